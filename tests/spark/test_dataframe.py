"""from_dataframe on a classic session and on Spark Connect: content, demand, laziness,
cancellation, failures, threads, and a long-lived session across many subscriptions."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import textwrap
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from spark_helpers import (  # noqa: E402
    active_jobs_for_tag,
    functions_for,
    heap_mib,
    job_status,
    jobs_for_tag,
    owned_threads,
    run_python,
    wait_until,
)

from reactive_streams import UNBOUNDED  # noqa: E402
from reactive_streams.spark import _partitions, from_dataframe  # noqa: E402
from reactive_streams.spark._partitions import is_connect  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

pytestmark = pytest.mark.spark

SLOW = 4 * 10**11  # rows of a partition that would take many minutes to compute


def sample(session: Any, rows: int = 10_000, partitions: int = 4) -> Any:
    """Three columns (long, long, string) over ``partitions`` partitions."""
    return session.range(0, rows, 1, partitions).selectExpr(
        "id", "id * 2 AS b", "concat('x', cast(id AS string)) AS c"
    )


def fast_then_stuck(session: Any) -> Any:
    """Partition 0 has 5 rows at once; partitions 1 and 2 keep a job busy for many minutes.

    (The children differ in partition count: Spark 4 merges the partitions of a union of
    equally partitioned children.)
    """
    stuck = session.range(0, SLOW, 1, 2).filter("id % 1000000007 = 3")
    return session.range(0, 5, 1, 1).union(stuck)


def no_owned_threads() -> bool:
    return not owned_threads()


# -- content and demand ------------------------------------------------------------------------


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


# -- laziness --------------------------------------------------------------------------------


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


# -- cancellation ----------------------------------------------------------------------------


def _reading_a_stuck_partition(
    spark: Any, tag: str, request: int, delivered: int, **options: Any
) -> tuple[RecordingSubscriber[Any], int]:
    """Subscribe to fast_then_stuck, wait for ``delivered`` rows and for the tagged job then
    running (the stuck partition's, or the prefetch's); return the subscriber and that job."""
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(request)
    from_dataframe(fast_then_stuck(spark), job_tag=tag, **options).subscribe(subscriber)
    subscriber.await_count(delivered, 120)
    wait_until(lambda: active_jobs_for_tag(spark, tag) != [], 60, "the tagged job")
    (job,) = active_jobs_for_tag(spark, tag)
    return subscriber, job


def _assert_cancelled_and_released(spark: Any, tag: str, job: int) -> None:
    """The job was cancelled (FAILED, not finished) and the subscription's thread ended."""
    wait_until(lambda: active_jobs_for_tag(spark, tag) == [], 60, "the job to be cancelled")
    assert job_status(spark, job) == "FAILED"
    wait_until(no_owned_threads, 30, "the owned thread to end")


def test_cancel_interrupts_the_running_job_and_ends_the_thread(spark: Any) -> None:
    """Cancel while blocked on a busy partition: the job fails as cancelled, the thread ends,
    and nothing is signalled after the cancel."""
    tag = "cancel-blocked"
    subscriber, stuck = _reading_a_stuck_partition(spark, tag, UNBOUNDED, 5)
    subscriber.cancel()
    _assert_cancelled_and_released(spark, tag, stuck)
    subscriber.expect_no_signals(0.2)
    assert not subscriber.is_terminated, (subscriber.completed, repr(subscriber.error))


def test_cancel_stops_the_prefetched_partition_job(spark: Any) -> None:
    """With prefetch_partitions, cancel after the first partition also stops the job that
    was computing the next one ahead of demand."""
    tag = "cancel-prefetch"
    subscriber, prefetched = _reading_a_stuck_partition(spark, tag, 2, 2, prefetch_partitions=True)
    subscriber.cancel()
    _assert_cancelled_and_released(spark, tag, prefetched)
    assert len(subscriber.elements) == 2


def test_a_bad_request_during_a_busy_partition_ends_the_stream_at_once(spark: Any) -> None:
    """§3.9: request(0) while the subscription's thread waits on a busy partition: the job
    is cancelled and on_error arrives now, not once the partition is done (hours here)."""
    tag = "bad-request-blocked"
    subscriber, stuck = _reading_a_stuck_partition(spark, tag, UNBOUNDED, 5)
    subscriber.request(0)
    subscriber.await_terminal(60)
    assert isinstance(subscriber.error, ValueError) and "§3.9" in str(subscriber.error)
    _assert_cancelled_and_released(spark, tag, stuck)
    subscriber.assert_no_violations()


