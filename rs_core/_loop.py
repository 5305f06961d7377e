"""Event-loop helpers the asyncio adapters share (from_async_iterable, from_async_observable).

Where a loop-bound publisher runs (checking and resolving ``loop=``), how it starts the tasks
it keeps (strongly referenced until done; first step at a later turn, or now), and how its
clean-up outlives the end of ``asyncio.run``. The drain policy itself is ``_drain.OnLoop``.
Why each helper is shaped so: docs/adapters.md, "Running on the event loop".
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable, Coroutine, Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Generic, TypeVar, final

__all__ = [
    "BATCH",
    "call_on_loop",
    "check_loop",
    "on_loop",
    "resolve_loop",
    "running_loop",
    "run_clean_up",
    "delivery_executor",
    "shared_loop",
    "start_eagerly",
    "start_task",
]

T = TypeVar("T")

BATCH: Final = 1024
"""The most elements one task of an adapter handles before it lets the loop run."""

_tasks: Final[set[asyncio.Task[Any]]] = set()
"""Strong references to the tasks started here (the loop holds tasks only weakly)."""
_tasks_lock: Final = threading.Lock()
"""Guards ``_tasks``: loops on several threads start and finish tasks at once."""


_shared: asyncio.AbstractEventLoop | None = None
"""The process-wide loop of :func:`shared_loop`, once started (under ``_shared_lock``)."""
_delivery: ThreadPoolExecutor | None = None
"""The pool of :func:`delivery_executor`, once made (under ``_shared_lock``)."""
_shared_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process's one library-owned event loop, running on the daemon thread
    ``rs-map-async-loop``: started by the first caller (under a lock), never stopped, and
    the same for every later caller, so an async client made on it stays valid for the
    process's life (a Spark Python worker's, across tasks). A forked child starts its own
    (the thread does not survive ``fork``)."""
    global _shared
    with _shared_lock:
        loop = _shared
        if loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_run_forever, args=(loop,), name="rs-map-async-loop", daemon=True
            )
            thread.start()
            _shared = loop  # under _shared_lock
    return loop


def delivery_executor() -> ThreadPoolExecutor:
    """The process's pool (threads ``rs-map-async-deliver``) on which ``map_async`` delivers
    results, so a subscriber's ``on_next``, and the upstream pulls it causes, never run on
    the shared loop. Made by the first caller (under a lock); a forked child makes its own."""
    global _delivery
    with _shared_lock:
        if _delivery is None:
            _delivery = ThreadPoolExecutor(thread_name_prefix="rs-map-async-deliver")
        return _delivery


def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


def _forget_shared_loop() -> None:
    """In a forked child: the loop's and the pool's threads are gone, and the lock may be
    held for ever."""
    global _shared, _delivery, _shared_lock
    _shared = None
    _delivery = None
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forget_shared_loop)


def _keep(task: asyncio.Task[Any]) -> None:
    with _tasks_lock:
        _tasks.add(task)  # under _tasks_lock
    task.add_done_callback(_forget)


def _forget(task: asyncio.Task[Any]) -> None:
    with _tasks_lock:
        _tasks.discard(task)  # under _tasks_lock


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, or ``None`` (asyncio's public call, which
    raises instead of answering ``None``)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """True when called on ``loop``'s thread while it runs (in a task or a callback)."""
    return running_loop() is loop


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: Any) -> None:
    """``fn(*args)`` now when on ``loop``, else at its next turn; from any thread.

    Raises ``RuntimeError`` (from ``call_soon_threadsafe``) once ``loop`` is closed."""
    if on_loop(loop):
        fn(*args)
    else:
        loop.call_soon_threadsafe(fn, *args)


def check_loop(loop: object) -> None:
    """A ``loop=`` argument, checked at the call: an event loop, not closed (a closed loop
    can never run the stream; one closed later fails it at subscribe)."""
    if loop is None:
        return
    if not isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(f"loop must be an asyncio event loop, got {type(loop).__name__}")
    if loop.is_closed():
        raise ValueError(f"loop is closed: {loop!r} can never run the stream")


def resolve_loop(
    loop: asyncio.AbstractEventLoop | None, who: str
) -> asyncio.AbstractEventLoop | Exception:
    """The loop a loop-bound publisher runs on, at subscribe time, or the error to reject
    with (§1.9: ``on_subscribe`` then ``on_error``): ``loop`` if given, else the loop
    running on the subscribing thread."""
    if loop is None:
        loop = running_loop()
        if loop is None:
            return RuntimeError(
                f"{who}: no event loop to run on: pass loop=..., or subscribe from a coroutine "
                "running on the loop"
            )
    if loop.is_closed():
        return RuntimeError(f"{who}: the event loop {loop!r} is closed")
    return loop


def start_task(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, T],
    context: contextvars.Context | None = None,
) -> asyncio.Task[T]:
    """A task for ``coro`` on ``loop``, kept until done; its first step runs at a later
    loop turn whatever the loop's task factory (``asyncio.Task``, never an eager
    ``loop.create_task``). Called on the loop's thread."""
    task = asyncio.Task(coro, loop=loop, context=context)
    _keep(task)
    return task


def start_eagerly(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, None],
    context: contextvars.Context | None = None,
) -> asyncio.Task[None] | None:
    """Run ``coro`` up to its first suspension now, then the rest as a kept task on ``loop``.

    Called on ``loop``'s thread. What that first step does is done when this returns (a hot
    source's ``subscribe_async`` has registered its observer); an exception it raises
    propagates here. None when ``coro`` finished in that step. The first step runs in
    ``context`` (a copy of the current one by default), under the caller's current task."""
    if context is None:
        context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration:
        return None
    return start_task(loop, _rest(_Resumed(coro, yielded)), context)


async def _rest(resumed: _Resumed[T]) -> T:
    return await resumed


@final
class _Resumed(Generic[T]):
    """The rest of a coroutine whose first step already ran: hands its task what that step
    yielded (a future to wait for, or None), then drives it on as ``await`` would."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, T], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, T]:
        coro, yielded = self._coro, self._yielded
        self._yielded = None
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation (or any throw): into the coroutine
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]


def run_clean_up(
    loop: asyncio.AbstractEventLoop,
    work: Callable[[], Coroutine[Any, Any, None]],
    context: contextvars.Context | None = None,
) -> None:
    """Run ``work()`` in a kept task of its own, on ``loop``'s thread; if asyncio.run's
    task sweep cancels that task before its first step, ``work()`` is started once more
    (the sweep cancels each task once). A clean-up that then awaits longer than the few
    turns of asyncio.run's remaining shutdown is destroyed pending when the loop closes."""
    started = False

    async def run() -> None:
        nonlocal started
        started = True  # owned: the loop
        await work()

    def ended(task: asyncio.Task[None]) -> None:
        if task.cancelled() and not started:
            start_task(loop, work(), context)

    start_task(loop, run(), context).add_done_callback(ended)
