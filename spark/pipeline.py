"""The main job: synthetic events from Spark, RxPY operators, a slow asyncio consumer.

``events`` (a DataFrame) -> ``from_dataframe`` -> ``rx_processor`` (parse, filter, a tumbling
event-time window aggregate) -> ``publish_on`` -> ``to_async_iterator`` consumed by a
coroutine that sleeps after each window. Every hop is demand-driven, so the slow consumer
slows Spark; a :class:`Meter` counts source rows emitted and rows finished (dropped by the
filter or folded into a consumed window) and keeps the largest difference: the rows in flight
anywhere in the pipeline, which :func:`run` compares with the bound the stages promise.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from reactive_streams import Publisher, Subscriber, Subscription, publish_on
from reactive_streams._subscription import require_subscriber
from reactive_streams.spark.dataframe import from_dataframe, refuse_on_loop

__all__ = [
    "EVENTS_PER_WINDOW",
    "Config",
    "Meter",
    "Stop",
    "Summary",
    "Window",
    "events",
    "run",
]

WINDOW_MS: Final = 10_000
"""Tumbling event-time windows of ten seconds (1,000 events)."""
TICK_MS: Final = 10
"""Synthetic clock: event ``id`` happens at ``id * TICK_MS`` milliseconds."""
EVENTS_PER_WINDOW: Final = WINDOW_MS // TICK_MS
KINDS: Final = ("view", "view", "view", "click", "click", "buy", "error")


def events(spark: Any, rows: int, partitions: int = 8) -> Any:
    """A DataFrame of ``rows`` synthetic events: ``id, ts_ms, user, payload``.

    ``payload`` is ``"<kind>:<amount>"``, the text the pipeline parses.
    """
    kinds = ", ".join(f"'{k}'" for k in KINDS)
    return spark.range(0, rows, 1, partitions).selectExpr(
        "id",
        f"id * {TICK_MS} AS ts_ms",
        "(id * 7919) % 5000 AS user",
        f"concat(element_at(array({kinds}), cast(id % {len(KINDS)} AS int) + 1), ':', "
        "format_number((id * 37 % 10000) / 100.0, 2)) AS payload",
    )


class Partial(NamedTuple):
    """The aggregate of some events of one window (mergeable)."""

    window: int
    events: int
    views: int
    clicks: int
    buys: int
    revenue: float
    max_amount: float


class Window(NamedTuple):
    """A finished window, as the consumer receives it."""

    window: int
    events: int
    views: int
    clicks: int
    buys: int
    revenue: float
    max_amount: float


# -- the operators' functions (pure; the Rx stage composes them) ----------------------------


def parse_row(row: Any) -> tuple[int, str, float]:
    """Row -> (window, kind, amount)."""
    kind, _, amount = row.payload.partition(":")
    return row.ts_ms // WINDOW_MS, kind, float(amount.replace(",", ""))


def keep_event(event: tuple[int, str, float]) -> bool:
    """The filter: no errors, no amounts under 1.00."""
    return event[1] != "error" and event[2] >= 1.0


def row_partial(event: tuple[int, str, float]) -> Partial:
    window, kind, amount = event
    return Partial(
        window,
        1,
        kind == "view",
        kind == "click",
        kind == "buy",
        amount if kind == "buy" else 0.0,
        amount,
    )


def parse_batch(batch: pa.RecordBatch) -> pa.Table:
    """RecordBatch -> table (window, kind, amount), vectorised."""
    parts = pc.split_pattern(batch.column("payload"), ":")
    amount = pc.cast(pc.replace_substring(pc.list_element(parts, 1), ",", ""), pa.float64())
    return pa.table(
        {
            "window": pc.divide(batch.column("ts_ms"), WINDOW_MS),
            "kind": pc.list_element(parts, 0),
            "amount": amount,
        }
    )


def keep_table(table: pa.Table) -> pa.Table:
    mask = pc.and_(pc.not_equal(table["kind"], "error"), pc.greater_equal(table["amount"], 1.0))
    return table.filter(mask)


def table_partials(table: pa.Table) -> list[Partial]:
    """One partial per window present in the (filtered) table, in window order."""
    kind = table["kind"]
    buy_amount = pc.if_else(pc.equal(kind, "buy"), table["amount"], 0.0)
    flags = table.append_column("is_view", pc.cast(pc.equal(kind, "view"), pa.int64()))
    flags = flags.append_column("is_click", pc.cast(pc.equal(kind, "click"), pa.int64()))
    flags = flags.append_column("is_buy", pc.cast(pc.equal(kind, "buy"), pa.int64()))
    flags = flags.append_column("buy_amount", buy_amount)
    grouped = flags.group_by("window").aggregate(
        [
            ("amount", "count"),
            ("is_view", "sum"),
            ("is_click", "sum"),
            ("is_buy", "sum"),
            ("buy_amount", "sum"),
            ("amount", "max"),
        ]
    )
    rows = grouped.sort_by("window").to_pylist()
    return [
        Partial(
            r["window"],
            r["amount_count"],
            r["is_view_sum"],
            r["is_click_sum"],
            r["is_buy_sum"],
            r["buy_amount_sum"],
            r["amount_max"],
        )
        for r in rows
    ]


def merge(a: Partial, b: Partial) -> Partial:
    return Partial(
        a.window,
        a.events + b.events,
        a.views + b.views,
        a.clicks + b.clicks,
        a.buys + b.buys,
        a.revenue + b.revenue,
        max(a.max_amount, b.max_amount),
    )


class Tumbling:
    """Folds partials of consecutive windows; hands a window on when the next one starts.
    Owned by the stage's observer, whose signals are serial (§1.3)."""

    def __init__(self, emit: Callable[[Window], None]) -> None:
        self._emit = emit
        self._open: Partial | None = None

    def push(self, item: Partial | list[Partial]) -> None:
        for partial in item if isinstance(item, list) else (item,):
            current = self._open
            if current is None:
                self._open = partial
            elif partial.window == current.window:
                self._open = merge(current, partial)  # owned: the serial signals (§1.3)
            else:
                self._emit(Window(*current))
                self._open = partial

    def flush(self) -> None:
        if self._open is not None:
            self._emit(Window(*self._open))
            self._open = None


