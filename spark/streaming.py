"""A Structured Streaming query as a Publisher: micro-batches handed over with demand.

- ``from_stream`` starts one streaming query per Subscriber, at the first ``request``, with a
  ``foreachBatch`` sink. The sink streams its micro-batch partition by partition (the same
  leak-free reader as ``from_dataframe``) into a hand-off of ``buffer_size`` elements and
  *blocks* while the hand-off is full, and again at the end of the micro-batch until every
  element was delivered: a slow subscriber holds the micro-batch open, so the next trigger
  waits instead of memory filling up (overflow strategy: block; bound: ``buffer_size``).
- Signals arrive on a thread the subscription owns (never on Spark's callback thread).
- Cancel wakes the blocked sink, which abandons its micro-batch (failing it when the caller
  gave a checkpoint, so its offsets are not committed), and stops the query from a helper
  thread; ``cancel()`` itself never blocks.
  A failing query becomes ``on_error`` with Spark's ``StreamingQueryException``. A query
  stopped from outside (``query.stop()``, ``spark.streams``) while the subscriber is behind
  is not held up: the blocked sink notices within ``_CHECK_EVERY`` and lets go of its
  micro-batch, and the subscription completes after the elements already handed over (a
  stopped session fails it instead).
- Classic sessions only: Spark Connect runs ``foreachBatch`` in a server-side Python worker,
  where a driver-side subscriber cannot be reached; such a subscription gets ``on_error``.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final

from reactive_streams._drain import EMPTY, END, DrainSubscription, OnExecutor, Source, _Marker
from reactive_streams._scan import Scan
from reactive_streams._subscription import reject, require_subscriber
from reactive_streams.api import Publisher, Subscriber, Subscription
from reactive_streams.spark._partitions import (
    DaemonThread,
    Mode,
    cancel_later,
    check_dataframe,
    check_read_options,
    is_connect,
    make_reader,
    new_tag,
    spark_error,
    stopped_session,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["StreamPublisher", "from_stream"]

T = TypeVar("T")


class _Stopped(Exception):
    """Raised inside ``foreachBatch`` when the subscription was cancelled: fails the batch."""


@final
class _StreamSource(Source[Any]):
    """The hand-off between the query's ``foreachBatch`` (producer) and the drain (consumer).

    The producer runs on Spark's callback thread and blocks on ``_cond`` while ``buffer_size``
    elements wait; ``poll`` runs on the subscription's thread and never blocks (``EMPTY``
    when nothing is ready; the producer's ``wake`` reschedules the drain). A scan reads the
    hand-off's length without the lock (buffered: rows, or Arrow batches in arrow mode);
    what Spark is computing is not known (in flight: None).
    """

    __slots__ = (
        "_buffer_size",
        "_checkpoint",
        "_cond",
        "_df",
        "_error",
        "_executor",
        "_options",
        "_outside",
        "_query",
        "_queue",
        "_stopped",
        "_tag",
        "_terminated",
        "_wake",
        "batches",
    )

    def __init__(
        self,
        df: Any,
        options: _Options,
        executor: DaemonThread,
    ) -> None:
        self._df = df
        self._options = options
        self._executor = executor
        self._buffer_size = options.buffer_size
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Any] = deque()
        self._query: Any = None
        self._stopped = False
        self._outside = False  # the query or its session was stopped by someone else
        self._terminated = False
        self._error: Exception | None = None
        self._wake: Callable[[], None] = _nothing
        self._checkpoint: str | None = None
        self._tag = new_tag()
        self.batches = 0

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    # -- consumer (the subscription's thread) ----------------------------------------------

    def poll(self) -> Any | _Marker:
        if self._query is None and not self._stopped:
            self._start()
        with self._cond:
            if self._queue:
                element = self._queue.popleft()
                self._cond.notify_all()  # room for the producer, or its batch is consumed
                return element
            terminated, error = self._terminated, self._error
        if error is not None:
            raise error
        return END if terminated else EMPTY

    def at_end(self) -> bool:
        with self._cond:
            return self._terminated and not self._queue

    def buffered(self) -> int:
        return len(self._queue)  # a deque's len: a snapshot, no lock (any thread)

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._queue.clear()  # §3.13
            self._cond.notify_all()
            query = self._query
        try:
            if query is not None:
                try:
                    query.stop()
                except Exception:
                    pass
        finally:
            if self._checkpoint is not None and self._options.checkpoint_location is None:
                shutil.rmtree(self._checkpoint, ignore_errors=True)
                with _TEMPORARY_LOCK:
                    _TEMPORARY.discard(self._checkpoint)  # under _TEMPORARY_LOCK
            self._df = None
            self._wake = _nothing
            self._executor.shutdown(wait=False)

    def interrupt(self) -> None:
        """Wake the producer so its batch fails; stop the query on the canceller thread."""
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._cond.notify_all()
            query = self._query
        if query is not None:
            cancel_later(query.stop)

    # -- producer (Spark's foreachBatch callback thread) ---------------------------------------

    def _start(self) -> None:
        options = self._options
        checkpoint = options.checkpoint_location
        if checkpoint is None:
            checkpoint = tempfile.mkdtemp(prefix="rs-spark-stream-")
            with _TEMPORARY_LOCK:
                _TEMPORARY.add(checkpoint)  # under _TEMPORARY_LOCK
        self._checkpoint = checkpoint
        writer = self._df.writeStream.foreachBatch(self._on_batch).option(
            "checkpointLocation", checkpoint
        )
        if options.trigger:
            writer = writer.trigger(**options.trigger)
        if options.query_name:
            writer = writer.queryName(options.query_name)
        query = writer.start()
        with self._cond:
            self._query = query
            stopped = self._stopped
        if stopped:  # cancelled while starting
            cancel_later(query.stop)
            return
        threading.Thread(
            target=self._watch, args=(query,), name=f"{self._tag}-watch", daemon=True
        ).start()

    def _watch(self, query: Any) -> None:
        """Wait for the query to end; turn its end into END or the error (§1.4). A stopped
        session may never release ``awaitTermination``: it is looked at between waits."""
        failure: object = None
        try:
            while not query.awaitTermination(_CHECK_EVERY):
                if self._stopped:
                    return  # cancelled: close() stops the query
                if stopped_session(self._df) is not None:
                    break
            else:
                failure = query.exception()
        except Exception as exc:  # awaitTermination raises the query's failure
            failure = spark_error(exc)
        why = stopped_session(self._df)  # its end may look like a stop: it is a failure
        error: Exception | None = None
        if why is not None:
            error = RuntimeError(f"from_stream(): {why}")
        elif self._outside:  # stopped from outside: a failure is our own _abandon's, which
            error = None  # kept the batch uncommitted; the stop itself is an end
        elif isinstance(failure, Exception):
            error = failure
        elif failure is not None:
            error = RuntimeError(str(failure))
        with self._cond:
            if self._stopped:
                return
            self._terminated = True
            self._error = error
        self._wake()

    def _on_batch(self, batch_df: Any, batch_id: int) -> None:
        options = self._options
        reader = make_reader(
            batch_df,
            options.mode,
            prefetch_partitions=False,
            max_rows_per_batch=options.max_rows_per_batch,
            job_tag=self._tag,
        )
        try:
            for element in reader.open():
                if not self._wait_for(self._has_room):  # block: the subscriber is behind
                    return self._abandon(batch_id)
                with self._cond:
                    if self._stopped:
                        return self._abandon(batch_id)
                    self._queue.append(element)
                self._wake()
            # The micro-batch ends only when all its elements were delivered.
            if not self._wait_for(self._delivered):
                return self._abandon(batch_id)
            with self._cond:
                self.batches += 1  # under _cond: py4j may call back on another thread
        except _Stopped:
            raise
        except Exception:
            if self._stopped:  # the query stop cancelled this batch's job: an echo of cancel
                return self._abandon(batch_id)
            raise
        finally:
            reader.close()

    def _has_room(self) -> bool:
        return len(self._queue) < self._buffer_size

    def _delivered(self) -> bool:
        return not self._queue

    def _wait_for(self, ready: Callable[[], bool]) -> bool:
        """Block the callback until ``ready()`` (checked under ``_cond``); False once
        cancelled, or once the query was stopped from outside or its session stopped: then
        nobody would ever take the rest, and ``query.stop()`` waits for this callback. The
        session is looked at after every wait (Python-side state only); the query, a call
        into the JVM, only when a wait timed out."""
        while True:
            with self._cond:
                if self._stopped:
                    return False
                if ready():
                    return True
                notified = self._cond.wait(_CHECK_EVERY)
            if stopped_session(self._df) is not None or (not notified and self._ended()):
                self._outside = True
                return False

    def _ended(self) -> bool:
        query = self._query
        try:
            return query is not None and not query.isActive  # false from stop()'s start
        except Exception:  # the JVM is gone or going
            return True

    def _abandon(self, batch_id: int) -> None:
        """Cancelled or stopped mid-batch. With the caller's checkpoint, fail the batch so its
        offsets are not committed (a restarted query reads it again); with our temporary
        checkpoint, which is deleted anyway, return quietly (no failed-query noise)."""
        if self._options.checkpoint_location is not None:
            if self._outside:
                raise _Stopped(
                    f"the query was stopped during micro-batch {batch_id}, before the "
                    "subscriber took all of it; the batch is not committed"
                )
            raise _Stopped(f"subscription cancelled during micro-batch {batch_id}")


_TRIGGERS = frozenset({"processingTime", "once", "availableNow"})
"""The triggers ``foreachBatch`` runs under (it refuses ``continuous``, so a stream under it
could never deliver: refused at the call)."""

_TEMPORARY: set[str] = set()
"""The temporary checkpoints of subscriptions not closed yet: removed at exit if still there
(a subscription the program never cancelled), as ``close()`` removes each. Each
subscription's thread adds and removes its own: under ``_TEMPORARY_LOCK``."""
_TEMPORARY_LOCK = threading.Lock()


