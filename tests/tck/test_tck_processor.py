"""IdentityProcessorVerification has teeth: two test-only identity processors on the drain
loop (a unicast one on PrefetchQueue, a multicast one with a queue per subscriber) pass the whole
verification, and broken variants of them fail the test of the rule they break, naming it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import pytest
from tck_helpers import FAST, Unusable, fails

from reactive_streams import UNBOUNDED, Processor, Publisher, Subscriber, Subscription
from reactive_streams._drain import EMPTY, END, DrainSubscription, Source, _Marker
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._subscription import (
    reject,
    require_element,
    require_error,
    require_subscriber,
    require_subscription,
)
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import IdentityProcessorVerification, TestEnvironment

# -- two reference processors on the drain loop -------------------------------------------------


class _Deaf(Source[int]):
    """A PrefetchQueue as a source that never wakes the drain: it is looked at only when
    downstream requests, so only a synchronous upstream (that signals inside the request the
    queue makes while being polled) gets its elements through."""

    def __init__(self, queue: PrefetchQueue[int]) -> None:
        self.inner = queue

    def poll(self) -> int | _Marker:
        return self.inner.poll()

    def at_end(self) -> bool:
        return self.inner.at_end()

    def close(self) -> None:
        self.inner.close()


class QueueProcessor:
    """A unicast identity processor: a PrefetchQueue (upstream side) drained by a
    DrainSubscription (downstream side). ``swallow_errors`` breaks §4.1; ``deaf`` (see
    ``_Deaf``) loses the elements of an asynchronous upstream."""

    def __init__(self, buffer_size: int, swallow_errors: bool = False, deaf: bool = False) -> None:
        self._queue: PrefetchQueue[int] = PrefetchQueue(buffer_size)
        self._swallow = swallow_errors
        self._deaf = deaf
        self._lock = threading.Lock()
        self._subscribed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self._queue.on_subscribe(subscription)

    def on_next(self, element: int) -> None:
        self._queue.on_next(element)

    def on_error(self, error: Exception) -> None:
        require_error(error)
        if not self._swallow:
            self._queue.on_error(error)

    def on_complete(self) -> None:
        self._queue.on_complete()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        require_subscriber(subscriber)
        with self._lock:
            taken, self._subscribed = self._subscribed, True
        if taken:
            reject(subscriber, RuntimeError("§1.11: this processor serves one subscriber"))
            return
        source: Source[int] = _Deaf(self._queue) if self._deaf else self._queue
        DrainSubscription(subscriber, source).start()


class _Outlet(Source[int]):
    """One subscriber's queue in MulticastProcessor; an error overtakes queued elements."""

    def __init__(self, owner: MulticastProcessor) -> None:
        self.owner = owner
        self.items: deque[int] = deque()
        self.done = False
        self.error: Exception | None = None
        self.wake: Callable[[], None] = lambda: None

    def bind(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def poll(self) -> int | _Marker:
        if self.error is not None:
            raise self.error  # §4.1: errors are passed on at once
        if self.items:
            element = self.items.popleft()
            self.owner.replenish()
            return element
        return END if self.done else EMPTY

    def at_end(self) -> bool:
        return self.error is not None or (self.done and not self.items)

    def close(self) -> None:
        self.owner.remove(self)


class MulticastProcessor:
    """A multicast identity processor: each subscriber drains its own outlet; upstream is
    requested only while every outlet has room in ``buffer_size`` (so the slowest subscriber
    paces it) and only once someone subscribed. Elements reach the subscribers present when
    they arrive; the last subscriber's cancel cancels upstream.

    Flaws: ``error_to_first_only`` (breaks §1.4), ``no_replenish`` (requests upstream once).
    """

    def __init__(self, buffer_size: int, flaw: str | None = None) -> None:
        self._buffer = buffer_size
        self._flaw = flaw
        self._lock = threading.Lock()
        self._outlets: list[_Outlet] = []
        self._upstream: Subscription | None = None
        self._outstanding = 0
        self._requested = False
        self._done = False
        self._error: Exception | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
        if duplicate:  # §2.5
            subscription.cancel()
            return
        self.replenish()

    def on_next(self, element: int) -> None:
        require_element(element)
        with self._lock:
            self._outstanding = max(self._outstanding - 1, 0)
            outlets = list(self._outlets)
            for outlet in outlets:
                outlet.items.append(element)
        for outlet in outlets:
            outlet.wake()

    def on_error(self, error: Exception) -> None:
        require_error(error)
        with self._lock:
            self._done, self._error = True, error
            outlets = list(self._outlets)
        if self._flaw == "error_to_first_only":
            outlets = outlets[:1]
        for outlet in outlets:
            outlet.error = error
            outlet.wake()

    def on_complete(self) -> None:
        with self._lock:
            self._done = True
            outlets = list(self._outlets)
        for outlet in outlets:
            outlet.done = True
            outlet.wake()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        require_subscriber(subscriber)
        outlet = _Outlet(self)
        with self._lock:
            if self._done:  # late: only the terminal signal is left
                outlet.done, outlet.error = True, self._error
            else:
                self._outlets.append(outlet)
        DrainSubscription(subscriber, outlet).start()
        self.replenish()

    def replenish(self) -> None:
        with self._lock:
            upstream = self._upstream
            if upstream is None or self._done or not self._outlets:
                return
            if self._flaw == "no_replenish" and self._requested:
                return
            fullest = max(len(outlet.items) for outlet in self._outlets)
            room = self._buffer - fullest - self._outstanding
            if room <= 0:
                return
            self._outstanding += room
            self._requested = True
        upstream.request(room)

    def remove(self, outlet: _Outlet) -> None:
        with self._lock:
            if outlet not in self._outlets:
                return
            self._outlets.remove(outlet)
            last = not self._outlets and not self._done
            if last:
                self._done = True
                self._error = RuntimeError("the processor was cancelled by its last subscriber")
            upstream = self._upstream if last else None
        if upstream is not None:
            upstream.cancel()


class QueueProcessorVerification(IdentityProcessorVerification[int]):
    """The unicast reference processor under the whole processor verification."""

    def env(self) -> TestEnvironment:
        return FAST

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return QueueProcessor(buffer_size)

    def create_element(self, i: int) -> int:
        return i

    def create_failed_publisher(self) -> Publisher[int] | None:
        processor = QueueProcessor(4)
        from_iterable(Unusable()).subscribe(processor)
        return processor

    def max_supported_subscribers(self) -> int:
        return 1


class MulticastProcessorVerification(QueueProcessorVerification):
    """The multicast reference processor, buffer 2, under the whole processor verification."""

    flaw: str | None = None

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return MulticastProcessor(buffer_size, self.flaw)

    def processor_buffer_size(self) -> int:
        return 2

    def max_supported_subscribers(self) -> int:
        return UNBOUNDED


# -- the whole verification passes over both references -----------------------------------------


class TestQueueProcessor(QueueProcessorVerification):
    """Every processor test passes over the unicast reference (multi-subscriber ones skip)."""


class TestMulticastProcessor(MulticastProcessorVerification):
    """Every processor test passes over the multicast reference."""


# -- each broken processor fails the test of its rule; the reference passes it ------------------


def _swallowing() -> IdentityProcessorVerification[int]:
    class V(QueueProcessorVerification):
        def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
            return QueueProcessor(buffer_size, swallow_errors=True)

    return V()


class _CompletesThenFails(QueueProcessor):
    """Passes an upstream error on as on_complete then on_error: two terminal signals."""

    def __init__(self, buffer_size: int) -> None:
        super().__init__(buffer_size)
        self._downstream: list[Subscriber[int]] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._downstream.append(subscriber)
        super().subscribe(subscriber)

    def on_error(self, error: Exception) -> None:
        for subscriber in self._downstream:
            subscriber.on_complete()
            subscriber.on_error(error)


class _FlushesOnComplete(_CompletesThenFails):
    """Sends its subscribers one element nobody requested (a "flush") before on_complete."""

    def on_complete(self) -> None:
        for subscriber in self._downstream:
            subscriber.on_next(-1)  # §1.1 broken: nothing was requested
        super().on_complete()


def _flushes_on_complete() -> IdentityProcessorVerification[int]:
    class V(QueueProcessorVerification):
        def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
            return _FlushesOnComplete(buffer_size)

    return V()


def _deaf() -> IdentityProcessorVerification[int]:
    class V(QueueProcessorVerification):
        def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
            return QueueProcessor(1, deaf=True)  # a buffer of 1: it must replenish at once

    return V()


def _completes_then_fails() -> IdentityProcessorVerification[int]:
    class V(QueueProcessorVerification):
        def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
            return _CompletesThenFails(buffer_size)

    return V()


def _multicast(flaw: str) -> IdentityProcessorVerification[int]:
    class V(MulticastProcessorVerification):
        pass

    V.flaw = flaw
    return V()


PROCESSOR_CASES: list[tuple[str, Callable[[], IdentityProcessorVerification[int]], Callable[[], IdentityProcessorVerification[int]], str, str]] = [  # noqa: E501
    ("swallows upstream errors", _swallowing, QueueProcessorVerification,
     "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream", "§4.1"),  # noqa: E501
    ("error to one subscriber only", lambda: _multicast("error_to_first_only"), MulticastProcessorVerification,  # noqa: E501
     "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error", "§1.4"),  # noqa: E501
    ("stops requesting upstream", lambda: _multicast("no_replenish"), MulticastProcessorVerification,  # noqa: E501
     "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago", "§2.1"),  # noqa: E501
    ("swallows upstream errors", _swallowing, QueueProcessorVerification,
     "test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call", "§2.10"),  # noqa: E501
    ("elements after request() returned are lost", _deaf, QueueProcessorVerification,
     "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription", "§1.2"),  # noqa: E501
    ("an unrequested element before on_complete", _flushes_on_complete, QueueProcessorVerification,  # noqa: E501
     "test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call", "§2.9"),  # noqa: E501
    ("on_complete before the error", _completes_then_fails, QueueProcessorVerification,
     "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream", "§1.7"),  # noqa: E501
]  # fmt: skip


@pytest.mark.parametrize(
    ("flaw", "broken", "reference", "test", "rule"),
    PROCESSOR_CASES,
    ids=[c[0] + "-" + c[4] for c in PROCESSOR_CASES],
)  # noqa: E501
def test_broken_processor_fails_the_named_rule(
    flaw: str,
    broken: Callable[[], IdentityProcessorVerification[int]],
    reference: Callable[[], IdentityProcessorVerification[int]],
    test: str,
    rule: str,
) -> None:
    """The broken processor fails the test of its rule, naming it; the reference passes."""
    fails(getattr(broken(), test), rule)
    getattr(reference(), test)()
