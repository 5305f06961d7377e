"""What the tests of the asyncio adapters share: a loop on a helper thread, and small sources."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from reactive_streams import Subscriber
from reactive_streams.testing import RecordingSubscription


@contextmanager
def running_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in debug mode, running on a helper thread; torn down cleanly."""
    event_loop = asyncio.new_event_loop()
    event_loop.set_debug(True)
    thread = threading.Thread(target=event_loop.run_forever, name="test-loop", daemon=True)
    thread.start()
    try:
        yield event_loop
    finally:

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.get_running_loop().shutdown_asyncgens()

        asyncio.run_coroutine_threadsafe(shutdown(), event_loop).result(10)
        event_loop.call_soon_threadsafe(event_loop.stop)
        thread.join(10)
        event_loop.close()


@contextmanager
def switch_interval(seconds: float | None) -> Iterator[None]:
    """``sys.setswitchinterval(seconds)`` for the block (None: left as it is), restored after."""
    before = sys.getswitchinterval()
    if seconds is not None:
        sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def loop_thread(loop: asyncio.AbstractEventLoop) -> int:
    """The id of the thread ``loop`` runs on."""

    async def ident() -> int:
        return threading.get_ident()

    return asyncio.run_coroutine_threadsafe(ident(), loop).result(10)


def on_loop_result(loop: asyncio.AbstractEventLoop, fn: Callable[[], Awaitable[Any]]) -> Any:
    """Run the coroutine ``fn()`` on ``loop`` and return its result."""
    return asyncio.run_coroutine_threadsafe(fn(), loop).result(10)  # type: ignore[arg-type]


def settle(loop: asyncio.AbstractEventLoop, rounds: int = 20) -> None:
    """Let ``loop`` run ``rounds`` iterations, so that anything already scheduled has run."""

    async def spin() -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)

    on_loop_result(loop, spin)


class CountingAsyncIterator:
    """An async iterator over ``range(n)`` that counts ``__anext__`` calls and their thread."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0
        self.threads: set[int] = set()

    def __aiter__(self) -> CountingAsyncIterator:
        return self

    async def __anext__(self) -> int:
        self.threads.add(threading.get_ident())
        self.calls += 1
        if self.calls > self.n:
            raise StopAsyncIteration
        await asyncio.sleep(0)  # a real suspension: the fetch is asynchronous
        return self.calls - 1


class FreshEachTime:
    """A re-iterable async iterable: each ``__aiter__`` starts a new generator."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __aiter__(self) -> AsyncIterator[int]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[int]:
        for i in range(self.n):
            yield i


class ManualPublisher:
    """A publisher whose single subscriber the test signals directly, from any thread."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[Any] | None = None
        self.subscription = RecordingSubscription()
        self.subscribed = threading.Event()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self.subscription)
        self.subscribed.set()
