"""One classic Spark session (local[2]) and one local Spark Connect server per test session.

Every test here is marked ``spark``; without pyspark or Java they are skipped, not failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    from reactive_streams.spark.local import LocalConnectServer, java_problem, local_session

    _MISSING = java_problem()
except ImportError as exc:  # pyspark or pyarrow absent
    _MISSING = f"pyspark/pyarrow not installed: {exc}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
            # pyspark 4.3 warns that it does not fully support pandas 3 (we do not use pandas)
            item.add_marker(
                pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
            )
            if _MISSING:
                item.add_marker(pytest.mark.skip(reason=_MISSING))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The classic session shared by every Spark test (UI off, 4 shuffle partitions)."""
    if _MISSING:
        pytest.skip(_MISSING)
    warehouse = tmp_path_factory.mktemp("warehouse")
    session = local_session(
        "local[2]",
        app_name="rs-tests",
        conf={
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server() -> Iterator[Any]:
    """A Spark Connect server on 127.0.0.1 (a free port), stopped at the end of the session."""
    if _MISSING:
        pytest.skip(_MISSING)
    from reactive_streams.spark._map_partitions import FLUSH_CONF

    server = LocalConnectServer("local[2]", conf={FLUSH_CONF: "true"}).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def connect(connect_server: Any) -> Iterator[Any]:
    """A Spark Connect session on the local server.

    Built with the Connect builder itself: the generic ``SparkSession.builder.remote`` would
    switch the whole process (``pyspark.sql.functions`` included) into Connect mode.
    """
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(connect_server.url).create()
    yield session
    session.stop()


@pytest.fixture(params=["classic", "connect"])
def session(request: pytest.FixtureRequest) -> Any:
    """Each test using it runs on the classic session and on the Spark Connect session."""
    return request.getfixturevalue("spark" if request.param == "classic" else "connect")
