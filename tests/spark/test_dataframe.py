"""reactive_streams.spark.dataframe is a façade over _read, _arrow and _sinks: every name it
offered before the split is still importable from it, and the package's names too."""

from __future__ import annotations

import importlib

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = pytest.mark.spark

_PUBLIC = [
    "BatchSubscriber",
    "DataFramePublisher",
    "WriteStats",
    "from_dataframe",
    "to_dataframe",
    "write_parquet",
    "write_table",
]
_BEFORE_THE_SPLIT = [
    *_PUBLIC,
    "DaemonThread",
    "Mode",
    "Reader",
    "T",
    "_ArrowBatcher",
    "_DataFrameSource",
    "_DataFrameSubscription",
    "_Hook",
    "_NOT_ON_LOOP",
    "_batcher",
    "_create",
    "_drain_batches",
    "_fill_null_types",
    "_filled",
    "_has_null",
    "_target",
    "_typed_map_keys",
    "_write",
    "check_dataframe",
    "check_job_tag",
    "check_read_options",
    "make_reader",
    "refuse_on_loop",
    "session_stopped",
    "stopped_session",
]


@pytest.mark.parametrize("name", _BEFORE_THE_SPLIT)
def test_every_name_of_the_dataframe_module_is_still_importable(name: str) -> None:
    module = importlib.import_module("reactive_streams.spark.dataframe")
    assert getattr(module, name) is not None


@pytest.mark.parametrize(
    "name", [*_PUBLIC, "StreamPublisher", "from_stream", "dataframe", "streaming"]
)
def test_every_name_of_the_package_is_still_importable(name: str) -> None:
    module = importlib.import_module("reactive_streams.spark")
    assert getattr(module, name) is not None


def test_the_facade_and_the_package_give_the_same_objects() -> None:
    import reactive_streams.spark as package
    import reactive_streams.spark.dataframe as facade

    for name in _PUBLIC:
        assert getattr(package, name) is getattr(facade, name)
    assert set(package.__all__) >= set(_PUBLIC)
