"""Elements into Arrow as Spark's createDataFrame makes them: inference over the first
batch, a given schema's conversions, types learnt from later batches, values refused rather
than coerced, and schema errors that name the sink."""

from __future__ import annotations

import datetime
import os
import textwrap
import time
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from spark_helpers import run_python  # noqa: E402

from reactive_streams.adapters.iterables import from_iterable  # noqa: E402
from reactive_streams.spark import from_dataframe, to_dataframe  # noqa: E402

pytestmark = pytest.mark.spark


# -- without a schema, Spark's inference over the whole first batch --------------------------


def test_to_dataframe_infers_like_spark_over_the_whole_first_batch(session: Any) -> None:
    """Without a schema, the columns and types are Spark's own inference over every row of
    the first batch: a key missing from the first dict is a column still, dict values are
    maps, Decimals DECIMAL(38,18), as createDataFrame gives for the same rows."""
    rows = [
        {"a": 1, "tags": {"k": 1}, "price": Decimal("1.50")},
        {"a": 2, "b": "x", "tags": {}, "price": Decimal("1234567.25")},
    ]
    df = to_dataframe(from_iterable(rows), session, batch_size=10)
    assert df.schema == session.createDataFrame(rows).schema
    assert df.schema.simpleString() == (
        "struct<a:bigint,price:decimal(38,18),tags:map<string,bigint>,b:string>"
    )  # a column first seen in a later row comes last, as in Spark
    assert [tuple(r) for r in df.collect()] == [
        (1, Decimal("1.5"), {"k": 1}, None),
        (2, Decimal("1234567.25"), {}, "x"),
    ]


def test_to_dataframe_of_rows_round_trips_decimals_and_maps(session: Any) -> None:
    """from_dataframe (rows) into to_dataframe keeps a DECIMAL(10,2) column's values and
    map columns (string or integer keys) as maps."""
    source = session.sql(
        "SELECT id, CAST(id * 1000.25 AS DECIMAL(10,2)) AS d, map('k', id) AS m, "
        "map(id, 'v') AS n FROM range(3)"
    )
    copy = to_dataframe(from_dataframe(source), session, batch_size=2)
    assert copy.schema.simpleString() == (
        "struct<id:bigint,d:decimal(38,18),m:map<string,bigint>,n:map<bigint,string>>"
    )
    assert [tuple(r) for r in copy.orderBy("id").collect()] == [
        tuple(r) for r in source.orderBy("id").collect()
    ]


# -- a type the first batch cannot tell comes from a later batch -----------------------------


def test_to_dataframe_types_a_column_that_was_all_null_in_the_first_batch(
    session: Any,
) -> None:
    """A sparse column, all None in the first batch, takes its type from the first batch
    with a value (as Spark infers from every row), instead of failing the cast to null."""
    rows = [{"i": i, "note": None if i < 3 else f"n{i}"} for i in range(8)]
    df = to_dataframe(from_iterable(rows), session, batch_size=3)
    assert df.schema.simpleString() == "struct<i:bigint,note:string>"
    assert [r.asDict() for r in df.orderBy("i").collect()] == rows


def test_to_dataframe_types_a_nested_field_that_was_all_null_in_the_first_batch(
    session: Any,
) -> None:
    """An empty list in every row of the first batch (list<null>) takes its element type
    from a later batch, for rows and for Arrow batches alike; so does an empty dict (a map
    whose key type Spark cannot infer, and Arrow cannot leave null)."""
    rows = [{"i": 0, "xs": []}, {"i": 1, "xs": [1, 2]}]
    df = to_dataframe(from_iterable(rows), session, batch_size=1)
    assert df.schema.simpleString() == "struct<i:bigint,xs:array<bigint>>"
    assert [r.xs for r in df.orderBy("i").collect()] == [[], [1, 2]]
    batches = [pa.RecordBatch.from_pylist([row]) for row in rows]
    df = to_dataframe(from_iterable(batches), session, batch_size=1)
    assert [r.xs for r in df.orderBy("i").collect()] == [[], [1, 2]]
    maps = [{"i": 0, "m": {}}, {"i": 1, "m": {}}, {"i": 2, "m": {3: "x"}}]  # map<void, void>
    df = to_dataframe(from_iterable(maps), session, batch_size=2)
    assert df.schema.simpleString() == "struct<i:bigint,m:map<bigint,string>>"
    assert [r.m for r in df.orderBy("i").collect()] == [{}, {}, {3: "x"}]


# -- a given schema converts values as Spark does --------------------------------------------