@atexit.register
def _remove_temporary() -> None:
    with _TEMPORARY_LOCK:
        left = list(_TEMPORARY)
        _TEMPORARY.clear()  # under _TEMPORARY_LOCK
    for checkpoint in left:
        shutil.rmtree(checkpoint, ignore_errors=True)


_CHECK_EVERY = 0.5
"""Seconds between two checks, by a blocked callback, that its query is still running."""


def _nothing() -> None:
    pass


@final
class _Options:
    __slots__ = (
        "buffer_size",
        "checkpoint_location",
        "max_rows_per_batch",
        "mode",
        "query_name",
        "trigger",
    )

    def __init__(
        self,
        mode: Mode,
        buffer_size: int,
        trigger: Mapping[str, Any] | None,
        checkpoint_location: str | None,
        query_name: str | None,
        max_rows_per_batch: int | None,
    ) -> None:
        self.mode = mode
        self.buffer_size = buffer_size
        self.trigger = dict(trigger) if trigger else None
        self.checkpoint_location = checkpoint_location
        self.query_name = query_name
        self.max_rows_per_batch = max_rows_per_batch


@final
class _StreamSubscription:
    """The Subscriber's view: the drain's ``request``; ``cancel`` also wakes and stops Spark."""

    __slots__ = ("_drain", "_source", "request")

    def __init__(self, drain: DrainSubscription[Any], source: _StreamSource) -> None:
        self._drain = drain
        self._source = source
        self.request = drain.request

    def cancel(self) -> None:
        self._source.interrupt()  # §3.5: non-blocking
        self._drain.cancel()  # §3.7

    def scan(self) -> Scan:
        """The drain's record (``from_stream(rows)`` / ``(arrow)``): any thread, no lock."""
        return self._drain.scan()