def test_an_abandoned_subscription_stops_its_prefetched_job(spark: Any) -> None:
    """A subscriber dropped without cancel, while prefetch_partitions computes the next
    partition: once the subscription is collected, that job is cancelled too, not only the
    socket closed."""
    tag = "abandoned-prefetch"
    subscriber, prefetched = _reading_a_stuck_partition(spark, tag, 3, 3, prefetch_partitions=True)
    del subscriber  # the only reference: the subscription goes with it

    def collected_and_stopped() -> bool:
        gc.collect()
        return active_jobs_for_tag(spark, tag) == []

    wait_until(collected_and_stopped, 60, "the abandoned prefetch job to stop")
    assert job_status(spark, prefetched) == "FAILED"


def test_the_abandoned_finalizer_takes_no_lock_of_ours() -> None:
    """The collector may run a reader's finalizer on any thread, at any allocation: even on
    one inside ``cancel_later`` holding its lock. The finalizer must not wait for that lock
    (a deadlock with itself); its cancel still runs once the lock is free."""
    cancelled = threading.Event()

    class Context:
        def cancelJobsWithTag(self, tag: str) -> None:  # noqa: N802 (Spark's name)
            assert tag == "gc-tag"
            cancelled.set()

    _partitions.start_canceller()  # as open() does before it creates the finalizer
    left, right = socket.socketpair()
    finalizer_returned = threading.Event()

    def collected_inside_cancel_later() -> None:
        with _partitions._canceller_lock:  # where an allocation in cancel_later may collect
            _partitions._abandoned(right.makefile("rwb"), right, Context(), "gc-tag")
            finalizer_returned.set()

    thread = threading.Thread(target=collected_inside_cancel_later, daemon=True)
    thread.start()
    assert finalizer_returned.wait(10), "the finalizer waited for a lock its thread holds"
    assert cancelled.wait(10), "the abandoned reader's jobs were never cancelled"
    assert right.fileno() == -1  # its socket was closed
    left.close()


def test_cancel_before_any_request_runs_no_job(spark: Any) -> None:
    """Cancelling an idle subscription runs no Spark job and ends its thread."""
    tag = "cancel-idle"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    from_dataframe(sample(spark), job_tag=tag).subscribe(subscriber)
    subscriber.await_subscribed()
    subscriber.cancel()
    subscriber.request(5)  # §3.6: a no-op after cancel
    wait_until(no_owned_threads, 30, "the owned thread to end")
    subscriber.expect_no_signals(0.3)
    assert jobs_for_tag(spark, tag) == []


def stages(session: Any, rows: int = SLOW) -> Any:
    """A query whose planning runs a shuffle stage (adaptive execution runs the earlier
    stages as jobs before the result's partitions can be served): for many minutes with the
    default ``rows``."""
    return session.range(0, rows, 1, 2).selectExpr("id % 7 AS k").groupBy("k").count()


@pytest.mark.parametrize("delay", [0.0, 0.002, 0.01, 0.05])
def test_a_cancel_while_the_query_is_planned_stops_the_jobs_planning_starts(
    session: Any, delay: float
) -> None:
    """Cancel a few ms after the first request, while the reader is still starting Spark
    (planning runs a shuffle stage; a Connect operation may not be registered yet): a tag
    cancels only what runs at that moment, so the reader cancels again until it is started.
    No job, no operation runs on after the cancel; nothing is signalled; the thread ends."""
    tag = f"cancel-planning-{delay}"
    # On Spark Connect the server may still run a stage it began planning for an operation
    # interrupted meanwhile (the client has no handle on it any more): a stage of seconds,
    # there, so that it cannot starve the tests that follow.
    rows = 5 * 10**8 if is_connect(session) else SLOW
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    from_dataframe(stages(session, rows), job_tag=tag).subscribe(subscriber)
    subscriber.await_subscribed()
    subscriber.request(1)
    time.sleep(delay)
    subscriber.cancel()
    wait_until(no_owned_threads, 60, "the owned thread to end")
    if is_connect(session):
        assert session.interruptTag(tag) == []  # nothing with the tag is left running
    else:
        wait_until(lambda: active_jobs_for_tag(session, tag) == [], 60, "the jobs to stop")
        assert all(job_status(session, job) == "FAILED" for job in jobs_for_tag(session, tag))
    subscriber.expect_no_signals(0.2)
    assert subscriber.elements == [] and not subscriber.is_terminated