# -- metering ------------------------------------------------------------------------------


@dataclass
class Meter:
    """Source rows emitted vs finished; the largest gap is the rows in flight."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    emitted: int = 0
    finished: int = 0
    max_in_flight: int = 0
    source_requested: int = 0
    source_delivered: int = 0
    max_outstanding: int = 0

    def on_emitted(self, rows: int) -> None:
        with self.lock:
            self.emitted += rows  # under lock: the source's and the consumer's threads
            self.source_delivered += 1
            gap = self.emitted - self.finished
            if gap > self.max_in_flight:
                self.max_in_flight = gap

    def on_requested(self, n: int) -> None:
        with self.lock:
            self.source_requested = min(self.source_requested + n, 2**63 - 1)  # under lock
            outstanding = self.source_requested - self.source_delivered
            if outstanding > self.max_outstanding:
                self.max_outstanding = outstanding

    def on_finished(self, rows: int) -> None:
        with self.lock:
            self.finished += rows  # under lock


class _MeteredSubscription:
    __slots__ = ("_meter", "_upstream")

    def __init__(self, upstream: Subscription, meter: Meter) -> None:
        self._upstream = upstream
        self._meter = meter

    def request(self, n: int) -> None:
        if isinstance(n, int) and n > 0:
            self._meter.on_requested(n)
        self._upstream.request(n)

    def cancel(self) -> None:
        self._upstream.cancel()


class _MeteredSubscriber:
    __slots__ = ("_downstream", "_meter", "_size")

    def __init__(self, downstream: Subscriber[Any], meter: Meter, size: Callable[[Any], int]):
        self._downstream = downstream
        self._meter = meter
        self._size = size

    def on_subscribe(self, subscription: Subscription) -> None:
        self._downstream.on_subscribe(_MeteredSubscription(subscription, self._meter))

    def on_next(self, element: Any) -> None:
        self._meter.on_emitted(self._size(element))
        self._downstream.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._downstream.on_error(error)

    def on_complete(self) -> None:
        self._downstream.on_complete()


class _Metered:
    """A pass-through Publisher that meters what its upstream emits and what is requested."""

    def __init__(self, upstream: Publisher[Any], meter: Meter, size: Callable[[Any], int]):
        self._upstream = upstream
        self._meter = meter
        self._size = size

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        require_subscriber(subscriber)  # §1.9: refused here, before the wrapper hides it
        self._upstream.subscribe(_MeteredSubscriber(subscriber, self._meter, self._size))


# -- the stage -----------------------------------------------------------------------------


def rx_stage(mode: Literal["rows", "arrow"], meter: Meter, buffer_size: int) -> Any:
    """``rx_processor`` running parse, filter and the tumbling window aggregate."""
    import reactivex
    from reactivex import operators as ops

    from reactive_streams.adapters.rx import rx_processor

    def drop_row(event: tuple[int, str, float]) -> bool:
        keep = keep_event(event)
        if not keep:
            meter.on_finished(1)
        return keep

    def drop_rows_of(table: pa.Table) -> pa.Table:
        kept = keep_table(table)
        if kept.num_rows != table.num_rows:
            meter.on_finished(table.num_rows - kept.num_rows)
        return kept

    def tumbling(source: reactivex.Observable[Any]) -> reactivex.Observable[Window]:
        def subscribe(observer: Any, scheduler: Any = None) -> Any:
            folder = Tumbling(observer.on_next)

            def on_completed() -> None:
                folder.flush()
                observer.on_completed()

            return source.subscribe(
                folder.push, observer.on_error, on_completed, scheduler=scheduler
            )

        return reactivex.create(subscribe)

    if mode == "rows":
        operators: tuple[Any, ...] = (
            ops.map(parse_row),
            ops.filter(drop_row),
            ops.map(row_partial),
            tumbling,
        )
    else:
        operators = (
            ops.map(parse_batch),
            ops.map(drop_rows_of),
            ops.filter(lambda t: t.num_rows > 0),
            ops.map(table_partials),
            tumbling,
        )
    return rx_processor(*operators, buffer_size=buffer_size)


# -- running -------------------------------------------------------------------------------


class Stop:
    """Ends a :func:`run` early, from any thread (the main job's answer to Ctrl-C).

    :meth:`request` cancels the consuming task on its loop, which cancels the read and its
    Spark jobs through the subscriptions (§3.13); ``run`` then returns what was done.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self._cancel: Callable[[], None] | None = None

    @property
    def requested(self) -> bool:
        with self._lock:
            return self._requested

    def request(self) -> None:
        """Stop the run now, or before it starts reading; idempotent, never blocks."""
        with self._lock:
            self._requested = True  # under _lock
            cancel = self._cancel
        if cancel is not None:
            cancel()

    def _bind(self, cancel: Callable[[], None] | None) -> bool:
        """How to cancel the running consumer (``None``: it ended); True if already stopped."""
        with self._lock:
            self._cancel = cancel  # under _lock
            return self._requested


@dataclass(frozen=True)
class Config:
    """What the main job runs with; the bounds are what the stages promise."""

    rows: int = 2_000_000
    mode: Literal["rows", "arrow"] = "rows"
    partitions: int = 8
    rx_buffer: int = 32
    publish_on_prefetch: int = 8
    consumer_prefetch: int = 8
    consumer_delay: float = 0.02
    max_rows_per_batch: int = 1024
    job_tag: str = "rs-main-job"

    def __post_init__(self) -> None:
        if self.mode not in ("rows", "arrow"):
            raise ValueError(f"mode must be 'rows' or 'arrow', got {self.mode!r}")
        for name in (
            "rows",
            "partitions",
            "rx_buffer",
            "publish_on_prefetch",
            "consumer_prefetch",
            "max_rows_per_batch",
        ):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.consumer_delay < 0:
            raise ValueError(f"consumer_delay must be >= 0, got {self.consumer_delay!r}")

    def bound_rows(self) -> int:
        """Source rows that may be in flight, from what each stage promises.

        ``rx_processor`` keeps ``queued outputs + outstanding inputs <= rx_buffer``: at most
        ``rx_buffer`` inputs (rows, or batches of ``max_rows_per_batch``) and the windows
        they complete; then the open window, the windows queued in ``publish_on`` and in
        ``to_async_iterator``, the one each of them hands over, and the one the consumer holds.
        """
        if self.mode == "rows":
            per_input, windows_per_input = 1, 1
        else:
            per_input = self.max_rows_per_batch
            windows_per_input = -(-self.max_rows_per_batch // EVENTS_PER_WINDOW) + 1
        windows = (
            self.rx_buffer * windows_per_input
            + 1  # the open window
            + self.publish_on_prefetch
            + self.consumer_prefetch
            + 3  # handed over by publish_on, by to_async_iterator, held by the consumer
        )
        return self.rx_buffer * per_input + windows * EVENTS_PER_WINDOW


@dataclass
class Summary:
    """The end of a run: what the summary line reports."""

    rows: int
    windows: int
    seconds: float
    max_in_flight: int
    bound: int
    max_outstanding_demand: int
    spark_jobs: int | None
    totals: Window
    spark_jobs_capped: bool = False
    """True when Spark's status tracker had let go of some of this run's jobs (it keeps the
    last ``spark.ui.retainedJobs``): ``spark_jobs`` is then a lower bound."""

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def run(
    spark: Any,
    config: Config,
    *,
    on_window: Callable[[Window, Meter], None] | None = None,
    stop: Stop | None = None,
) -> Summary:
    """Run the pipeline to the end and return its :class:`Summary` (blocks the caller).

    ``stop``, when requested, ends the run early: the read is cancelled and the summary
    says what was done until then (nothing is read if it was requested before the start).
    ``on_window`` runs on the consumer's loop, on this thread.

    Raises:
        RuntimeError: called on a thread running an asyncio event loop (before anything
            starts: use ``asyncio.to_thread``).
    """
    refuse_on_loop("run")
    meter = Meter()
    jobs_before = _jobs(spark, config.job_tag)  # a reused session remembers earlier runs
    frame = events(spark, config.rows, config.partitions)
    if config.mode == "rows":
        source: Publisher[Any] = from_dataframe(frame, job_tag=config.job_tag)
        size: Callable[[Any], int] = _one
    else:
        source = from_dataframe(
            frame,
            mode="arrow",
            max_rows_per_batch=config.max_rows_per_batch,
            job_tag=config.job_tag,
        )
        size = _num_rows
    metered = _Metered(source, meter, size)
    stage = rx_stage(config.mode, meter, config.rx_buffer)
    windows: list[Window] = []
    start = time.perf_counter()
    with ThreadPoolExecutor(1, thread_name_prefix="rs-main-publish-on") as pool:
        boundary = publish_on(stage, pool, prefetch=config.publish_on_prefetch)
        consume = _consume(metered, stage, boundary, config, meter, windows, on_window, stop)
        try:
            asyncio.run(consume)
        except asyncio.CancelledError:
            if stop is None or not stop.requested:
                raise  # not our cancel: a stop cancels the consumer, and ends the run here
    seconds = time.perf_counter() - start
    jobs_after = _jobs(spark, config.job_tag)
    jobs, capped = _new_jobs(spark, jobs_before, jobs_after)
    return Summary(
        rows=meter.emitted,
        windows=len(windows),
        seconds=seconds,
        max_in_flight=meter.max_in_flight,
        bound=config.bound_rows(),
        max_outstanding_demand=meter.max_outstanding,
        spark_jobs=jobs,
        totals=_total(windows),
        spark_jobs_capped=capped,
    )


async def _consume(
    source: Publisher[Any],
    stage: Any,
    publisher: Publisher[Window],
    config: Config,
    meter: Meter,
    windows: list[Window],
    on_window: Callable[[Window, Meter], None] | None,
    stop: Stop | None,
) -> None:
    """Connect ``source`` to ``stage``, then consume ``publisher`` deliberately slowly: one
    ``asyncio.sleep`` per window. Nothing is connected once ``stop`` was requested, and a
    later request cancels this task (and so the subscriptions) at its next ``await``."""
    from reactive_streams.adapters.async_iterables import to_async_iterator

    if stop is not None:
        task = asyncio.current_task()
        assert task is not None
        loop, cancel_task = asyncio.get_running_loop(), task.cancel

        def cancel() -> None:
            try:
                loop.call_soon_threadsafe(cancel_task)
            except RuntimeError:  # the loop is closed: the run is over
                pass

        if stop._bind(cancel):
            return
    try:
        source.subscribe(stage)
        async for window in to_async_iterator(publisher, prefetch=config.consumer_prefetch):
            windows.append(window)
            if config.consumer_delay:
                await asyncio.sleep(config.consumer_delay)
            meter.on_finished(window.events)
            if on_window is not None:
                on_window(window, meter)
    finally:
        if stop is not None:
            stop._bind(None)


def _one(_: Any) -> int:
    return 1


def _num_rows(batch: Any) -> int:
    return int(batch.num_rows)


def _jobs(spark: Any, tag: str) -> list[int] | None:
    """The ids of the jobs Spark still tracks under ``tag``; None on Spark Connect."""
    from reactive_streams.spark import _py4j
    from reactive_streams.spark._partitions import is_connect

    if is_connect(spark):
        return None  # the Connect client cannot see the server's job list
    try:
        return _py4j.job_ids_for_tag(spark, tag)
    except Exception:
        return None


def _new_jobs(
    spark: Any, before: list[int] | None, after: list[int] | None
) -> tuple[int | None, bool]:
    """How many jobs ran between ``before`` and ``after``, and whether that is a lower bound:
    the tracker keeps the last ``spark.ui.retainedJobs`` jobs (ids only grow), and once over
    that drops the oldest tenth, so a list that long may have lost some of this run's."""
    if before is None or after is None:
        return None, False
    last = max(before, default=-1)
    new = [j for j in after if j > last]
    try:
        retained = int(spark.conf.get("spark.ui.retainedJobs", "1000"))
    except Exception:
        retained = 1000
    return len(new), len(after) >= retained - retained // 10


def _total(windows: Iterable[Window]) -> Window:
    total = Partial(-1, 0, 0, 0, 0, 0.0, 0.0)
    for w in windows:
        total = merge(total, Partial(*w))
    return Window(*total)
