"""The source x sink grid: every ``from_…`` feeding every ``to_…``, directly and through
``publish_on``, with a slow consumer. Each cell checks that all elements arrive in order; that
the elements in flight (taken from the foreign source, not yet consumed) never exceed the
bound the stages between them promise, so an adapter that buffers without bound fails; that
the sink never has more than its prefetch requested and undelivered, so a sink that asks for
unbounded demand fails; and that the run ends within ``CELL_TIMEOUT`` seconds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from compat_matrix._tck_run import optional_missing
from reactive_streams import Publisher, Subscriber, Subscription, publish_on
from reactive_streams._demand import add_cap

__all__ = ["Cell", "Sink", "Source", "run_grid", "sinks", "sources"]

PREFETCH = 16  # every sink's window in the grid
PUBLISH_ON_PREFETCH = 16
CELL_TIMEOUT = 120.0  # seconds: a cell still running then has hung, and fails

Taken = Callable[[], None]
"""Called by a source as each element leaves the foreign library (or the adapter, for Spark)."""


@dataclass(frozen=True)
class Source:
    """A ``from_…`` publisher factory: ``make(n, taken)`` emits ``0..n-1`` (after
    ``normalize``), calling ``taken()`` as each element is taken from the foreign source."""

    name: str
    make: Callable[[int, Taken], Publisher[Any]]
    normalize: Callable[[Any], Any] = lambda x: x
    slack: int = 0  # elements the adapter itself may hold beyond downstream demand
    library: str = ""  # the foreign library it bridges ("reactivex", ...), if any


@dataclass(frozen=True)
class Sink:
    """A ``to_…`` consumer: ``consume(publisher, each, delay)`` drains a publisher slowly."""

    name: str
    consume: Callable[[Publisher[Any], Callable[[Any], None], float], None]
    library: str = ""


@dataclass
class Cell:
    """One source -> sink run and whether it kept order and the in-flight bound."""

    source: str
    sink: str
    via: str
    status: str  # "pass" | "fail" | "unavailable"
    elements: int
    max_in_flight: int
    bound: int
    detail: str = ""
    libraries: list[str] = field(default_factory=list)  # of the source and sink, if foreign
    env: str = ""  # e.g. "reactivex 6.1.0": the library version the cell ran under, if varied

    def to_json(self) -> dict[str, Any]:
        """The cell as plain JSON-able data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cell:
        """Rebuild a cell from ``to_json()`` output (e.g. sent by another interpreter)."""
        return cls(**data)


# -- instrumentation -----------------------------------------------------------------------


