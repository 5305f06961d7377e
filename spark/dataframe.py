"""Spark DataFrames and Reactive Streams, both directions.

- ``from_dataframe``: a cold Publisher over a DataFrame's rows (``pyspark.sql.Row``) or Arrow
  record batches. Nothing runs in Spark before the first ``request``; then partitions are
  fetched one Spark job at a time, only as far as demand reaches (plus one partition ahead
  with ``prefetch_partitions``), on a thread the subscription owns: blocking reads never run
  on the caller of ``request`` nor on an event loop. Signals arrive on that thread.
- Cancel interrupts the subscription's Spark jobs (by job tag, from a helper thread, so
  ``cancel()`` itself never blocks), closes the socket or gRPC stream, and ends the thread.
  A failing job becomes ``on_error`` with Spark's exception.
- ``to_dataframe``: drains a finite Publisher into a DataFrame through Arrow, ``batch_size``
  elements requested at a time. ``write_parquet`` / ``write_table``: append an unbounded
  Publisher to storage one batch at a time, requesting the next batch only after the
  previous one is written, so Python never holds more than one batch. Both block the
  calling thread (never call them on a running event loop).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, final, overload

import pyarrow as pa

from reactive_streams._demand import add_cap, check_request, produced
from reactive_streams._drain import EMPTY, END, DrainSubscription, OnExecutor, Source, _Marker
from reactive_streams._subscription import (
    CANCELLED,
    reject,
    report_dropped,
    require_element,
    require_error,
    require_publisher,
    require_subscriber,
    require_subscription,
)
from reactive_streams.api import Publisher, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation
from reactive_streams.spark._partitions import (
    DaemonThread,
    Mode,
    Reader,
    check_dataframe,
    check_job_tag,
    check_read_options,
    make_reader,
    session_stopped,
    stopped_session,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "BatchSubscriber",
    "DataFramePublisher",
    "WriteStats",
    "from_dataframe",
    "to_dataframe",
    "write_parquet",
    "write_table",
]

T = TypeVar("T")


# -- DataFrame -> Publisher ------------------------------------------------------------------


@final
class _DataFrameSource(Source[Any]):
    """One partition reader behind the drain; every method runs on the subscription's thread.

    ``poll`` opens the reader on first use (the first Spark job starts only then), then pulls
    one row or batch per call, blocking on the socket while Spark computes a partition.
    After ``interrupt`` a failing read, or the end of the broken iterator, is the echo of the
    cancel, not news: ``poll`` answers ``EMPTY`` and the drain, seeing the cancel, closes the
    source without signalling (§1.8).
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

    def close(self) -> None:
        try:
            self._reader.close()
        finally:
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
        DrainSubscription(_Hook(subscriber, reader), source, OnExecutor(executor)).start()

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
        ValueError: for an unknown ``mode``, a non-positive ``max_rows_per_batch``, or a
            ``job_tag`` that is empty or holds a comma.

    Example:
        >>> from reactive_streams.adapters.iterables import to_iterator
        >>> rows = list(to_iterator(from_dataframe(spark.range(3))))  # doctest: +SKIP
    """
    check_read_options(mode, max_rows_per_batch)
    check_dataframe(df, "from_dataframe()")
    check_job_tag(job_tag)
    return DataFramePublisher(df, mode, bool(prefetch_partitions), max_rows_per_batch, job_tag)


# -- Publisher -> Spark ----------------------------------------------------------------------


_NOT_ON_LOOP: Final = (
    "{name}() blocks the calling thread until the publisher is drained, and this thread runs "
    "an asyncio event loop; call it through asyncio.to_thread() or from another thread"
)


def refuse_on_loop(name: str) -> None:
    if asyncio._get_running_loop() is not None:
        raise RuntimeError(_NOT_ON_LOOP.format(name=name))


@final
class BatchSubscriber(Generic[T]):
    """Gathers elements into batches of ``batch_size`` for one consumer thread.

    Demand is asked in whole batches: one at ``on_subscribe``, then one each time the consumer
    of :meth:`batches` comes back for the next batch (``request_batches(k)`` asks for more
    ahead). So the sinks hold at most one batch, and a slow consumer (a Spark write) slows the
    publisher. Signals may arrive on any thread; the consumer runs on its own.

    Rules: §2.1 (demand is signalled), §2.5 (a second ``on_subscribe`` is cancelled), §2.8
    (elements after ``cancel`` are dropped), §2.13 (``None`` arguments raise ``TypeError``),
    §1.1 (more than requested cancels upstream and fails with ``OverflowViolation``),
    §3.13 (closing the iterator early cancels and drops the buffer).
    """

    __slots__ = (
        "_batch_size",
        "_buffer",
        "_cond",
        "_done",
        "_error",
        "_outstanding",
        "_upstream",
    )

    def __init__(self, batch_size: int = 10_000) -> None:
        if type(batch_size) is not int or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self._batch_size = batch_size
        self._cond = threading.Condition(threading.Lock())
        self._buffer: list[T] = []
        self._upstream: Subscription | None = None
        self._outstanding = 0  # requested and not yet received
        self._done = False
        self._error: Exception | None = None

    @property
    def batch_size(self) -> int:
        return self._batch_size

    # -- Subscriber ----------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        with self._cond:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
        if duplicate:  # §2.5 (or the consumer already closed)
            subscription.cancel()
            return
        self.request_batches(1)  # §2.1: the first batch

    def on_next(self, element: T) -> None:
        try:
            require_element(element)
        except TypeError as exc:  # §2.13: the publisher must stop signalling now, so the
            self._fail(exc)  # sink fails with it (and cancels) rather than wait for ever
            raise
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

    def on_error(self, error: Exception) -> None:
        try:
            require_error(error)
        except TypeError as exc:  # §2.13: the publisher must stop signalling now, so the
            self._fail(exc)  # sink fails with it (and cancels) rather than wait for ever
            raise
        with self._cond:
            late = self._done
            if not late:
                self._error = error
                self._done = True
                self._upstream = CANCELLED  # §2.4
                self._cond.notify_all()
        if late:
            report_dropped(error, rule="1.7", where="on_error after cancel or a terminal signal")

    def on_complete(self) -> None:
        with self._cond:
            if self._done:
                return
            self._done = True
            self._upstream = CANCELLED  # §2.4
            self._cond.notify_all()

    # -- consumer ------------------------------------------------------------------------------

    def request_batches(self, k: int = 1) -> None:
        """Ask upstream for ``k`` more batches (``k * batch_size`` elements)."""
        if type(k) is not int or k <= 0:  # §3.9 is the publisher's answer; refuse it here
            raise ValueError(f"k must be a positive int (batches), got {k!r}")
        with self._cond:
            upstream = None if self._done else self._upstream
            if upstream is not None:
                self._outstanding = add_cap(self._outstanding, k * self._batch_size)
        if upstream is not None and upstream is not CANCELLED:
            upstream.request(k * self._batch_size)

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
        with self._cond:
            upstream, self._upstream = self._upstream, CANCELLED
            was_done, self._done = self._done, True
            self._buffer = []
            self._cond.notify_all()
        if upstream is not None and upstream is not CANCELLED and not was_done:
            upstream.cancel()

    def _fail(self, error: Exception) -> None:
        with self._cond:
            upstream, self._upstream = self._upstream, CANCELLED
            if self._done:
                return
            self._error = error
            self._done = True
            self._cond.notify_all()
        if upstream is not None and upstream is not CANCELLED:
            upstream.cancel()


@final
class _ArrowBatcher:
    """Turns a list of elements into Arrow record batches of one schema, as Spark would.

    ``pyarrow.RecordBatch`` / ``pyarrow.Table`` elements pass through (cast to the schema).
    Any other element goes through pyspark's own conversion of local data to Arrow (the one
    ``createDataFrame`` uses on Spark Connect), so values mean what they mean to Spark: a
    naive ``datetime`` is local time, a ``dict`` value is a map, a ``Decimal`` is
    ``DECIMAL(38, 18)``, a tuple fills a struct. Elements may be ``Row``, dicts (columns in
    sorted order, as Spark infers them), tuples or lists (named by the schema, else ``_1``,
    ``_2``, …), objects with a ``__dict__``, or scalars (one column named ``value``).

    Without a schema, Spark's inference over the whole first batch gives it (read with the
    session's inference settings); a type it could not determine there (a column, or a
    nested field, all ``None``) is taken from the next batches that have a value.
    """

    __slots__ = (
        "_given",
        "_infer",
        "_inferred",
        "_large",
        "_verified",
        "_verifier",
        "schema",
        "spark_schema",
    )

    def __init__(self, schema: StructType | str | None, session: SparkSession) -> None:
        from pyspark.sql.types import StructType

        conf = session.conf
        self._large = conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        self._infer = {
            "infer_dict_as_struct": conf.get(
                "spark.sql.pyspark.inferNestedDictAsStruct.enabled", "false"
            )
            == "true",
            "prefer_timestamp_ntz": conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
            == "TIMESTAMP_NTZ",
        }
        self._given = schema is not None
        self._verifier: Callable[[Any], None] | None = None  # for the schema _verified
        self._verified: StructType | None = None
        self._inferred: StructType | None = None  # Spark's inference so far, merged
        self.spark_schema: StructType | None = None
        self.schema: pa.Schema | None = None  # every batch is cast to it
        if schema is not None:
            spark_schema = session._parse_ddl(schema) if isinstance(schema, str) else schema
            if not isinstance(spark_schema, StructType):
                raise TypeError(f"schema must describe a struct, got {spark_schema!r}")
            self.spark_schema = spark_schema
            self.schema = self._arrow(spark_schema)

    def _arrow(self, spark_schema: StructType) -> pa.Schema:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(spark_schema, timezone="UTC", prefers_large_types=self._large)

    def convert(self, elements: Sequence[Any]) -> list[pa.RecordBatch]:
        first = elements[0]
        if isinstance(first, pa.RecordBatch | pa.Table):
            out: list[pa.RecordBatch] = []
            for element in elements:
                batches = element.to_batches() if isinstance(element, pa.Table) else [element]
                out.extend(self._fit(b) for b in batches)
            return self.unify(out)  # a later element may have typed an all-null column
        return [self._fit(self._from_local(elements))]

    def _from_local(self, elements: Sequence[Any]) -> pa.RecordBatch:
        from pyspark.sql import Row
        from pyspark.sql.conversion import LocalDataToArrowConversion
        from pyspark.sql.types import _has_nulltype, _infer_schema, _merge_type

        first = elements[0]
        names: list[str] | None = None
        if isinstance(first, Mapping):  # Spark's inference sorts a dict's keys: so do we
            data: list[Any] = [dict(sorted(e.items())) for e in elements]
        elif isinstance(first, Row | tuple | list) or hasattr(first, "__dict__"):
            data = list(elements)
        else:  # scalars
            data = [(e,) for e in elements]
            names = ["value"]
        known = self._inferred
        if not self._given and (known is None or _has_nulltype(known)):
            inferred = _infer_schema(data[0], names, **self._infer)
            for row in data[1:]:
                inferred = _merge_type(inferred, _infer_schema(row, names, **self._infer))
            self._inferred = inferred if known is None else _merge_type(known, inferred)
            self.spark_schema = _typed_map_keys(self._inferred)
            self.schema = self._arrow(self.spark_schema)
        schema = self.spark_schema
        assert schema is not None
        self._verify(data, schema)
        table = LocalDataToArrowConversion.convert(data, schema, self._large)
        return table.combine_chunks().to_batches()[0]

    def _verify(self, data: list[Any], schema: StructType) -> None:
        """Refuse an element that does not fit ``schema``, as ``createDataFrame`` does
        (``verifySchema``): the conversion would coerce it silently (``1.7`` into a ``BIGINT``
        column becomes ``1``), so whether a stream failed or was quietly changed would depend
        on where its batches happened to break."""
        from pyspark.sql.types import _make_type_verifier

        if self._verifier is None or self._verified is not schema:
            self._verifier = _make_type_verifier(schema, nullable=False)
            self._verified = schema
        verify = self._verifier
        for row in data:
            try:
                verify(row)
            except (TypeError, ValueError) as exc:
                source = "given" if self._given else "inferred from the first batch"
                raise TypeError(
                    f"to_dataframe: the element {row!r} does not fit the schema {source} "
                    f"({schema.simpleString()}): {exc}"
                    + ("" if self._given else "; pass schema= to say what the columns hold")
                ) from exc

    def _fit(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.schema is None:
            self.schema = batch.schema
            return batch
        if batch.schema.equals(self.schema):
            return batch
        if not self._given:
            self.schema = _fill_null_types(self.schema, batch.schema)
        return batch.select(self.schema.names).cast(self.schema)

    def unify(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """``batches`` cast to the schema kept now: the earliest may predate a column's type
        (all-null there, see :func:`_fill_null_types`)."""
        schema = self.schema
        assert schema is not None
        return [b if b.schema.equals(schema) else b.cast(schema) for b in batches]

    def untyped(self) -> list[str]:
        """The columns whose type is still unknown (Arrow ``null``, maybe nested)."""
        schema = self.schema
        return [] if schema is None else [f.name for f in schema if _has_null(f.type)]


def _typed_map_keys(data_type: Any) -> Any:
    """Spark infers an empty dict as ``map<void, void>``, but an Arrow map's key cannot be of
    the null type: such keys get a stand-in type (string; no key exists to convert) until a
    later batch tells, and the batches before it are cast then (see ``unify``)."""
    from pyspark.sql.types import ArrayType, MapType, NullType, StringType, StructField, StructType

    if isinstance(data_type, MapType):
        key = data_type.keyType
        return MapType(
            StringType() if isinstance(key, NullType) else _typed_map_keys(key),
            _typed_map_keys(data_type.valueType),
            data_type.valueContainsNull,
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_typed_map_keys(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, StructType):
        return StructType(
            [
                StructField(f.name, _typed_map_keys(f.dataType), f.nullable, f.metadata)
                for f in data_type.fields
            ]
        )
    return data_type


def _has_null(arrow_type: pa.DataType) -> bool:
    if pa.types.is_null(arrow_type):
        return True
    return any(_has_null(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def _fill_null_types(kept: pa.Schema, batch: pa.Schema) -> pa.Schema:
    """An inferred schema whose column was all-null in the first batch (Arrow type ``null``,
    maybe nested: ``list<null>``, ``struct<x: null>``) takes that column's type from the
    first later batch that has values in it: Spark would have inferred it from all the rows,
    and nothing can be cast to ``null``."""
    for i, field in enumerate(kept):
        j = batch.get_field_index(field.name)
        if j >= 0 and _has_null(field.type):
            kept = kept.set(i, field.with_type(_filled(field.type, batch.field(j).type)))
    return kept


def _filled(kept: pa.DataType, new: pa.DataType) -> pa.DataType:
    """``kept`` with each ``null`` inside it replaced by the type ``new`` has there."""
    if pa.types.is_null(kept):
        return new
    if pa.types.is_struct(kept) and pa.types.is_struct(new):
        fields = []
        for field in kept:
            j = new.get_field_index(field.name)
            fields.append(field if j < 0 else field.with_type(_filled(field.type, new[j].type)))
        return pa.struct(fields)
    if pa.types.is_map(kept) and pa.types.is_map(new):
        return pa.map_(_filled(kept.key_type, new.key_type), _filled(kept.item_type, new.item_type))
    if pa.types.is_large_list(kept) and pa.types.is_large_list(new):
        return pa.large_list(kept.value_field.with_type(_filled(kept.value_type, new.value_type)))
    if pa.types.is_list(kept) and pa.types.is_list(new):
        return pa.list_(kept.value_field.with_type(_filled(kept.value_type, new.value_type)))
    return kept


def _batcher(
    name: str, publisher: Publisher[Any], session: SparkSession, schema: StructType | str | None
) -> _ArrowBatcher:
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
    return _ArrowBatcher(schema, session)


def _target(name: str, what: str, target: object) -> str:
    """A write's ``path`` or ``table``, checked at the call (a None path failed only after
    the first batch had been read: 'Can not create a Path from a null string')."""
    if what == "path" and isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str) or not target:
        raise TypeError(f"{name}(): {what} must be a non-empty str, got {target!r}")
    return target


def _drain_batches(
    publisher: Publisher[Any],
    batcher: _ArrowBatcher,
    batch_size: int,
    on_batch: Callable[[list[pa.RecordBatch]], None],
    max_batches: int | None = None,
) -> tuple[int, int]:
    """Subscribe a :class:`BatchSubscriber`; hand each converted batch to ``on_batch``.

    Stops (cancelling upstream) after ``max_batches`` batches when given.
    """
    subscriber: BatchSubscriber[Any] = BatchSubscriber(batch_size)
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


def _create(spark: SparkSession, table: pa.Table, batcher: _ArrowBatcher) -> DataFrame:
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
        publisher: a finite Publisher of rows (see :class:`_ArrowBatcher` for the shapes
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
    _drain_batches(publisher, batcher, batch_size, collected.extend)
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

    rows, batches = _drain_batches(publisher, batcher, batch_size, write, max_batches)
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

    Requests ``batch_size`` elements, writes them as one Spark append job, and only then
    requests the next batch: Python holds at most one batch, and the publisher runs at the
    pace of the writes. Blocks until the publisher completes, or until ``max_batches``
    batches were written (then the subscription is cancelled).

    Args:
        publisher: rows or Arrow batches (the shapes :func:`to_dataframe` accepts).
        spark_session: a classic or Spark Connect session.
        path: the Parquet folder, appended to.
        batch_size: elements requested, converted and written at a time.
        schema: a ``StructType`` or DDL string; inferred from the first batch when omitted.
        max_batches: stop after this many batches (``None``: until the publisher ends).

    Returns:
        :class:`WriteStats` (rows, batches written, seconds).

    Raises:
        RuntimeError: when called on a thread running an asyncio event loop.
        Exception: the publisher's error (raised after every element received before it
            was written, the last batch possibly short), or the write's error (the
            subscription is cancelled first).
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
