"""from_dataframe on a classic session and on Spark Connect: what a read emits and when,
laziness, the thread signals arrive on, failures, and a long-lived session."""

from __future__ import annotations

import asyncio
import os
import textwrap
import threading
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from spark_helpers import (  # noqa: E402
    functions_for,
    heap_mib,
    jobs_for_tag,
    no_owned_threads,
    run_python,
    sample,
    wait_until,
)

from reactive_streams import UNBOUNDED  # noqa: E402
from reactive_streams.spark import from_dataframe  # noqa: E402
from reactive_streams.spark._partitions import is_connect  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

pytestmark = pytest.mark.spark


# -- a read emits what collect() returns, only as far as demand reaches ----------------------


def test_rows_mode_emits_the_rows_collect_returns_in_order(session: Any) -> None:
    """Rows mode emits exactly the Row objects of collect(), in order, then completes."""
    df = sample(session)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df).subscribe(subscriber)
    subscriber.await_terminal(120)
    assert subscriber.error is None
    assert subscriber.elements == df.collect()
    subscriber.assert_no_violations()


def test_arrow_mode_emits_the_batches_of_to_arrow(session: Any) -> None:
    """Arrow mode emits RecordBatches whose table equals toArrow(), types included."""
    df = session.range(0, 3000, 1, 3).selectExpr(
        "id",
        "cast(id AS double) / 3 AS d",
        "cast(id % 7 AS string) AS s",
        "id % 2 = 0 AS flag",
        "CASE WHEN id % 5 = 0 THEN NULL ELSE id END AS maybe",
        "array(id, id + 1) AS arr",
        "named_struct('a', id, 'b', 'z') AS st",
        "to_date('2024-01-02') AS day",
        "cast(1700000000 + id AS timestamp) AS ts",
        "cast(id AS decimal(12, 2)) AS dec",
    )
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df, mode="arrow").subscribe(subscriber)
    subscriber.await_terminal(120)
    assert subscriber.error is None
    assert all(isinstance(b, pa.RecordBatch) for b in subscriber.elements)
    assert pa.Table.from_batches(subscriber.elements).equals(df.toArrow())


def test_arrow_demand_counts_batches_of_at_most_max_rows(session: Any) -> None:
    """In arrow mode one unit of demand is one batch of at most max_rows_per_batch rows."""
    df = sample(session, rows=5000, partitions=2)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    from_dataframe(df, mode="arrow", max_rows_per_batch=700).subscribe(subscriber)
    subscriber.await_count(1, 120)
    subscriber.expect_no_signals(0.3)
    assert len(subscriber.elements) == 1
    subscriber.request(UNBOUNDED)
    subscriber.await_terminal(120)
    sizes = [b.num_rows for b in subscriber.elements]
    assert max(sizes) <= 700
    assert sum(sizes) == 5000
    subscriber.assert_no_violations()


def test_rows_are_pulled_only_as_far_as_demand(session: Any) -> None:
    """request(3) yields exactly 3 rows and nothing more until more is requested."""
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(3)
    from_dataframe(sample(session, rows=2000)).subscribe(subscriber)
    subscriber.await_count(3, 120)
    subscriber.expect_no_signals(0.3)
    assert [r.id for r in subscriber.elements] == [0, 1, 2]
    subscriber.request(UNBOUNDED)
    subscriber.await_terminal(120)
    assert len(subscriber.elements) == 2000
    subscriber.assert_no_violations()


def test_each_subscriber_reads_afresh(session: Any) -> None:
    """The publisher is cold: two concurrent subscribers each receive every row."""
    publisher = from_dataframe(sample(session, rows=3000))
    first: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    second: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    publisher.subscribe(first)
    publisher.subscribe(second)
    first.await_terminal(120)
    second.await_terminal(120)
    assert first.elements == second.elements
    assert len(first.elements) == 3000


