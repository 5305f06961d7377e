"""The main job: synthetic events from Spark, shared by two consumers, each paced by demand.

``events`` (a DataFrame) -> ``from_dataframe`` -> ``share(min_subscribers=2)`` ->
(1) ``rx_processor`` (parse, filter, a tumbling event-time window aggregate) -> ``publish_on``
-> ``to_async_iterator`` consumed by a coroutine that sleeps after each window, and (2) the
running amount statistics (``_stats``), which do more per row on a thread of their own over
``to_iterator``. One read feeds both; the slower sets its pace. A :class:`Meter` counts source
rows emitted and rows finished (dropped by the filter or folded into a consumed window) and
keeps the largest difference: the rows in flight, which :func:`run` compares with the bound
the stages promise; and how far the read ran ahead of the statistics.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from reactive_streams import Publisher, publish_on, share
from reactive_streams.adapters.iterables import to_iterator
from reactive_streams.spark._meter import Meter, Metered
from reactive_streams.spark._stats import StatsResult, consume
from reactive_streams.spark.dataframe import from_dataframe, refuse_on_loop

if TYPE_CHECKING:
    from reactive_streams.spark._enrich import Enrich

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
    ``watched`` is the stage a snapshot of the run starts from (the statistics consumer's
    sink), or None outside a run: read without a lock, so a signal handler may read it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self._cancel: Callable[[], None] | None = None
        self.watched: object | None = None  # set by the run's thread; read lock-free

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
    share_buffer: int = 256
    stats_prefetch: int = 64
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
            "share_buffer",
            "stats_prefetch",
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
        ``to_async_iterator``, the one each of them hands over, and the one the consumer holds;
        and before all of them, ``share_buffer`` inputs the share may hold for them.
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
        return (self.share_buffer + self.rx_buffer) * per_input + windows * EVENTS_PER_WINDOW

    def stats_lead_bound(self) -> int:
        """Rows the read may emit beyond those the statistics took: the share's buffer, the
        iterator's prefetch and the element in hand (inputs are rows, or batches)."""
        per_input = 1 if self.mode == "rows" else self.max_rows_per_batch
        return (self.share_buffer + self.stats_prefetch + 1) * per_input


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
    windows_rows: int = 0
    """Source rows the window consumer finished (filtered out or folded into a window)."""
    windows_waited: float = 0.0
    """Seconds the window consumer waited for its next window."""
    stats: StatsResult | None = None
    """The statistics consumer's rows, waits and statistics (None: not run)."""
    max_stats_lead: int = 0
    """The most rows the read emitted beyond those the statistics had taken."""
    stats_lead_bound: int = 0

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def run(
    spark: Any,
    config: Config,
    *,
    on_window: Callable[[Window, Meter], None] | None = None,
    stop: Stop | None = None,
    enrich: Enrich | None = None,
) -> Summary:
    """Run the pipeline to the end and return its :class:`Summary` (blocks the caller).

    ``stop``, when requested, ends the run early: the read is cancelled and the summary
    says what was done until then (nothing is read if it was requested before the start).
    ``on_window`` runs on the consumer's loop, on this thread. ``enrich`` (started): the
    read is of the events its service enriched in the executors, counted per segment.

    Raises:
        RuntimeError: called on a thread running an asyncio event loop (before anything
            starts: use ``asyncio.to_thread``).
    """
    refuse_on_loop("run")
    meter = Meter()
    jobs_before = _jobs(spark, config.job_tag)  # a reused session remembers earlier runs
    frame = events(spark, config.rows, config.partitions)
    if enrich is not None:
        frame = enrich.frame(frame)
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
    if enrich is not None:
        size = enrich.segments.sized(size)
    shared = share(Metered(source, meter, size), buffer_size=config.share_buffer, min_subscribers=2)
    stage = rx_stage(config.mode, meter, config.rx_buffer)
    windows: list[Window] = []
    waits = _Waits()
    start = time.perf_counter()
    with (
        ThreadPoolExecutor(1, thread_name_prefix="rs-main-publish-on") as pool,
        ThreadPoolExecutor(1, thread_name_prefix="rs-main-stats") as stats_pool,
    ):
        boundary = publish_on(stage, pool, prefetch=config.publish_on_prefetch)
        consumers = _consume(
            shared, stage, boundary, config, meter, windows, on_window, stop, stats_pool, waits
        )
        try:
            asyncio.run(consumers)
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
        windows_rows=meter.finished,
        windows_waited=waits.windows,
        stats=waits.stats,
        max_stats_lead=meter.max_stats_lead,
        stats_lead_bound=config.stats_lead_bound(),
    )


class _Waits:
    """What the consumers report to ``run``: the window consumer's waits (its loop) and
    the statistics' result (set on the loop once their thread returned)."""

    def __init__(self) -> None:
        self.windows = 0.0
        self.stats: StatsResult | None = None


async def _consume(
    shared: Publisher[Any],
    stage: Any,
    publisher: Publisher[Window],
    config: Config,
    meter: Meter,
    windows: list[Window],
    on_window: Callable[[Window, Meter], None] | None,
    stop: Stop | None,
    stats_pool: ThreadPoolExecutor,
    waits: _Waits,
) -> None:
    """Connect both consumers to the share (it subscribes to the read once both came),
    then consume the windows. Nothing is connected once ``stop`` was requested, and a later
    request cancels this task at its next ``await``: the statistics' iterator is closed
    too, so the share, left with no subscriber, cancels the read (§3.13)."""
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
    rows = to_iterator(shared, prefetch=config.stats_prefetch)
    if stop is not None:
        stop.watched = rows  # owned: this thread; a snapshot starts at the statistics' sink
    clock = time.perf_counter
    try:
        stats = asyncio.wrap_future(stats_pool.submit(consume, rows, config.mode, meter.on_stats))
        shared.subscribe(stage)  # the second subscriber: the share subscribes to the read
        ready = clock()
        async for window in to_async_iterator(publisher, prefetch=config.consumer_prefetch):
            waits.windows += clock() - ready  # owned: this loop
            windows.append(window)
            if config.consumer_delay:
                await asyncio.sleep(config.consumer_delay)
            meter.on_finished(window.events)
            if on_window is not None:
                on_window(window, meter)
            ready = clock()
        waits.stats = await stats
    finally:
        rows.close()  # the windows failed or were cancelled: the read must not go on for it
        if stop is not None:
            stop._bind(None)
            stop.watched = None


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
