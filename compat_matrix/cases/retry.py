"""TCK cases for ``reactive_streams.retry``.

Publishers: ``retry(from_iterable(range(n)), attempts=3)``, which never needs a retry, and
the same over a source whose first two subscriptions fail at their first request, so every
test meets the elements through a third attempt. The failed publisher always fails and has
two attempts: on_subscribe once, then the second attempt's error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from reactive_streams import Publisher, Subscriber, retry
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import PublisherVerification


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: a subscription to it fails (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: a transient failure")


class FailsTwice:
    """A cold Publisher of ``range(n)`` whose first ``failures`` subscriptions fail."""

    def __init__(self, n: int, failures: int = 2) -> None:
        self._n = n
        self._failures = failures
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        with self._lock:  # under _lock: subscriptions may come from several threads
            failing = self._failures > 0
            self._failures -= failing
        source = from_iterable(_FailingIterable() if failing else range(self._n))
        source.subscribe(subscriber)


class RetryVerification(PublisherVerification[int]):
    """``retry(from_iterable(range(n)), attempts=3)``: the first attempt succeeds."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return retry(from_iterable(range(elements)), attempts=3)

    def create_failed_publisher(self) -> Publisher[int] | None:
        return retry(from_iterable(_FailingIterable()), attempts=2)


class RetryAfterFailuresVerification(RetryVerification):
    """``retry(FailsTwice(n), attempts=3)``: the elements come from the third attempt."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return retry(FailsTwice(elements), attempts=3)


CASES = [
    ("retry", RetryVerification),
    ("retry (fails twice)", RetryAfterFailuresVerification),
]
