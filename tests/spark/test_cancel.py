"""Cancelling a from_dataframe read: the running and prefetched jobs stop, also when Spark
starts work just after a cancel call (§3.12); nothing is signalled after it; abandoned reads
stop their jobs; cancel never blocks (§3.5), and no cancel holds up another."""

from __future__ import annotations

import gc
import socket
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import (  # noqa: E402
    SLOW,
    active_jobs_for_tag,
    fast_then_stuck,
    job_status,
    jobs_for_tag,
    no_owned_threads,
    run_python,
    sample,
    wait_until,
)

from reactive_streams import UNBOUNDED  # noqa: E402
from reactive_streams.spark import _py4j, from_dataframe  # noqa: E402
from reactive_streams.spark._partitions import _cancel, _classic, is_connect  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

pytestmark = pytest.mark.spark


# -- cancel stops the job that runs, and ends the subscription's thread ----------------------


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


# -- work Spark starts just after a cancel call is stopped too (§3.12) -----------------------


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


class _CancelAtRequest:
    """Stands for ``pyspark.serializers`` in the reader: cancels right after the request for
    the second partition has left (on the subscription's thread, before it waits for the
    answer), as a consumer's cancel landing then would."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel
        self.requests = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(_py4j.serializers, name)

    def write_int(self, value: int, stream: Any) -> None:
        _py4j.serializers.write_int(value, stream)
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
        monkeypatch.setattr(_classic, "_ser", _CancelAtRequest(subscriber.cancel))
        from_dataframe(df, job_tag=tag).subscribe(subscriber)
        try:
            wait_until(lambda: len(jobs_for_tag(spark, tag)) == 2, 60, "the second job")  # noqa: B023
            # A job left running would run for many minutes: cancelled, it ends at once.
            wait_until(lambda: active_jobs_for_tag(spark, tag) == [], 20, "the job's end")  # noqa: B023
        finally:
            spark.sparkContext.cancelJobsWithTag(tag)  # never leave one running for the next
        assert [row.id for row in subscriber.elements] == [0, 1, 2, 3, 4]


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

    reader = _classic.ClassicReader(None, "rows", True, None, ("rs-spark-000000000000",))
    reader._started = True  # a read in progress
    reader._sc, reader._server = Context(), Server()
    reader.interrupt()
    wait_until(lambda: events.count("cancel") >= 2, 5, "a cancel after the job")
    assert events[: events.index("job") + 2] == ["cancel", "job", "cancel"]


# -- nothing is signalled after the cancel ---------------------------------------------------


def test_a_row_a_read_in_progress_gets_after_the_cancel_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cancel() breaks a read in progress, which may still return a row (it arrived as the
    cancel landed): that row is not delivered, nothing is signalled after the cancel."""
    reading = threading.Event()

    class RowAsCancelLands(_cancel.Reader):  # stands for a reader whose read is blocked
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
        "reactive_streams.spark._read.make_reader", lambda *args, **kwargs: RowAsCancelLands()
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


# -- an abandoned subscription stops its jobs ------------------------------------------------


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

    _cancel.start_canceller()  # as open() does before it creates the finalizer
    left, right = socket.socketpair()
    finalizer_returned = threading.Event()

    def collected_inside_cancel_later() -> None:
        with _cancel._canceller_lock:  # where an allocation in cancel_later may collect
            _classic._abandoned(right.makefile("rwb"), right, Context(), "gc-tag")
            finalizer_returned.set()

    thread = threading.Thread(target=collected_inside_cancel_later, daemon=True)
    thread.start()
    assert finalizer_returned.wait(10), "the finalizer waited for a lock its thread holds"
    assert cancelled.wait(10), "the abandoned reader's jobs were never cancelled"
    assert right.fileno() == -1  # its socket was closed
    left.close()


# -- cancel never blocks, and no cancel holds up another -------------------------------------


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
        _cancel.cancel_later(Remote().interruptTag, "gone")
        _cancel.cancel_later(ran.set)  # a classic cancel, queued behind it
        assert ran.wait(10), "the classic cancel waited for the Connect one"
    finally:
        unblock.set()


def test_a_reader_cancel_that_hangs_never_holds_up_the_shared_canceller() -> None:
    """A reader's cancel (a Connect RPC retrying against a dead server) runs on a thread of
    its own, also once the read is open: a classic cancel queued meanwhile runs at once."""
    unblock, ran = threading.Event(), threading.Event()

    class Hanging(_cancel.Reader):
        def _cancel_tag(self) -> None:
            unblock.wait(60)

    reader = Hanging(("rs-spark-hanging",))
    reader._started = True  # opened, reading: not opening any more
    try:
        reader.interrupt()
        _cancel.cancel_later(ran.set)
        assert ran.wait(10), "a hanging reader cancel held up the shared canceller"
    finally:
        unblock.set()


def test_the_canceller_starts_once_and_again_after_a_refused_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shared canceller thread is started once; a start refused (interpreter exit, or
    no thread to be had) is tried again at the next cancel, not taken for a start."""
    monkeypatch.setattr(_cancel, "_canceller", False)
    starts: list[str] = []

    def start_daemon(target: Callable[..., object], *args: Any, name: str) -> bool:
        starts.append(name)
        return len(starts) > 1  # refused the first time

    monkeypatch.setattr(_cancel, "start_daemon", start_daemon)
    _cancel.start_canceller()
    _cancel.start_canceller()
    _cancel.start_canceller()
    assert starts == ["rs-spark-cancel", "rs-spark-cancel"]


def test_a_reader_that_cannot_start_its_cancel_thread_still_cancels_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read interrupted when no thread of its own can start still gets one cancel call,
    through the shared canceller."""
    later: list[Any] = []
    monkeypatch.setattr(_cancel, "start_daemon", lambda *args, name: False)
    monkeypatch.setattr(_cancel, "cancel_later", lambda fn, *args: later.append(fn))
    reader = _classic.ClassicReader(None, "rows", True, None, ("rs-spark-000000000001",))
    reader._started = True  # a read in progress
    reader.interrupt()
    assert later == [reader._cancel_tag]


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


# -- on Spark Connect, cancel interrupts the operation ---------------------------------------


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
