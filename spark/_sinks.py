"""Publishers into Spark: ``to_dataframe``, ``write_parquet``, ``write_table``, and the
:class:`BatchSubscriber` inside each.

Demand is asked in whole batches, the next only once the previous one was converted (and
written): Python holds at most one batch of elements. The sinks block the calling thread,
and refuse to run on a thread running an event loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final

import pyarrow as pa

from reactive_streams._demand import add_cap, produced
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    CANCELLED,
    cancel_quietly,
    report_dropped,
    require_element,
    require_error,
    require_publisher,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Publisher, Subscription
from reactive_streams.errors import OverflowViolation
from reactive_streams.spark._arrow import ArrowBatcher
from reactive_streams.spark._partitions import session_stopped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "BatchSubscriber",
    "WriteStats",
    "refuse_on_loop",
    "to_dataframe",
    "write_parquet",
    "write_table",
]

T = TypeVar("T")


_NOT_ON_LOOP: Final = (
    "{name}() blocks the calling thread until the publisher is drained, and this thread runs "
    "an asyncio event loop; call it through asyncio.to_thread() or from another thread"
)


def refuse_on_loop(name: str) -> None:
    """Raise ``RuntimeError`` when called on a thread running an asyncio event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop runs here: blocking is fine
        return
    raise RuntimeError(_NOT_ON_LOOP.format(name=name))


class TerminalSignals:
    """``on_error``, ``on_complete`` and ``_fail`` for a buffering sink whose shared state is
    guarded by ``_cond`` (``BatchSubscriber``, to_stream's ``Feed``): the first terminal
    signal wins (§1.7), the subscription is dropped (§2.4), a late ``on_error`` is reported,
    never raised; a ``None`` error fails the sink and cancels upstream before raising (§2.13).
    """

    _cond: threading.Condition
    _done: bool  # a terminal signal came, or we failed; under _cond
    _error: Exception | None  # under _cond
    _cancelled: bool  # we cancelled upstream; under _cond
    _upstream: Upstream

    def _require(self, check: Callable[[Any], object], value: object) -> None:
        """``check(value)``; a ``TypeError`` (§2.13) fails the sink and cancels upstream
        before it is raised: the publisher must stop signalling now, so the sink does not
        wait for ever."""
        try:
            check(value)
        except TypeError as exc:
            self._fail(exc)
            raise

    def on_error(self, error: Exception) -> None:
        self._require(require_error, error)  # §2.13
        with self._cond:
            late = self._done
            if not late:
                self._error = error
                self._done = True
                self._cond.notify_all()
        self._upstream.take()  # §2.4: dropped, never called again
        if late:
            report_dropped(error, rule="1.7", where="on_error after cancel or a terminal signal")

    def on_complete(self) -> None:
        with self._cond:
            if self._done:
                return
            self._done = True
            self._cond.notify_all()
        self._upstream.take()  # §2.4: dropped, never called again

    def _fail(self, error: Exception) -> None:
        upstream = self._upstream.take()
        with self._cond:
            if self._done:
                return
            self._error = error
            self._cancelled = True  # under _cond: it cancels upstream below
            self._done = True
            self._cond.notify_all()
        if upstream is not None and upstream is not CANCELLED:
            cancel_quietly(upstream)  # §3.15


