"""Where a drain runs: ``INLINE`` on the caller of ``request``, ``OnExecutor`` as executor
tasks, ``OnLoop`` on an asyncio event loop; the last two ``batch`` elements at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, Final, final

from reactive_streams._loop import on_loop

__all__ = ["INLINE", "DrainPolicy", "OnExecutor", "OnLoop"]


class DrainPolicy:
    """Where the drain runs. ``INLINE`` runs it on the caller of ``request``; subclasses hand it
    to an executor or an event loop, ``batch`` elements at a time, then reschedule."""

    __slots__ = ("batch",)

    def __init__(self, batch: int = 0) -> None:
        self.batch = batch

    def run(self, drain: Callable[[], None]) -> Future[Any] | None:
        """Run ``drain`` now, on this thread (a trampoline, thanks to the WIP counter).

        A policy that hands it on raises when it cannot (a closed loop, a shut-down or full
        executor) and may return the ``Future`` it queued: if that is cancelled before it
        ran, the subscription fails as if it had raised."""
        drain()
        return None


INLINE: Final = DrainPolicy()


@final
class OnExecutor(DrainPolicy):
    """Run the drain as a task of a ``concurrent.futures.Executor``, ``batch`` items a task."""

    __slots__ = ("executor",)

    def __init__(self, executor: Executor, batch: int = 1024) -> None:
        if not isinstance(executor, Executor):  # checked here, for every user of the policy
            raise TypeError(
                f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}"
            )
        super().__init__(batch)
        self.executor = executor

    def run(self, drain: Callable[[], None]) -> Future[Any]:
        return self.executor.submit(drain)  # raises after shutdown, or when full: see _schedule


@final
class OnLoop(DrainPolicy):
    """Run the drain on ``loop``: inline when already on it, else via ``call_soon_threadsafe``.

    A wake from a task or callback on the loop (an ``__anext__`` that just produced, an
    ``asend``, a same-loop consumer's ``request``) drains at once instead of costing a loop
    iteration and a self-pipe write per element. A drain that reschedules itself after
    ``batch`` elements always goes through ``call_soon``, so the loop gets its turn and the
    stack never grows. One per subscription: ``_draining`` is touched only on the loop.
    """

    __slots__ = ("_draining", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, batch: int = 1024) -> None:
        super().__init__(batch)
        self.loop = loop
        self._draining = False

    def run(self, drain: Callable[[], None]) -> None:
        loop = self.loop
        if not on_loop(loop):
            loop.call_soon_threadsafe(self._enter, drain)  # RuntimeError once closed: the
            # caller treats it as cancellation
        elif self._draining:
            loop.call_soon(self._enter, drain)  # a batch is done: yield to the loop
        else:
            self._enter(drain)

    def _enter(self, drain: Callable[[], None]) -> None:
        self._draining = True  # owned: the loop's thread
        try:
            drain()
        finally:
            self._draining = False
