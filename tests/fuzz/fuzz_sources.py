"""The publishers the fuzzer drives, one factory per kind, each over ``0, 1, ..., n - 1``.

A factory returns a ``Made``: the publisher, what a complete run delivers, how a run may
legitimately differ from that (``mode``: ``exact``, ``prefix`` for the overflow strategies
that fail, ``subsequence`` for those that drop), and how to tell that the source was let go
(a generator closed, an Rx or aioreactive subscription disposed). A hot source's producer
starts as the publisher's ``subscribe`` returns, on a thread (Rx) or the loop (aioreactive).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import AsyncGeneratorType
from typing import Any, Final, cast

import aioreactive
import reactivex
from expression.system import AsyncDisposable
from reactivex import Observable
from reactivex import operators as ops
from reactivex.abc import ObserverBase, SchedulerBase
from reactivex.disposable import Disposable
from reactivex.subject import Subject

from reactive_streams import OverflowViolation, Publisher, Subscriber, publish_on
from reactive_streams.adapters.aioreactive import from_async_observable
from reactive_streams.adapters.async_iterables import from_async_iterable
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.adapters.rx import from_observable, rx_processor

__all__ = ["KINDS", "PULL", "Boom", "Made", "make"]


class Boom(Exception):
    """The failure a plan injects into a source (``Plan.fail_at``)."""


@dataclass
class Made:
    """One publisher of a schedule, and what the judge needs to know about it."""

    publisher: Publisher[Any]
    expected: list[Any]
    mode: str = "exact"  # "exact" | "prefix" | "subsequence"
    failure_after: int | None = None  # ends with Boom after this many of ``expected``
    may_fail_with: tuple[type[BaseException], ...] = ()  # what else it may end with
    released: Callable[[], bool] | None = None  # the source was let go ...
    started: Callable[[], bool] = lambda: True  # ... if it was started at all
    released_on_end: bool = True  # ... at the end too, not only after a cancel
    dropped: Callable[[], int] = lambda: 0
    first: Callable[[], Coroutine[Any, Any, None]] | None = None  # an eager first signal
    eager: bool = False  # subscribe on the loop and send at once, before it yields
    executor: Executor | None = None
    tasks: list[Any] = field(default_factory=list)  # producer threads or futures


class Gen:
    """A generator over ``range(n)`` that raises ``Boom`` at ``fail_at`` and notes its end;
    ``iterator`` is its one generator, for the Publishers that take one."""

    def __init__(self, n: int, fail_at: int | None) -> None:
        self.n = n
        self.fail_at = fail_at
        self.closed = threading.Event()
        self.iterator = self._run()

    def released(self) -> bool:
        """Closed: its ``finally`` ran, or ``close()`` came before it started."""
        return self.closed.is_set() or inspect.getgeneratorstate(self.iterator) == "GEN_CLOSED"

    def _run(self) -> Generator[int, None, None]:
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise Boom(f"the source failed at {i}")
                yield i
            if self.fail_at == self.n:
                raise Boom(f"the source failed at {self.n}")
        finally:
            self.closed.set()


class Agen:
    """``Gen``'s asynchronous twin; it awaits between elements, as a real fetch does."""

    def __init__(self, n: int, fail_at: int | None) -> None:
        self.n = n
        self.fail_at = fail_at
        self.closed = threading.Event()
        self.iterator = self._run()

    def released(self) -> bool:
        """Closed: its ``finally`` ran, or ``aclose()`` came before it started."""
        agen = cast(AsyncGeneratorType[int, None], self.iterator)
        return self.closed.is_set() or agen.ag_frame is None

    async def _run(self) -> AsyncGenerator[int, None]:
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise Boom(f"the source failed at {i}")
                await asyncio.sleep(0)
                yield i
            if self.fail_at == self.n:
                raise Boom(f"the source failed at {self.n}")
        finally:
            self.closed.set()


def _noted(inner: Observable[int]) -> tuple[Observable[int], threading.Event, threading.Event]:
    """``inner`` passed through, noting its subscription and its disposal (which Rx's own
    observer also makes at the end)."""
    subscribed, disposed = threading.Event(), threading.Event()

    def subscribe(observer: ObserverBase[int], scheduler: SchedulerBase | None = None) -> Any:
        subscribed.set()
        disposable = inner.subscribe(observer, scheduler=scheduler)

        def dispose() -> None:
            disposed.set()
            disposable.dispose()

        return Disposable(dispose)

    return reactivex.create(subscribe), subscribed, disposed


class _StartAfterSubscribe:
    """A hot source's Publisher: its producer starts as ``subscribe`` returns, as a user's
    code goes on after it (the Subscriber is passed through untouched)."""

    def __init__(self, inner: Publisher[int], start: Callable[[], None]) -> None:
        self.inner = inner
        self.start = start

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.inner.subscribe(subscriber)
        self.start()


class _Noting:
    """A Publisher passed through (the Subscriber untouched), noting that it was subscribed:
    a source nobody subscribed has nothing to release."""

    def __init__(self, inner: Publisher[Any]) -> None:
        self.inner = inner
        self.subscribed = threading.Event()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscribed.set()
        self.inner.subscribe(subscriber)