def test_request_from_on_next_does_not_recurse(spark: Any) -> None:
    """request(1) from inside every on_next (§3.3) delivers all rows without deep recursion."""
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1, request_on_next=1)
    from_dataframe(sample(spark, rows=3000)).subscribe(subscriber)
    subscriber.await_terminal(120)
    assert len(subscriber.elements) == 3000
    subscriber.assert_no_violations()


# -- nothing runs in Spark before the first request ------------------------------------------


def test_no_spark_job_before_the_first_request(spark: Any) -> None:
    """Subscribing starts no Spark job; the first request does (status tracker, by tag)."""
    tag = "lazy-check"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    from_dataframe(sample(spark), job_tag=tag).subscribe(subscriber)
    subscriber.await_subscribed()
    subscriber.expect_no_signals(0.5)
    assert jobs_for_tag(spark, tag) == []
    subscriber.request(1)
    subscriber.await_count(1, 120)
    assert jobs_for_tag(spark, tag) != []
    subscriber.cancel()


def test_nothing_is_computed_before_the_first_request(session: Any, tmp_path: Any) -> None:
    """A UDF that leaves a marker file has not run after subscribe, and has after request."""
    marker = str(tmp_path / "ran")

    def touch(x: int) -> int:
        with open(marker, "a") as f:
            f.write("x")
        return x

    touch_udf = functions_for(session).udf(touch, "long", useArrow=False)
    df = session.range(0, 10, 1, 1).select(touch_udf("id").alias("id"))
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    from_dataframe(df).subscribe(subscriber)
    subscriber.await_subscribed()
    subscriber.expect_no_signals(0.5)
    assert not os.path.exists(marker)
    subscriber.request(UNBOUNDED)
    subscriber.await_terminal(180)
    assert subscriber.error is None
    assert os.path.exists(marker)


# -- signals arrive on the subscription's own thread, never on an event loop -----------------


def test_signals_arrive_on_the_thread_the_subscription_owns(spark: Any) -> None:
    """on_next never runs on the requesting thread; the owned thread ends with the stream."""
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    threads: set[str] = set()
    subscriber.on_next_hook = lambda _: threads.add(threading.current_thread().name)
    from_dataframe(sample(spark, rows=500)).subscribe(subscriber)
    subscriber.request(UNBOUNDED)
    subscriber.await_terminal(120)
    assert len(threads) == 1
    (name,) = threads
    assert name != threading.current_thread().name
    assert name.startswith("rs-spark-")
    wait_until(no_owned_threads, 10, "the owned thread to end")


@pytest.mark.asyncio
async def test_an_asyncio_consumer_never_runs_spark_on_its_loop(spark: Any) -> None:
    """Consumed through to_async_iterator, rows arrive; no on_next ran on the loop's thread."""
    from reactive_streams.adapters.async_iterables import to_async_iterator

    asyncio.get_running_loop().set_debug(True)
    loop_thread = threading.get_ident()
    seen: set[int] = set()

    class Spy:
        def __init__(self, target: Any) -> None:
            self.target = target

        def subscribe(self, subscriber: Any) -> None:
            outer = self

            class Tap:
                def on_subscribe(self, s: Any) -> None:
                    subscriber.on_subscribe(s)

                def on_next(self, x: Any) -> None:
                    seen.add(threading.get_ident())
                    subscriber.on_next(x)

                def on_error(self, e: Exception) -> None:
                    subscriber.on_error(e)

                def on_complete(self) -> None:
                    subscriber.on_complete()

            outer.target.subscribe(Tap())

    total = 0
    async for batch in to_async_iterator(Spy(from_dataframe(sample(spark), mode="arrow"))):
        total += batch.num_rows
    assert total == 10_000
    assert seen and loop_thread not in seen


# -- a failure in Spark becomes on_error -----------------------------------------------------


