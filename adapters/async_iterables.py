"""Async iterables and Reactive Streams, both directions.

- ``from_async_iterable``: a pull source. One unit of demand allows one ``__anext__`` (never more
  than one in flight), so an async generator runs only as far as demand reaches; what it
  fetched waits (never more than the demand) until the pump yields to the loop.
- ``to_async_iterator``: ``async for`` over any Publisher; at most ``prefetch`` elements are
  requested ahead of consumption, ``limit`` (75%) re-requested as they are consumed.
- Signals of ``from_async_iterable`` arrive on its event loop (``on_subscribe`` on the thread
  that subscribes); ``request``/``cancel`` may come from any thread. ``to_async_iterator``
  accepts signals from any thread and hands them to its loop with ``call_soon_threadsafe``.
- Cancel ``aclose()``s the async generator on its loop (cancelling an in-flight ``__anext__``
  first), so its ``finally`` runs; ``break`` (dropping the iterator), ``aclose()``, leaving
  ``async with`` or cancelling the consuming task cancel ``to_async_iterator``'s subscription.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
)
from itertools import repeat
from types import AsyncGeneratorType, TracebackType
from typing import Any, Final, Generic, TypeVar, final

from reactive_streams._drain import EMPTY, END, DrainSubscription, OnLoop, Source, _Marker
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._subscription import (
    OneShot,
    not_an_exception,
    reject,
    report_dropped,
    require_publisher,
    require_subscriber,
)
from reactive_streams.api import Publisher, Subscriber

__all__ = [
    "AsyncIterablePublisher",
    "AsyncPublisherIterator",
    "from_async_iterable",
    "to_async_iterator",
]

T = TypeVar("T")

_NOTHING: Final = _Marker("NOTHING")
_BURST: Final = 1024
"""The most elements one pump task fetches (the drain's batch size), and about the most
``to_async_iterator`` hands over without suspending: a source, or a consumer, that never
suspends by itself still lets the loop's other tasks run this often."""

_TASKS: Final[set[asyncio.Task[Any]]] = set()
"""Strong references to the shutdown tasks this module starts (the loop holds tasks weakly)."""


def _start_task(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, None],
    context: contextvars.Context | None = None,
) -> asyncio.Task[None]:
    """A task for ``coro`` on ``loop``, kept in ``_TASKS`` until done (the loop holds tasks
    only weakly). Its first step runs at a later loop turn whatever the loop's task factory:
    ``asyncio.Task``, not ``loop.create_task``, which under ``asyncio.eager_task_factory``
    (3.12+) runs that step inside the call. A pump started from inside the drain would then
    fetch and deliver reentrantly, finish before it is recorded as running (the stream
    stalled with demand left), and enter the subscription's context a second time (a
    RuntimeError that wedged the loop). Shared with ``reactive_streams.adapters.aioreactive``."""
    task = asyncio.Task(coro, loop=loop, context=context)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    return task


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    return asyncio._get_running_loop() is loop


def _check_loop(loop: object) -> None:
    """A ``loop=`` argument, checked at the call: an event loop, not closed (a closed loop
    can never run the stream; one closed later fails it at subscribe). Shared with
    ``reactive_streams.adapters.aioreactive``."""
    if loop is None:
        return
    if not isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(f"loop must be an asyncio event loop, got {type(loop).__name__}")
    if loop.is_closed():
        raise ValueError(f"loop is closed: {loop!r} can never run the stream")


def _resolve_loop(
    loop: asyncio.AbstractEventLoop | None, who: str
) -> asyncio.AbstractEventLoop | Exception:
    """The loop a loop-bound publisher runs on at subscribe time, or the error to reject with.

    ``loop`` if given, else the loop running on the subscribing thread; shared with
    ``reactive_streams.adapters.aioreactive``.
    """
    if loop is None:
        loop = asyncio._get_running_loop()
        if loop is None:
            return RuntimeError(
                f"{who}: no event loop to run on: pass loop=..., or subscribe from a coroutine "
                "running on the loop"
            )
    if loop.is_closed():
        return RuntimeError(f"{who}: the event loop {loop!r} is closed")
    return loop


