"""Publishers into Spark: to_dataframe, write_parquet / write_table, and BatchSubscriber."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from spark_helpers import wait_until  # noqa: E402

from reactive_streams.adapters.iterables import from_iterable  # noqa: E402
from reactive_streams.errors import OverflowViolation  # noqa: E402
from reactive_streams.spark import (  # noqa: E402
    BatchSubscriber,
    from_dataframe,
    to_dataframe,
    write_parquet,
    write_table,
)
from reactive_streams.testing import RecordingSubscription  # noqa: E402

pytestmark = pytest.mark.spark


class CountingGenerator:
    """An infinite generator of dict rows that counts how far it has been pulled."""

    def __init__(self) -> None:
        self.pulled = 0
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for i in itertools.count():
                self.pulled += 1
                yield {"i": i, "s": f"row{i}"}
        finally:
            self.closed = True


# -- to_dataframe drains a finite publisher into a DataFrame ---------------------------------


def test_to_dataframe_round_trips_dict_rows(session: Any) -> None:
    """Dicts from a finite publisher become a DataFrame with the same rows, in order."""
    rows = [{"i": i, "name": f"n{i}", "x": i / 4} for i in range(2500)]
    df = to_dataframe(from_iterable(rows), session, batch_size=1000)
    assert [r.asDict() for r in df.orderBy("i").collect()] == rows


def test_to_dataframe_takes_arrow_batches_from_from_dataframe(session: Any) -> None:
    """from_dataframe (arrow) into to_dataframe reproduces the DataFrame."""
    source = session.range(0, 5000, 1, 3).selectExpr("id", "cast(id AS string) AS s")
    copy = to_dataframe(from_dataframe(source, mode="arrow"), session, batch_size=2)
    assert copy.orderBy("id").collect() == source.collect()


def test_to_dataframe_of_rows_from_from_dataframe(spark: Any) -> None:
    """from_dataframe (rows) into to_dataframe: Row elements keep their field names."""
    source = spark.range(0, 300, 1, 2).selectExpr("id", "id % 3 AS m")
    copy = to_dataframe(from_dataframe(source), spark, batch_size=128)
    assert copy.columns == ["id", "m"]
    assert copy.orderBy("id").collect() == source.collect()


def test_to_dataframe_of_an_empty_publisher_needs_a_schema(spark: Any) -> None:
    """An empty publisher gives an empty DataFrame with a schema, and ValueError without."""
    df = to_dataframe(from_iterable([]), spark, schema="a LONG")
    assert df.count() == 0 and df.columns == ["a"]
    with pytest.raises(ValueError, match="schema"):
        to_dataframe(from_iterable([]), spark)


def test_to_dataframe_raises_the_publishers_error(spark: Any) -> None:
    """A publisher that fails makes to_dataframe raise that error."""

    def failing() -> Iterator[dict[str, int]]:
        yield {"a": 1}
        raise KeyError("upstream broke")

    with pytest.raises(KeyError, match="upstream broke"):
        to_dataframe(from_iterable(failing()), spark, batch_size=10)


# -- a sink refuses what cannot work before it pulls anything --------------------------------


def test_to_dataframe_refuses_a_session_that_is_not_one_before_pulling() -> None:
    """A wrong spark_session is a TypeError naming it, before anything is pulled."""
    source = CountingGenerator()
    with pytest.raises(TypeError, match="spark_session"):
        to_dataframe(from_iterable(source), None, batch_size=10)  # type: ignore[arg-type]
    assert source.pulled == 0


class _StoppedSession:
    """What a classic SparkSession looks like from Python once its context was stopped."""

    class sparkContext:  # noqa: N801 (SparkSession's attribute name)
        _jsc = None

    def createDataFrame(self, *args: Any) -> Any:  # noqa: N802 (SparkSession's name)
        raise AssertionError("never called: refused before")


def test_sinks_refuse_a_stopped_session_and_a_bad_target_before_pulling(
    spark: Any, tmp_path: Path
) -> None:
    """A stopped session is refused at the call (to_dataframe returned a DataFrame that
    failed when used); a write's path or table must be a non-empty str (a None path failed
    after the first batch was read)."""
    source = CountingGenerator()
    with pytest.raises(RuntimeError, match="to_dataframe\\(\\): the SparkContext was stopped"):
        to_dataframe(from_iterable(source), _StoppedSession())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="write_parquet\\(\\): path must be a non-empty str"):
        write_parquet(from_iterable(source), spark, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="write_table\\(\\): table must be a non-empty str"):
        write_table(from_iterable(source), spark, "")
    assert source.pulled == 0
    rows = [{"i": i} for i in range(3)]
    stats = write_parquet(from_iterable(rows), spark, tmp_path / "out", batch_size=3)
    assert stats.rows == 3 and stats.target == str(tmp_path / "out")  # a PathLike is a path


def test_to_dataframe_refuses_to_block_a_running_loop(spark: Any) -> None:
    """Called on a thread running an event loop, to_dataframe raises instead of blocking it."""

    async def main() -> None:
        with pytest.raises(RuntimeError, match="event loop"):
            to_dataframe(from_iterable([{"a": 1}]), spark)

    asyncio.run(main())


# -- a write requests the next batch only after the last one was written ---------------------


def test_write_parquet_holds_one_batch_and_requests_after_each_write(
    session: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unbounded source is pulled one batch ahead of the writes, never more."""
    source = CountingGenerator()
    path = str(tmp_path / "out")
    pulled_at_write: list[int] = []

    import reactive_streams.spark._sinks as sinks

    original = sinks._create

    def spy(spark_session: Any, table: Any, batcher: Any) -> Any:
        pulled_at_write.append(source.pulled)
        return original(spark_session, table, batcher)

    monkeypatch.setattr(sinks, "_create", spy)
    stats = write_parquet(from_iterable(source), session, path, batch_size=50, max_batches=4)
    assert (stats.rows, stats.batches) == (200, 4)
    assert pulled_at_write == [50, 100, 150, 200]  # nothing requested while a batch is written
    assert source.closed  # the subscription was cancelled after max_batches
    assert session.read.parquet(path).count() == 200


