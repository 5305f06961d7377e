"""``from_dataframe``: a DataFrame as a cold Publisher of rows or Arrow record batches.

Nothing runs in Spark before the first ``request``; then partitions are fetched one Spark job
at a time, only as far as demand reaches, on a thread the subscription owns, where all
signals but ``on_subscribe`` arrive. Cancel interrupts the subscription's Spark jobs from a
helper thread, so ``cancel()`` never blocks (§3.5). docs/spark.md says what is held where.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, final, overload

import pyarrow as pa

from reactive_streams._demand import check_request
from reactive_streams._drain import EMPTY, END, DrainSubscription, OnExecutor, Source, _Marker
from reactive_streams._scan import Scan
from reactive_streams._subscription import reject, require_subscriber
from reactive_streams.api import Publisher, Subscriber, Subscription
from reactive_streams.spark._partitions import (
    DaemonThread,
    Mode,
    Reader,
    check_dataframe,
    check_job_tag,
    check_read_options,
    make_reader,
    stopped_session,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

__all__ = ["DataFramePublisher", "from_dataframe"]

T = TypeVar("T")


@final
class _DataFrameSource(Source[Any]):
    """One partition reader behind the drain; every method runs on the subscription's thread.

    ``poll`` opens the reader on first use (the first Spark job starts only then), then pulls
    one row or batch per call, blocking on the socket while Spark computes a partition.
    After ``interrupt`` a failing read, or the end of the broken iterator, is the echo of the
    cancel, not news: ``poll`` answers ``EMPTY`` and the drain, seeing the cancel, closes the
    source without signalling (§1.8). A scan (any thread) reads the reader's diagnostics:
    buffered = rows (rows mode) or Arrow batches (arrow mode) decoded on the driver and not
    yet delivered; in flight = partitions asked of Spark and not yet arriving (classic; not
    known on Spark Connect, whose rows mode reports nothing buffered).
    """

    __slots__ = ("_executor", "_iterator", "_reader")

    def __init__(self, reader: Reader, executor: DaemonThread) -> None:
        self._reader = reader
        self._executor = executor
        self._iterator: Iterator[Any] | None = None

    def poll(self) -> Any | _Marker:
        iterator = self._iterator
        reader = self._reader
        try:
            if iterator is None:
                if reader.interrupted:
                    return EMPTY
                iterator = self._iterator = reader.open()
            value = next(iterator, END)
        except Exception:
            if reader.interrupted:  # the cancel broke the read: stay silent (§1.8)
                return EMPTY
            raise  # §1.4: Spark's error becomes on_error
        if reader.interrupted:  # §3.12
            # What a read returns once cancel came (the end of the broken iterator, or an
            # element a read in progress still got) is not delivered: nothing is signalled
            # after the cancel. The drain may poll again before it sees the cancel (demand it
            # had not yet accounted for): it sees it then, and closes the source.
            return EMPTY
        return value

    def buffered(self) -> int:
        return self._reader.buffered()

    def in_flight(self) -> int | None:
        return self._reader.in_flight()

    def close(self) -> None:
        try:
            self._reader.close()
        finally:
            self._reader.held = None  # owned: the subscription's thread
            self._iterator = None
            self._executor.shutdown(wait=False)  # the owned thread ends after this task


@final
class _DataFrameSubscription:
    """What the Subscriber holds: the drain's ``request`` and ``cancel``, which also
    interrupt Spark.

    ``cancel`` stops the running partition job at once, from the module's canceller thread,
    instead of waiting for the subscription's thread to finish reading it (§3.5, §3.12). So
    does a ``request(n <= 0)``: its ``on_error`` ends the stream (§3.9), and must not wait
    for a partition that may take hours.
    """

    __slots__ = ("_drain", "_reader")

    def __init__(self, drain: DrainSubscription[Any], reader: Reader) -> None:
        self._drain = drain
        self._reader = reader

    def request(self, n: int) -> None:
        if check_request(n) is not None:  # §3.9: the read in progress breaks; the drain
            self._reader.interrupt()  # then delivers the error (EMPTY, never a fake end)
        self._drain.request(n)

    def cancel(self) -> None:
        self._reader.interrupt()  # §3.5: non-blocking; idempotent
        self._drain.cancel()  # §3.7

    def scan(self) -> Scan:
        """The drain's record (``from_dataframe(rows)`` / ``(arrow)``): any thread, no lock."""
        return self._drain.scan()


@final
class _Hook:
    """Forwards to the real Subscriber, handing it a :class:`_DataFrameSubscription`.

    ``on_next`` and the terminal signals are the subscriber's own bound methods, so the
    drain calls them directly: no per-element indirection.
    """

    __slots__ = ("_reader", "_target", "on_complete", "on_error", "on_next")

    def __init__(self, target: Subscriber[Any], reader: Reader) -> None:
        self._target = target
        self._reader = reader
        self.on_next = target.on_next
        self.on_error = target.on_error
        self.on_complete = target.on_complete

    def on_subscribe(self, subscription: Subscription) -> None:
        assert isinstance(subscription, DrainSubscription)
        self._target.on_subscribe(_DataFrameSubscription(subscription, self._reader))