def test_to_dataframe_uses_the_given_schema_for_tuples(spark: Any) -> None:
    """Tuples take their column names and Spark types from a DDL schema."""
    df = to_dataframe(
        from_iterable([(1, "a"), (2, "b")]), spark, schema="k INT, v STRING", batch_size=1
    )
    assert df.schema.simpleString() == "struct<k:int,v:string>"
    assert [tuple(r) for r in df.collect()] == [(1, "a"), (2, "b")]


def test_to_dataframe_with_a_schema_converts_values_as_spark_does(spark: Any) -> None:
    """With a schema, values are converted for it as createDataFrame converts them: a key
    missing from the first dict is null there, a tuple fills a struct, and a naive datetime
    is local time (checked in a zone that is not UTC)."""
    schema = "a LONG, b STRING, s STRUCT<x: STRING, n: INT>, ts TIMESTAMP"
    when = datetime.datetime(2024, 1, 1, 12, 0)
    rows = [{"a": 1, "s": ("p", 1), "ts": when}, {"a": 2, "b": "x", "s": None, "ts": when}]
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        ours = to_dataframe(from_iterable(rows), spark, schema=schema, batch_size=10).collect()
        spark_own = spark.createDataFrame(rows, schema).collect()
    finally:
        if zone is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = zone
        time.tzset()
    assert ours == spark_own
    assert [(r.a, r.b, r.s) for r in ours] == [(1, None, ("p", 1)), (2, "x", None)]


def test_a_ddl_schema_works_with_only_a_connect_session(connect_server: Any) -> None:
    """A DDL schema is parsed by the session given, so a process with only a Spark Connect
    session (no classic SparkContext to parse it) can pass one."""
    script = textwrap.dedent(
        f"""
        from pyspark.sql.connect.session import SparkSession
        from reactive_streams.adapters.iterables import from_iterable
        from reactive_streams.spark import to_dataframe
        session = SparkSession.builder.remote({connect_server.url!r}).create()
        df = to_dataframe(from_iterable([(1, "a")]), session, schema="k INT, v STRING")
        print("ROWS", [tuple(r) for r in df.collect()], df.schema.simpleString())
        session.stop()
        """
    )
    result = run_python("-c", script)
    assert "ROWS [(1, 'a')] struct<k:int,v:string>" in result.stdout, result.stderr[-3000:]


# -- a value the schema would coerce is refused ----------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_to_dataframe_refuses_a_value_its_schema_would_coerce(spark: Any, batch_size: int) -> None:
    """1.7 after an inferred BIGINT (or under a given one) is refused, as createDataFrame
    refuses it: never a silent 1, whichever way the batches break (within the first batch,
    Spark's inference refuses to merge the types; in a later one, the check names it)."""
    data = [{"a": 1}, {"a": 1.7}, {"a": 2.9}]
    refused = r"the element \{'a': 1.7\} does not fit the schema|CANNOT_MERGE_TYPE"
    with pytest.raises(TypeError, match=refused):
        to_dataframe(from_iterable(data), spark, batch_size=batch_size).collect()
    with pytest.raises(TypeError, match="does not fit the schema given"):
        to_dataframe(from_iterable(data), spark, schema="a BIGINT").collect()


# -- a schema error names the sink and says why ----------------------------------------------


@pytest.mark.parametrize("sink", ["to_dataframe", "write_parquet"])
def test_an_unparsable_ddl_schema_is_a_value_error_naming_the_sink_and_the_reason(
    spark: Any, tmp_path: Any, sink: str
) -> None:
    """Spark's ParseException starts with an empty line: the error's first line names the
    sink, the schema and Spark's reason instead, and Spark's caret follows."""
    from reactive_streams.spark import write_parquet

    source = from_iterable([(1,)])
    with pytest.raises(ValueError) as raised:
        if sink == "to_dataframe":
            to_dataframe(source, spark, schema="a INT,, b")
        else:
            write_parquet(source, spark, str(tmp_path / "out"), schema="a INT,, b")
    first = str(raised.value).splitlines()[0]
    assert first.startswith(f"{sink}(): the schema 'a INT,, b' is not valid DDL: ")
    assert "PARSE_SYNTAX_ERROR" in first
    assert "^^^" in str(raised.value)


def test_a_write_names_itself_when_an_element_does_not_fit(spark: Any, tmp_path: Any) -> None:
    """write_parquet's schema errors say write_parquet, not to_dataframe."""
    from reactive_streams.spark import write_parquet

    with pytest.raises(TypeError, match=r"^write_parquet\(\): the element \(1.5,\) does not fit"):
        write_parquet(from_iterable([(1.5,)]), spark, str(tmp_path / "x"), schema="a BIGINT")
    with pytest.raises(TypeError, match=r"^to_dataframe\(\): schema must describe a struct"):
        to_dataframe(from_iterable([(1,)]), spark, schema="int")
