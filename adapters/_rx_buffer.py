"""What the RxPY adapter's two push sources share: the buffer the Rx side fills and the drain
empties (``from_observable``'s and ``rx_processor``'s), and the exception that unwinds a
synchronous Rx producer on a thread of ours."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from reactivex.abc import DisposableBase

from reactive_streams._drain import Source, _Marker
from reactive_streams._source import poll_queued
from reactive_streams._subscription import report_dropped

T = TypeVar("T")


class _Stop(Exception):
    """Raised into a synchronous Rx producer to end it, only on a thread of ours: the owned
    thread of ``from_observable(block)`` after a cancel, or the thread that builds an
    ``rx_processor`` whose chain overflowed while being subscribed."""


def _nothing() -> None:
    pass


def _dispose(disposable: DisposableBase | None) -> None:
    if disposable is not None:
        try:
            disposable.dispose()
        except Exception as exc:
            report_dropped(exc, where="disposing an Rx subscription")


class _BufferSource(Source[T]):
    """A deque the Rx side fills and the drain empties (fused: the drain pops it directly).

    ``_pushing`` orders every append against the end: ``finish`` and ``close`` set ``_done``
    under it, and a push re-checks ``_done`` under it. So an element is either in the buffer
    before the end is recorded (delivered before the terminal signal) or dropped (it came
    after the end, §1.7, or after a cancel, §3.13), even when two threads feed one Subject.
    """

    __slots__ = (
        "_cancelled",
        "_done",
        "_error",
        "_items",
        "_pushing",
        "_wake",
        "queue",
    )

    until_replenish = 1  # consumed() after each element

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._pushing = threading.Lock()
        self.queue: deque[T] | None = self._items
        self._done = False
        self._cancelled = False  # closed before the end: under _pushing
        self._error: Exception | None = None
        self._wake: Callable[[], None] = _nothing

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def push(self, element: T) -> None:
        items = self._items
        # Wake only on empty -> non-empty: the drain stops only when it has seen the buffer
        # empty (the push that refills it wakes it) or the demand met (the next request
        # drains); a push behind a slow subscriber then costs no drain pass. Rx's on_next
        # calls should be serial, but two threads feeding one Subject at once is a common
        # mistake: under the lock, exactly one of two racing pushes sees the buffer go from
        # empty to one element, so neither can leave the other's element stranded.
        with self._pushing:
            if self._done:
                return  # after the end (§1.7) or a cancel (§3.13): never held
            items.append(element)
            first = len(items) == 1
        if first:
            self._wake()

    def finish(self, error: Exception | None) -> None:
        with self._pushing:
            ended = self._done
            if not ended:
                self._error = error
                self._done = True  # set after the error: a poll that sees _done sees _error
        if ended:
            if error is not None:  # after our cancel (§1.8 allows it), else after the end
                rule = "1.8" if self._cancelled else "1.7"
                where = "after a cancel" if self._cancelled else "after the end"
                report_dropped(error, rule=rule, where=f"an Rx error {where}")
            return
        self._wake()

    def _discard(self) -> None:
        """Close: record the end and drop the buffer and the error, ordered against pushes
        (§3.13). The error goes too: raised by ``poll``, its traceback holds the drain's
        frames, and through them the subscriber, for as long as this source lives (an
        ``rx_processor`` keeps it). The elements are let go after the lock: a finalizer of
        theirs never runs under it."""
        with self._pushing:
            self._cancelled = not self._done  # under _pushing
            self._done = True
            dropped = self._items.copy()
            self._items.clear()
            self._error = None  # the subscriber has had it, or never will (cancelled)
        dropped.clear()

    def poll(self) -> T | _Marker:
        return poll_queued(self._done, self._items, self._error)  # in this order (see there)

    def at_end(self) -> bool:
        return self._done and not self._items

    def buffered(self) -> int:
        """Elements held (a snapshot, for ``snapshot()``): the buffer, fused or not (LATEST
        pops through ``poll`` and sets no ``queue``)."""
        return len(self._items)
