"""TCK cases for ``adapters.async_iterables`` (the loop runs on the TCK's helper thread)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from adapters.async_iterables import from_async_iterable, to_async_iterator
from rs_core import Publisher, Subscriber
from rs_core.tck import PublisherVerification, SubscriberBlackboxVerification


class _Numbers:
    """A re-iterable async iterable: each ``__aiter__`` starts a fresh generator."""

    def __init__(self, n: int) -> None:
        self._n = n

    def __aiter__(self) -> AsyncIterator[int]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[int]:
        for i in range(self._n):
            yield i


class _Broken:
    def __aiter__(self) -> AsyncIterator[int]:
        raise RuntimeError("TCK: this async iterable cannot be iterated")


class FromAsyncIterableVerification(PublisherVerification[int]):
    """``from_async_iterable(...)`` on the TCK's loop, signals from that loop's thread."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_async_iterable(_Numbers(elements), loop=self.env().event_loop())

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_async_iterable(_Broken(), loop=self.env().event_loop())


class ToAsyncIteratorSubscriberBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_async_iterator`` (its bounded prefetch queue)."""

    def create_subscriber(self) -> Subscriber[int]:
        return to_async_iterator(_NeverPublisher(), prefetch=256).subscriber

    def create_element(self, i: int) -> int:
        return i


class _NeverPublisher:
    def subscribe(self, subscriber: Subscriber[int]) -> None:  # pragma: no cover - unused
        raise AssertionError("the TCK subscribes the subscriber itself")


CASES = [
    ("from_async_iterable", FromAsyncIterableVerification),
    ("to_async_iterator (blackbox)", ToAsyncIteratorSubscriberBlackboxVerification),
]