@final
class BatchSubscriber(TerminalSignals, Generic[T]):
    """Gathers elements into batches of ``batch_size`` for one consumer thread.

    Demand is asked in whole batches: one at ``on_subscribe``, then one each time the consumer
    of :meth:`batches` comes back for the next batch (``request_batches(k)`` asks for more
    ahead). So the sinks hold at most one batch, and a slow consumer (a Spark write) slows the
    publisher. Signals may arrive on any thread; the consumer runs on its own.

    Rules: §2.1 (demand is signalled), §2.5 (a second ``on_subscribe`` is cancelled), §2.8
    (elements after ``cancel`` are dropped), §2.13 (``None`` arguments raise ``TypeError``),
    §1.1 (more than requested cancels upstream and fails with ``OverflowViolation``),
    §3.13 (closing the iterator early cancels and drops the buffer).

    ``scan()`` (any thread, no lock) reports it as the sink ``name``: asked and in flight
    are counted per request, delivered (to the consumer) per batch taken.
    """

    __slots__ = (
        "_asked",
        "_batch_size",
        "_buffer",
        "_cancelled",
        "_cond",
        "_done",
        "_error",
        "_name",
        "_outstanding",
        "_taken",
        "_upstream",
    )

    def __init__(self, batch_size: int = 10_000, name: str = "BatchSubscriber") -> None:
        if type(batch_size) is not int or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self._name = name  # the sink's name in a snapshot
        self._asked = 0  # requested in all; under _cond
        self._taken = 0  # elements the consumer took, in batches; under _cond
        self._cancelled = False  # one-way: cancel() or a failure of ours (§2.13, §1.1)
        self._batch_size = batch_size
        self._cond = threading.Condition(threading.Lock())
        self._buffer: list[T] = []
        self._upstream = Upstream()  # set once (§2.5), requests serial (§2.7)
        self._outstanding = 0  # requested and not yet received
        self._done = False
        self._error: Exception | None = None

    @property
    def batch_size(self) -> int:
        return self._batch_size

    # -- Subscriber ----------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        if self._upstream.set_once(subscription):  # §2.5: a duplicate, or one after the
            self.request_batches(1)  # consumer closed, is cancelled quietly (§3.15); §2.1

    def on_next(self, element: T) -> None:
        self._require(require_element, element)  # §2.13
        with self._cond:
            if self._done:
                return  # §2.8: after cancel
            overflow = self._outstanding == 0  # §1.1
            if not overflow:
                self._outstanding = produced(self._outstanding, 1)
                self._buffer.append(element)
                if len(self._buffer) >= self._batch_size:
                    self._cond.notify_all()
        if overflow:
            self._fail(OverflowViolation("§1.1: an element arrived that was not requested"))

    # -- consumer ------------------------------------------------------------------------------

    def request_batches(self, k: int = 1) -> None:
        """Ask upstream for ``k`` more batches (``k * batch_size`` elements)."""
        if type(k) is not int or k <= 0:  # §3.9 is the publisher's answer; refuse it here
            raise ValueError(f"k must be a positive int (batches), got {k!r}")
        with self._cond:
            if self._done or self._upstream.subscription is None:
                return  # nothing is asked before on_subscribe (it asks for the first batch)
            self._outstanding = add_cap(self._outstanding, k * self._batch_size)  # under _cond
            self._asked = add_cap(self._asked, k * self._batch_size)  # under _cond
        self._upstream.request(k * self._batch_size)  # §2.7: one call at a time

    def next_batch(self, timeout: float | None = None) -> list[T] | None:
        """Wait for a full batch (or the shorter last one) and take it; ``None`` at the end.

        Raises the publisher's error once the elements before it were taken, and
        ``TimeoutError`` when nothing completes within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        size = self._batch_size
        with self._cond:
            while len(self._buffer) < size and not self._done:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no batch of {size} within {timeout} s")
                self._cond.wait(left)
            batch, self._buffer = self._buffer[:size], self._buffer[size:]
            self._taken += len(batch)  # under _cond
            error = self._error if not batch else None
            if error is not None:
                self._error = None
        if batch:
            return batch  # an error, if any, comes after the elements that preceded it
        if error is not None:
            raise error
        return None

    def batches(self, timeout: float | None = None) -> Generator[list[T], None, None]:
        """Yield each batch; the next one is requested when the consumer asks for it.

        Closing the iterator before the end cancels the subscription.

        Args:
            timeout: give up (``TimeoutError``, subscription cancelled) when no batch
                completes within this many seconds; ``None`` waits as long as it takes.
        """
        finished = False
        try:
            while True:
                batch = self.next_batch(timeout)
                if batch is None:
                    finished = True
                    return
                yield batch
                self.request_batches(1)  # the consumer is done with the batch
        finally:
            if not finished:
                self.cancel()

    def cancel(self) -> None:
        """Cancel upstream and drop what is buffered (§3.13); idempotent."""
        upstream = self._upstream.take()
        with self._cond:
            was_done, self._done = self._done, True
            if not was_done:
                self._cancelled = True  # under _cond
            self._buffer = []
            self._cond.notify_all()
        if upstream is not None and upstream is not CANCELLED and not was_done:
            cancel_quietly(upstream)  # §3.12; §3.15: a raising cancel is reported

    def scan(self) -> Scan:
        """This sink's state for :func:`~reactive_streams.snapshot` (any thread, no lock)."""
        upstream = self._upstream
        done, cancelled = self._done, self._cancelled
        return Scan(
            self._name,
            asked=self._asked,
            in_flight=None if done else self._outstanding,
            buffered=len(self._buffer),
            delivered=self._taken,
            cancelled=cancelled,
            terminated=done and not cancelled,
            subscribed=upstream.subscription is not None,
            upstream=upstream.linked,
        )


