"""TCK cases for ``reactive_streams.pipe`` (through ``rx_processor`` stages, so reactivex).

The publisher is what ``pipe`` returns for ``from_iterable -> map -> filter``; the processor
is two identity ``rx_processor`` stages wired by ``pipe``, seen as one Processor: signals go
to the first stage, subscribers to what ``pipe`` returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactivex import operators as ops

from reactive_streams import Processor, Publisher, Subscriber, Subscription, pipe
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.adapters.rx import rx_processor
from reactive_streams.tck import IdentityProcessorVerification, PublisherVerification


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: the error must pass both stages (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable cannot be iterated")


def _plus_one(x: int) -> int:
    return x + 1


def _positive(x: int) -> bool:
    return x > 0


class PipePublisherVerification(PublisherVerification[int]):
    """``pipe(from_iterable(range(n)), rx_processor(map), rx_processor(filter))``: n elements
    (the filter keeps them all), through two stages; unicast, as rx_processor is."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return pipe(
            from_iterable(range(elements)),
            rx_processor(ops.map(_plus_one)),
            rx_processor(ops.filter(_positive)),
        )

    def create_failed_publisher(self) -> Publisher[int] | None:
        return pipe(
            from_iterable(_FailingIterable()),
            rx_processor(ops.map(_plus_one)),
            rx_processor(ops.filter(_positive)),
        )


class _Piped:
    """Two Processors joined by ``pipe``: a Subscriber at the first, a Publisher at the last."""

    def __init__(self, first: Processor[Any, Any], last: Publisher[Any]) -> None:
        self._first = first
        self._last = last

    def on_subscribe(self, subscription: Subscription) -> None:
        self._first.on_subscribe(subscription)

    def on_next(self, element: Any) -> None:
        self._first.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._first.on_error(error)

    def on_complete(self) -> None:
        self._first.on_complete()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self._last.subscribe(subscriber)


class PipeProcessorVerification(IdentityProcessorVerification[Any]):
    """Two identity ``rx_processor`` stages joined by ``pipe(first, second)``; unicast."""

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        first: Processor[Any, Any] = rx_processor(buffer_size=buffer_size)
        return _Piped(first, pipe(first, rx_processor(buffer_size=buffer_size)))

    def create_element(self, i: int) -> Any:
        return i

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return pipe(from_iterable(_FailingIterable()), rx_processor(), rx_processor())

    def max_supported_subscribers(self) -> int:
        return 1


CASES = [
    ("pipe(map, filter)", PipePublisherVerification),
    ("pipe(rx_processor(), rx_processor())", PipeProcessorVerification),
]
