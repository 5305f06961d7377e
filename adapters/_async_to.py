"""``to_async_iterator``: ``async for`` over any Publisher, at most ``prefetch`` ahead.

The Publisher signals a bounded prefetch queue from any thread; the consumer's loop is woken
through a loop-side future (``call_soon_threadsafe`` from elsewhere). Dropping the iterator,
``aclose()``, leaving ``async with``, cancelling the consuming task or a ``timeout`` cancel the
subscription.
How the hand-off is shaped and what it costs: docs/adapters.md.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from itertools import repeat
from operator import length_hint
from types import AsyncGeneratorType, TracebackType
from typing import Final, Generic, TypeVar, final

from reactive_streams._drain import EMPTY, END, _Marker
from reactive_streams._loop import BATCH, on_loop
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._scan import Scan
from reactive_streams._subscription import report_dropped, require_publisher, require_timeout
from reactive_streams.api import Publisher

__all__ = ["AsyncPublisherIterator", "to_async_iterator"]

T = TypeVar("T")


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
            direct = on_loop(self._loop)  # on the loop, in a task or a callback
            if direct:
                self._waiter = None  # under _lock
            elif self._scheduled:
                return  # a _fire is on its way and takes whatever waiter is current
            else:
                self._scheduled = True  # under _lock
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
            waiter, self._waiter = self._waiter, None  # under _lock
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
    subscription that is still open (§3.13). Owned by the consumer's loop (or by the thread
    that drops the last reference, when nothing else can reach it)."""

    __slots__ = ("loop", "origin", "phase", "publisher", "queue", "rest", "round", "signal")

    def __init__(self, publisher: Publisher[T], prefetch: int) -> None:
        self.queue: PrefetchQueue[T] = PrefetchQueue(prefetch)  # validates prefetch
        self.publisher: Publisher[T] | None = publisher
        self.origin: Publisher[T] | None = publisher  # for repr alone; close() drops it
        self.loop: asyncio.AbstractEventLoop | None = None
        self.signal: _LoopSignal | None = None
        self.phase = _NEW
        # The round being handed over (per round, for scan): its size and what is left of it.
        self.round = 0
        self.rest: repeat[deque[T]] | None = None

    def pending(self) -> int:
        """Elements of the current round handed over and not yet reported with ``consumed``
        (a snapshot, from any thread)."""
        rest = self.rest
        return 0 if rest is None else max(0, self.round - length_hint(rest))

    def subscribe(self) -> None:
        loop = asyncio.get_running_loop()
        publisher, self.publisher = self.publisher, None  # owned: the consumer's loop
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
        self.phase = _CLOSED  # owned: the consumer's loop (see the class)
        self.publisher = self.origin = None
        self.queue.close()  # cancels upstream (§3.12) and drops the queued elements (§3.13)
        signal = self.signal
        if signal is not None:
            signal.notify()  # wakes the generator waiting for more, which then stops

    def __del__(self) -> None:
        if getattr(self, "phase", _CLOSED) == _OPEN:
            self.queue.close()


_PRIMED: Final = _Marker("PRIMED")
"""What ``_iterate`` yields first, to ``_without_loop_finalizer`` alone."""


