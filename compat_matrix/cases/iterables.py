"""TCK cases for ``adapters.iterables`` and ``rs_core.publish_on``."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from adapters.iterables import from_iterable
from rs_core import Publisher, Subscriber, Subscription, publish_on
from rs_core._drain import EMPTY, END
from rs_core._prefetch import PrefetchQueue
from rs_core.tck import (
    ProbedSubscriber,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
)

_EXECUTOR = ThreadPoolExecutor(4, thread_name_prefix="tck-publish-on")


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: every subscriber must get on_error (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable cannot be iterated")


class FromIterableVerification(PublisherVerification[int]):
    """``from_iterable(range(n))``: inline, pulled on the caller of ``request``."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(range(elements))

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_iterable(_FailingIterable())


class FromIterableOnExecutorVerification(FromIterableVerification):
    """``from_iterable(range(n), executor=...)``: ``next()`` runs on an executor thread."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(range(elements), executor=_EXECUTOR)


class PublishOnVerification(FromIterableVerification):
    """``publish_on(from_iterable(range(n)), executor)``: the asynchronous boundary."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return publish_on(from_iterable(range(elements)), _EXECUTOR, prefetch=8)

    def create_failed_publisher(self) -> Publisher[int] | None:
        return publish_on(from_iterable(_FailingIterable()), _EXECUTOR)


class _ConsumingPuppet:
    """Plays the thread that iterates ``to_iterator``: ``trigger_request(n)`` consumes up to
    ``n`` elements waiting in the queue, which makes it request more; cancel closes it."""

    def __init__(self, queue: PrefetchQueue[Any]) -> None:
        self._queue = queue

    def trigger_request(self, n: int) -> None:
        for _ in range(n):
            if self._queue.poll() in (EMPTY, END):
                break

    def signal_cancel(self) -> None:
        self._queue.close()


class ToIteratorSubscriberWhiteboxVerification(SubscriberWhiteboxVerification[int]):
    """The subscriber inside ``to_iterator`` (a PrefetchQueue, window 2, replenishing 1 at a
    time so each consumed element shows as a request), driven the way iteration drives it."""

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
        queue: PrefetchQueue[int] = PrefetchQueue(2, limit=1)

        def puppet(_: Subscription) -> _ConsumingPuppet:
            return _ConsumingPuppet(queue)

        return ProbedSubscriber(queue, probe, puppet)

    def create_element(self, i: int) -> int:
        return i


class ToIteratorSubscriberBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_iterator``, as a publisher sees it (default window 256)."""

    def create_subscriber(self) -> Subscriber[int]:
        return PrefetchQueue(256)

    def create_element(self, i: int) -> int:
        return i


CASES = [
    ("from_iterable", FromIterableVerification),
    ("from_iterable(executor)", FromIterableOnExecutorVerification),
    ("publish_on", PublishOnVerification),
    ("to_iterator (whitebox)", ToIteratorSubscriberWhiteboxVerification),
    ("to_iterator (blackbox)", ToIteratorSubscriberBlackboxVerification),
]
