"""A few random schedules over ``from_dataframe`` (a local classic Spark session): each read
runs Spark jobs, so a handful of schedules, behind the ``spark`` marker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from fuzz_plan import base_seed, draw, options_rng  # noqa: E402
from fuzz_run import LoopHarness, run_plan  # noqa: E402
from fuzz_sources import Made  # noqa: E402

from reactive_streams.spark import from_dataframe  # noqa: E402
from reactive_streams.spark._partitions import start_canceller  # noqa: E402
from reactive_streams.spark.local import java_problem, local_session  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
    pytest.mark.skipif(java_problem() is not None, reason=str(java_problem())),
]

COUNT = int(os.environ.get("RS_FUZZ_SPARK_COUNT", "12"))


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A session of this module's own, stopped after it (the Spark tests build theirs). The
    one long-lived thread that makes Spark's cancel calls for every subscription (§3.5) is
    started first: it is no thread a schedule left behind."""
    session = local_session("local[2]", app_name="rs-fuzz")
    start_canceller()
    yield session
    session.stop()


@pytest.fixture(scope="module")
def harness(spark: Any) -> Iterator[LoopHarness]:
    loop = LoopHarness()
    yield loop
    loop.close()


def test_random_schedules_over_a_dataframe_keep_the_rules(spark: Any, harness: LoopHarness) -> None:
    """§1.1, §1.3, §1.7, order, no loss, the cancel bound and no thread left running, over
    ``RS_FUZZ_SPARK_COUNT`` (12) schedules reading ``spark.range(n)`` row by row from one to
    three partitions."""
    base = base_seed()
    broken = []
    for seed in range(base, base + COUNT):
        plan = draw("spark_rows", seed, pull=False)
        plan.options["partitions"] = partitions = options_rng("spark_rows", seed).randint(1, 3)

        def made(n: int = plan.n, partitions: int = partitions) -> Made:
            df = spark.range(n, numPartitions=partitions)
            return Made(from_dataframe(df), [(i,) for i in range(n)])  # Rows equal tuples

        result = run_plan(harness, plan, made)
        if result.violations:
            broken.append(result)
    if broken:
        reports = "\n".join(result.report() for result in broken)
        pytest.fail(
            f"spark_rows, base seed {base} (RS_FUZZ_SEED={base}):\n{reports}", pytrace=False
        )