def test_interrupt_all_of_the_session_stops_the_read(spark: Any) -> None:
    """spark.interruptAll() stops the session's jobs, a from_dataframe read's too (they carry
    the session's tag, as toLocalIterator's do): the job fails, the subscriber gets
    on_error."""
    tag = "interrupt-all"
    subscriber, stuck = _reading_a_stuck_partition(spark, tag, UNBOUNDED, 5)
    spark.interruptAll()
    subscriber.await_terminal(60)
    assert subscriber.error is not None
    _assert_cancelled_and_released(spark, tag, stuck)


def test_a_connect_cancel_never_holds_up_the_shared_canceller() -> None:
    """A Spark Connect cancel call (an RPC that retries for minutes against a server that is
    gone) runs on a thread of its own: the classic cancels every other subscription queues
    meanwhile still run at once."""
    unblock = threading.Event()
    ran = threading.Event()

    class Remote:  # stands for a Connect session whose server does not answer
        def interruptTag(self, tag: str) -> None:  # noqa: N802 (Spark's name)
            unblock.wait(60)

    Remote.__module__ = "pyspark.sql.connect.session"
    try:
        _partitions.cancel_later(Remote().interruptTag, "gone")
        _partitions.cancel_later(ran.set)  # a classic cancel, queued behind it
        assert ran.wait(10), "the classic cancel waited for the Connect one"
    finally:
        unblock.set()


def test_cancel_on_spark_connect_interrupts_the_operation(connect: Any) -> None:
    """On Spark Connect, cancel interrupts the tagged operation and ends the thread."""
    tag = "connect-cancel"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(fast_then_stuck(connect), job_tag=tag).subscribe(subscriber)
    subscriber.await_count(5, 120)
    subscriber.cancel()
    wait_until(no_owned_threads, 60, "the owned thread to end")
    assert connect.interruptTag(tag) == []  # nothing with the tag is left running
    subscriber.expect_no_signals(0.2)
    assert not subscriber.is_terminated


def test_a_row_a_read_in_progress_gets_after_the_cancel_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cancel() breaks a read in progress, which may still return a row (it arrived as the
    cancel landed): that row is not delivered, nothing is signalled after the cancel."""
    reading = threading.Event()

    class RowAsCancelLands(_partitions.Reader):  # stands for a reader whose read is blocked
        def __init__(self) -> None:
            super().__init__(("row-after-cancel",))
            self.broken = threading.Event()

        def open(self) -> Iterator[Any]:
            def rows() -> Iterator[Any]:
                reading.set()
                self.broken.wait(10)  # the read in progress, until cancel breaks it ...
                yield "a row"  # ... and still gets a row

            return rows()

        def _break_read(self) -> None:
            self.broken.set()

        def _cancel_tag(self) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(
        "reactive_streams.spark.dataframe.make_reader", lambda *args, **kwargs: RowAsCancelLands()
    )
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    from pyspark.sql import DataFrame

    from_dataframe(object.__new__(DataFrame)).subscribe(subscriber)  # never read: a stand-in
    subscriber.await_subscribed()
    subscriber.request(1)
    assert reading.wait(10)
    subscriber.cancel()
    wait_until(
        lambda: not any(t.name.startswith("row-after-cancel") for t in threading.enumerate()),
        10,
        "the owned thread to end",
    )
    subscriber.expect_no_signals(0.05)
    assert subscriber.elements == [] and not subscriber.is_terminated


def _cancel_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.endswith("-cancel")}


def test_a_cancel_after_on_error_on_connect_leaves_no_thread_behind(connect: Any) -> None:
    """A Connect read that fails before its first row ends in on_error; a cancel after that
    (a no-op for the stream, §3.6) must leave no cancel thread running on."""
    df = connect.range(0, 10, 1, 2).selectExpr("raise_error('boom') AS x")
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_dataframe(df).subscribe(subscriber)
    subscriber.await_terminal(120)
    assert subscriber.error is not None
    before = _cancel_threads()
    subscriber.cancel()
    wait_until(lambda: not (_cancel_threads() - before), 10, "the cancel thread to end")


# -- failures --------------------------------------------------------------------------------


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
    print("ON_ERROR" if subscriber.error is not None else "NO_ERROR", type(subscriber.error))
    """
)


