"""TCK cases for ``reactive_streams.adapters.async_iterables`` (the loop: the TCK's helper thread).

- ``from_async_iterable`` over a re-iterable async generator (PublisherVerification);
- the Subscriber inside ``to_async_iterator`` in black-box mode, twice: alone (its bounded
  prefetch queue, nobody consuming) and in its habitat, with an ``async for`` consuming it on
  the TCK's loop, so the loop-side hand-off and the 75% replenishment are under test too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from reactive_streams import Publisher, Subscriber
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.tck import PublisherVerification, SubscriberBlackboxVerification

T = TypeVar("T")


class Numbers:
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
        return from_async_iterable(Numbers(elements), loop=self.env().event_loop())

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_async_iterable(_Broken(), loop=self.env().event_loop())


class ToAsyncIteratorSubscriberBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_async_iterator`` (its bounded prefetch queue), unconsumed."""

    def create_subscriber(self) -> Subscriber[int]:
        return to_async_iterator(_NeverPublisher(), prefetch=256).subscriber

    def create_element(self, i: int) -> int:
        return i


class _NeverPublisher:
    def subscribe(self, subscriber: Subscriber[int]) -> None:  # pragma: no cover - unused
        raise AssertionError("the TCK subscribes the subscriber itself")


class Handoff(Generic[T]):
    """A Publisher that hands the Subscriber it is given to the TCK, which then plays the
    publisher: the way to put a ``to_…`` adapter's inner Subscriber under test in its habitat."""

    def __init__(self) -> None:
        self.subscriber: Future[Subscriber[T]] = Future()

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        self.subscriber.set_result(subscriber)


class ConsumedToAsyncIteratorBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_async_iterator`` while an ``async for`` on the TCK's loop
    consumes it (prefetch 4, so replenishing requests happen within the TCK's few elements).
    ``timeout``: the iterator's (a subclass sets one, so its waits go through asyncio's)."""

    timeout: float | None = None

    def create_subscriber(self) -> Subscriber[int]:
        handoff: Handoff[int] = Handoff()

        async def consume() -> None:
            async for _ in to_async_iterator(handoff, prefetch=4, timeout=self.timeout):
                pass

        consumer = asyncio.run_coroutine_threadsafe(_quiet(consume()), self.env().event_loop())
        self.__dict__.setdefault("_consumers", []).append(consumer)
        return handoff.subscriber.result(self.env().default_timeout)

    def create_element(self, i: int) -> int:
        return i

    def teardown_method(self, method: object) -> None:
        """Cancel the consumers a test left waiting (cancel also cancels their subscription)."""
        for consumer in self.__dict__.pop("_consumers", []):
            consumer.cancel()


async def _quiet(coro: Any) -> None:
    """Run a consumer whose stream the TCK may end with any error: nobody awaits it."""
    try:
        await coro
    except Exception:
        pass


CASES = [
    ("from_async_iterable", FromAsyncIterableVerification),
    ("to_async_iterator (blackbox)", ToAsyncIteratorSubscriberBlackboxVerification),
    ("to_async_iterator, consumed (blackbox)", ConsumedToAsyncIteratorBlackboxVerification),
]
