"""from_stream: micro-batches handed over with demand, a slow subscriber holding the trigger,
cancel stopping the query, failures as on_error, Spark Connect refused."""

from __future__ import annotations

import json
import os
import textwrap
import time
from typing import Any

import pytest

pytest.importorskip("pyspark")

from spark_helpers import run_python, wait_until  # noqa: E402

from reactive_streams import UNBOUNDED  # noqa: E402
from reactive_streams.spark import from_stream  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

pytestmark = pytest.mark.spark


def drop_file(folder: Any, index: int, rows: int) -> None:
    """Write a JSON-lines file atomically, as a stream source expects; its modification
    time orders it after the files dropped before (the source reads oldest first)."""
    tmp = folder / f".part-{index}.tmp"
    tmp.write_text("".join(json.dumps({"f": index, "k": k}) + "\n" for k in range(rows)))
    stamp = time.time() + index
    os.utime(tmp, (stamp, stamp))
    os.rename(tmp, folder / f"part-{index}.json")


def query_named(spark: Any, name: str) -> Any:
    matches = [q for q in spark.streams.active if q.name == name]
    return matches[0] if matches else None


def completed_batches(query: Any) -> list[int]:
    return [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_the_next_micro_batch_waits_for_demand(spark: Any, tmp_path: Any) -> None:
    """While demand covers only part of micro-batch 0, that batch stays open (no progress
    reported, no rows of batch 1 delivered); more demand lets the stream move on."""
    source = tmp_path / "in"
    source.mkdir()
    drop_file(source, 0, 5)
    drop_file(source, 1, 5)
    frame = (
        spark.readStream.schema("f INT, k INT").option("maxFilesPerTrigger", 1).json(str(source))
    )
    name = "rs_backpressure"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(3)
    from_stream(frame, buffer_size=2, query_name=name).subscribe(subscriber)
    subscriber.await_count(3, 120)
    query = query_named(spark, name)
    assert query is not None
    subscriber.expect_no_signals(1.0)  # the trigger interval is 0: only demand holds it
    assert len(subscriber.elements) == 3
    assert completed_batches(query) == []  # micro-batch 0 is still being handed over
    subscriber.request(2)
    subscriber.await_count(5, 120)
    wait_until(lambda: completed_batches(query) == [0], 60, "micro-batch 0 to complete")
    subscriber.expect_no_signals(0.5)
    assert [r.f for r in subscriber.elements] == [0] * 5  # nothing of batch 1 yet
    subscriber.request(UNBOUNDED)
    subscriber.await_count(10, 120)
    assert [(r.f, r.k) for r in subscriber.elements[5:]] == [(1, k) for k in range(5)]
    drop_file(source, 2, 3)  # files appearing later are picked up
    subscriber.await_count(13, 120)
    subscriber.cancel()
    wait_until(lambda: query_named(spark, name) is None, 60, "the query to stop")
    subscriber.assert_no_violations()


def test_cancel_stops_a_rate_source_query(spark: Any) -> None:
    """Cancel after some rows of an endless rate source stops the query; no more signals."""
    frame = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 200)
        .option("numPartitions", 1)
        .load()
    )
    name = "rs_rate"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(40)
    from_stream(frame, query_name=name, trigger={"processingTime": "200 milliseconds"}).subscribe(
        subscriber
    )
    subscriber.await_count(40, 120)
    assert query_named(spark, name) is not None
    subscriber.cancel()
    wait_until(lambda: query_named(spark, name) is None, 60, "the query to stop")
    subscriber.expect_no_signals(0.3)
    assert len(subscriber.elements) == 40
    assert [r.value for r in subscriber.elements] == list(range(40))


def test_available_now_completes_after_all_rows(spark: Any, tmp_path: Any) -> None:
    """With the availableNow trigger the publisher completes once the data is processed;
    arrow mode delivers RecordBatches."""
    source = tmp_path / "in"
    source.mkdir()
    for i in range(3):
        drop_file(source, i, 4)
    frame = spark.readStream.schema("f INT, k INT").json(str(source))
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_stream(frame, mode="arrow", trigger={"availableNow": True}).subscribe(subscriber)
    subscriber.await_terminal(120)
    assert subscriber.completed
    assert sum(b.num_rows for b in subscriber.elements) == 12