@final
class DataFramePublisher(Generic[T]):
    """A cold Publisher over a DataFrame: each Subscriber runs its own Spark jobs.

    Rules: §1.1 and §3.17 (the drain emits only what was requested), §1.3 (all signals from
    one thread the subscription owns), §1.4 (a failing job or a stopped session becomes
    ``on_error``), §1.9 (``on_subscribe`` first, on the subscribing thread; a DataFrame whose
    session is already stopped is refused at once, on_subscribe then on_error), §3.5 (``cancel``
    never blocks: the interrupt goes to a helper thread), §3.13 (sockets, iterators and the
    thread released on cancel and termination).

    Backpressure: rows mode pulls one ``Row`` per unit of demand; arrow mode one
    ``pyarrow.RecordBatch``. Spark computes a partition only when the reader reaches it, so
    at most one partition (two with ``prefetch_partitions``) is held on the driver JVM, and
    one pickled chunk of rows or one Arrow batch in Python.
    """

    __slots__ = ("_df", "_job_tag", "_max_rows", "_mode", "_prefetch")

    def __init__(
        self,
        df: DataFrame,
        mode: Mode,
        prefetch_partitions: bool,
        max_rows_per_batch: int | None,
        job_tag: str | None,
    ) -> None:
        self._df = df
        self._mode = mode
        self._prefetch = prefetch_partitions
        self._max_rows = max_rows_per_batch
        self._job_tag = job_tag

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        stopped = stopped_session(self._df)
        if stopped is not None:  # known without calling Spark: refuse at once (§1.9)
            reject(subscriber, RuntimeError(stopped))
            return
        reader = make_reader(
            self._df,
            self._mode,
            prefetch_partitions=self._prefetch,
            max_rows_per_batch=self._max_rows,
            job_tag=self._job_tag,
        )
        executor = DaemonThread(f"{reader.tags[0]}_0")
        source = _DataFrameSource(reader, executor)
        DrainSubscription(
            _Hook(subscriber, reader),
            source,
            OnExecutor(executor),
            name=f"from_dataframe({self._mode})",  # the unit of its counts: rows or batches
        ).start()

    def __repr__(self) -> str:
        return f"from_dataframe(<{type(self._df).__name__}>, mode={self._mode!r})"


@overload
def from_dataframe(
    df: DataFrame,
    *,
    mode: Literal["rows"] = "rows",
    prefetch_partitions: bool = False,
    max_rows_per_batch: None = None,
    job_tag: str | None = None,
) -> Publisher[Row]: ...


@overload
def from_dataframe(
    df: DataFrame,
    *,
    mode: Literal["arrow"],
    prefetch_partitions: bool = False,
    max_rows_per_batch: int | None = None,
    job_tag: str | None = None,
) -> Publisher[pa.RecordBatch]: ...


def from_dataframe(
    df: DataFrame,
    *,
    mode: Mode = "rows",
    prefetch_partitions: bool = False,
    max_rows_per_batch: int | None = None,
    job_tag: str | None = None,
) -> Publisher[Any]:
    """A cold Publisher over ``df``, pulled partition by partition as demand reaches it.

    Args:
        df: a classic or Spark Connect DataFrame.
        mode: ``"rows"`` emits ``pyspark.sql.Row`` (what ``toLocalIterator`` yields), one per
            unit of demand; ``"arrow"`` emits ``pyarrow.RecordBatch``, one per unit of demand.
        prefetch_partitions: compute the next partition while the current one is read (one
            more partition held on the driver). Classic sessions only; Spark Connect ignores it.
        max_rows_per_batch: arrow mode: at most this many rows per batch (default: the
            session's ``spark.sql.execution.arrow.maxRecordsPerBatch``).
        job_tag: an extra Spark job tag on every job a subscription runs (each subscription
            also tags its jobs with a unique ``rs-spark-…`` tag, which cancel uses).

    Returns:
        A Publisher; each Subscriber gets its own Spark jobs and its own thread.

    Raises:
        TypeError: ``df`` is not a pyspark DataFrame; ``job_tag`` is not a str.
        ValueError: an unknown ``mode``, a non-positive ``max_rows_per_batch``, or a
            ``job_tag`` that is empty or holds a comma.
    """
    check_read_options(mode, max_rows_per_batch)
    check_dataframe(df, "from_dataframe()")
    check_job_tag(job_tag)
    return DataFramePublisher(df, mode, bool(prefetch_partitions), max_rows_per_batch, job_tag)