def test_stopping_the_classic_session_mid_stream_becomes_on_error() -> None:
    """spark.stop() while a partition job runs ends the subscription with on_error (own JVM)."""
    result = run_python("-c", _STOP_MID_STREAM)
    assert "ON_ERROR" in result.stdout, result.stdout + result.stderr[-3000:]


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


class _CancelAtRequest:
    """Stands for ``pyspark.serializers`` in the reader: cancels right after the request for
    the second partition has left (on the subscription's thread, before it waits for the
    answer), as a consumer's cancel landing then would."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel
        self.requests = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(_partitions.pyspark.serializers, name)

    def write_int(self, value: int, stream: Any) -> None:
        _partitions.pyspark.serializers.write_int(value, stream)
        if value == 1:
            self.requests += 1
            if self.requests == 2:
                stream.flush()
                self.cancel()


def test_spec312_a_cancel_right_after_a_partition_request_stops_its_job(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§3.12: a cancel that lands as the reader has just asked for the next partition (the
    JVM submits that job a moment later, after a single cancel call may have run) still
    stops it: the interrupt cancels again while the serving handler may start one. Racy by
    nature: a single cancel left the job running in about 4 of 10 rounds, so ten rounds."""
    df = fast_then_stuck(spark)
    for round_ in range(10):
        tag = f"cancel-at-request-{round_}"
        subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
        monkeypatch.setattr(_partitions, "_ser", _CancelAtRequest(subscriber.cancel))
        from_dataframe(df, job_tag=tag).subscribe(subscriber)
        try:
            wait_until(lambda: len(jobs_for_tag(spark, tag)) == 2, 60, "the second job")  # noqa: B023
            # A job left running would run for many minutes: cancelled, it ends at once.
            wait_until(lambda: active_jobs_for_tag(spark, tag) == [], 20, "the job's end")  # noqa: B023
        finally:
            spark.sparkContext.cancelJobsWithTag(tag)  # never leave one running for the next
        assert [row.id for row in subscriber.elements] == [0, 1, 2, 3, 4]


# -- event loops -----------------------------------------------------------------------------


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


# -- a long-lived session --------------------------------------------------------------------


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


@pytest.mark.stress
def test_cancel_and_request_racing_from_many_threads(spark: Any) -> None:
    """Requests and cancels racing from four threads while rows flow: no rule broken, no
    signal after the cancel settles, every owned thread ends, no tagged job left running."""
    df = sample(spark, rows=20_000, partitions=2)
    tag = "race"
    for round_ in range(12):
        subscriber: RecordingSubscriber[Any] = RecordingSubscriber(round_ + 1)
        from_dataframe(df, mode="arrow" if round_ % 2 else "rows", job_tag=tag).subscribe(
            subscriber
        )
        subscriber.await_count(1, 120)
        barrier = threading.Barrier(4)

        def hammer(i: int, s: RecordingSubscriber[Any] = subscriber, gate: Any = barrier) -> None:
            gate.wait()
            for _ in range(50):
                if i % 2:
                    s.request(3)
                else:
                    s.cancel()

        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        wait_until(no_owned_threads, 60, "the owned threads to end")
        count = len(subscriber.elements)
        subscriber.expect_no_signals(0.05)
        assert len(subscriber.elements) == count
        subscriber.assert_no_violations()
    wait_until(lambda: active_jobs_for_tag(spark, tag) == [], 60, "no tagged job running")


