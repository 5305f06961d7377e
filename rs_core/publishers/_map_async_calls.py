"""The loop side of ``map_async``: its calls of ``fn`` on the event loop, and the queue of
finished results that its subscriber's drain pops (a :class:`Source`).

Elements come in from the upstream's thread (``push``); calls start and finish on the loop's
thread only; the drain pops results on whichever thread runs it. Every count they share is
under one lock, held for O(1) work only (never while calling ``fn`` or a subscriber).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Generic, Protocol, TypeVar, final

from reactive_streams._loop import call_on_loop, delivery_executor, on_loop
from reactive_streams._source import Source, _Marker, poll_queued
from reactive_streams._subscription import not_an_exception

__all__ = ["Calls", "Stage"]

T = TypeVar("T")
R = TypeVar("R")


class Stage(Protocol):
    """**Protocol:** what the calls need of their processor: its upstream side."""

    def want_more(self) -> None: ...
    def delivered(self, n: int) -> None: ...
    def until_due(self) -> int: ...
    def cancel_upstream(self) -> None: ...


@final
class _Slot:
    """An ordered call's place in line: its result once it finished (None before)."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result: Any = None


def _nothing() -> None:
    pass


async def _awaited(awaitable: Awaitable[R]) -> R:
    return await awaitable


@final
class Calls(Source[R], Generic[T, R]):
    """``fn``'s calls, at most ``concurrency`` at once, and their results in a queue.

    An element waits in ``_inputs`` until a call is free; the loop starts its call as a
    task. A finished result goes to ``queue`` at once (unordered), or once every call
    started before it has finished (ordered: it waits, "parked", behind them). ``stop``
    ends it all: no call starts, the calls in flight are cancelled on the loop, what is
    parked or waiting to start is dropped; ``queue`` keeps what was released, and the end
    (``on_error``/``on_complete``) follows it (§1.4, as every queue of the project).
    """

    __slots__ = (
        "_cancelled",
        "_concurrency",
        "_done",
        "_ended",
        "_error",
        "_fn",
        "_inputs",
        "_lock",
        "_loop",
        "_order",
        "_ordered",
        "_parked",
        "_pump_due",
        "_running",
        "_stage",
        "_stopped",
        "_tasks",
        "_wake",
        "queue",
    )

    def __init__(
        self,
        fn: Callable[[T], Awaitable[R]],
        concurrency: int,
        ordered: bool,
        loop: asyncio.AbstractEventLoop,
        stage: Stage,
    ) -> None:
        self._fn = fn
        self._concurrency = concurrency
        self._ordered = ordered
        self._loop = loop
        self._stage = stage
        self._lock = threading.Lock()
        self.queue: deque[R] = deque()  # fused: appended under _lock, popped by the drain
        self._wake: Callable[[], None] = _nothing
        self._tasks: set[asyncio.Task[R]] = set()  # owned: the loop; kept till done
        # Under _lock:
        self._inputs: deque[T] = deque()  # received, waiting for a free call
        self._running = 0  # calls started and not finished: at most concurrency
        self._order: deque[_Slot] = deque()  # ordered: the started calls, in input order
        self._parked = 0  # finished, in _order behind an unfinished call
        self._pump_due = False  # a _pump is scheduled on the loop
        self._ended = False  # the upstream completed
        self._stopped = False  # one-way: failed or cancelled; read lock-free as a hint
        self._cancelled = False  # stopped by the subscriber's cancel, before the end
        self._done = False  # one-way: the end is decided; it follows the queue
        self._error: Exception | None = None  # set before _done

    # -- from the upstream side: any thread ------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self._stopped

    def push(self, element: T) -> None:
        """An element from upstream: its call starts on the loop when one is free."""
        with self._lock:
            if self._stopped:
                return  # §2.8: after a cancel or a failure
            self._inputs.append(element)
            pump = self._running < self._concurrency and not self._pump_due
            if pump:
                self._pump_due = True  # one pump at a time takes every element it can
        if pump:
            self._on_loop(self._pump)

    def upstream_ended(self) -> None:
        """The upstream completed: the stream completes once every call was delivered."""
        with self._lock:
            self._ended = True
            end = self._ending()
        if end:
            self.wake()

    def fail(self, error: Exception) -> None:
        """End with ``error``: the upstream cancelled (§3.13), then as :meth:`stop`."""
        self._stage.cancel_upstream()
        self.stop(error)

    def stop(self, error: Exception | None, *, cancelled: bool = False) -> bool:
        """End now (once; False if ended before): no call starts, the calls in flight are
        cancelled on the loop, and the end follows the results already released."""
        with self._lock:
            if self._stopped:
                return False
            self._stopped = True
            running = self._running
            if not self._done:
                self._cancelled = cancelled
                self._error = error
                self._done = True  # after the error: the drain reads _done first
            self._inputs.clear()
            self._order.clear()
            self._parked = 0
        if running:
            try:
                call_on_loop(self._loop, self._cancel_tasks)
            except RuntimeError:  # a closed loop runs no call any more
                pass
        self.wake()
        return True

    def wake(self) -> None:
        """Wake the drain; called on the loop's thread, the drain runs on the delivery pool
        instead, so the subscriber's ``on_next`` and the upstream pulls it causes (a blocking
        generator, say) never run on the loop and stall its calls."""
        if on_loop(self._loop):
            delivery_executor().submit(self.wake)  # a RuntimeError at shutdown: as a drain's
        else:
            self._wake()

    # -- on the loop's thread --------------------------------------------------------------

    def _on_loop(self, action: Callable[[], None]) -> None:
        try:
            call_on_loop(self._loop, action)
        except RuntimeError as exc:  # closed: no call can run (§1.4: the subscriber hears it)
            error = RuntimeError(f"map_async: its event loop {self._loop!r} is closed")
            error.__cause__ = exc
            self.fail(error)

    def _take(self) -> list[tuple[T, _Slot | None]]:
        """Under _lock: the elements whose calls start now, counted as running."""
        taken: list[tuple[T, _Slot | None]] = []
        if self._stopped:
            return taken
        inputs, ordered = self._inputs, self._ordered
        while inputs and self._running < self._concurrency:
            slot = _Slot() if ordered else None
            if slot is not None:
                self._order.append(slot)
            taken.append((inputs.popleft(), slot))
            self._running += 1
        return taken

    def _pump(self) -> None:
        with self._lock:
            self._pump_due = False
            taken = self._take()
        self._start(taken)

    def _start(self, taken: list[tuple[T, _Slot | None]]) -> None:
        """Start the calls of ``taken``, each a task kept in ``_tasks`` till it is done
        (its first step at the loop's next turn, whatever its task factory)."""
        loop, fn, tasks = self._loop, self._fn, self._tasks
        for index, (element, slot) in enumerate(taken):
            try:
                call = fn(element)
                if not asyncio.iscoroutine(call):
                    call = _awaited(call)
            except Exception as exc:  # fn raised before its first await: as a failed call
                with self._lock:
                    self._running -= len(taken) - index  # under _lock: never started
                self.fail(exc)
                return
            task: asyncio.Task[R] = asyncio.Task(call, loop=loop)
            tasks.add(task)  # owned: the loop
            task.add_done_callback(partial(self._finished, slot))

    def _finished(self, slot: _Slot | None, task: asyncio.Task[R]) -> None:
        """A call ended: release its result (in order), start the next, wake the drain."""
        self._tasks.discard(task)  # owned: the loop
        error: Exception | None = None
        result: Any = None
        if task.cancelled():
            if not self._stopped:  # not by us: fn's own code cancelled it
                error = RuntimeError("map_async: a call of fn was cancelled, not by the stage")
        else:
            exc = task.exception()
            if exc is None:
                result = task.result()
                if result is None:
                    error = TypeError("§2.13: map_async: fn returned None, never an element")
            else:  # the original exception object (a BaseException only wrapped, §1.4)
                error = exc if isinstance(exc, Exception) else not_an_exception(exc, "fn raised")
        wake = False
        with self._lock:
            self._running -= 1
            if self._stopped or error is not None:
                taken = None
            else:
                queue = self.queue
                if slot is None:
                    queue.append(result)
                    wake = len(queue) == 1  # empty -> non-empty: the drain looks again
                else:
                    slot.result = result
                    order = self._order
                    if order[0] is slot:  # first in line: it and the parked behind it go
                        released = 0
                        while order and order[0].result is not None:
                            queue.append(order.popleft().result)
                            released += 1
                            wake = wake or len(queue) == 1  # each append: see ``push``
                        self._parked -= released - 1
                    else:
                        self._parked += 1
                taken = self._take()
                wake = self._ending() or wake
        if error is not None:
            self.fail(error)
            return
        if taken:
            self._start(taken)
        if wake:
            self.wake()

    def _ending(self) -> bool:
        """Under _lock: the upstream ended and every call was released: the end is due."""
        if self._ended and not self._done and not self._running and not self._inputs:
            self._done = True
            return True
        return False

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):  # owned: the loop
            task.cancel()

    # -- Source: the drain, serially -------------------------------------------------------

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def poll(self) -> R | _Marker:
        return poll_queued(self._done, self.queue, self._error)  # in this order (see there)

    def at_end(self) -> bool:
        return self._done and not self.queue

    @property
    def until_replenish(self) -> int:
        return self._stage.until_due()

    def consumed(self, n: int) -> None:
        self._stage.delivered(n)

    def want(self, n: int) -> None:
        self._stage.want_more()

    def interrupt(self) -> None:
        """The subscriber cancelled (any thread): upstream (§3.12) and the calls, once."""
        self._stage.cancel_upstream()
        self.stop(None, cancelled=True)

    def close(self) -> None:
        self.interrupt()
        self._wake = _nothing
        self.queue.clear()  # §3.13

    # -- diagnostics: read without the lock (a snapshot) -----------------------------------

    def buffered(self) -> int:
        return 0  # the processor's row shows them (upstream())

    def upstream(self) -> object | None:
        return self._stage

    @property
    def running(self) -> int:
        return self._running

    @property
    def held(self) -> int:
        """Elements waiting for a call, and results waiting for delivery."""
        return len(self._inputs) + self._parked + len(self.queue)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def done(self) -> bool:
        return self._done