def _batcher(
    name: str, publisher: Publisher[Any], session: SparkSession, schema: StructType | str | None
) -> ArrowBatcher:
    """What every sink checks before it subscribes, and the converter it then uses."""
    refuse_on_loop(name)
    require_publisher(publisher, f"{name}()")
    if not callable(getattr(session, "createDataFrame", None)):
        raise TypeError(
            f"{name}(): spark_session must be a SparkSession (classic or Connect), "
            f"got {type(session).__name__}"
        )
    stopped = session_stopped(session)
    if stopped is not None:  # else a DataFrame that fails only when used
        raise RuntimeError(f"{name}(): {stopped}")
    return ArrowBatcher(schema, session, name)


def _target(name: str, what: str, target: object) -> str:
    """A write's ``path`` or ``table``, checked at the call (a None path failed only after
    the first batch had been read: 'Can not create a Path from a null string')."""
    if what == "path" and isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str) or not target:
        raise TypeError(f"{name}(): {what} must be a non-empty str, got {target!r}")
    return target


def _drain_batches(
    name: str,
    publisher: Publisher[Any],
    batcher: ArrowBatcher,
    batch_size: int,
    on_batch: Callable[[list[pa.RecordBatch]], None],
    max_batches: int | None = None,
) -> tuple[int, int]:
    """Subscribe a :class:`BatchSubscriber`; hand each converted batch to ``on_batch``.

    Stops (cancelling upstream) after ``max_batches`` batches when given. ``name`` names
    the subscriber in a snapshot (the sink's name).
    """
    subscriber: BatchSubscriber[Any] = BatchSubscriber(batch_size, name)
    publisher.subscribe(subscriber)
    rows = batches = 0
    iterator = subscriber.batches()
    try:
        for elements in iterator:
            converted = batcher.convert(elements)
            on_batch(converted)  # the next batch is requested only after this returns
            rows += sum(b.num_rows for b in converted)
            batches += 1
            if batches == max_batches:
                break
    finally:
        iterator.close()  # cancels upstream if a conversion or a write failed
    return rows, batches


def _create(spark: SparkSession, table: pa.Table, batcher: ArrowBatcher) -> DataFrame:
    if batcher.spark_schema is not None:
        return spark.createDataFrame(table, schema=batcher.spark_schema)
    return spark.createDataFrame(table)


def to_dataframe(
    publisher: Publisher[Any],
    spark_session: SparkSession,
    *,
    schema: StructType | str | None = None,
    batch_size: int = 10_000,
) -> DataFrame:
    """Drain a finite Publisher into a DataFrame, ``batch_size`` elements at a time via Arrow.

    Each batch of elements becomes an Arrow record batch as soon as it is complete (Python
    holds at most one batch of elements at a time; the Arrow batches accumulate, compactly,
    until the DataFrame is created). Blocks the calling thread.

    Args:
        publisher: a finite Publisher of rows (see :class:`ArrowBatcher` for the shapes
            accepted) or of Arrow record batches.
        spark_session: a classic or Spark Connect session.
        schema: a ``StructType`` or DDL string; inferred from the first batch when omitted.
        batch_size: the demand requested at a time, and the rows per Arrow batch.

    Returns:
        A DataFrame over the collected batches.

    Raises:
        RuntimeError: when called on a thread running an asyncio event loop.
        Exception: the publisher's ``on_error``, or a conversion error (then cancelled).
    """
    batcher = _batcher("to_dataframe", publisher, spark_session, schema)
    collected: list[pa.RecordBatch] = []
    _drain_batches("to_dataframe", publisher, batcher, batch_size, collected.extend)
    if not collected:
        if batcher.spark_schema is None:
            raise ValueError("the publisher was empty: pass schema= to create an empty DataFrame")
        return spark_session.createDataFrame([], batcher.spark_schema)
    return _create(spark_session, pa.Table.from_batches(batcher.unify(collected)), batcher)


