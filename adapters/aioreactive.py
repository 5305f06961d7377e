"""aioreactive (async observables) and Reactive Streams, both directions.

- ``from_async_observable``: the adapter's ``AsyncObserver.asend`` awaits until the subscriber
  has demand, and hands the element over through a one-slot buffer to the drain loop; a source
  that awaits its observer (``from_async_iterable``, ``create`` with ``await obv.asend``, an
  ``AsyncSubject`` whose producer awaits ``asend``) is paced by demand. aioreactive's own
  ``from_iterable`` does NOT await its observer: it posts every element to an unbounded mailbox
  at once (without yielding to the loop), so it runs ahead of any demand and fills memory; see
  docs/adapters.md for the lossless ways.
- ``to_async_observable``: requests ``prefetch`` (256), re-requests 75% as elements are sent,
  and awaits each ``asend`` before sending the next: a slow observer slows the publisher.
- Signals of ``from_async_observable`` arrive on its loop (``on_subscribe`` on the subscribing
  thread); ``to_async_observable`` accepts signals from any thread and sends on the loop of
  ``subscribe_async``. Cancel disposes the aioreactive subscription; disposing the one
  ``to_async_observable`` returns cancels the Reactive Streams subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final, Generic, TypeVar, final

from reactive_streams.adapters._extras import missing_extra

try:
    import aioreactive  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra(exc, "reactive_streams.adapters.aioreactive", "aio") from exc
from aioreactive import AsyncAnonymousObserver, AsyncObservable, AsyncObserver
from expression.system import AsyncDisposable

from reactive_streams._drain import EMPTY, END, DrainSubscription, OnLoop, Source, _Marker
from reactive_streams._loop import (
    call_on_loop,
    check_loop,
    on_loop,
    resolve_loop,
    run_clean_up,
    start_eagerly,
    start_task,
)
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    not_an_exception,
    reject,
    report_dropped,
    require_publisher,
    require_subscriber,
)
from reactive_streams.adapters.async_iterables import AsyncPublisherIterator
from reactive_streams.api import Publisher, Subscriber

__all__ = [
    "AsyncObservablePublisher",
    "PublisherAsyncObservable",
    "from_async_observable",
    "to_async_observable",
]

T = TypeVar("T")

_NOTHING: Final = _Marker("NOTHING")


def _spawn(
    loop: asyncio.AbstractEventLoop, start: Callable[[], Awaitable[Any]], what: str
) -> asyncio.Task[None]:
    """Run ``start()`` as a kept task on ``loop``, called when the task first runs: a task
    cancelled before then (the end of ``asyncio.run``) leaves no coroutine never awaited."""
    return start_task(loop, _guard(start, what))


async def _guard(start: Callable[[], Awaitable[Any]], what: str) -> None:
    try:
        await start()
    except Exception as exc:  # nobody awaits this task: report instead of losing the error
        report_dropped(exc, where=f"aioreactive adapter: {what}")


# -- from_async_observable ------------------------------------------------------------------


@final
class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


@final
class _HandOff(AsyncObserver[T], Source[T]):
    """The adapter's AsyncObserver (upstream) and the drain's Source (downstream).

    ``poll`` finding the slot empty is the drain saying "one more, please" (it polls only
    while there is demand): that grants one ``asend`` the right to fill the slot. So the slot
    holds at most one element (§1.1), and ``asend`` waits, without blocking the loop, until
    demand reaches it. Owned by the loop: everything runs there, ``close`` too unless the loop
    is closed (then on the one thread whose drain found it closed).
    """

    __slots__ = (
        "_closed",
        "_disposable",
        "_ended",
        "_loop",
        "_permit",
        "_slot",
        "_source",
        "_terminal",
        "_wake",
        "_wanted",
        "_watch",
    )

    def __init__(self, source: AsyncObservable[T], loop: asyncio.AbstractEventLoop) -> None:
        self._source: AsyncObservable[T] | None = source
        self._loop = loop
        self._slot: T | _Marker = _NOTHING
        self._terminal: _Marker | _Failure | None = None
        self._wanted = False
        self._permit: asyncio.Future[None] | None = None
        self._closed = False
        self._disposable: AsyncDisposable | None = None
        self._ended: asyncio.Future[None] | None = None  # resolved by close (see _subscribe)
        self._wake: Callable[[], None] | None = None
        self._watch: asyncio.Task[None] | None = None  # _subscribe's task, after its first step

    # -- upstream: aioreactive's side ----------------------------------------------------

    def connect(self) -> None:
        """Subscribe to the aioreactive source, on the loop, unless already cancelled.

        ``subscribe_async`` runs up to its first suspension before this returns, so a hot
        source that registers its observer at once (an ``AsyncSubject``) keeps every element
        sent after ``subscribe()``; the rest of ``_subscribe`` is a kept task."""
        source, self._source = self._source, None  # owned: the loop
        if source is None or self._closed:
            return
        watch = start_eagerly(
            self._loop, _guard(lambda: self._subscribe(source), "subscribing the source")
        )
        if watch is not None:
            self._watch = watch
            watch.add_done_callback(self._watch_ended)

    def _watch_ended(self, watch: asyncio.Task[None]) -> None:
        if watch.cancelled():
            self._loop_ended()

    async def _subscribe(self, source: AsyncObservable[T]) -> None:
        """Subscribe, then watch the loop until close(): once its first step has run, this
        task is ours alone, so if it is cancelled before close(), the loop is shutting down
        (the end of ``asyncio.run``), and ``_loop_ended`` runs."""
        try:
            disposable = await source.subscribe_async(self)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task is self._watch and task.cancelling():
                raise  # our task: the loop shutting down
            error = RuntimeError(  # the source's own: it will never be subscribed (§1.4)
                "from_async_observable(): the source's subscribe_async() was cancelled"
            )
            self._fail(error)
            return
        except Exception as exc:  # §1.4: a source that cannot be subscribed to fails
            self._fail(exc)
            return
        if self._closed:  # cancelled while subscribing
            await disposable.dispose_async()
            return
        self._disposable = disposable  # owned: the loop
        ended = self._ended = self._loop.create_future()
        await ended

    def _loop_ended(self) -> None:
        """Nothing will run the source again; a subscriber waiting with demand on another
        thread must hear it (§1.4), not wait forever."""
        self._fail(
            RuntimeError(
                "from_async_observable(): the event loop is shutting down (its tasks were "
                "cancelled); the stream cannot go on"
            )
        )

    def _check_loop(self) -> None:
        if not on_loop(self._loop):
            raise RuntimeError(
                "from_async_observable(): the source signalled from another event loop or "
                "thread; it must run on the loop given to (or captured by) the adapter"
            )

    async def asend(self, value: T) -> None:
        """Wait for demand, then hand ``value`` to the subscriber (through the drain)."""
        self._check_loop()
        while not self._wanted:  # no demand yet: wait for the drain to ask (backpressure)
            if self._closed or self._terminal is not None:
                break
            permit = self._permit
            if permit is None:
                permit = self._permit = self._loop.create_future()  # owned: the loop
            # Shielded: the permit is shared by every waiting asend, and cancelling one
            # waiter (a timeout, the source disposed) must not cancel the others'.
            await asyncio.shield(permit)
        if self._closed or self._terminal is not None:
            # Cancelled (§3.12: dropped) or after a terminal signal (§1.7: ignored). Yield once,
            # so a source that loops without awaiting anything else lets the disposal run.
            await asyncio.sleep(0)
            return
        self._wanted = False  # owned: the loop (see the class)
        self._slot = value
        self._signal()

    async def athrow(self, error: Exception) -> None:
        """The source failed: ``on_error`` after the element in the slot, if any (§1.4)."""
        self._check_loop()
        thrown: object = error  # a source may throw anything: None, a cancellation
        if not isinstance(thrown, Exception):
            thrown = not_an_exception(thrown, "from_async_observable(): the source threw")
        self._fail(thrown)

    def _fail(self, error: Exception) -> None:
        if self._terminal is None and not self._closed:
            self._terminal = _Failure(error)  # owned: the loop
            self._release_senders()
            self._signal()

    async def aclose(self) -> None:
        """The source completed: ``on_complete`` after the element in the slot, if any."""
        self._check_loop()
        if self._terminal is None and not self._closed:
            self._terminal = END  # owned: the loop
            self._release_senders()
            self._signal()

    def _signal(self) -> None:
        wake = self._wake
        if wake is not None:
            wake()

    def _release_senders(self) -> None:
        permit, self._permit = self._permit, None  # owned: the loop
        if permit is not None and not permit.done():
            permit.set_result(None)

    # -- downstream: the drain's side ------------------------------------------------------

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def poll(self) -> T | _Marker:
        slot = self._slot
        if slot is not _NOTHING:
            self._slot = _NOTHING  # owned: the loop
            return slot
        terminal = self._terminal
        if terminal is not None:
            if isinstance(terminal, _Failure):
                raise terminal.error  # §1.4
            return terminal  # END
        if not self._wanted:  # one unit of demand: let one asend through (§1.1)
            self._wanted = True  # owned: the loop
            self._release_senders()
        return EMPTY

    def at_end(self) -> bool:
        return self._slot is _NOTHING and self._terminal is not None

    # diagnostics (snapshot): snapshots of loop-owned state, from any thread

    def buffered(self) -> int:
        return 0 if self._slot is _NOTHING else 1  # the slot

    def in_flight(self) -> int:
        return 1 if self._wanted else 0  # an asend let through, its element not here yet

    def close(self) -> None:
        """Cancel: drop the slot, release a waiting ``asend``, dispose upstream (§3.13)."""
        if self._closed:
            return
        self._closed = True  # owned: the loop (see the class)
        self._slot = _NOTHING
        self._wake = None
        try:
            call_on_loop(self._loop, self._dispose)
        except RuntimeError:  # the loop is closed: nothing runs on it any more
            pass

    def _dispose(self) -> None:
        self._release_senders()
        ended, self._ended = self._ended, None  # owned: the loop
        if ended is not None and not ended.done():
            ended.set_result(None)  # the watch in _subscribe ends
        disposable, self._disposable = self._disposable, None  # owned: the loop
        if disposable is not None:  # else _subscribe disposes once subscribe_async returns
            run_clean_up(
                self._loop, lambda: _guard(disposable.dispose_async, "disposing the source")
            )


@final
class AsyncObservablePublisher(Generic[T]):
    """A Publisher over an aioreactive ``AsyncObservable``, paced by demand where it can be.

    Each Subscriber subscribes the source anew, on the loop (§1.10: one subscription per
    subscriber). The adapter's ``asend`` returns only once the subscriber has demand for the
    element and the element sits in the one-slot hand-off, so a source that awaits ``asend``
    never runs ahead of demand (§1.1); a source that does not await (aioreactive's
    ``from_iterable``, a mailbox) queues inside aioreactive, not here. ``athrow``/``aclose``
    become ``on_error``/``on_complete`` after the element in the slot (§1.4, §1.5), even
    without demand (§1.2); so does the loop shutting down before the end (``on_error``).
    Signals are delivered on the loop by the drain loop; ``request`` and ``cancel`` may come
    from any thread. Subscribed on the loop's thread, the source is subscribed before
    ``subscribe`` returns. Cancel disposes the aioreactive subscription and lets a waiting
    ``asend`` return (its element dropped) (§3.12, §3.13).
    """

    __slots__ = ("__weakref__", "_loop", "_source")

    def __init__(
        self, source: AsyncObservable[T], loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        if not callable(getattr(source, "subscribe_async", None)):
            raise TypeError(
                "from_async_observable() requires an aioreactive AsyncObservable, "
                f"got {type(source).__name__}"
            )
        check_loop(loop)
        self._source = source
        self._loop = loop

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        loop = resolve_loop(self._loop, "from_async_observable()")
        if isinstance(loop, Exception):
            reject(subscriber, loop)
            return
        handoff: _HandOff[T] = _HandOff(self._source, loop)
        name = "from_async_observable"  # upstream: aioreactive, not scanned
        DrainSubscription(subscriber, handoff, OnLoop(loop), name=name).start()
        try:  # on the loop: subscribed before this returns (a hot source's elements kept)
            call_on_loop(loop, handoff.connect)
        except RuntimeError as exc:  # closed since resolve_loop: the drain cannot run either
            report_dropped(exc, where="from_async_observable(): the event loop closed")

    def __repr__(self) -> str:
        return f"from_async_observable({self._source!r})"


def from_async_observable(
    source: AsyncObservable[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> Publisher[T]:
    """A Publisher over an aioreactive ``AsyncObservable``, its ``asend`` paced by demand (§1.1).

    Args:
        source: the async observable, subscribed once per Subscriber on ``loop``; it must
            signal its observer on that loop.
        loop: where the source runs and signals are delivered; ``None``: the loop running
            where ``subscribe`` is called (without one: ``on_subscribe``, then ``on_error``).

    A hot source's elements are kept from ``subscribe`` on the loop's thread (from another
    thread: from the loop's next turn). Raises ``TypeError``/``ValueError``.

    Example:
        >>> import aioreactive as rx
        >>> from reactive_streams.adapters.async_iterables import to_async_iterator
        >>> async def numbers():
        ...     for i in range(3):
        ...         yield i
        >>> async def main():
        ...     source = rx.from_async_iterable(numbers())
        ...     return [x async for x in to_async_iterator(from_async_observable(source))]
        >>> asyncio.run(main())
        [0, 1, 2]
    """
    return AsyncObservablePublisher(source, loop)


# -- to_async_observable --------------------------------------------------------------------


@final
class _Disposal:
    """Set once the subscription is disposed: the observer then hears nothing more."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


async def _pump(
    iterator: AsyncPublisherIterator[T], observer: AsyncObserver[T], disposal: _Disposal
) -> None:
    """Send each element and await its ``asend`` before taking the next one. However the
    task ends (cancelled by dispose or by ``asyncio.run``'s last sweep, too), the
    subscription ends with it (§3.13): a task that died with it open left upstream running
    for as long as the user held the disposable."""
    try:
        failure = await _send_all(iterator, observer)
    except BaseException:
        iterator.subscriber.close()  # cancels upstream (§3.12), never awaits
        raise
    if disposal.done:  # disposed from inside asend (take, first): the iterator ended because
        return  # of it, which is no completion; the observer expects nothing more
    if failure is None:
        await observer.aclose()
    else:
        await observer.athrow(failure)


async def _send_all(
    iterator: AsyncPublisherIterator[T], observer: AsyncObserver[T]
) -> Exception | None:
    """``_pump``'s loop: None at the end of the stream, else the failure to ``athrow``."""
    while True:
        try:
            element = await iterator.__anext__()
        except StopAsyncIteration:
            return None
        except Exception as exc:  # the publisher's on_error
            return exc
        try:
            await observer.asend(element)
        except Exception as exc:  # the observer failed: cancel upstream, tell it (as aioreactive)
            await iterator.aclose()
            return exc
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():  # this task's own cancellation
                raise
            # asend awaited something cancelled that is not this task: it failed
            await iterator.aclose()
            failure = RuntimeError(f"the observer's asend raised {exc!r}")
            failure.__cause__ = exc
            return failure


@final
class PublisherAsyncObservable(AsyncObservable[T], Generic[T]):
    """An aioreactive ``AsyncObservable`` over a Publisher (what ``to_async_observable`` returns).

    Each ``subscribe_async`` subscribes the publisher anew, through a bounded prefetch queue
    (at most ``prefetch`` requested ahead of what was sent, 75% re-requested as elements are
    taken: §1.1 bound), and runs one task on the calling loop that awaits each ``asend``
    before taking the next element. Publisher signals may arrive on any thread. Disposing the
    returned ``AsyncDisposable`` cancels the task and the subscription (§3.12).
    """

    __slots__ = ("_prefetch", "_publisher")

    def __init__(self, publisher: Publisher[T], prefetch: int = 256) -> None:
        require_publisher(publisher, "to_async_observable()")
        AsyncPublisherIterator(publisher, prefetch)  # validates prefetch now
        self._publisher = publisher
        self._prefetch = prefetch

    async def subscribe_async(
        self,
        send: Callable[[T], Awaitable[None]] | AsyncObserver[T] | None = None,
        throw: Callable[[Exception], Awaitable[None]] | None = None,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncDisposable:
        observer: AsyncObserver[T] = (
            send if isinstance(send, AsyncObserver) else AsyncAnonymousObserver(send, throw, close)
        )
        iterator = AsyncPublisherIterator(self._publisher, self._prefetch)
        await iterator.__aenter__()  # subscribes now, on this loop
        disposal = _Disposal()
        task = _spawn(
            asyncio.get_running_loop(),
            lambda: _pump(iterator, observer, disposal),
            "sending to an observer",
        )

        async def dispose() -> None:
            disposal.done = True  # owned: the loop (a one-way flag)
            if task is not asyncio.current_task():  # from inside the observer's own asend or
                task.cancel()  # aclose, the pump ends by itself: let the observer's code finish
            await iterator.aclose()

        return _ScannableDisposable(dispose, iterator)


@final
class _ScannableDisposable(AsyncDisposable):
    """What ``subscribe_async`` returns: disposing cancels; ``scan()`` reads the window it
    sends from, so ``snapshot(disposable)`` walks from here up to the source."""

    __slots__ = ("_dispose", "_iterator")

    def __init__(
        self, dispose: Callable[[], Awaitable[None]], iterator: AsyncPublisherIterator[Any]
    ) -> None:
        self._dispose = dispose
        self._iterator = iterator

    async def dispose_async(self) -> None:
        await self._dispose()

    def scan(self) -> Scan:
        """The sink's state, as ``to_async_iterator``'s (any thread, no lock)."""
        return replace(self._iterator.scan(), name="to_async_observable")


def to_async_observable(publisher: Publisher[T], *, prefetch: int = 256) -> AsyncObservable[T]:
    """An aioreactive ``AsyncObservable`` over any Publisher, with a bounded window (§1.1).

    Args:
        publisher: any Publisher, signalling on any thread.
        prefetch: the most elements requested ahead of those sent; 75% is re-requested as
            they are taken. Each ``asend`` is awaited before the next element is sent.

    Disposing a subscription cancels the Reactive Streams one (§3.12).

    Example:
        >>> import aioreactive as rx
        >>> from reactive_streams.adapters.iterables import from_iterable
        >>> async def main():
        ...     seen, done = [], asyncio.Event()
        ...     async def asend(x): seen.append(x)
        ...     async def aclose(): done.set()
        ...     observer = rx.AsyncAnonymousObserver(asend, None, aclose)
        ...     await to_async_observable(from_iterable("ab")).subscribe_async(observer)
        ...     await done.wait()
        ...     return seen
        >>> asyncio.run(main())
        ['a', 'b']
    """
    return PublisherAsyncObservable(publisher, prefetch)