# -- from_async_iterable -------------------------------------------------------------------


LoopPolicy = OnLoop
"""The drain policy of loop-bound publishers (kept as a name; it is the core's OnLoop)."""


@final
class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_RECHECK: Final = 0.05
"""How often (seconds) ``_shutdown`` looks whether a cancel it left to another party was
withdrawn meanwhile (see ``_AsyncIteratorSource._stop``)."""


async def _shutdown(
    pump: asyncio.Task[Any] | None, aclose: Callable[[], Awaitable[Any]] | None
) -> None:
    """Wait for the cancelled pump to unwind, then ``aclose()`` the iterator (§3.13), even
    when this task is cancelled meanwhile (the loop shutting down: the iterator's
    ``finally`` blocks must still run; a CancelledError of this task propagates after).

    A pump another party was already cancelling when we closed was left to unwind (see
    ``_stop``); if that cancel is withdrawn (an ``asyncio.timeout`` inside the source
    catches its own), it is cancelled here after all."""
    try:
        if pump is not None and not pump.done():
            while not (await asyncio.wait((pump,), timeout=_RECHECK))[0]:
                if not pump.cancelling():
                    pump.cancel()
    finally:
        if pump is not None and not pump.done():
            await asyncio.wait((pump,))  # cancelled while waiting: it still unwinds first
        if aclose is not None:
            try:
                await aclose()
            except Exception as exc:
                report_dropped(exc, where="aclose() of an async iterator after cancel")


def _run_clean_up(
    loop: asyncio.AbstractEventLoop,
    work: Callable[[], Coroutine[Any, Any, None]],
    context: contextvars.Context | None = None,
) -> None:
    """Run the clean-up ``work()`` in a task of its own, kept until done. asyncio.run's task
    sweep may cancel that task before its first step (a cancel on the loop's last turn):
    ``work()`` is then started once more, in a task made after the sweep (which cancels each
    task once). That task gets only the loop turns asyncio.run's remaining shutdown steps
    run (a few): a clean-up that awaits longer is destroyed pending when the loop closes."""
    started = False

    async def run() -> None:
        nonlocal started
        started = True
        await work()

    def ended(task: asyncio.Task[None]) -> None:
        if task.cancelled() and not started:
            _start_task(loop, work(), context)

    _start_task(loop, run(), context).add_done_callback(ended)