def test_daemon_thread_runs_tasks_in_order_on_one_daemon_thread() -> None:
    """The subscription's executor: one daemon thread named as asked, tasks in order, a
    raising task's error in its future; after shutdown a submit is refused (as a
    ThreadPoolExecutor refuses it), queued tasks still run, or are cancelled with
    cancel_futures, and the thread ends."""
    executor = _partitions.DaemonThread("rs-spark-000000000000_0")
    gate = threading.Event()
    seen: list[tuple[int, str, bool]] = []

    def task(i: int) -> int:
        current = threading.current_thread()
        seen.append((i, current.name, current.daemon))
        return i

    blocked = executor.submit(gate.wait, 5)
    futures = [executor.submit(task, i) for i in range(3)]
    failing = executor.submit(lambda: 1 // 0)
    executor.shutdown(wait=False)
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(task, 99)
    gate.set()
    assert blocked.result(5) is True and [f.result(5) for f in futures] == [0, 1, 2]
    assert isinstance(failing.exception(5), ZeroDivisionError)
    assert seen == [(i, "rs-spark-000000000000_0", True) for i in range(3)]
    wait_until(no_owned_threads, 5, "the thread to end")

    cancelling = _partitions.DaemonThread("rs-spark-000000000001_0")
    gate.clear()
    cancelling.submit(gate.wait, 5)
    queued = cancelling.submit(task, 7)
    cancelling.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert queued.cancelled()
    wait_until(no_owned_threads, 5, "the thread to end")


def test_an_abandoned_daemon_thread_ends_when_collected() -> None:
    """A DaemonThread dropped without shutdown (an abandoned subscription's) lets its thread
    end once collected, as a ThreadPoolExecutor's worker does; the last task it ran is not
    kept alive meanwhile."""
    executor = _partitions.DaemonThread("rs-spark-000000000002_0")

    class Payload:
        pass

    payload = Payload()
    kept = weakref.ref(payload)
    executor.submit(lambda p: None, payload).result(5)
    del payload
    gc.collect()
    assert kept() is None  # the idle thread does not hold its last task
    del executor
    gc.collect()
    wait_until(no_owned_threads, 5, "the thread to end")


def test_a_daemon_thread_skips_a_task_whose_future_was_cancelled() -> None:
    """A task cancelled while queued never runs; the next one does."""
    executor = _partitions.DaemonThread("rs-spark-000000000009_0")
    gate = threading.Event()
    ran: list[str] = []
    executor.submit(gate.wait, 5)
    skipped = executor.submit(ran.append, "skipped")
    assert skipped.cancel()
    gate.set()
    assert executor.submit(ran.append, "next").result(5) is None
    assert ran == ["next"]
    executor.shutdown()


def test_the_handler_counts_as_done_when_the_jvm_cannot_be_asked() -> None:
    """With the gateway gone, the serving handler cannot be asked about: counted as done,
    so an interrupt's cancel loop ends instead of calling a dead JVM every 50 ms for ever."""

    class Gone:
        def __getattr__(self, name: str) -> Any:
            raise ConnectionError("py4j gateway closed")

    assert _partitions._handler_done(None) and _partitions._handler_done(Gone())


def test_a_reader_cancel_that_hangs_never_holds_up_the_shared_canceller() -> None:
    """A reader's cancel (a Connect RPC retrying against a dead server) runs on a thread of
    its own, also once the read is open: a classic cancel queued meanwhile runs at once."""
    unblock, ran = threading.Event(), threading.Event()

    class Hanging(_partitions.Reader):
        def _cancel_tag(self) -> None:
            unblock.wait(60)

    reader = Hanging(("rs-spark-hanging",))
    reader._started = True  # opened, reading: not opening any more
    try:
        reader.interrupt()
        _partitions.cancel_later(ran.set)
        assert ran.wait(10), "a hanging reader cancel held up the shared canceller"
    finally:
        unblock.set()


def test_a_read_ended_by_a_raising_subscriber_stops_its_prefetched_job(spark: Any) -> None:
    """Not only cancel: a read that ends because on_next raised (§2.13) stops the partition
    job computed ahead of demand too (close() interrupts)."""
    tag = "on-next-raises-prefetch"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)

    def fail_at_the_last_fast_row(row: Any) -> None:
        if row.id == 4:
            wait_until(lambda: active_jobs_for_tag(spark, tag) != [], 60, "the prefetch job")
            raise RuntimeError("consumer bug")

    subscriber.on_next_hook = fail_at_the_last_fast_row
    from_dataframe(fast_then_stuck(spark), job_tag=tag, prefetch_partitions=True).subscribe(
        subscriber
    )
    wait_until(lambda: len(subscriber.elements) == 5, 120, "the fast rows")
    wait_until(lambda: active_jobs_for_tag(spark, tag) == [], 30, "the prefetched job to stop")
    assert all(job_status(spark, job) == "FAILED" for job in jobs_for_tag(spark, tag)[1:])
    wait_until(no_owned_threads, 30, "the owned thread to end")