def _noting(made: Made) -> Made:
    """``made`` whose source counts as started once its publisher was subscribed."""
    noting = _Noting(made.publisher)
    made.publisher = noting
    made.started = noting.subscribed.is_set
    return made


class Producing(aioreactive.AsyncObservable[int]):
    """A cold aioreactive source whose task awaits each ``asend``, ``athrow`` at ``fail_at``
    and notes its subscription and disposal (the public ``AsyncDisposable`` API)."""

    def __init__(self, n: int, fail_at: int | None) -> None:
        self.n = n
        self.fail_at = fail_at
        self.subscribed = threading.Event()
        self.released = threading.Event()

    async def subscribe_async(
        self, send: Any = None, throw: Any = None, close: Any = None
    ) -> AsyncDisposable:
        assert isinstance(send, aioreactive.AsyncObserver), "the adapter passes an observer"
        observer = send
        self.subscribed.set()

        async def run() -> None:
            for i in range(self.n):
                if i == self.fail_at:
                    await observer.athrow(Boom(f"the source failed at {i}"))
                    return
                await observer.asend(i)
            if self.fail_at == self.n:
                await observer.athrow(Boom(f"the source failed at {self.n}"))
            else:
                await observer.aclose()

        task = asyncio.get_running_loop().create_task(run())

        async def dispose() -> None:
            self.released.set()
            task.cancel()

        return AsyncDisposable.create(dispose)


class Tracked(aioreactive.AsyncObservable[int]):
    """An aioreactive source passed through, noting its subscription and disposal."""

    def __init__(self, inner: aioreactive.AsyncObservable[int]) -> None:
        self.inner = inner
        self.subscribed = threading.Event()
        self.released = threading.Event()

    async def subscribe_async(
        self, send: Any = None, throw: Any = None, close: Any = None
    ) -> AsyncDisposable:
        self.subscribed.set()
        disposable = await self.inner.subscribe_async(send, throw, close)

        async def dispose() -> None:
            self.released.set()
            await disposable.dispose_async()

        return AsyncDisposable.create(dispose)


STRATEGIES: Final = ("block", "buffer", "drop", "latest", "error")
_MODES: Final = {
    "block": "exact",
    "buffer": "prefix",
    "drop": "subsequence",
    "latest": "subsequence",
    "error": "prefix",
}


def _small(rng: random.Random) -> int:
    """A buffer or prefetch size: 1, 2, small, or the library's default."""
    return rng.choice((1, 2, rng.randint(3, 16), 256))


def _iterable(
    kind: str, n: int, fail_at: int | None, rng: random.Random, opts: dict[str, int]
) -> Made:
    expected = list(range(n))
    if kind == "list":
        return Made(from_iterable(expected), list(expected))
    gen = Gen(n, fail_at)
    made = _noting(
        Made(from_iterable(gen.iterator), expected, failure_after=fail_at, released=gen.released)
    )
    if kind == "generator":
        return made
    opts["workers"] = workers = rng.randint(1, 3)
    made.executor = pool = ThreadPoolExecutor(workers, thread_name_prefix="fuzz-pool")
    if kind == "generator_executor":
        return _noting(
            Made(
                from_iterable(gen.iterator, executor=pool),
                expected,
                failure_after=fail_at,
                released=gen.released,
                executor=pool,
            )
        )
    opts["prefetch"] = prefetch = _small(rng)
    if kind == "publish_on_list":
        made.publisher = publish_on(from_iterable(expected), pool, prefetch=prefetch)
        made.released, made.failure_after = None, None
        return made
    assert kind == "publish_on_generator"
    made.publisher = publish_on(made.publisher, pool, prefetch=prefetch)
    return made


def _rx(kind: str, n: int, fail_at: int | None, rng: random.Random, opts: dict[str, int]) -> Made:
    _, temperature, strategy = kind.split("_")
    opts["buffer_size"] = buffer_size = _small(rng)
    allowed: tuple[type[BaseException], ...] = (
        (OverflowViolation,) if strategy in ("buffer", "error") else ()
    )
    if temperature == "cold":
        source, subscribed, disposed = _noted(reactivex.from_iterable(Gen(n, fail_at).iterator))
        cold = from_observable(source, overflow=strategy, buffer_size=buffer_size)
        return Made(
            cold,
            list(range(n)),
            _MODES[strategy],
            fail_at,
            allowed,
            released=disposed.is_set,
            started=subscribed.is_set,
            dropped=lambda: cold.dropped,
        )
    subject: Subject[int] = Subject()
    source, subscribed, disposed = _noted(subject)
    hot = from_observable(source, overflow=strategy, buffer_size=buffer_size)
    made = Made(
        hot,
        list(range(n)),
        _MODES[strategy],
        fail_at,
        allowed,
        released=disposed.is_set,
        started=subscribed.is_set,
        dropped=lambda: hot.dropped,
    )

    def produce() -> None:
        for i in range(n):
            if i == fail_at:
                subject.on_error(Boom(f"the source failed at {i}"))
                return
            subject.on_next(i)
        if fail_at == n:
            subject.on_error(Boom(f"the source failed at {n}"))
        else:
            subject.on_completed()

    def start() -> None:
        thread = threading.Thread(target=produce, name="fuzz-hot-producer", daemon=True)
        thread.start()
        made.tasks.append(thread)

    made.publisher = _StartAfterSubscribe(hot, start)
    return made