@final
class _AsyncIteratorSource(Source[T]):
    """A pump task that awaits ``__anext__`` only for unmet demand; ``close()`` acloses.

    A fused queue source: the pump appends what it fetched to ``queue`` and the drain pops
    it. When the queue runs dry with demand unmet, the drain calls ``want(n)``: the pump may
    fetch ``n`` more (less the one ``__anext__`` in flight, and at most ``_BURST`` per task,
    so a source that never suspends lets the loop run), starting a pump task if none runs.
    So at most one ``__anext__`` is in flight and none runs ahead of demand (§1.1, §3.10).
    The pump wakes the drain with ``call_soon`` once per burst, not per element: an
    iterator that never suspends is fetched a whole burst before it is delivered, one that
    awaits I/O has each element delivered at the next loop iteration. The pump ends when
    its budget runs out, so an abandoned idle subscription leaves no pending task behind;
    while it runs, ``_TASKS`` holds it. Every ``__anext__`` runs in the subscription's one
    ``contextvars`` context. Every method but ``close`` runs on the loop; ``close`` runs
    elsewhere only once the loop is closed.
    """

    __slots__ = (
        "_budget",
        "_context",
        "_exhausted",
        "_iterator",
        "_loop",
        "_outcome",
        "_pump",
        "_wake",
        "_waking",
        "_idle",
        "queue",
    )

    def __init__(
        self,
        iterator: AsyncIterator[T],
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
    ) -> None:
        self._iterator: AsyncIterator[T] | None = iterator
        self._loop = loop
        self._context = context
        self.queue: deque[T] = deque()
        self._pump: asyncio.Task[None] | None = None
        self._budget = 0  # how many more __anext__ calls demand allows
        self._idle = False  # a pump exists but has no __anext__ in flight
        self._outcome: _Marker | _Failure = _NOTHING  # END or the failure, once over
        self._exhausted = False
        self._wake: Callable[[], None] | None = None
        self._waking: asyncio.Handle | None = None  # the burst's wake, once scheduled

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def want(self, n: int) -> None:
        # The queue is empty, so everything fetched was delivered: only an __anext__ in
        # flight counts against the unmet demand. This runs on the loop, so a pump that
        # exists is suspended: at its __anext__, unless idle (not started yet).
        in_flight = self._pump is not None and not self._idle
        budget = n - 1 if in_flight else n
        if budget > _BURST:  # a pump that never suspends ends after a burst: the loop
            budget = _BURST  # runs, and the next want() starts the next pump
        self._budget = budget
        if budget > 0 and self._pump is None and self._outcome is _NOTHING:
            if self._iterator is not None:
                self._idle = True  # until the task starts
                self._pump = pump = _start_task(self._loop, self._pump_budget(), self._context)
                pump.add_done_callback(self._pump_ended)

    def poll(self) -> T | _Marker:
        if self.queue:
            return self.queue.popleft()
        outcome = self._outcome
        if isinstance(outcome, _Failure):
            raise outcome.error  # §1.4, after every fetched element
        return outcome if outcome is END else EMPTY

    def at_end(self) -> bool:
        return self._outcome is not _NOTHING and not self.queue

    def _pump_ended(self, pump: asyncio.Task[None]) -> None:
        """A pump task is done, maybe without running at all: cancelled before its first
        step (the end of ``asyncio.run`` right after a request), or from outside during an
        ``__anext__``, or ended by a BaseException of the source's. The stream cannot go on,
        and the subscriber must hear it (§1.4), not wait forever."""
        if self._pump is pump:
            self._pump = None
        if pump.cancelled():
            error: BaseException | None = RuntimeError(
                "from_async_iterable(): the pump task was cancelled from outside (its event "
                "loop shutting down?); the stream cannot go on"
            )
        else:
            error = pump.exception()  # retrieved: never logged as such by asyncio
        if error is None or self._iterator is None or self._outcome is not _NOTHING:
            return  # the budget was spent, or the stream is over (closed, ended, failed)
        if not isinstance(error, Exception):  # a BaseException of the source's own
            error = not_an_exception(error, "from_async_iterable(): the async iterator raised")
        self._finish(_Failure(error))

    async def _pump_budget(self) -> None:
        iterator = self._iterator
        if iterator is None or self._budget <= 0:  # closed, or no demand any more
            return
        append = self.queue.append
        self._idle = False
        try:
            # ``async for`` is the cheapest way to await __anext__; it is left (never
            # closing the iterator) as soon as the budget is spent, so no __anext__ runs
            # ahead of demand. If close() runs meanwhile it cancels this task: the await
            # raises CancelledError instead of returning, and the element is dropped.
            async for value in iterator:
                if value is None:  # §2.13: None is never an element
                    self._finish(_Failure(TypeError("§2.13: the async iterator produced None")))
                    return
                append(value)
                self._budget -= 1  # before any await: want() computes from it
                if self._waking is None:  # once per burst: the drain takes all that came
                    self._waking = self._loop.call_soon(self._wake_drain)
                if self._budget <= 0:  # the burst ends here: deliver it now, not one
                    self._pump = None  # loop iteration later (a want() it causes starts
                    self._wake_now()  # a fresh pump, which runs after the loop's turn)
                    return
        except Exception as exc:  # §1.4: a failing source becomes on_error
            self._finish(_Failure(exc))
            return
        except asyncio.CancelledError as exc:
            if self._iterator is None:
                raise  # close() cancelled this pump
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # cancelled from outside (the loop shutting down): see _pump_ended
            # The source itself raised it (it awaited something someone else cancelled):
            # a failure like any other (§1.4), not a silent end of the pump.
            error = RuntimeError(
                "§1.4: the async iterator raised CancelledError while its subscription was "
                "not cancelled (it awaited a task or future that was cancelled)"
            )
            error.__cause__ = exc
            self._finish(_Failure(error))
            return
        self._exhausted = True  # ran to its end: nothing for aclose() to release
        self._finish(END)

    def _wake_drain(self) -> None:
        self._waking = None
        wake = self._wake
        if wake is not None:
            wake()  # on the loop: the drain emits right here (OnLoop)

    def _wake_now(self) -> None:
        waking = self._waking
        if waking is not None:
            waking.cancel()
            self._wake_drain()

    def _finish(self, outcome: _Marker | _Failure) -> None:
        if self._iterator is None:
            return
        self._outcome = outcome
        self._wake_drain()  # elements fetched before it are still delivered first

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None
        pump, self._pump = self._pump, None
        self.queue.clear()  # §3.13
        self._wake = None
        if iterator is None or self._exhausted:
            return
        aclose = getattr(iterator, "aclose", None)
        if pump is None and aclose is None:
            return
        loop = self._loop
        if _on_loop(loop):
            self._stop(pump, aclose)
            return
        try:
            loop.call_soon_threadsafe(self._stop, pump, aclose)
        except RuntimeError:  # the loop is closed: nothing can run on it any more
            pass

    def _stop(
        self,
        pump: asyncio.Task[Any] | None,
        aclose: Callable[[], Awaitable[Any]] | None,
    ) -> None:
        if pump is not None and pump is not asyncio.current_task() and not pump.cancelling():
            pump.cancel()  # throws CancelledError into an __anext__ in flight, at its await;
            # not when another party is cancelling it (the loop's shutdown): a second cancel
            # would cut short the iterator's finally, unwinding (_shutdown sees to the rest)
        _run_clean_up(self._loop, lambda: _shutdown(pump, aclose), self._context)