@pytest.mark.parametrize("sink", ["write_parquet", "write_table"])
def test_a_write_refuses_a_column_it_cannot_type(spark: Any, tmp_path: Any, sink: str) -> None:
    """A column all None in the first batch cannot be typed before it is written (Spark's
    createDataFrame refuses it too): a ValueError naming it and schema=, nothing written."""
    rows = [{"i": i, "note": None if i < 3 else f"n{i}"} for i in range(8)]
    spark.sql("DROP TABLE IF EXISTS rs_untyped")
    path = str(tmp_path / "untyped")
    target = path if sink == "write_parquet" else "rs_untyped"
    write = write_parquet if sink == "write_parquet" else write_table
    with pytest.raises(ValueError, match=r"\['note'\].*schema="):
        write(from_iterable(rows), spark, target, batch_size=3)
    assert not Path(path).exists() and not spark.catalog.tableExists("rs_untyped")
    stats = write(from_iterable(rows), spark, target, batch_size=3, schema="i LONG, note STRING")
    assert stats.rows == 8
    spark.sql("DROP TABLE IF EXISTS rs_untyped")


def test_write_table_appends_batch_by_batch(spark: Any) -> None:
    """write_table creates the table on the first batch and appends the others."""
    spark.sql("DROP TABLE IF EXISTS rs_events")
    rows = [{"k": i, "v": str(i)} for i in range(120)]
    stats = write_table(from_iterable(rows), spark, "rs_events", batch_size=50)
    assert (stats.rows, stats.batches) == (120, 3)
    assert spark.table("rs_events").count() == 120
    write_table(from_iterable(rows[:10]), spark, "rs_events", batch_size=50)
    assert spark.table("rs_events").count() == 130
    spark.sql("DROP TABLE rs_events")


def test_write_parquet_keeps_earlier_batches_when_the_publisher_fails(
    spark: Any, tmp_path: Any
) -> None:
    """A failure after 25 rows raises, after every row received before it was written
    (two full batches and the partial third)."""

    def failing() -> Iterator[dict[str, int]]:
        yield from ({"a": i} for i in range(25))
        raise OSError("disk on fire")

    path = str(tmp_path / "partial")
    with pytest.raises(OSError, match="disk on fire"):
        write_parquet(from_iterable(failing()), spark, path, batch_size=10)
    assert spark.read.parquet(path).count() == 25