_OPERATORS: Final[dict[str, tuple[Callable[[Any], Any], Callable[[int], list[int]]]]] = {
    "map": (ops.map(lambda x: x * 3), lambda x: [x * 3]),
    "filter": (ops.filter(lambda x: x % 3 != 1), lambda x: [x] if x % 3 != 1 else []),
    "flat_map": (
        ops.flat_map(lambda x: reactivex.of(2 * x, 2 * x + 1)),
        lambda x: [2 * x, 2 * x + 1],
    ),
}


def _processor(n: int, fail_at: int | None, rng: random.Random, opts: dict[str, int]) -> Made:
    names = sorted(_OPERATORS)  # flat_map, filter, map
    opts["operator"] = pick = rng.randrange(len(names))
    operator, outputs = _OPERATORS[names[pick]]
    opts["buffer_size"] = buffer_size = _small(rng)
    gen = Gen(n, fail_at)
    processor = rx_processor(operator, buffer_size=buffer_size)
    from_iterable(gen.iterator).subscribe(processor)
    expected = [y for x in range(n) for y in outputs(x)]
    failure_after = None
    if fail_at is not None:
        failure_after = len([y for x in range(fail_at) for y in outputs(x)])
    return _noting(Made(processor, expected, failure_after=failure_after, released=gen.released))


def _aio(
    kind: str,
    n: int,
    fail_at: int | None,
    rng: random.Random,
    opts: dict[str, int],
    loop: asyncio.AbstractEventLoop,
) -> Made:
    if kind == "async_generator":
        agen = Agen(n, fail_at)
        return _noting(
            Made(
                from_async_iterable(agen.iterator, loop=loop),
                list(range(n)),
                failure_after=fail_at,
                released=agen.released,
            )
        )
    if kind == "aio_cold":
        # aioreactive's own from_async_iterable, or a source of ours that can fail
        real = fail_at is None and rng.random() < 0.5
        opts["aioreactive_from_async_iterable"] = int(real)
        source = (
            Tracked(aioreactive.from_async_iterable(Agen(n, None).iterator))
            if real
            else Producing(n, fail_at)
        )
        return Made(
            from_async_observable(source, loop=loop),
            list(range(n)),
            failure_after=fail_at,
            released=source.released.is_set,
            started=source.subscribed.is_set,
            released_on_end=False,
        )
    assert kind == "aio_hot"
    subject: aioreactive.AsyncSubject[int] = aioreactive.AsyncSubject()
    tracked = Tracked(subject)
    opts["eager"] = eager = int(rng.random() < 0.5)

    async def send(i: int) -> bool:
        """Send the i-th signal; False once the stream has ended."""
        if i == fail_at:
            await subject.athrow(Boom(f"the source failed at {i}"))
            return False
        if i == n:
            await subject.aclose()
            return False
        await subject.asend(i)
        return True

    made = Made(
        from_async_observable(tracked, loop=loop),
        list(range(n)),
        failure_after=fail_at,
        released=tracked.released.is_set,
        started=tracked.subscribed.is_set,
        released_on_end=False,
        eager=bool(eager),
    )

    async def produce(begin: int) -> None:
        for i in range(begin, n + 1):
            if not await send(i):
                return

    async def first() -> None:
        if await send(0):
            made.tasks.append(asyncio.get_running_loop().create_task(produce(1)))

    def start() -> None:
        made.tasks.append(asyncio.run_coroutine_threadsafe(produce(0), loop))

    if eager:
        made.first = first  # the sink subscribes on the loop and awaits it at once
    else:
        made.publisher = _StartAfterSubscribe(made.publisher, start)
    return made


KINDS: Final = (
    "list",
    "generator",
    "generator_executor",
    "publish_on_list",
    "publish_on_generator",
    "async_generator",
    *(f"rx_cold_{s}" for s in STRATEGIES),
    *(f"rx_hot_{s}" for s in STRATEGIES),
    "rx_processor",
    "aio_cold",
    "aio_hot",
)
PULL: Final = frozenset(KINDS) - {"list", "publish_on_list"}
"""The kinds whose source the plan may make fail."""


def make(
    kind: str,
    n: int,
    fail_at: int | None,
    rng: random.Random,
    opts: dict[str, int],
    loop: asyncio.AbstractEventLoop,
) -> Made:
    """The publisher of ``kind`` over ``range(n)``; its own draws go into ``opts``."""
    if kind == "rx_processor":
        return _processor(n, fail_at, rng, opts)
    if kind.startswith("rx_"):
        return _rx(kind, n, fail_at, rng, opts)
    if kind.startswith("aio_") or kind == "async_generator":
        return _aio(kind, n, fail_at, rng, opts, loop)
    return _iterable(kind, n, fail_at, rng, opts)
