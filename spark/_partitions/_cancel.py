"""Cancelling Spark work without blocking the caller (§3.5): the shared canceller thread,
and :class:`Reader`, the base of the readers, whose ``interrupt`` cancels by job tag on a
thread of its own, again and again while Spark may still start work (§3.12).
"""

from __future__ import annotations

import atexit
import operator
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from reactive_streams._subscription import start_daemon
from reactive_streams.spark._partitions._common import is_connect

__all__ = ["Reader", "cancel_later", "queue_cancel", "start_canceller"]

_RECANCEL_EVERY: Final = 0.05
"""Seconds between two cancels of an interrupt while Spark may still start a reader's work."""

# Cancel calls waiting for the canceller thread. A SimpleQueue, because the finalizer of an
# abandoned reader puts into it, and a finalizer may run on any thread at any allocation, even
# one that holds a lock cancel_later or an executor would take: put() takes none that matter.
_cancels: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]] = queue.SimpleQueue()
_canceller = False  # started; under _canceller_lock
_canceller_lock = threading.Lock()


def cancel_later(fn: Callable[..., object], *args: Any) -> None:
    """Run a Spark cancel call off the caller's thread: ``cancel()`` never blocks (§3.5).

    A classic (py4j) call goes to the one long-lived canceller thread (a thread per cancel
    would cost a JVM thread each in py4j's pinned-thread mode). A Spark Connect call (a bound
    method of a Connect object) gets a daemon thread of its own: its RPC retries for minutes
    against an unreachable server. From a finalizer at interpreter exit no thread starts
    (``start_daemon``): the call is dropped with the process, whose local JVM ends with it.
    """
    if is_connect(getattr(fn, "__self__", None)):
        start_daemon(_run, fn, args, name="rs-spark-cancel-connect")
        return
    start_canceller()
    _cancels.put((fn, args))


def queue_cancel(fn: Callable[..., object], *args: Any) -> None:
    """Queue a classic cancel call for the canceller thread, taking no lock: safe from a
    finalizer (the caller started the canceller beforehand, with :func:`start_canceller`)."""
    _cancels.put((fn, args))


def start_canceller() -> None:
    """Start the canceller thread once (it is a daemon: calls still queued at exit run then)."""
    global _canceller
    with _canceller_lock:
        if not _canceller:
            _canceller = start_daemon(_cancel_forever, name="rs-spark-cancel")  # under the lock


def _cancel_forever() -> None:
    while True:
        _run(*_cancels.get())


@atexit.register
def _cancel_pending() -> None:
    """At exit, run the cancel calls the daemon thread has not reached yet."""
    while True:
        try:
            call = _cancels.get_nowait()
        except queue.Empty:
            return
        _run(*call)


def _run(fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except Exception:  # the session may be gone: nothing left to cancel
        pass


class Interrupted(Exception):
    """Raised by ``open`` when the subscription was cancelled before Spark started."""


class Reader:
    """The pull side of one subscription: ``open`` starts Spark, ``close`` releases it.

    ``open``, the iterator and ``close`` run on the subscription's thread; ``interrupt`` on
    any thread, without blocking (§3.5). A tag cancels only what Spark runs at that moment,
    so ``interrupt`` cancels on a thread of its own, again every ``_RECANCEL_EVERY`` seconds
    while :meth:`_may_start_work` says Spark still may (docs/spark.md, "Cancel").
    ``_interrupted``, ``_started`` and ``_opening`` change under ``_lock``; ``finished`` is a
    one-way flag the subscription's thread sets.

    Diagnostics (``scan``): ``held`` is the decoded chunk being handed out, as a list
    iterator (its length hint is what is left of it), and ``fetching`` is True while the
    reader waits on Spark for a partition; both are set once per chunk or partition by the
    subscription's thread (owned) and read from any thread without a lock (a snapshot).
    """

    held: Iterator[Any] | None = None
    fetching: bool = False

    def __init__(self, tags: tuple[str, ...]) -> None:
        self.tags = tags
        self._lock = threading.Lock()
        self._interrupted = False
        self._started = False
        self._opening = False
        self.finished = False

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def buffered(self) -> int:
        """Elements (rows, or Arrow batches) decoded on the driver, not yet handed out."""
        held = self.held
        return operator.length_hint(held) if held is not None else 0

    def in_flight(self) -> int | None:
        """Partitions asked of Spark and not yet arriving; None when the reader cannot tell."""
        return None

    def open(self) -> Iterator[Any]:
        """Start the Spark work and return the element iterator (subscription thread)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release sockets and iterators, cancel unfinished jobs (subscription thread)."""
        raise NotImplementedError

    def _cancel_tag(self) -> None:
        """Cancel the Spark work carrying this reader's tag, now (a blocking call)."""
        raise NotImplementedError

    def _break_read(self) -> None:
        """Wake a read blocked in this reader (any thread, non-blocking); none by default."""

    def _begin_opening(self) -> None:
        """Spark is about to start: raise ``Interrupted`` if cancelled already (decided under
        the lock, so an ``interrupt`` either comes first and stops this, or sees the opening
        and cancels until it is over)."""
        with self._lock:
            if self._interrupted:
                raise Interrupted()
            self._started = True
            self._opening = True

    def _end_opening(self) -> bool:
        """The opening is over; True if the reader was interrupted meanwhile."""
        with self._lock:
            self._opening = False
            return self._interrupted

    def interrupt(self) -> None:
        """Stop Spark work now, from any thread, without blocking (§3.5)."""
        with self._lock:
            if self._interrupted:
                return
            self._interrupted = True
            running = self._started and not self.finished
        self._break_read()
        if not running:
            return
        # From a finalizer at interpreter exit (an iterator never closed) no thread starts:
        # the process, and a local JVM's jobs with it, are ending; a Connect operation ends
        # with its channel. A system out of threads still gets one cancel call.
        if not start_daemon(self._cancel_until_quiet, name=f"{self.tags[0]}-cancel"):
            cancel_later(self._cancel_tag)

    def _may_start_work(self) -> bool:
        """True while Spark may still start work for this reader that a cancel call made now
        would miss: while opening; a subclass adds its own cases."""
        with self._lock:
            return self._opening

    def _cancel_until_quiet(self) -> None:
        while True:  # §3.12: what starts after a cancel call must stop too
            busy = self._may_start_work()  # asked before the cancel: the last cancel comes
            _run(self._cancel_tag, ())  # after Spark was seen unable to start more (a
            if not busy:  # prefetched job the handler submitted just before returning)
                return
            time.sleep(_RECANCEL_EVERY)