@final
class _Hook:
    __slots__ = ("_source", "_target", "on_complete", "on_error", "on_next")

    def __init__(self, target: Subscriber[Any], source: _StreamSource) -> None:
        self._target = target
        self._source = source
        self.on_next = target.on_next
        self.on_error = target.on_error
        self.on_complete = target.on_complete

    def on_subscribe(self, subscription: Subscription) -> None:
        assert isinstance(subscription, DrainSubscription)
        self._target.on_subscribe(_StreamSubscription(subscription, self._source))


@final
class StreamPublisher(Generic[T]):
    """Publisher over a streaming DataFrame; one streaming query per Subscriber.

    Rules: §1.1 (emits only what was requested; the sink blocks otherwise), §1.3 (signals
    from the subscription's thread), §1.4 (a failed query becomes ``on_error``), §1.9
    (Spark Connect is refused with ``on_subscribe`` then ``on_error``), §3.5 (``cancel`` does
    not block), §3.13 (query stopped, hand-off emptied, thread ended on cancel).
    """

    __slots__ = ("_df", "_options")

    def __init__(self, df: DataFrame, options: _Options) -> None:
        self._df = df
        self._options = options

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        if is_connect(self._df):
            reject(
                subscriber,
                NotImplementedError(
                    "from_stream() needs a classic SparkSession: Spark Connect runs "
                    "foreachBatch in a server-side Python worker, out of this subscriber's reach"
                ),
            )
            return
        stopped = stopped_session(self._df)
        if stopped is not None:  # known without calling Spark: refuse at once (§1.9)
            reject(subscriber, RuntimeError(stopped))
            return
        executor = DaemonThread("rs-spark-stream_0")
        source = _StreamSource(self._df, self._options, executor)
        DrainSubscription(
            _Hook(subscriber, source),
            source,
            OnExecutor(executor),
            name=f"from_stream({self._options.mode})",  # the unit: rows or Arrow batches
        ).start()


