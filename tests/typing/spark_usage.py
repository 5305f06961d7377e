"""A type-checked tour of ``from_dataframe``'s element types: ``mypy --strict
tests/typing/spark_usage.py`` must pass (tests/typing/test_spark_usage.py runs it).

Never executed. ``mode="rows"`` (the default) is a ``Publisher[pyspark.sql.Row]`` and
``mode="arrow"`` a ``Publisher[pyarrow.RecordBatch]``, through typing overloads on the mode's
Literal. pyarrow ships no types: without ``pyarrow-stubs`` the batch type is ``Any`` (this
project's mypy config ignores pyarrow's missing imports), with them it is ``RecordBatch``;
both pass here. Lines marked ``# type: ignore[...]`` are mistakes mypy must reject
(``warn_unused_ignores`` turns an accepted mistake into an error).
"""

from __future__ import annotations

from typing import Literal, assert_type

import pyarrow as pa
from pyspark.sql import DataFrame, Row

from reactive_streams import Publisher, Subscriber
from reactive_streams.adapters.iterables import to_iterator
from reactive_streams.spark import from_dataframe


def rows(df: DataFrame) -> list[str]:
    """The default mode, and ``mode="rows"`` said: Rows, with their fields."""
    assert_type(from_dataframe(df), Publisher[Row])
    assert_type(from_dataframe(df, mode="rows", job_tag="nightly"), Publisher[Row])
    names: list[str] = []
    for row in to_iterator(from_dataframe(df, mode="rows"), prefetch=64):
        assert_type(row, Row)
        names.append(str(row["name"]))
    return names


def batches(df: DataFrame) -> int:
    """``mode="arrow"``: record batches (``Any`` without pyarrow-stubs)."""
    assert_type(from_dataframe(df, mode="arrow"), Publisher[pa.RecordBatch])
    publisher = from_dataframe(df, mode="arrow", max_rows_per_batch=1024)
    assert_type(publisher, Publisher[pa.RecordBatch])
    return sum(batch.num_rows for batch in to_iterator(publisher))


def either(df: DataFrame, mode: Literal["rows", "arrow"]) -> Publisher[Row | pa.RecordBatch]:
    """A mode known only as one of the two: one Publisher or the other."""
    publisher = from_dataframe(df, mode=mode)
    assert_type(publisher, Publisher[Row] | Publisher[pa.RecordBatch])
    return publisher


def mistakes(df: DataFrame, counts: Subscriber[int], mode: str) -> None:
    """What mypy refuses."""
    from_dataframe(df).subscribe(counts)  # type: ignore[arg-type]  # a Row is no int
    from_dataframe(df, mode="parquet")  # type: ignore[call-overload]  # no such mode
    from_dataframe(df, mode=mode)  # type: ignore[call-overload]  # any str: no overload
    # max_rows_per_batch is for arrow mode only (at run time too: ValueError)
    from_dataframe(df, mode="rows", max_rows_per_batch=1024)  # type: ignore[call-overload]