@pytest.mark.parametrize("mode", ["rows", "arrow"])
def test_a_failing_expression_becomes_on_error(session: Any, mode: str) -> None:
    """A job that fails at run time ends in on_error carrying Spark's error, not a hang."""
    from pyspark.errors import PySparkException

    df = session.range(0, 10, 1, 2).selectExpr("raise_error('boom') AS x")
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df, mode=mode).subscribe(subscriber)  # type: ignore[call-overload]
    subscriber.await_terminal(120)
    assert isinstance(subscriber.error, PySparkException)
    assert "boom" in str(subscriber.error)
    wait_until(no_owned_threads, 30, "the owned thread to end")


@pytest.mark.parametrize("mode", ["rows", "arrow"])
def test_a_failing_udf_becomes_on_error_after_the_rows_before_it(session: Any, mode: str) -> None:
    """A Python UDF that raises in the third of four partitions: the rows of the first two
    are delivered, then on_error with Spark's PythonException (§1.4). On Spark Connect the
    server runs the whole query and may fail it before it streamed those rows: there, the
    rows delivered are a prefix of them."""
    from pyspark.errors import PythonException

    def explode(x: int) -> int:
        if x >= 200:
            raise ValueError(f"bad row {x}")
        return x

    bad = functions_for(session).udf(explode, "long", useArrow=False)
    df = session.range(0, 400, 1, 4).select(bad("id").alias("x"))
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df, mode=mode).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.await_terminal(180)
    assert isinstance(subscriber.error, PythonException)
    assert "bad row" in str(subscriber.error)
    if mode == "rows":
        rows = [row.x for row in subscriber.elements]
    else:
        rows = [x for batch in subscriber.elements for x in batch.column("x").to_pylist()]
    if is_connect(session):
        assert rows == list(range(len(rows))) and len(rows) <= 200
    else:
        assert rows == list(range(200))


def test_an_unresolvable_column_on_connect_becomes_on_error(connect: Any) -> None:
    """On Spark Connect analysis is lazy: a bad column surfaces as on_error at the request."""
    from pyspark.errors import AnalysisException

    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    from_dataframe(connect.range(3).select("nope")).subscribe(subscriber)
    subscriber.await_subscribed()
    assert not subscriber.is_terminated
    subscriber.request(1)
    subscriber.await_terminal(60)
    assert isinstance(subscriber.error, AnalysisException)


def test_a_stopped_connect_session_becomes_on_error(connect_server: Any) -> None:
    """A DataFrame of a Spark Connect session stopped before the request gives on_error."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    other = RemoteSparkSession.builder.remote(connect_server.url).create()
    df = other.range(10)
    other.stop()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df).subscribe(subscriber)
    subscriber.await_terminal(60)
    assert subscriber.error is not None
    wait_until(no_owned_threads, 30, "the owned thread to end")


_STOP_MID_STREAM = textwrap.dedent(
    """
    import sys
    from reactive_streams import UNBOUNDED
    from reactive_streams.testing import RecordingSubscriber
    from reactive_streams.spark import from_dataframe
    from reactive_streams.spark.local import local_session

    spark = local_session("local[2]")
    stuck = spark.range(0, 4 * 10**11, 1, 2).filter("id % 1000000007 = 3")
    df = spark.range(0, 5, 1, 1).union(stuck)
    subscriber = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df).subscribe(subscriber)
    subscriber.await_count(5, 120)
    spark.stop()
    subscriber.await_terminal(120)
    error = subscriber.error
    print("ON_ERROR" if error is not None else "NO_ERROR", type(error).__name__)
    print("FIRST_LINE", str(error).splitlines()[0] if error is not None else "")
    """
)


def test_stopping_the_classic_session_mid_stream_becomes_on_error_saying_why() -> None:
    """spark.stop() while a partition job runs ends the subscription with on_error (own JVM)
    whose first line gives Spark's reason, not py4j's "An error occurred while calling
    o42.getResult" with the reason deep in the Java stack."""
    result = run_python("-c", _STOP_MID_STREAM)
    said = result.stdout + result.stderr[-3000:]
    assert "ON_ERROR" in result.stdout and "Py4JJavaError" not in result.stdout, said
    (first,) = [line for line in result.stdout.splitlines() if line.startswith("FIRST_LINE")]
    assert first.startswith("FIRST_LINE Spark failed the read: "), said
    assert "SparkContext was shut down" in first or "stopped SparkContext" in first, said


