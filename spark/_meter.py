"""The main job's meters: rows the read emitted and rows finished (the gap is the rows in
flight), the demand asked of the read, and how far the read ran ahead of the statistics
consumer. Every update is under ``Meter.lock``; the hot ones are per element (this is the
job's own accounting, not the library's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams._scan import Scan, Scannable
from reactive_streams._subscription import require_subscriber

__all__ = ["Meter", "Metered"]


@dataclass
class Meter:
    """Source rows emitted vs finished; the largest gap is the rows in flight."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    emitted: int = 0
    finished: int = 0
    max_in_flight: int = 0
    source_requested: int = 0
    source_delivered: int = 0
    max_outstanding: int = 0
    stats_rows: int = 0
    max_stats_lead: int = 0

    def on_emitted(self, rows: int) -> None:
        with self.lock:
            self.emitted += rows  # under lock: the source's and the consumer's threads
            self.source_delivered += 1
            gap = self.emitted - self.finished
            if gap > self.max_in_flight:
                self.max_in_flight = gap

    def on_requested(self, n: int) -> None:
        with self.lock:
            self.source_requested = min(self.source_requested + n, 2**63 - 1)  # under lock
            outstanding = self.source_requested - self.source_delivered
            if outstanding > self.max_outstanding:
                self.max_outstanding = outstanding

    def on_finished(self, rows: int) -> None:
        with self.lock:
            self.finished += rows  # under lock

    def on_stats(self, rows: int) -> None:
        """The statistics consumer took ``rows`` in all (reported every few hundred rows):
        keeps the most rows the read had emitted beyond it."""
        with self.lock:
            self.stats_rows = rows  # under lock
            lead = self.emitted - rows
            if lead > self.max_stats_lead:
                self.max_stats_lead = lead


class _MeteredSubscription:
    __slots__ = ("_meter", "_upstream")

    def __init__(self, upstream: Subscription, meter: Meter) -> None:
        self._upstream = upstream
        self._meter = meter

    def request(self, n: int) -> None:
        if isinstance(n, int) and n > 0:
            self._meter.on_requested(n)
        self._upstream.request(n)

    def cancel(self) -> None:
        self._upstream.cancel()

    def scan(self) -> Scan:
        """Transparent to a snapshot: the metered subscription's own record (a foreign one
        shows as such)."""
        upstream = self._upstream
        if isinstance(upstream, Scannable):
            return upstream.scan()
        return Scan(type(upstream).__name__, foreign=True)


class _MeteredSubscriber:
    __slots__ = ("_downstream", "_meter", "_size")

    def __init__(self, downstream: Subscriber[Any], meter: Meter, size: Callable[[Any], int]):
        self._downstream = downstream
        self._meter = meter
        self._size = size

    def on_subscribe(self, subscription: Subscription) -> None:
        self._downstream.on_subscribe(_MeteredSubscription(subscription, self._meter))

    def on_next(self, element: Any) -> None:
        self._meter.on_emitted(self._size(element))
        self._downstream.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._downstream.on_error(error)

    def on_complete(self) -> None:
        self._downstream.on_complete()


class Metered:
    """A pass-through Publisher that meters what its upstream emits and what is requested."""

    def __init__(self, upstream: Publisher[Any], meter: Meter, size: Callable[[Any], int]):
        self._upstream = upstream
        self._meter = meter
        self._size = size

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        require_subscriber(subscriber)  # §1.9: refused here, before the wrapper hides it
        self._upstream.subscribe(_MeteredSubscriber(subscriber, self._meter, self._size))