@dataclass(frozen=True)
class WriteStats:
    """What a ``write_*`` sink wrote: rows, batches (one Spark write job each), and time."""

    rows: int
    batches: int
    seconds: float
    target: str


def _write(
    name: str,
    publisher: Publisher[Any],
    spark: SparkSession,
    target: str,
    save: Callable[[DataFrame], None],
    batch_size: int,
    schema: StructType | str | None,
    max_batches: int | None,
) -> WriteStats:
    if max_batches is not None and (type(max_batches) is not int or max_batches <= 0):
        raise ValueError(f"max_batches must be a positive int or None, got {max_batches!r}")
    batcher = _batcher(name, publisher, spark, schema)
    start = time.perf_counter()

    def write(batches: list[pa.RecordBatch]) -> None:
        untyped = batcher.untyped()
        if untyped:  # written now: no later batch can tell what they hold
            raise ValueError(
                f"columns {untyped} hold only None (or empty collections) in the first "
                "batch, so their type cannot be inferred; pass schema="
            )
        frame = _create(spark, pa.Table.from_batches(batches), batcher)
        save(frame.coalesce(1))  # one file per batch

    rows, batches = _drain_batches(name, publisher, batcher, batch_size, write, max_batches)
    return WriteStats(rows, batches, time.perf_counter() - start, target)


def write_parquet(
    publisher: Publisher[Any],
    spark_session: SparkSession,
    path: str,
    *,
    batch_size: int = 10_000,
    schema: StructType | str | None = None,
    max_batches: int | None = None,
) -> WriteStats:
    """Append a (possibly unbounded) Publisher to Parquet at ``path``, one batch at a time.

    Requests ``batch_size`` elements, writes them as one Spark append job, then requests the
    next batch: Python holds at most one batch. Blocks until the publisher completes, or
    ``max_batches`` batches were written (then the subscription is cancelled).

    Args:
        publisher: rows or Arrow batches (the shapes :func:`to_dataframe` accepts).
        spark_session: a classic or Spark Connect session.
        path: the Parquet folder, appended to.
        batch_size: elements requested, converted and written at a time.
        schema: a ``StructType`` or DDL string; inferred from the first batch when omitted.
        max_batches: stop after this many batches (``None``: until the publisher ends).

    Returns :class:`WriteStats` (rows, batches written, seconds).

    Raises:
        RuntimeError: when called on a thread running an asyncio event loop.
        Exception: the publisher's error (after every element received before it was
            written), or the write's error (the subscription is cancelled first).
    """
    folder = _target("write_parquet", "path", path)
    return _write(
        "write_parquet",
        publisher,
        spark_session,
        folder,
        lambda frame: frame.write.mode("append").parquet(folder),
        batch_size,
        schema,
        max_batches,
    )


def write_table(
    publisher: Publisher[Any],
    spark_session: SparkSession,
    table: str,
    *,
    batch_size: int = 10_000,
    schema: StructType | str | None = None,
    max_batches: int | None = None,
) -> WriteStats:
    """Append a (possibly unbounded) Publisher to the table ``table``, one batch at a time.

    Same demand discipline as :func:`write_parquet`; the table is created on the first batch
    if it does not exist (``saveAsTable`` in append mode).
    """
    name = _target("write_table", "table", table)
    return _write(
        "write_table",
        publisher,
        spark_session,
        name,
        lambda frame: frame.write.mode("append").saveAsTable(name),
        batch_size,
        schema,
        max_batches,
    )
