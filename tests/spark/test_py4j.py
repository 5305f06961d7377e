"""The private names of pyspark the package relies on (spark/_py4j.py): all there in this
pyspark, and a release that drops one is named, with its version, by the check."""

from __future__ import annotations

from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from reactive_streams.spark import _py4j  # noqa: E402

pytestmark = pytest.mark.spark


# -- every private name we use exists in this pyspark ----------------------------------------


def test_every_private_name_the_package_uses_exists(spark: Any, connect: Any) -> None:
    """Fails, naming each missing name and pyspark's version, when a release drops one."""
    gone = _py4j.missing(spark, connect)
    assert not gone, _py4j.explain(gone)


# -- a missing name is named, with pyspark's version -----------------------------------------


def test_a_python_name_a_release_dropped_is_named_with_the_version(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyspark.util

    monkeypatch.delattr(pyspark.util, "_create_local_socket")
    gone = _py4j.missing(spark)
    assert gone == ["pyspark.util._create_local_socket"]
    message = _py4j.explain(gone)
    assert f"pyspark {pyspark.__version__}" in message
    assert "pyspark.util._create_local_socket" in message
    with pytest.raises(RuntimeError, match="lacks private names .*_create_local_socket"):
        _py4j.private("pyspark.util", "_create_local_socket")


def test_a_jvm_method_a_release_dropped_is_named(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    methods = (*_py4j.JVM_METHODS, ("org.apache.spark.api.python.PythonRDD", "goneInSpark9"))
    monkeypatch.setattr(_py4j, "JVM_METHODS", methods)
    assert _py4j.missing(spark) == ["JVM org.apache.spark.api.python.PythonRDD.goneInSpark9"]


def test_an_attribute_a_release_dropped_is_named(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    attributes = (*_py4j.CLASSIC_ATTRIBUTES, ("SparkSession", "_goneInSpark9"))
    monkeypatch.setattr(_py4j, "CLASSIC_ATTRIBUTES", attributes)
    assert _py4j.missing(spark) == ["SparkSession._goneInSpark9"]


# -- the serving handler ---------------------------------------------------------------------


def test_the_handler_counts_as_done_when_the_jvm_cannot_be_asked() -> None:
    """With the gateway gone, the serving handler cannot be asked about: counted as done,
    so an interrupt's cancel loop ends instead of calling a dead JVM every 50 ms for ever."""

    class Gone:
        def __getattr__(self, name: str) -> Any:
            raise ConnectionError("py4j gateway closed")

    assert _py4j.handler_done(None) and _py4j.handler_done(Gone())