@final
class _SelfIterating(Generic[T]):
    """An async iterator without ``__aiter__`` (``aiter()`` and ``async for`` accept one: an
    iterable's ``__aiter__`` need only return something with ``__anext__``), given the
    ``__aiter__`` the pump's own ``async for`` needs; every other attribute (``aclose``) is
    the iterator's."""

    __slots__ = ("_iterator",)

    def __init__(self, iterator: Any) -> None:
        self._iterator = iterator

    def __aiter__(self) -> _SelfIterating[T]:
        return self

    def __anext__(self) -> Awaitable[T]:
        return self._iterator.__anext__()  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._iterator, name)


@final
class AsyncIterablePublisher(Generic[T]):
    """A cold Publisher over an async iterable, on an asyncio event loop.

    ``__anext__`` is awaited on the loop, by one pump task per subscription, one call at a
    time and only for demand the subscriber signalled (§1.1, §3.10); ``on_next``/``on_error``/
    ``on_complete`` are delivered on the loop by the drain loop, whatever thread requests
    (§1.3). ``aiter()`` is called at subscribe time, on the subscribing thread. An async
    iterator or generator (``__aiter__`` returns itself) serves one Subscriber; a second one
    is rejected (§1.9). A raising iterator becomes ``on_error`` after the elements already
    delivered (§1.4). Cancel (§3.12, §3.13) cancels an in-flight ``__anext__`` and then
    ``aclose()``s the iterator on the loop.
    """

    __slots__ = ("__weakref__", "_aiterable", "_loop", "_one_shot")

    def __init__(
        self, aiterable: AsyncIterable[T], loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        if not isinstance(aiterable, AsyncIterable):
            raise TypeError(
                "from_async_iterable() requires an async iterable (an object with __aiter__), "
                f"got {type(aiterable).__name__}"
            )
        _check_loop(loop)
        self._aiterable = aiterable
        self._loop = loop
        self._one_shot = (
            OneShot("async iterator or generator") if isinstance(aiterable, AsyncIterator) else None
        )

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        loop = _resolve_loop(self._loop, "from_async_iterable()")
        if isinstance(loop, Exception):
            reject(subscriber, loop)
            return
        if self._one_shot is not None:
            used = self._one_shot.take()
            if used is not None:
                reject(subscriber, used)
                return
        try:
            iterator = aiter(self._aiterable)
        except Exception as exc:  # §1.4
            reject(subscriber, exc)
            return
        if not hasattr(type(iterator), "__aiter__"):  # aiter() asks only for __anext__
            iterator = _SelfIterating(iterator)
        source = _AsyncIteratorSource(iterator, loop, contextvars.copy_context())
        DrainSubscription(subscriber, source, LoopPolicy(loop)).start()

    def __repr__(self) -> str:
        return f"from_async_iterable({self._aiterable!r})"


def from_async_iterable(
    aiterable: AsyncIterable[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> Publisher[T]:
    """A cold Publisher over ``aiterable``, awaited only as far as demand reaches.

    Args:
        aiterable: an async iterable; an async generator is ``aclose()``d on cancel, so its
            ``finally`` blocks run. A one-shot async iterator serves one Subscriber.
        loop: the event loop ``__anext__`` runs on and signals are delivered on. ``None`` (the
            default): the loop running on the thread that subscribes; a Subscriber that
            subscribes from a thread without one gets ``on_subscribe`` then ``on_error``.

    Returns:
        A Publisher; ``request``/``cancel`` may be called from any thread, never block, and
        never run the iterator on the calling thread.

    Raises:
        TypeError: ``aiterable`` is not an async iterable, or ``loop`` not an event loop.
        ValueError: ``loop`` is closed.

    Example:
        >>> async def numbers():
        ...     for i in range(3):
        ...         yield i
        >>> async def main():
        ...     return [x async for x in to_async_iterator(from_async_iterable(numbers()))]
        >>> asyncio.run(main())
        [0, 1, 2]
    """
    return AsyncIterablePublisher(aiterable, loop)


# -- to_async_iterator ----------------------------------------------------------------------


@final
class _LoopSignal:
    """Wakes the one coroutine waiting on a loop-side future, from any thread.

    ``notify`` from the running loop itself resolves the future directly; from anywhere else it
    goes through one ``call_soon_threadsafe`` at a time. A notify between ``clear`` and ``arm``
    makes ``arm`` return None, so no signal is lost.
    """

    __slots__ = ("_lock", "_loop", "_on_dead", "_scheduled", "_signalled", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_dead: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._loop = loop
        self._on_dead = on_dead
        self._waiter: asyncio.Future[None] | None = None
        self._signalled = False
        self._scheduled = False

    def clear(self) -> None:
        """Forget earlier signals: the consumer is about to look at the queue."""
        with self._lock:
            self._signalled = False

    def arm(self) -> asyncio.Future[None] | None:
        """A future resolved by the next ``notify``; None if one came since ``clear``."""
        waiter = self._loop.create_future()
        with self._lock:
            if self._signalled:
                return None
            self._waiter = waiter
        return waiter

    def notify(self) -> None:
        with self._lock:
            self._signalled = True
            waiter = self._waiter
            if waiter is None:
                return
            direct = asyncio._get_running_loop() is self._loop  # on the loop, in a callback
            if direct:
                self._waiter = None
            elif self._scheduled:
                return  # a _fire is on its way and takes whatever waiter is current
            else:
                self._scheduled = True
        if direct:
            if not waiter.done():
                waiter.set_result(None)
            return
        try:
            self._loop.call_soon_threadsafe(self._fire)
        except RuntimeError as exc:  # the consumer's loop is closed: nobody will consume
            report_dropped(exc, where="to_async_iterator: its event loop is closed; cancelled")
            self._on_dead()

    def _fire(self) -> None:
        with self._lock:
            waiter, self._waiter = self._waiter, None
            self._scheduled = False
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


_NEW: Final = 0
_OPEN: Final = 1
_CLOSED: Final = 2


@final
class _Window(Generic[T]):
    """The state an :class:`AsyncPublisherIterator` and its generator share: the prefetch
    queue, the loop, the signal and the phase. Neither refers back to the iterator, so
    dropping the iterator (and its generator) frees this at once: ``__del__`` cancels a
    subscription that is still open (§3.13)."""

    __slots__ = ("loop", "phase", "publisher", "queue", "signal")

    def __init__(self, publisher: Publisher[T], prefetch: int) -> None:
        self.queue: PrefetchQueue[T] = PrefetchQueue(prefetch)  # validates prefetch
        self.publisher: Publisher[T] | None = publisher
        self.loop: asyncio.AbstractEventLoop | None = None
        self.signal: _LoopSignal | None = None
        self.phase = _NEW

    def subscribe(self) -> None:
        loop = asyncio.get_running_loop()
        publisher, self.publisher = self.publisher, None
        queue = self.queue
        self.loop = loop
        # The signal holds the queue, not this window: dropping the iterator frees it at once.
        signal = _LoopSignal(loop, queue.close)
        self.signal = signal
        queue.bind(signal.notify)
        self.phase = _OPEN
        assert publisher is not None
        try:
            publisher.subscribe(queue)
        except Exception as exc:  # a broken publisher: its error surfaces at the async for
            queue.fail_upstream(exc)

    def close(self) -> None:
        if self.phase == _CLOSED:
            return
        self.phase = _CLOSED
        self.publisher = None
        self.queue.close()  # cancels upstream (§3.12) and drops the queued elements (§3.13)
        signal = self.signal
        if signal is not None:
            signal.notify()  # wakes the generator waiting for more, which then stops

    def __del__(self) -> None:
        if getattr(self, "phase", _CLOSED) == _OPEN:
            self.queue.close()


_PRIMED: Final = _Marker("PRIMED")
"""What ``_iterate`` yields first, to ``_without_loop_finalizer`` alone."""


async def _iterate(window: _Window[T]) -> AsyncGenerator[T, None]:
    """The generator behind :class:`AsyncPublisherIterator`: ``async for`` calls its C-level
    ``__anext__`` (an async generator's ``asend``), about 0.06 µs an element cheaper than a
    class's coroutine ``__anext__``.

    Queued elements are handed over a round at a time (at most ``until_replenish``, so the
    next request goes out when it is due), popped by a C iterator; their consumption is
    reported when the round has been handed over, so the elements in the generator's hands
    still count as requested ahead (§1.1 bound)."""
    yield _PRIMED  # type: ignore[misc]  # taken by _without_loop_finalizer, never iterated
    try:
        if window.phase == _NEW:
            window.subscribe()
        queue = window.queue
        items = queue.queue
        popleft = deque.popleft
        ran = 0  # handed over since this task last suspended
        while True:
            n = len(items)
            if n:  # the fast path: what is queued, without a Python call per element
                every = queue.until_replenish
                if n > every:
                    n = every
                for value in map(popleft, repeat(items, n)):  # never ==, unlike iter()
                    yield value
                queue.consumed(n)  # replenishes at the limit: at most prefetch ahead
                ran += n
                if ran >= _BURST:
                    # A synchronous publisher refills the queue inside consumed(), so this
                    # task would never suspend and would starve the loop's other tasks.
                    ran = 0
                    await asyncio.sleep(0)
                    if window.phase == _CLOSED:  # see below
                        return
                continue
            if window.phase == _CLOSED:  # aclose() from another coroutine, or a dead loop
                return
            if asyncio.get_running_loop() is not window.loop:
                raise RuntimeError("to_async_iterator(): iterated on another event loop")
            signal = window.signal
            assert signal is not None
            signal.clear()
            polled = queue.poll()  # raises the publisher's error, at the async for
            if polled is END:
                return
            if polled is not EMPTY:
                yield polled  # type: ignore[misc]
                continue
            queue.want(1)  # ran dry: the upstream may refill the whole window now
            waiter = signal.arm()
            if waiter is not None:  # else a signal arrived since clear(): look again
                ran = 0
                await waiter
                if window.phase == _CLOSED:  # aclose() from another task meanwhile: an
                    return  # element appended after its clear (a producer that was past
                    # the queue's closed check) is never handed over (§3.12)
    finally:  # the end, an error, aclose(), CancelledError, or the generator dropped
        window.close()  # cancels the subscription (§3.12), never awaits


def _without_loop_finalizer(agen: AsyncGenerator[T, None]) -> AsyncGeneratorType[T, None]:
    """``agen``, its asyncgen hooks set to none (PEP 525: they are taken when it is first
    iterated, here), so that dropping it closes it at once, as a class-based iterator's
    ``__del__`` would: ``break`` cancels the subscription right there. The event loop's
    finalizer would defer that to a task of its own, two loop iterations later.

    The first iteration runs to the generator's priming ``yield`` (before any of its work),
    and is awaited to its end right here: an ``asend`` dropped unawaited would warn on
    Python 3.13, and closing one there closes the generator."""
    assert isinstance(agen, AsyncGeneratorType)
    hooks = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(firstiter=None, finalizer=None)
    try:
        agen.asend(None).send(None)
    except StopIteration as primed:  # the asend is over: it yielded the priming marker
        assert primed.value is _PRIMED
    finally:
        sys.set_asyncgen_hooks(*hooks)
    return agen


@final
class AsyncPublisherIterator(Generic[T]):
    """The async iterator ``to_async_iterator`` returns; also an async context manager.

    Subscribes on the first ``__anext__`` (or ``async with``), capturing the running loop.
    Upstream signals may come from any thread (§1.3 is the publisher's duty); the queue keeps
    at most ``prefetch`` elements requested ahead of consumption (§1.1 bound; an overflowing
    publisher is cancelled and its §1.1 error raised here). The publisher's error is raised
    at the ``async for``; cancellation of the consuming task, ``aclose()``, ``async with``
    exit, and dropping the iterator (``break``) cancel the subscription (§3.12, §3.13). It
    never blocks the loop: waiting is ``await`` on a future resolved from the signalling
    thread via ``call_soon_threadsafe``. ``async for`` runs its generator directly.
    """

    __slots__ = ("__weakref__", "_agen", "_window")

    def __init__(self, publisher: Publisher[T], prefetch: int = 256) -> None:
        require_publisher(publisher, "to_async_iterator()")
        self._window: _Window[T] = _Window(publisher, prefetch)
        self._agen = _without_loop_finalizer(_iterate(self._window))

    @property
    def subscriber(self) -> PrefetchQueue[T]:
        """The Subscriber this iterator subscribes with (its bounded prefetch queue)."""
        return self._window.queue

    def __aiter__(self) -> AsyncIterator[T]:
        return self._agen

    def __anext__(self) -> Awaitable[T]:
        return self._agen.__anext__()

    async def aclose(self) -> None:
        """Cancel the subscription; later ``__anext__`` calls raise ``StopAsyncIteration``."""
        self._window.close()  # wakes a generator waiting in another task: it then stops
        if not self._agen.ag_running:  # suspended at an element (or done): close it here
            await self._agen.aclose()

    async def __aenter__(self) -> AsyncPublisherIterator[T]:
        if self._window.phase == _NEW:
            self._window.subscribe()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def to_async_iterator(publisher: Publisher[T], *, prefetch: int = 256) -> AsyncPublisherIterator[T]:
    """Iterate ``publisher`` with ``async for``, at most ``prefetch`` elements in flight.

    Args:
        publisher: any Publisher, signalling on any thread.
        prefetch: the most elements requested ahead of consumption; 75% of it is re-requested
            each time that many were consumed.

    Returns:
        An :class:`AsyncPublisherIterator`. It subscribes on the first ``__anext__`` or on
        ``async with``; ``break``, ``aclose()``, leaving ``async with`` or cancelling the task
        cancel the subscription.

    Raises:
        ValueError: ``prefetch`` is not a positive int.

    Example:
        >>> from reactive_streams.adapters.iterables import from_iterable
        >>> async def main():
        ...     async with to_async_iterator(from_iterable("abc"), prefetch=2) as letters:
        ...         return [x async for x in letters]
        >>> asyncio.run(main())
        ['a', 'b', 'c']
    """
    return AsyncPublisherIterator(publisher, prefetch)
