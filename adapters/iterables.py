"""Iterables and Reactive Streams, both directions.

- ``from_iterable``: a cold Publisher; the iterator is advanced once per unit of demand, on
  the thread that calls ``request``, so a generator runs only as far as demand reaches.
  Cancel ``close()``s a generator so its ``finally`` blocks run.
- ``to_iterator``: a blocking iterator over any Publisher that keeps at most ``prefetch``
  elements requested ahead of consumption (replenishing at 75%). Signals may arrive on any
  thread; the consuming thread blocks in ``__next__``, so never call it on a running event
  loop (use ``reactive_streams.adapters.async_iterables.to_async_iterator`` there).
  ``close()``, leaving a ``with`` block, dropping the iterator (its last reference), or a
  ``next()`` that waited ``timeout`` seconds for nothing cancels the subscription.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from types import TracebackType
from typing import Final, Generic, NoReturn, TypeVar, final

from reactive_streams._drain import EMPTY, END, OnExecutor
from reactive_streams._loop import running_loop
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._scan import Scan
from reactive_streams._subscription import require_publisher, require_timeout
from reactive_streams.api import Publisher
from reactive_streams.publishers._iterable import IterablePublisher

__all__ = ["BlockingIterator", "from_iterable", "to_iterator"]

T = TypeVar("T")


def from_iterable(iterable: Iterable[T], *, executor: Executor | None = None) -> Publisher[T]:
    """A cold Publisher over ``iterable``, pulled only as far as demand reaches.

    Each Subscriber iterates afresh; a one-shot iterator or generator serves one Subscriber
    (a second gets ``on_subscribe`` then ``on_error`` saying why). An exception raised by the
    iterator reaches ``on_error`` after the elements already produced; ``None`` from it is
    ``on_error(TypeError)``.

    Args:
        iterable: any iterable; a generator is ``close()``d when the subscription is cancelled.
        executor: where ``next()`` runs and signals are delivered. ``None`` (the default): on
            the thread that calls ``request``. Give one for an iterator that blocks (files,
            sockets), so that ``request`` never blocks its caller.

    Raises:
        TypeError: ``executor`` is not a ``concurrent.futures.Executor``.

    Example:
        >>> list(to_iterator(from_iterable(range(3))))
        [0, 1, 2]
    """
    if executor is None:
        return IterablePublisher(iterable)
    return IterablePublisher(iterable, policy=OnExecutor(executor))


_NOT_ON_LOOP: Final = (
    "to_iterator() blocks the calling thread, and this thread runs an asyncio event loop; "
    "use reactive_streams.adapters.async_iterables.to_async_iterator() here, "
    "or iterate in another thread "
    "(asyncio.to_thread)"
)


@final
class BlockingIterator(Generic[T]):
    """The iterator ``to_iterator`` returns: ``next()`` blocks until an element or the end.

    Keeps at most ``prefetch`` elements requested ahead of consumption (§1.1 bound), raises
    the publisher's error where iteration reaches it, and cancels on ``close()``, on leaving
    a ``with`` block, and as soon as its last reference goes (§2.6, §3.13): nothing the
    publisher holds refers back to it, so a hot publisher that keeps its subscriber does
    not keep the iterator alive.

    With a ``timeout``, a ``next()`` that finds nothing queued and waits that long for an
    element or the end cancels upstream (§3.12) and raises ``TimeoutError``; the iterator is
    then closed. Queued elements are always returned first.

    Iterate it from one thread at a time, like a generator (the per-element path takes no
    lock); ``close()`` may be called from any thread and wakes every blocked ``next()``.
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_every",
        "_pending",
        "_popleft",
        "_publisher",
        "_queue",
        "_timeout",
        "_wakeup",
    )

    def __init__(
        self, publisher: Publisher[T], prefetch: int, timeout: float | None = None
    ) -> None:
        self._queue: PrefetchQueue[T] = PrefetchQueue(prefetch)  # validates prefetch
        require_publisher(publisher, "to_iterator()")
        self._timeout = require_timeout(timeout, "to_iterator()")
        self._publisher: Publisher[T] | None = publisher  # for repr alone; close() drops it
        # The queue's wake: an Event, never a method of ours, so the queue (which the
        # publisher may hold) does not keep this iterator alive and __del__ cancels (§3.13).
        # set() wakes every waiter.
        self._wakeup = threading.Event()
        self._closed = False
        self._popleft = self._queue.queue.popleft  # fused fast path, as in the drain
        self._every = self._queue.until_replenish  # pops until the next request is due
        self._pending = 0
        self._queue.bind(self._wakeup.set)
        try:
            publisher.subscribe(self._queue)
        except Exception as exc:  # a broken publisher: surface its error at iteration,
            self._queue.fail_upstream(exc)  # cancelling what it may have subscribed (§3.13)

    def __iter__(self) -> BlockingIterator[T]:
        return self

    def scan(self) -> Scan:
        """This sink's state for :func:`~reactive_streams.snapshot` (any thread, no lock)."""
        return self._queue.scan_sink("to_iterator", self._pending)

    def __next__(self) -> T:
        if self._closed:  # an upstream drain on another thread may append once after
            raise StopIteration  # close() (it clears that again): never yield it
        try:
            value = self._popleft()
        except IndexError:
            return self._next_slow()
        self._pending += 1
        if self._pending == self._every:  # replenish: at most prefetch requested ahead
            self._pending = 0
            self._report(self._queue.consumed, self._every)
        return value

    def _report(self, report: Callable[[int], None], n: int) -> None:
        """Tell the queue (``consumed`` or ``want``); it may request upstream here, which
        runs a synchronous upstream on this thread. A ``KeyboardInterrupt`` there ended that
        upstream's subscription (its drain's abort): nothing more will come, so the
        iteration ends too, as a generator's does once an exception left it, instead of the
        next ``next()`` waiting for ever. (The queue raises no ``Exception``: it routes
        those to ``on_error``.)"""
        try:
            report(n)
        except BaseException:
            self.close()
            raise
        self._every = self._queue.until_replenish

    def _next_slow(self) -> T:
        queue = self._queue
        if self._pending:  # report what the fast path consumed before waiting for more
            pending, self._pending = self._pending, 0
            self._report(self._queue.consumed, pending)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        expired = False
        while True:
            if self._closed:
                raise StopIteration
            self._wakeup.clear()  # before the poll: a signal after it wakes the wait below
            try:
                value = queue.poll()
            except BaseException:  # the publisher's error (raised once), or an interrupt
                self.close()  # inside a replenishing request: the iteration ends
                raise
            if value is END:
                self._closed = True
                raise StopIteration
            if value is not EMPTY:
                self._every = queue.until_replenish  # poll() counted it
                return value  # type: ignore[return-value]
            if running_loop() is not None:
                raise RuntimeError(_NOT_ON_LOOP)
            left = None
            if deadline is not None:
                left = min(deadline - time.monotonic(), threading.TIMEOUT_MAX)
                if expired or left <= 0:  # nothing queued (just polled), not over: give up
                    self._time_out()
            self._report(queue.want, 1)  # ran dry: the upstream may refill the whole window
            # Then poll again, timed out or not: an element that came as the wait timed out
            # is returned, never dropped.
            expired = not self._wakeup.wait(left)

    def _time_out(self) -> NoReturn:
        self.close()  # §3.12: cancels upstream (a generator is closed), drops what came since
        raise TimeoutError(
            f"to_iterator(): no element or end within timeout={self._timeout} s; "
            "upstream cancelled"
        )

    def close(self) -> None:
        """Cancel the subscription; further ``next()`` calls raise ``StopIteration``."""
        self._closed = True
        self._publisher = None
        self._queue.close()
        self._wakeup.set()  # every next() blocked on another thread wakes and stops

    def __repr__(self) -> str:
        """What a blocked ``next()`` waits for: no upstream subscribed yet, or what is queued
        and requested; and the publisher's own repr. Read lock-free (a snapshot)."""
        if self._closed:
            return "<BlockingIterator closed>"
        return f"<BlockingIterator {self._queue.describe()}, from {self._publisher!r}>"

    def __enter__(self) -> BlockingIterator[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        queue = getattr(self, "_queue", None)
        if queue is not None:
            queue.close()


def to_iterator(
    publisher: Publisher[T], *, prefetch: int = 256, timeout: float | None = None
) -> BlockingIterator[T]:
    """Iterate ``publisher`` in a blocking ``for`` loop, with at most ``prefetch`` in flight.

    Args:
        publisher: any Publisher.
        prefetch: the most elements requested ahead of consumption; 75% is re-requested
            each time that many were consumed.
        timeout: seconds each ``next()`` may wait for an element or the end, counted from
            when it starts to wait (per element, like Reactor's ``timeout()``); ``None``
            waits for ever. A synchronous publisher's own work on this thread is not cut.

    Returns:
        A :class:`BlockingIterator`; ``close()`` or a ``with`` block cancels.

    Raises:
        TypeError, ValueError: ``timeout`` is not ``None`` or a finite number > 0.
        RuntimeError: from ``next()`` when it would block on a running event loop's thread.
        TimeoutError: from ``next()`` after ``timeout``; upstream is cancelled (§3.12), and
            later ``next()`` calls raise ``StopIteration``.

    Example:
        >>> with to_iterator(from_iterable("abc"), prefetch=2) as it:
        ...     next(it)
        'a'
    """
    return BlockingIterator(publisher, prefetch, timeout)
