"""TCK cases for ``reactive_streams.adapters.iterables`` (both directions) and ``publish_on``.

Publishers: ``from_iterable`` over a re-iterable range, over a fresh generator, with
``executor=``, and behind ``publish_on``. Subscriber: the one ``to_iterator`` builds (its
``PrefetchQueue``), obtained by letting ``to_iterator`` subscribe to a hand-off publisher
and handing that subscriber to the TCK, which then plays the real publisher.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reactive_streams import Publisher, Subscriber, Subscription, publish_on
from reactive_streams.adapters.iterables import BlockingIterator, from_iterable, to_iterator
from reactive_streams.tck import (
    ProbedSubscriber,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
)

_EXECUTOR = ThreadPoolExecutor(4, thread_name_prefix="tck-iterables")


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: every subscriber must get on_error (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable cannot be iterated")


def _numbers(n: int) -> Iterator[int]:
    yield from range(n)


def _consumed_generator() -> Iterator[int]:
    generator = _numbers(3)
    for _ in generator:
        pass
    return generator


class FromIterableVerification(PublisherVerification[int]):
    """``from_iterable(range(n))``: pulled inline on the thread that calls ``request``; the
    failed publisher wraps an iterable whose ``__iter__`` raises."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(range(elements))

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_iterable(_FailingIterable())


class FromGeneratorVerification(PublisherVerification[int]):
    """``from_iterable(generator)``: one-shot, so a second subscriber is refused (the
    optional multi-subscriber tests skip); the failed publisher wraps a generator that was
    already consumed, so its first subscriber is refused as well (one-shot guard)."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(_numbers(elements))

    def create_failed_publisher(self) -> Publisher[int] | None:
        publisher = from_iterable(_consumed_generator())
        publisher.subscribe(_Discard())  # the one subscriber it could serve
        return publisher


class _Discard:
    """Takes a subscription and cancels it at once."""

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.cancel()

    def on_next(self, element: int) -> None:
        pass

    def on_error(self, error: Exception) -> None:
        pass

    def on_complete(self) -> None:
        pass


class FromIterableOnExecutorVerification(FromIterableVerification):
    """``from_iterable(range(n), executor=...)``: ``next()`` and signals on executor threads."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(range(elements), executor=_EXECUTOR)


class PublishOnVerification(FromIterableVerification):
    """``publish_on(from_iterable(range(n)), executor, prefetch=8)``: the asynchronous
    boundary, with a window small enough that replenishing runs in every test."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return publish_on(from_iterable(range(elements)), _EXECUTOR, prefetch=8)

    def create_failed_publisher(self) -> Publisher[int] | None:
        return publish_on(from_iterable(_FailingIterable()), _EXECUTOR)


# -- to_iterator's subscriber ---------------------------------------------------------------


class _Handoff:
    """A publisher that only remembers its subscriber: the TCK then plays the publisher."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[int] | None = None

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscriber = subscriber


def _iterator_and_subscriber(prefetch: int) -> tuple[BlockingIterator[int], Subscriber[int]]:
    """``to_iterator(...)`` and the very subscriber it subscribed with."""
    handoff = _Handoff()
    iterator = to_iterator(handoff, prefetch=prefetch)
    assert handoff.subscriber is not None
    return iterator, handoff.subscriber


class _Consumer:
    """Plays the thread that iterates: ``trigger_request(n)`` means "n more ``next()``
    calls"; each is made as soon as an element has arrived, so it never blocks (the TCK
    drives the stage from one thread). Consuming is what makes ``to_iterator`` request more;
    ``signal_cancel`` is ``close()``."""

    def __init__(self, iterator: BlockingIterator[int]) -> None:
        self._iterator = iterator
        self._wanted = 0
        self._arrived = 0
        self._ended = False

    def arrived(self) -> None:
        self._arrived += 1
        self._consume()

    def trigger_request(self, n: int) -> None:
        self._wanted += n
        self._consume()

    def signal_cancel(self) -> None:
        self._iterator.close()

    def _consume(self) -> None:
        while self._wanted > 0 and self._arrived > 0 and not self._ended:
            self._wanted -= 1
            self._arrived -= 1
            try:
                next(self._iterator)
            except StopIteration:
                self._ended = True
            except Exception:  # the stream's error, raised where iteration reaches it
                self._ended = True


class _ConsumedSubscriber(ProbedSubscriber[int]):
    """to_iterator's subscriber reporting to the probe; each element, once reported, is
    offered to the consumer."""

    def __init__(
        self, inner: Subscriber[int], probe: WhiteboxSubscriberProbe[int], consumer: _Consumer
    ) -> None:
        super().__init__(inner, probe, lambda _: consumer)
        self._consumer = consumer

    def on_next(self, element: int) -> None:
        super().on_next(element)
        self._consumer.arrived()


class _KeepsIterators:
    """Holds each test's ``to_iterator`` (dropping it would cancel) and closes it after."""

    _iterators: list[BlockingIterator[int]]

    def _keep(self, iterator: BlockingIterator[int]) -> None:
        if not hasattr(self, "_iterators"):
            self._iterators = []
        self._iterators.append(iterator)

    def teardown_method(self, method: Any) -> None:
        for iterator in getattr(self, "_iterators", []):
            iterator.close()


class ToIteratorSubscriberWhiteboxVerification(
    _KeepsIterators, SubscriberWhiteboxVerification[int]
):
    """The subscriber inside ``to_iterator(publisher, prefetch=1)``: a window of one, so
    every element consumed through the iterator's ``next()`` shows as one more request.
    The puppet is the consuming thread (see ``_Consumer``); cancel is ``close()``."""

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
        iterator, subscriber = _iterator_and_subscriber(prefetch=1)
        self._keep(iterator)
        return _ConsumedSubscriber(subscriber, probe, _Consumer(iterator))

    def create_element(self, i: int) -> int:
        return i


class ToIteratorSubscriberBlackboxVerification(
    _KeepsIterators, SubscriberBlackboxVerification[int]
):
    """The subscriber inside ``to_iterator(publisher)`` (default window 256), as a
    publisher sees it: it requests its window on subscription."""

    def create_subscriber(self) -> Subscriber[int]:
        iterator, subscriber = _iterator_and_subscriber(prefetch=256)
        self._keep(iterator)
        return subscriber

    def create_element(self, i: int) -> int:
        return i


CASES = [
    ("from_iterable", FromIterableVerification),
    ("from_iterable(generator)", FromGeneratorVerification),
    ("from_iterable(executor)", FromIterableOnExecutorVerification),
    ("publish_on", PublishOnVerification),
    ("to_iterator (whitebox)", ToIteratorSubscriberWhiteboxVerification),
    ("to_iterator (blackbox)", ToIteratorSubscriberBlackboxVerification),
]
