"""TCK cases for ``adapters.rx`` (reactivex 4.x to 6.x)."""

from __future__ import annotations

from typing import Any

import reactivex

from adapters.rx import from_observable, rx_processor
from rs_core import Processor, Publisher, Subscriber
from rs_core._prefetch import PrefetchQueue
from rs_core.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
)


class FromObservableBlockVerification(PublisherVerification[int]):
    """``from_observable(reactivex.range(n))`` with the default lossless ``block`` strategy."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_observable(reactivex.range(elements))

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_observable(reactivex.throw(RuntimeError("TCK: a failing Observable")))


class FromObservableBufferVerification(PublisherVerification[int]):
    """``from_observable(..., overflow="buffer")`` over a cold source that fits the buffer."""

    def max_elements_from_publisher(self) -> int:
        return 1024  # a cold source emits at subscribe: it must fit buffer_size

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_observable(reactivex.range(elements), overflow="buffer", buffer_size=1024)

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_observable(reactivex.throw(RuntimeError("TCK: a failing Observable")))


class ToObservableSubscriberBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_observable`` (a PrefetchQueue feeding the Rx observer)."""

    def create_subscriber(self) -> Subscriber[int]:
        queue: PrefetchQueue[int] = PrefetchQueue(256)
        return queue

    def create_element(self, i: int) -> int:
        return i


class RxProcessorVerification(IdentityProcessorVerification[Any]):
    """``rx_processor()`` with no operators: an identity stage; unicast."""

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return rx_processor(buffer_size=buffer_size)

    def create_element(self, i: int) -> Any:
        return i

    def max_supported_subscribers(self) -> int:
        return 1


CASES = [
    ("from_observable(block)", FromObservableBlockVerification),
    ("from_observable(buffer)", FromObservableBufferVerification),
    ("to_observable (blackbox)", ToObservableSubscriberBlackboxVerification),
    ("rx_processor()", RxProcessorVerification),
]