def test_a_failing_query_becomes_on_error(spark: Any, tmp_path: Any) -> None:
    """A micro-batch that fails ends the subscription with Spark's StreamingQueryException."""
    from pyspark.errors import StreamingQueryException

    source = tmp_path / "in"
    source.mkdir()
    drop_file(source, 0, 2)
    frame = spark.readStream.schema("f INT, k INT").json(str(source))
    bad = frame.selectExpr("raise_error('stream boom') AS x")
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_stream(bad, trigger={"availableNow": True}).subscribe(subscriber)
    subscriber.await_terminal(120)
    assert isinstance(subscriber.error, StreamingQueryException)
    assert "stream boom" in str(subscriber.error)


def test_spark_connect_is_refused_with_on_error(connect: Any) -> None:
    """On Spark Connect the subscription is refused: on_subscribe, then on_error (§1.9)."""
    frame = connect.readStream.format("rate").load()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    from_stream(frame).subscribe(subscriber)
    subscriber.await_terminal(10)
    assert isinstance(subscriber.error, NotImplementedError)


def test_a_batch_dataframe_is_refused(spark: Any) -> None:
    """from_stream needs a streaming DataFrame; bad options raise ValueError."""
    with pytest.raises(ValueError, match="streaming"):
        from_stream(spark.range(3))
    frame = spark.readStream.format("rate").load()
    with pytest.raises(ValueError):
        from_stream(frame, buffer_size=0)
    with pytest.raises(TypeError, match="trigger"):
        from_stream(frame, trigger="1 second")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trigger"):
        from_stream(frame, trigger={"procesingTime": "1 second"})
    with pytest.raises(ValueError, match="takes an interval string such as"):
        from_stream(frame, trigger={"processingTime": 5})  # Spark refused it at the first pull
    with pytest.raises(ValueError, match="takes an interval string such as"):
        from_stream(frame, trigger={"processingTime": "  "})
    with pytest.raises(ValueError, match=r"\{'availableNow': \.\.\.\} takes True"):
        from_stream(frame, trigger={"availableNow": "yes"})
    with pytest.raises(TypeError, match="requires a pyspark DataFrame"):
        from_stream([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        from_stream(frame, mode="pandas")  # type: ignore[arg-type]
    for bad in (0, -1, 2.5):  # -1 used to drop every row, 0 to fail the query later
        with pytest.raises(ValueError, match="max_rows_per_batch must be a positive int"):
            from_stream(frame, mode="arrow", max_rows_per_batch=bad)  # type: ignore[arg-type]


def rate_stream(spark: Any, rows_per_second: int = 200) -> Any:
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .option("numPartitions", 1)
        .load()
    )


@pytest.mark.parametrize("checkpoint", ["temporary", "given"])
def test_a_query_stopped_from_outside_is_not_held_by_a_slow_subscriber(
    spark: Any, tmp_path: Any, checkpoint: str
) -> None:
    """query.stop() from elsewhere while the sink is blocked on a subscriber that is behind:
    the stop returns (the sink lets go of its micro-batch), and the subscription completes
    after the elements already handed over; also with the caller's checkpoint, where the
    batch let go is failed (not committed), which is still no error of the stream's."""
    name = f"rs_outside_stop_{checkpoint}"
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    from_stream(
        rate_stream(spark),
        buffer_size=1,
        query_name=name,
        trigger={"processingTime": "200 milliseconds"},
        checkpoint_location=str(tmp_path / "ckpt") if checkpoint == "given" else None,
    ).subscribe(subscriber)
    subscriber.await_count(1, 120)
    subscriber.expect_no_signals(1.5)  # the sink now waits: one element handed over, no demand
    query = query_named(spark, name)
    assert query is not None
    try:
        query.stop()  # on this thread, as a user would; a stop held by the sink hangs here
        # until pytest-timeout fails the test
        subscriber.request(UNBOUNDED)
        subscriber.await_terminal(60)
    finally:
        subscriber.cancel()  # lets go of a sink still blocked when the test fails
    assert subscriber.completed, subscriber.error
    values = [r.value for r in subscriber.elements]
    assert values == list(range(len(values))) and len(values) in (1, 2)
    subscriber.assert_no_violations()


_SESSION_STOP = textwrap.dedent(
    """
    import threading
    from reactive_streams.testing import RecordingSubscriber
    from reactive_streams.spark import from_stream
    from reactive_streams.spark.local import local_session

    spark = local_session("local[2]")
    frame = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    subscriber = RecordingSubscriber(1)
    trigger = {"processingTime": "200 milliseconds"}
    from_stream(frame, buffer_size=1, trigger=trigger).subscribe(subscriber)
    subscriber.await_count(1, 120)
    subscriber.expect_no_signals(1.0)
    stopper = threading.Thread(target=spark.stop, daemon=True)
    stopper.start()
    stopper.join(90)
    print("STOP_RETURNED" if not stopper.is_alive() else "STOP_HUNG")
    subscriber.request(1)  # the element handed over before the stop; then the end
    subscriber.await_terminal(90)
    print("ON_ERROR" if subscriber.error is not None else "COMPLETED")
    """
)


def test_stopping_the_session_under_a_slow_subscriber_fails_the_stream() -> None:
    """spark.stop() while the sink waits for a subscriber that is behind: the stop returns and
    the subscription ends with on_error (own JVM), instead of waiting for ever."""
    result = run_python("-c", _SESSION_STOP, timeout=300)
    assert "STOP_RETURNED" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "ON_ERROR" in result.stdout, result.stdout + result.stderr[-3000:]


def test_a_continuous_trigger_is_refused_at_the_call(spark: Any) -> None:
    """foreachBatch does not run under a continuous trigger: every subscription would fail
    at its first request, so the call says so at once."""
    frame = spark.readStream.format("rate").load()
    with pytest.raises(ValueError, match="continuous.*foreachBatch"):
        from_stream(frame, trigger={"continuous": "1 second"})


def test_a_stopped_session_is_refused_at_subscribe() -> None:
    """As from_dataframe: a session known to be stopped gives on_subscribe then on_error
    naming it, not a raw Py4JJavaError at the first request."""

    from pyspark.sql import DataFrame

    class _Stopped(DataFrame):  # a stand-in, never initialised
        isStreaming = True  # type: ignore[assignment]

        class sparkSession:  # noqa: N801 - the shape of a DataFrame's session
            class sparkContext:  # noqa: N801
                _jsc = None

    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    from_stream(object.__new__(_Stopped)).subscribe(subscriber)
    subscriber.await_terminal(10)
    assert isinstance(subscriber.error, RuntimeError)
    assert "SparkContext of this DataFrame was stopped" in str(subscriber.error)


_NEVER_CANCELLED = textwrap.dedent(
    """
    from reactive_streams.testing import RecordingSubscriber
    from reactive_streams.spark import from_stream, streaming
    from reactive_streams.spark.local import local_session

    spark = local_session("local[2]")
    frame = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    subscriber = RecordingSubscriber(1)
    from_stream(frame, buffer_size=1).subscribe(subscriber)
    subscriber.await_count(1, 120)
    print("CHECKPOINTS", *streaming._TEMPORARY)
    """  # the program ends here, its subscription never cancelled
)


def test_a_temporary_checkpoint_is_removed_at_exit_when_never_cancelled() -> None:
    result = run_python("-c", _NEVER_CANCELLED, timeout=300)
    line = next(
        (x for x in result.stdout.splitlines() if x.startswith("CHECKPOINTS")),
        "",
    )
    folders = line.split()[1:]
    assert len(folders) == 1, result.stdout + result.stderr[-3000:]
    assert not os.path.exists(folders[0])


_STOP_AT_EXIT = textwrap.dedent(
    """
    import sys
    from reactive_streams.spark.streaming import _StreamSource
    from reactive_streams.spark._partitions import DaemonThread

    class Query:  # a running streaming query, stubbed
        def stop(self):
            pass

    if sys.argv[1] == "connect":  # cancel_later gives a Connect call a thread of its own
        Query.__module__ = "pyspark.sql.connect.streaming.query"

    class Options:
        buffer_size = 4

    class LeftOpen:  # what a program that never closed its iterator leaves to a finalizer
        def __init__(self):
            self.source = _StreamSource(None, Options(), DaemonThread("rs-test"))
            self.source._query = Query()

        def __del__(self):
            self.source.interrupt()  # what the subscription's cancel does first

    rows = LeftOpen()
    raise SystemExit(3)
    """
)


@pytest.mark.parametrize("kind", ["classic", "connect"])
def test_a_stream_stopped_from_a_finalizer_at_interpreter_exit_lets_the_process_exit(
    kind: str,
) -> None:
    """A stream source interrupted by a finalizer as the interpreter finalizes starts no
    thread to stop its query: one started then never runs, and start() waited for it for
    ever (the process hung at exit)."""
    result = run_python("-c", _STOP_AT_EXIT, kind, timeout=60)
    assert result.returncode == 3, result.stderr[-3000:]