# -- a program may end in the middle of a read -----------------------------------------------


_EXIT_MID_READ = textwrap.dedent(
    """
    from reactive_streams.adapters.iterables import to_iterator
    from reactive_streams.spark import from_dataframe
    from reactive_streams.spark.local import local_session

    spark = local_session("local[2]")
    stuck = spark.range(0, 4 * 10**11, 1, 2).filter("id % 1000000007 = 3")
    rows = to_iterator(from_dataframe(spark.range(0, 5, 1, 1).union(stuck)))
    for row in rows:  # demand is outstanding: the read waits on the stuck partition
        if row.id == 4:
            print("FAILING", flush=True)
            raise SystemExit(3)  # the program ends; `rows` is still referenced, never closed
    """
)


def test_a_program_ending_mid_read_exits() -> None:
    """A program that ends while a read waits on a partition Spark is still computing (the
    iterator never closed) exits: the subscription's thread does not hold the interpreter's
    exit (a ThreadPoolExecutor worker did, until the partition was done: many minutes here),
    nor does closing its socket at exit."""
    result = run_python("-c", _EXIT_MID_READ, timeout=150)
    assert "FAILING" in result.stdout and result.returncode == 3, result.stderr[-3000:]


# -- a long-lived session keeps nothing of a read --------------------------------------------


def test_many_subscriptions_do_not_accumulate_driver_heap(spark: Any) -> None:
    """Twelve full reads in one session leave the driver heap (after GC) where it was.

    ``toLocalIterator`` over this DataFrame keeps ~7 MiB per call (docs/spark.md): the four
    rows-mode reads alone would add ~29 MiB if they leaked like it (measured).
    """
    df = sample(spark, rows=150_000, partitions=4)
    for mode in ("rows", "arrow"):  # warm up: classes loaded, caches filled
        for element in _read(df, mode, prefetch=False):
            del element
    before = heap_mib(spark)
    for i in range(12):
        mode = "rows" if i % 3 == 0 else "arrow"
        count = sum(1 if mode == "rows" else b.num_rows for b in _read(df, mode, i % 2 == 1))
        assert count == 150_000
    growth = heap_mib(spark) - before
    assert growth < 20, f"driver heap grew by {growth:.1f} MiB over 12 subscriptions"


def _read(df: Any, mode: str, prefetch: bool) -> list[Any]:
    from reactive_streams.adapters.iterables import to_iterator

    publisher = from_dataframe(df, mode=mode, prefetch_partitions=prefetch)  # type: ignore[call-overload]
    return list(to_iterator(publisher, prefetch=512))


# -- arguments are checked at the call -------------------------------------------------------


def test_bad_arguments_are_refused_at_once(spark: Any) -> None:
    """Unknown modes and non-positive batch limits raise ValueError before any Spark call."""
    df = spark.range(3)
    with pytest.raises(ValueError, match="mode"):
        from_dataframe(df, mode="pandas")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="max_rows_per_batch"):
        from_dataframe(df, mode="arrow", max_rows_per_batch=0)
    with pytest.raises(ValueError, match="arrow"):
        from_dataframe(df, max_rows_per_batch=10)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        from_dataframe(None)  # type: ignore[call-overload]
    for not_a_dataframe in ([1, 2], df.toPandas()):  # failed only at the first request
        with pytest.raises(TypeError, match="requires a pyspark DataFrame, got"):
            from_dataframe(not_a_dataframe)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="job_tag must be a str"):
        from_dataframe(df, job_tag=5)  # type: ignore[call-overload]
    for tag in ("", "a,b"):  # Spark's IllegalArgumentException, at the first request
        with pytest.raises(ValueError, match="job_tag must be non-empty and hold no comma"):
            from_dataframe(df, job_tag=tag)
    assert is_connect(df) is False
