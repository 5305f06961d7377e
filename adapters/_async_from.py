"""``from_async_iterable``: an async iterable as a cold Publisher, pulled as far as demand.

A pump task on the loop awaits ``__anext__`` only for unmet demand and fills a queue the drain
(``OnLoop``) pops; cancel cancels the ``__anext__`` in flight, then ``aclose()``s the iterator
on its loop. How the pump and its shutdown are shaped: docs/adapters.md, "Running on the event
loop".
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, Final, Generic, TypeVar, final

from reactive_streams._drain import EMPTY, END, DrainSubscription, OnLoop, Source, _Marker
from reactive_streams._loop import (
    BATCH,
    call_on_loop,
    check_loop,
    resolve_loop,
    run_clean_up,
    start_task,
)
from reactive_streams._subscription import (
    OneShot,
    not_an_exception,
    reject,
    report_dropped,
    require_subscriber,
)
from reactive_streams.api import Publisher, Subscriber

__all__ = ["AsyncIterablePublisher", "from_async_iterable"]

T = TypeVar("T")

_NOTHING: Final = _Marker("NOTHING")

_RECHECK: Final = 0.05
"""How often (seconds) ``_shutdown`` looks whether a cancel it left to another party was
withdrawn meanwhile (see ``_AsyncIteratorSource._stop``)."""


@final
class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


async def _shutdown(
    pump: asyncio.Task[Any] | None, aclose: Callable[[], Awaitable[Any]] | None
) -> None:
    """Wait for the cancelled pump to unwind, then ``aclose()`` the iterator (§3.13), even
    when this task is cancelled meanwhile (the loop shutting down: the iterator's
    ``finally`` still runs; this task's CancelledError propagates after). A pump left to
    another party's cancel is cancelled here after all if that cancel is withdrawn."""
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


@final
class _AsyncIteratorSource(Source[T]):
    """A fused queue source fed by a pump task that awaits ``__anext__`` only for demand.

    When the queue runs dry with demand unmet, the drain calls ``want(n)``: the pump may
    fetch ``n`` more (less the one in flight, at most ``BATCH`` per task), so at most one
    ``__anext__`` is in flight and none runs ahead of demand (§1.1, §3.10). The pump wakes
    the drain once per burst; it ends when its budget is spent, so an idle subscription
    leaves no task behind. Every ``__anext__`` runs in the subscription's one context.
    Owned by the loop: every method runs there, ``close`` too unless the loop is closed
    (then on the one thread whose drain found it closed).
    """

    __slots__ = (
        "_budget",
        "_context",
        "_exhausted",
        "_idle",
        "_iterator",
        "_loop",
        "_outcome",
        "_pump",
        "_wake",
        "_waking",
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
        if budget > BATCH:  # a pump that never suspends ends after a burst: the loop
            budget = BATCH  # runs, and the next want() starts the next pump
        self._budget = budget  # owned: the loop
        if budget > 0 and self._pump is None and self._outcome is _NOTHING:
            if self._iterator is not None:
                self._idle = True  # until the task starts
                pump = start_task(self._loop, self._pump_budget(), self._context)
                self._pump = pump  # owned: the loop
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

    def in_flight(self) -> int:
        """An ``__anext__`` awaited now: 1, else 0 (a snapshot of loop-owned state)."""
        return 1 if self._pump is not None and not self._idle else 0

    def _pump_ended(self, pump: asyncio.Task[None]) -> None:
        """A pump is done, maybe without running: cancelled before its first step or during
        an ``__anext__`` (the loop shutting down), or ended by a BaseException of the
        source's. The stream cannot go on: the subscriber hears it (§1.4)."""
        if self._pump is pump:
            self._pump = None  # owned: the loop
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
            # closing the iterator) as soon as the budget is spent. close() cancels this
            # task: the await raises CancelledError, and the element is dropped.
            async for value in iterator:
                if value is None:  # §2.13: None is never an element
                    self._finish(_Failure(TypeError("§2.13: the async iterator produced None")))
                    return
                append(value)
                self._budget -= 1  # owned: the loop; before any await (want() reads it)
                if self._waking is None:  # once per burst: the drain takes all that came
                    self._waking = self._loop.call_soon(self._wake_drain)  # owned: the loop
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
        self._outcome = outcome  # owned: the loop
        self._wake_drain()  # elements fetched before it are still delivered first

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None  # owned: the loop (see the class)
        pump, self._pump = self._pump, None  # owned: the loop
        self.queue.clear()  # §3.13
        self._wake = None
        if iterator is None or self._exhausted:
            return
        aclose = getattr(iterator, "aclose", None)
        if pump is None and aclose is None:
            return
        try:
            call_on_loop(self._loop, self._stop, pump, aclose)
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
        run_clean_up(self._loop, lambda: _shutdown(pump, aclose), self._context)


@final
class _SelfIterating(Generic[T]):
    """An async iterator without ``__aiter__`` (``aiter()`` accepts one), given the
    ``__aiter__`` the pump's own ``async for`` needs; every other attribute (``aclose``)
    is the iterator's."""

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
        check_loop(loop)
        self._aiterable = aiterable
        self._loop = loop
        self._one_shot = (
            OneShot("async iterator or generator") if isinstance(aiterable, AsyncIterator) else None
        )

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        loop = resolve_loop(self._loop, "from_async_iterable()")
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
        DrainSubscription(subscriber, source, OnLoop(loop), name="from_async_iterable").start()

    def __repr__(self) -> str:
        return f"from_async_iterable({self._aiterable!r})"


def from_async_iterable(
    aiterable: AsyncIterable[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> Publisher[T]:
    """A cold Publisher over ``aiterable``, awaited only as far as demand reaches (§1.1).

    Args:
        aiterable: an async iterable; an async generator is ``aclose()``d on cancel (its
            ``finally`` runs). A one-shot async iterator serves one Subscriber (§1.9).
        loop: where ``__anext__`` runs and signals are delivered; ``None``: the loop running
            where ``subscribe`` is called (without one: ``on_subscribe``, then ``on_error``).

    ``request``/``cancel`` may come from any thread and never block. Raises ``TypeError``
    (not an async iterable, or ``loop`` no event loop) or ``ValueError`` (``loop`` closed).

    Example:
        >>> from reactive_streams.adapters.async_iterables import to_async_iterator
        >>> async def numbers():
        ...     for i in range(3):
        ...         yield i
        >>> async def main():
        ...     return [x async for x in to_async_iterator(from_async_iterable(numbers()))]
        >>> asyncio.run(main())
        [0, 1, 2]
    """
    return AsyncIterablePublisher(aiterable, loop)
