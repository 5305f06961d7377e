"""What the rx adapter's test modules share: a publisher wrapper that counts demand, and a
switch to run a race with thread switches at every chance."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from reactive_streams import Publisher, Subscriber, Subscription

__all__ = ["CountingPublisher", "switching"]


@contextmanager
def switching(often: bool = True) -> Iterator[None]:
    """Run the block with thread switches at every chance (``sys.setswitchinterval(1e-6)``)
    when ``often``, so a race shows in few rounds; the interval is restored after it."""
    interval = sys.getswitchinterval()
    if often:
        sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


class CountingPublisher:
    """Wraps a Publisher and counts what its subscriber requests (and each request's size)
    and receives."""

    def __init__(self, inner: Publisher[Any]) -> None:
        self.inner = inner
        self.requested = 0
        self.requests: list[int] = []
        self.sent = 0
        self.cancelled = threading.Event()
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        outer = self

        class _Sub:
            def on_subscribe(self, s: Subscription) -> None:
                class _S:
                    def request(self, n: int) -> None:
                        with outer._lock:
                            outer.requested += n
                            outer.requests.append(n)
                            outer.max_in_flight = max(
                                outer.max_in_flight, outer.requested - outer.sent
                            )
                        s.request(n)

                    def cancel(self) -> None:
                        outer.cancelled.set()
                        s.cancel()

                subscriber.on_subscribe(_S())

            def on_next(self, x: Any) -> None:
                with outer._lock:
                    outer.sent += 1
                subscriber.on_next(x)

            def on_error(self, e: Exception) -> None:
                subscriber.on_error(e)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self.inner.subscribe(_Sub())