_INTERRUPT_AT_EXIT = textwrap.dedent(
    """
    from reactive_streams.spark._partitions import Reader, start_canceller

    start_canceller()  # as a classic reader's open() does


    class Stub(Reader):
        def _cancel_tag(self):
            pass


    class LeftOpen:  # an iterator the program never closed: cancelled by its __del__
        def __init__(self):
            self.reader = Stub(("rs-spark-000000000000",))
            self.reader._started = True  # a read in progress

        def __del__(self):
            self.reader.interrupt()


    rows = LeftOpen()
    raise SystemExit(3)
    """
)


def test_an_interrupt_from_a_finalizer_at_interpreter_exit_lets_the_process_exit() -> None:
    """A read interrupted by a finalizer as the interpreter finalizes (an iterator left
    open) starts no thread: one started then never runs, and start() waited for it for
    ever (the process hung at exit)."""
    result = run_python("-c", _INTERRUPT_AT_EXIT, timeout=60)
    assert result.returncode == 3, result.stderr[-3000:]


def test_the_cancel_loop_cancels_after_the_last_job_the_handler_started() -> None:
    """The handler may submit a prefetched job just after a cancel call and then return:
    the loop asks whether Spark may still start work before each cancel, so its last
    cancel comes after the handler was seen done, and catches that job (a model: a stub
    SparkContext and handler around the real classic reader)."""
    events: list[str] = []

    class Promise:
        done = False

        def isCompleted(self) -> bool:  # noqa: N802 (Scala's name)
            return self.done

    promise = Promise()

    class Server:
        pass

    setattr(Server, "org$apache$spark$security$SocketAuthServer$$promise", lambda _: promise)

    class Context:
        def cancelJobsWithTag(self, tag: str) -> None:  # noqa: N802 (Spark's name)
            events.append("cancel")
            if events.count("cancel") == 1:  # meanwhile, the handler: a prefetch, then done
                events.append("job")
                promise.done = True

    reader = _partitions._ClassicReader(None, "rows", True, None, ("rs-spark-000000000000",))
    reader._started = True  # a read in progress
    reader._sc, reader._server = Context(), Server()
    reader.interrupt()
    wait_until(lambda: events.count("cancel") >= 2, 5, "a cancel after the job")
    assert events[: events.index("job") + 2] == ["cancel", "job", "cancel"]


def test_the_canceller_starts_once_and_again_after_a_refused_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shared canceller thread is started once; a start refused (interpreter exit, or
    no thread to be had) is tried again at the next cancel, not taken for a start."""
    monkeypatch.setattr(_partitions, "_canceller", False)
    starts: list[str] = []

    def start_daemon(target: Callable[..., object], *args: Any, name: str) -> bool:
        starts.append(name)
        return len(starts) > 1  # refused the first time

    monkeypatch.setattr(_partitions, "start_daemon", start_daemon)
    _partitions.start_canceller()
    _partitions.start_canceller()
    _partitions.start_canceller()
    assert starts == ["rs-spark-cancel", "rs-spark-cancel"]


def test_a_reader_that_cannot_start_its_cancel_thread_still_cancels_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read interrupted when no thread of its own can start still gets one cancel call,
    through the shared canceller."""
    later: list[Any] = []
    monkeypatch.setattr(_partitions, "start_daemon", lambda *args, name: False)
    monkeypatch.setattr(_partitions, "cancel_later", lambda fn, *args: later.append(fn))
    reader = _partitions._ClassicReader(None, "rows", True, None, ("rs-spark-000000000001",))
    reader._started = True  # a read in progress
    reader.interrupt()
    assert later == [reader._cancel_tag]
