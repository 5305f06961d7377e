"""TCK cases for ``reactive_streams.adapters.rx`` (reactivex 4.x to 6.x).

The subscriber cases verify the very subscriber ``to_observable`` subscribes to a publisher
(captured through the public function), with its window drained into a live Rx observer.
"""

from __future__ import annotations

from typing import Any

import reactivex
from reactivex import operators as ops
from reactivex.abc import DisposableBase
from reactivex.scheduler import NewThreadScheduler

from reactive_streams import Processor, Publisher, Subscriber, Subscription
from reactive_streams.adapters.rx import from_observable, rx_processor, to_observable
from reactive_streams.tck import (
    IdentityProcessorVerification,
    ProbedSubscriber,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
)


def _failing() -> Publisher[int]:
    return from_observable(reactivex.throw(RuntimeError("TCK: a failing Observable")))


class FromObservableBlockVerification(PublisherVerification[int]):
    """``from_observable(reactivex.from_iterable(range(n)))``: the default lossless ``block``,
    a cold source produced on the adapter's own thread and paced by demand."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_observable(reactivex.from_iterable(range(elements)))

    def create_failed_publisher(self) -> Publisher[int] | None:
        return _failing()


class FromObservableBlockOnRxThreadVerification(PublisherVerification[int]):
    """``block`` over an operator chain that emits on a thread of Rx's own
    (``from_iterable(..., scheduler=NewThreadScheduler())``): the emitting thread is not the
    adapter's. Not ``subscribe_on``: RxPY learns the disposable of a synchronous source that
    ``subscribe_on`` moved only once its loop returns, so cancel could not stop the TCK's
    2**31-element publishers, whose threads would spin on after their tests."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        chain = reactivex.from_iterable(range(elements), scheduler=NewThreadScheduler()).pipe(
            ops.map(lambda x: x)
        )
        return from_observable(chain, buffer_size=16)

    def create_failed_publisher(self) -> Publisher[int] | None:
        return _failing()


class FromObservableBufferVerification(PublisherVerification[int]):
    """``from_observable(..., overflow="buffer")`` over a cold source that fits the buffer
    (a cold source emits everything at subscribe, on the subscriber's thread)."""

    def max_elements_from_publisher(self) -> int:
        return 1024

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_observable(
            reactivex.from_iterable(range(elements)), overflow="buffer", buffer_size=1024
        )

    def create_failed_publisher(self) -> Publisher[int] | None:
        return from_observable(
            reactivex.throw(RuntimeError("TCK: a failing Observable")), overflow="buffer"
        )


class _Capture:
    """A Publisher that only keeps the subscriber it is given."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[int] | None = None

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscriber = subscriber


def _inside_to_observable(prefetch: int) -> tuple[Subscriber[int], DisposableBase]:
    """The subscriber ``to_observable(...).subscribe(observer)`` gives its publisher."""
    capture = _Capture()
    disposable = to_observable(capture, prefetch=prefetch).subscribe(
        on_next=lambda _: None, on_error=lambda _: None
    )
    assert capture.subscriber is not None
    return capture.subscriber, disposable


class _DisposePuppet:
    """The observer takes each element at once, so the window replenishes by itself;
    cancelling is what ``dispose()`` does."""

    def __init__(self, disposable: DisposableBase) -> None:
        self._disposable = disposable

    def trigger_request(self, n: int) -> None:
        pass

    def signal_cancel(self) -> None:
        self._disposable.dispose()


class ToObservableSubscriberWhiteboxVerification(SubscriberWhiteboxVerification[int]):
    """The subscriber inside ``to_observable(prefetch=1)`` (each element the observer takes is
    re-requested), cancelled through the Rx ``dispose()``."""

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
        subscriber, disposable = _inside_to_observable(1)

        def puppet(_: Subscription) -> _DisposePuppet:
            return _DisposePuppet(disposable)

        return ProbedSubscriber(subscriber, probe, puppet)

    def create_element(self, i: int) -> int:
        return i


class ToObservableSubscriberBlackboxVerification(SubscriberBlackboxVerification[int]):
    """The subscriber inside ``to_observable`` with the default window of 256."""

    def create_subscriber(self) -> Subscriber[int]:
        return _inside_to_observable(256)[0]

    def create_element(self, i: int) -> int:
        return i


class RxProcessorVerification(IdentityProcessorVerification[Any]):
    """``rx_processor()`` with no operators: an identity stage; unicast (one subscriber)."""

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return rx_processor(buffer_size=buffer_size)

    def create_element(self, i: int) -> Any:
        return i

    def max_supported_subscribers(self) -> int:
        return 1


CASES = [
    ("from_observable(block)", FromObservableBlockVerification),
    ("from_observable(block, Rx thread)", FromObservableBlockOnRxThreadVerification),
    ("from_observable(buffer)", FromObservableBufferVerification),
    ("to_observable (whitebox)", ToObservableSubscriberWhiteboxVerification),
    ("to_observable (blackbox)", ToObservableSubscriberBlackboxVerification),
    ("rx_processor()", RxProcessorVerification),
]