class _Meter:
    """Counts elements taken from the source and consumed by the consumer, and the demand the
    sink has outstanding (requested, not yet delivered to it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.emitted = 0
        self.consumed = 0
        self.max_in_flight = 0
        self.requested = 0
        self.delivered = 0
        self.max_outstanding = 0

    def taken(self) -> None:
        with self.lock:
            self.emitted += 1
            self.max_in_flight = max(self.max_in_flight, self.emitted - self.consumed)

    def on_consumed(self) -> None:
        with self.lock:
            self.consumed += 1

    def on_request(self, n: int) -> None:
        with self.lock:
            self.requested = add_cap(self.requested, n)
            self.max_outstanding = max(self.max_outstanding, self.requested - self.delivered)

    def on_delivered(self) -> None:
        with self.lock:
            self.delivered += 1


def counted(publisher: Publisher[Any], taken: Taken) -> Publisher[Any]:
    """``publisher`` calling ``taken()`` for each element it emits: for a source whose foreign
    side cannot be counted (Spark's rows leave the JVM a partition at a time)."""
    return _Tap(publisher, on_next=taken)


class _Tap:
    """A pass-through Publisher calling ``on_next()`` per element and ``on_request(n)`` per
    request its subscriber makes."""

    def __init__(
        self,
        upstream: Publisher[Any],
        on_next: Callable[[], None],
        on_request: Callable[[int], None] | None = None,
    ) -> None:
        self._upstream = upstream
        self._on_next = on_next
        self._on_request = on_request

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self._upstream.subscribe(_TapSubscriber(subscriber, self._on_next, self._on_request))


class _TapSubscriber:
    def __init__(
        self,
        downstream: Subscriber[Any],
        on_next: Callable[[], None],
        on_request: Callable[[int], None] | None,
    ) -> None:
        self._downstream = downstream
        self._on_next = on_next
        self._on_request = on_request
        self._upstream: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._upstream = subscription
        self._downstream.on_subscribe(self if self._on_request is not None else subscription)

    def request(self, n: int) -> None:  # only when counting requests
        assert self._upstream is not None and self._on_request is not None
        self._on_request(n)
        self._upstream.request(n)

    def cancel(self) -> None:
        assert self._upstream is not None
        self._upstream.cancel()

    def on_next(self, element: Any) -> None:
        self._on_next()
        self._downstream.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._downstream.on_error(error)

    def on_complete(self) -> None:
        self._downstream.on_complete()


# -- the registries ------------------------------------------------------------------------


def sources(spark: bool = False) -> Iterator[Source | tuple[str, str, str]]:
    """Every available source; ``(name, reason)`` for one whose library is missing.
    ``spark=True`` adds the Spark sources (starts a local Spark session)."""
    from reactive_streams.adapters.iterables import from_iterable

    yield Source("from_iterable(generator)", lambda n, taken: from_iterable(_gen(n, taken)))
    try:
        from reactive_streams.adapters.async_iterables import from_async_iterable

        yield Source(
            "from_async_iterable",
            lambda n, taken: from_async_iterable(_agen(n, taken), loop=_helper_loop()),
        )
    except ImportError as exc:
        yield _missing("from_async_iterable", exc)
    try:
        import reactivex

        from reactive_streams.adapters.rx import from_observable

        yield Source(
            "from_observable(block)",
            lambda n, taken: from_observable(
                reactivex.from_iterable(_gen(n, taken)), buffer_size=PREFETCH
            ),
            slack=PREFETCH + 1,  # block fills its buffer ahead of demand, then waits holding one
            library="reactivex",
        )
    except ImportError as exc:
        yield _missing("from_observable", exc)
    try:
        from reactive_streams.adapters.aioreactive import from_async_observable

        yield Source(
            "from_async_observable",
            lambda n, taken: from_async_observable(_aio_source(n, taken), loop=_helper_loop()),
            slack=2,  # the slot, and the element a worker holds while asend waits
            library="aioreactive",
        )
    except ImportError as exc:
        yield _missing("from_async_observable", exc)
    if spark:
        try:
            from compat_matrix.cases.spark import grid_sources

            yield from grid_sources()
        except ImportError as exc:
            yield _missing("from_dataframe", exc)


def sinks() -> Iterator[Sink | tuple[str, str, str]]:
    """Every available sink; ``(name, reason)`` for one whose library is missing."""
    from reactive_streams.adapters.iterables import to_iterator

    def to_iterator_sink(
        publisher: Publisher[Any], consume: Callable[[Any], None], delay: float
    ) -> None:
        with to_iterator(publisher, prefetch=PREFETCH) as it:
            for element in it:
                consume(element)
                time.sleep(delay)  # the deliberately slow consumer

    yield Sink("to_iterator", to_iterator_sink)
    try:
        from reactive_streams.adapters.async_iterables import to_async_iterator

        def to_async_iterator_sink(
            publisher: Publisher[Any], consume: Callable[[Any], None], delay: float
        ) -> None:
            async def main() -> None:
                async for element in to_async_iterator(publisher, prefetch=PREFETCH):
                    consume(element)
                    await asyncio.sleep(delay)  # slow, without blocking the loop

            asyncio.run(main())

        yield Sink("to_async_iterator", to_async_iterator_sink)
    except ImportError as exc:
        yield _missing("to_async_iterator", exc)
    try:
        from reactive_streams.adapters.rx import to_observable

        def to_observable_sink(
            publisher: Publisher[Any], consume: Callable[[Any], None], delay: float
        ) -> None:
            done = threading.Event()
            errors: list[Exception] = []

            def on_error(error: Exception) -> None:
                errors.append(error)
                done.set()

            def on_next(element: Any) -> None:
                consume(element)
                time.sleep(delay)  # Rx has no demand: slowness is felt by the signalling thread

            to_observable(publisher, prefetch=PREFETCH).subscribe(
                on_next=on_next, on_error=on_error, on_completed=done.set
            )
            done.wait()  # run_cell fails a cell still running after CELL_TIMEOUT
            if errors:
                raise errors[0]

        yield Sink("to_observable", to_observable_sink, library="reactivex")
    except ImportError as exc:
        yield _missing("to_observable", exc)


def _gen(n: int, taken: Taken) -> Iterator[int]:
    for i in range(n):
        taken()
        yield i


async def _agen(n: int, taken: Taken) -> Any:
    for i in range(n):
        taken()
        yield i


def _aio_source(n: int, taken: Taken) -> Any:
    import aioreactive as rx

    return rx.from_async_iterable(_agen(n, taken))


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _helper_loop() -> asyncio.AbstractEventLoop:
    """A loop on a daemon thread, for sources that need one while the sink runs elsewhere."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="grid-loop", daemon=True).start()
            _loop = loop
        return _loop


# -- running -------------------------------------------------------------------------------


def cell_bound(source: Source, via: str) -> int:
    """The elements a cell may have in flight: each stage holds at most its prefetch, plus the
    one element it has dequeued and is handing on, plus what the source itself holds."""
    bound = PREFETCH + 1 + source.slack
    if via == "publish_on":
        bound += PUBLISH_ON_PREFETCH + 1
    return bound


def min_grid_elements() -> int:
    """The fewest elements a cell may send: twice its bound, or an unbounded buffer could not
    show (the Spark sources hold nothing beyond demand, so the others decide)."""
    return 2 * max(cell_bound(s, "publish_on") for s in sources() if isinstance(s, Source))


def run_cell(source: Source, sink: Sink, via: str, n: int, delay: float) -> Cell:
    """Feed ``n`` elements from ``source`` to ``sink`` with a consumer sleeping ``delay`` each."""
    meter = _Meter()
    publisher = source.make(n, meter.taken)
    bound = cell_bound(source, via)
    executor: ThreadPoolExecutor | None = None
    if via == "publish_on":
        executor = ThreadPoolExecutor(1, thread_name_prefix="grid-publish-on")
        publisher = publish_on(publisher, executor, prefetch=PUBLISH_ON_PREFETCH)
    if n < 2 * bound:  # fewer, and an unbounded buffer could not show
        raise ValueError(f"grid elements must be >= {2 * bound} (twice the bound), got {n}")
    publisher = _Tap(publisher, meter.on_delivered, meter.on_request)  # the sink's demand
    received: list[Any] = []

    def consume(element: Any) -> None:
        meter.on_consumed()
        received.append(source.normalize(element))

    errors: list[Exception] = []

    def run() -> None:
        try:
            sink.consume(publisher, consume, delay)
        except Exception as exc:
            errors.append(exc)

    runner = threading.Thread(target=run, name="grid-cell", daemon=True)
    runner.start()
    runner.join(CELL_TIMEOUT)
    if executor is not None:
        executor.shutdown(wait=False)
    status, detail = "pass", ""
    if runner.is_alive():
        status, detail = "fail", f"still running after {CELL_TIMEOUT:.0f} s: a hang"
    elif errors:
        status, detail = "fail", f"{type(errors[0]).__name__}: {errors[0]}"
    elif received != list(range(n)):
        status, detail = "fail", f"received {len(received)} elements, not 0..{n - 1} in order"
    elif meter.max_in_flight > bound:
        status = "fail"
        detail = f"{meter.max_in_flight} elements in flight, bound {bound}"
    elif meter.max_outstanding > PREFETCH:
        status = "fail"
        detail = f"the sink had {meter.max_outstanding} requested ahead, prefetch {PREFETCH}"
    libraries = [lib for lib in (source.library, sink.library) if lib]
    return Cell(
        source.name,
        sink.name,
        via,
        status,
        len(received),
        meter.max_in_flight,
        bound,
        detail,
        sorted(set(libraries)),
    )


def _missing(name: str, exc: ImportError) -> tuple[str, str, str]:
    """``(name, reason, library)`` for a source or sink whose optional library is not
    installed; any other import error is ours, and is raised (the run fails)."""
    library = optional_missing(exc)
    if not library:
        raise exc
    return name, str(exc), library


def _library(side: Source | Sink | tuple[str, str, str]) -> str:
    """The foreign library of a source or sink ("" for ours); an unavailable one's too."""
    return side[2] if isinstance(side, tuple) else side.library


def run_grid(
    n: int = 300, delay: float = 0.0005, spark: bool = False, library: str | None = None
) -> list[Cell]:
    """Every source x sink, direct and via ``publish_on`` (with ``library``: only its cells)."""
    cells: list[Cell] = []
    srcs = list(sources(spark))
    snks = list(sinks())
    for src in srcs:
        for snk in snks:
            libraries = sorted({_library(src), _library(snk)} - {""})
            if library is not None and library not in libraries:
                continue
            for via in ("direct", "publish_on"):
                if isinstance(src, tuple) or isinstance(snk, tuple):
                    missing = src if isinstance(src, tuple) else snk
                    assert isinstance(missing, tuple)
                    cells.append(
                        Cell(
                            src[0] if isinstance(src, tuple) else src.name,
                            snk[0] if isinstance(snk, tuple) else snk.name,
                            via,
                            "unavailable",
                            0,
                            0,
                            0,
                            missing[1],
                            libraries,
                        )
                    )
                    continue
                cells.append(run_cell(src, snk, via, n, delay))
    return cells