async def _iterate(window: _Window[T], timeout: float | None) -> AsyncGenerator[T, None]:
    """The generator behind :class:`AsyncPublisherIterator`: ``async for`` calls its C-level
    ``__anext__`` (an async generator's ``asend``), about 0.06 µs an element cheaper than a
    class's coroutine ``__anext__``.

    Queued elements are handed over a round at a time (at most ``until_replenish``, so the
    next request goes out when it is due), popped by a C iterator; their consumption is
    reported when the round has been handed over, so the elements in the generator's hands
    still count as requested ahead (§1.1 bound). A ``timeout`` counts from the first empty
    poll of each ``__anext__``: asyncio's own, on the loop-side future, which carries no
    element, so an element that lands as it fires is found by the poll after it."""
    yield _PRIMED  # type: ignore[misc]  # taken by _without_loop_finalizer, never iterated
    try:
        if window.phase == _NEW:
            window.subscribe()
        queue = window.queue
        items = queue.queue
        popleft = deque.popleft
        ran = 0  # handed over since this task last suspended
        deadline: float | None = None  # of the __anext__ waiting now, once it has to wait
        expired = False  # that deadline's timeout fired
        while True:
            n = len(items)
            if n:  # the fast path: what is queued, without a Python call per element
                every = queue.until_replenish
                if n > every:
                    n = every
                window.round = n  # owned: the loop; per round, for scan (see pending)
                rest = window.rest = repeat(items, n)
                for value in map(popleft, rest):  # never ==, unlike iter()
                    yield value
                deadline = None
                window.rest = None  # before consumed(n), which may run a synchronous upstream
                queue.consumed(n)  # replenishes at the limit: at most prefetch ahead
                ran += n
                if ran >= BATCH:
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
                deadline = None
                continue
            if timeout is not None:
                if deadline is None:
                    deadline = window.loop.time() + timeout
                elif expired or window.loop.time() >= deadline:  # nothing queued (just
                    # polled) and the stream not over
                    window.close()  # §3.12: cancels upstream (a generator is closed)
                    raise TimeoutError(
                        f"to_async_iterator(): no element or end within timeout={timeout} s; "
                        "upstream cancelled"
                    )
            queue.want(1)  # ran dry: the upstream may refill the whole window now
            waiter = signal.arm()
            if waiter is not None:  # else a signal arrived since clear(): look again
                ran = 0
                if deadline is None:
                    await waiter
                else:
                    try:
                        async with asyncio.timeout_at(deadline):
                            await waiter
                    except TimeoutError:  # poll again: an element that came as it fired
                        expired = True  # is handed over, never dropped
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

    With a ``timeout``, an ``__anext__`` that finds nothing queued and waits that long for an
    element or the end cancels upstream (§3.12) and raises ``TimeoutError``; the iterator is
    then closed (later ``__anext__`` calls raise ``StopAsyncIteration``). Queued elements are
    always handed over first.
    """

    __slots__ = ("__weakref__", "_agen", "_window")

    def __init__(
        self, publisher: Publisher[T], prefetch: int = 256, timeout: float | None = None
    ) -> None:
        require_publisher(publisher, "to_async_iterator()")
        seconds = require_timeout(timeout, "to_async_iterator()")
        self._window: _Window[T] = _Window(publisher, prefetch)
        self._agen = _without_loop_finalizer(_iterate(self._window, seconds))

    def scan(self) -> Scan:
        """This sink's state for :func:`~reactive_streams.snapshot` (any thread, no lock);
        ``subscribed`` is False until the first ``__anext__`` (or ``async with``)."""
        window = self._window
        return window.queue.scan_sink("to_async_iterator", window.pending())

    @property
    def subscriber(self) -> PrefetchQueue[T]:
        """The Subscriber this iterator subscribes with (its bounded prefetch queue)."""
        return self._window.queue

    def __repr__(self) -> str:
        """What ``__anext__`` waits for, as ``BlockingIterator``'s repr says (a snapshot)."""
        window = self._window
        if window.phase == _CLOSED:
            return "<AsyncPublisherIterator closed>"
        state = "not subscribed yet (on the first __anext__)"
        if window.phase == _OPEN:
            state = window.queue.describe()
        return f"<AsyncPublisherIterator {state}, from {window.origin!r}>"

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


def to_async_iterator(
    publisher: Publisher[T], *, prefetch: int = 256, timeout: float | None = None
) -> AsyncPublisherIterator[T]:
    """Iterate ``publisher`` with ``async for``, at most ``prefetch`` elements in flight (§1.1).

    Args:
        publisher: any Publisher, signalling on any thread.
        prefetch: the most elements requested ahead of consumption; 75% of it is re-requested
            each time that many were consumed. Not a positive int: ``ValueError``.
        timeout: seconds each ``__anext__`` may wait for an element or the end, counted from
            when it starts to wait (per element, like Reactor's ``timeout()``); then upstream
            is cancelled (§3.12) and ``TimeoutError`` raised. ``None``: no limit. Not a finite
            number > 0: ``TypeError`` or ``ValueError``. The loop is never blocked.

    The iterator subscribes on the first ``__anext__`` or on ``async with``, on the running
    loop; ``break``, ``aclose()``, leaving ``async with`` or cancelling the task cancel the
    subscription (§3.12).

    Example:
        >>> from reactive_streams.adapters.iterables import from_iterable
        >>> async def main():
        ...     async with to_async_iterator(from_iterable("abc"), prefetch=2) as letters:
        ...         return [x async for x in letters]
        >>> asyncio.run(main())
        ['a', 'b', 'c']
    """
    return AsyncPublisherIterator(publisher, prefetch, timeout)