def from_stream(
    streaming_df: DataFrame,
    *,
    mode: Mode = "rows",
    buffer_size: int = 256,
    trigger: Mapping[str, Any] | None = None,
    checkpoint_location: str | None = None,
    query_name: str | None = None,
    max_rows_per_batch: int | None = None,
) -> Publisher[Any]:
    """A Publisher over a streaming DataFrame, each micro-batch delivered with demand.

    Args:
        streaming_df: a streaming DataFrame of a classic session (``spark.readStream…``).
        mode: ``"rows"`` (``Row`` elements) or ``"arrow"`` (``pyarrow.RecordBatch``).
        buffer_size: the most elements waiting between Spark and the subscriber.
        trigger: keyword arguments for ``DataStreamWriter.trigger`` (e.g.
            ``{"processingTime": "1 second"}`` or ``{"availableNow": True}``, which ends the
            stream, and the subscription, once the available data is processed). A query
            stopped from outside (``query.stop()``) completes the subscription after the
            elements already handed over; a stopped session fails it.
        checkpoint_location: kept if given; else a temporary folder, removed on cancel/end
            (or at exit, for a subscription the program never cancelled).
        query_name: the streaming query's name.
        max_rows_per_batch: arrow mode: at most this many rows per batch.

    Returns:
        A Publisher; each Subscriber starts its own query at its first ``request``.
    """
    check_read_options(mode, max_rows_per_batch)
    if type(buffer_size) is not int or buffer_size <= 0:
        raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
    check_dataframe(streaming_df, "from_stream()")
    if not is_connect(streaming_df) and not streaming_df.isStreaming:
        raise ValueError("from_stream() requires a streaming DataFrame (spark.readStream...)")
    if trigger is not None:
        if not isinstance(trigger, Mapping):
            raise TypeError(
                "trigger must be a mapping of DataStreamWriter.trigger keyword arguments, "
                f"e.g. {{'processingTime': '1 second'}}, got {trigger!r}"
            )
        if "continuous" in trigger:
            raise ValueError(
                "trigger={'continuous': ...} cannot work here: from_stream reads each "
                "micro-batch with foreachBatch, which Spark refuses under a continuous trigger"
            )
        unknown = sorted(set(trigger) - _TRIGGERS)
        if unknown or len(trigger) > 1:
            raise ValueError(
                f"trigger takes one of {sorted(_TRIGGERS)} (DataStreamWriter.trigger), "
                f"got {dict(trigger)!r}"
            )
        ((kind, value),) = trigger.items()
        if kind == "processingTime" and not (isinstance(value, str) and value.strip()):
            raise ValueError(
                f"trigger={{'processingTime': ...}} takes an interval string such as "
                f"'5 seconds', got {value!r}"
            )
        if kind != "processingTime" and value is not True:
            raise ValueError(f"trigger={{{kind!r}: ...}} takes True, got {value!r}")
    options = _Options(
        mode, buffer_size, trigger, checkpoint_location, query_name, max_rows_per_batch
    )
    return StreamPublisher(streaming_df, options)