def test_a_failing_write_cancels_the_publisher(spark: Any, tmp_path: Any) -> None:
    """When Spark cannot write, the error is raised and the source is cancelled (closed)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    source = CountingGenerator()
    with pytest.raises(Exception):  # noqa: B017 - whatever Spark raises for a bad path
        write_parquet(from_iterable(source), spark, str(blocker / "sub"), batch_size=10)
    assert source.closed
    assert source.pulled == 10


# -- BatchSubscriber asks for whole batches, and keeps the rules -----------------------------


def test_batch_subscriber_requests_the_next_batch_only_when_asked() -> None:
    """Demand goes out one batch at a time, when the consumer comes back for more."""
    upstream = RecordingSubscription()
    requests = upstream.requests

    subscriber: BatchSubscriber[int] = BatchSubscriber(3)
    subscriber.on_subscribe(upstream)
    assert requests == [3]
    for i in range(3):
        subscriber.on_next(i)
    batches = subscriber.batches(timeout=5)
    assert next(batches) == [0, 1, 2]
    assert requests == [3]  # the consumer still holds the batch
    second: list[list[int]] = []
    consumer = threading.Thread(target=lambda: second.append(next(batches)))
    consumer.start()  # coming back for more: that is when the next batch is requested
    wait_until(lambda: requests == [3, 3], 5, "the second request")
    for i in range(3, 5):
        subscriber.on_next(i)
    subscriber.on_complete()
    consumer.join(5)
    assert second == [[3, 4]]
    assert list(batches) == []
    assert requests == [3, 3] and not upstream.cancelled.is_set()


def test_batch_subscriber_fails_on_overflow() -> None:
    """More on_next than requested cancels upstream and fails with OverflowViolation (§1.1)."""
    upstream = RecordingSubscription()
    subscriber: BatchSubscriber[int] = BatchSubscriber(2)
    subscriber.on_subscribe(upstream)
    for i in range(3):
        subscriber.on_next(i)
    batches = subscriber.batches(timeout=5)
    assert next(batches) == [0, 1]
    with pytest.raises(OverflowViolation):
        next(batches)
    assert upstream.cancelled.is_set()


def test_batch_subscriber_closing_early_cancels() -> None:
    """Closing the batch iterator before the end cancels the subscription (§3.13)."""
    source = CountingGenerator()
    subscriber: BatchSubscriber[dict[str, Any]] = BatchSubscriber(4)
    from_iterable(source).subscribe(subscriber)
    batches = subscriber.batches(timeout=5)
    assert [row["i"] for row in next(batches)] == [0, 1, 2, 3]
    batches.close()
    assert source.closed
    assert source.pulled == 4


def test_a_late_on_error_is_reported_never_raised_and_the_first_terminal_stays(
    caplog: Any,
) -> None:
    """``TerminalSignals``: ``on_error`` after ``on_complete`` is logged as dropped (§1.7),
    not raised, and the sink still ends as completed; the subscription was let go (§2.4)."""
    upstream = RecordingSubscription()
    subscriber: BatchSubscriber[int] = BatchSubscriber(2)
    subscriber.on_subscribe(upstream)
    subscriber.on_next(1)
    subscriber.on_complete()
    late = RuntimeError("late-error-5e1c")
    with caplog.at_level("ERROR", logger="reactive_streams"):
        subscriber.on_error(late)
    assert any(
        "§1.7" in r.getMessage() and "late-error-5e1c" in r.getMessage() for r in caplog.records
    )
    assert list(subscriber.batches(timeout=5)) == [[1]]  # completed: no error raised
    assert subscriber.scan().upstream is None and not upstream.cancelled.is_set()


def test_batch_subscriber_rejects_none_and_bad_sizes() -> None:
    """None signals raise TypeError (§2.13); batch_size and request_batches(k) take
    positive ints only."""
    subscriber: BatchSubscriber[int] = BatchSubscriber(2)
    with pytest.raises(TypeError):
        subscriber.on_subscribe(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        subscriber.on_next(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        BatchSubscriber(0)
    for k in (0, -1, True, 1.5):  # never a request(n <= 0) sent upstream in their name
        with pytest.raises(ValueError, match="k must be a positive int"):
            subscriber.request_batches(k)  # type: ignore[arg-type]


def test_batch_subscriber_fails_its_consumer_on_a_none_signal() -> None:
    """A publisher that sends None gets TypeError (§2.13) and must then stop signalling: the
    consumer waiting for a batch hears the error instead of waiting for ever."""
    for signal in ("on_next", "on_error"):
        upstream = RecordingSubscription()
        subscriber: BatchSubscriber[int] = BatchSubscriber(2)
        subscriber.on_subscribe(upstream)
        with pytest.raises(TypeError, match="§2.13"):
            getattr(subscriber, signal)(None)
        with pytest.raises(TypeError, match="§2.13"):
            next(subscriber.batches(timeout=5))
        assert upstream.cancelled.is_set()


def test_batch_subscriber_cancels_a_second_subscription_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.5: a second on_subscribe is cancelled; a cancel that raises there (§3.15) is
    reported, not raised into the publisher that called on_subscribe."""

    class Raising(RecordingSubscription):
        def cancel(self) -> None:
            super().cancel()
            raise RuntimeError("cancel broke")

    first, second = RecordingSubscription(), Raising()
    subscriber: BatchSubscriber[int] = BatchSubscriber(2)
    subscriber.on_subscribe(first)
    with caplog.at_level("ERROR", logger="reactive_streams"):
        subscriber.on_subscribe(second)  # returns normally
    assert second.cancelled.is_set() and not first.cancelled.is_set()
    assert "3.15" in caplog.text and "cancel broke" in caplog.text
    assert first.requests == [2] and second.requests == []
