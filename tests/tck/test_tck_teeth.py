"""The TCK has teeth: each deliberately broken publisher, subscriber or processor fails the
TCK test for the rule it breaks, with a message naming that rule, and a correct reference
passes the very same test."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.iterables import from_iterable
from rs_core import BaseSubscriber, Publisher, Subscriber, Subscription
from rs_core._prefetch import PrefetchQueue
from rs_core.tck import (
    IdentityProcessorVerification,
    ProbedSubscriber,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TCKFailure,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)

FAST = TestEnvironment(default_timeout_ms=300, no_signals_timeout_ms=30, gc_timeout_ms=100)

# -- broken publishers -------------------------------------------------------------------------


class _NaiveSubscription:
    """A hand-written subscription with one flaw switched on at a time."""

    def __init__(self, subscriber: Subscriber[int], n: int, flaw: str) -> None:
        self.subscriber = subscriber
        self.n = n
        self.flaw = flaw
        self.i = 0
        self.cancelled = False
        self.done = False

    def request(self, k: int) -> None:
        if k <= 0:
            if self.flaw != "ignore_3_9":
                self.done = True
                self.subscriber.on_error(ValueError("§3.9: non-positive request"))
            return
        if self.cancelled and self.flaw != "ignore_cancel":
            return
        if self.done:
            if self.flaw == "signal_after_complete":
                self.subscriber.on_complete()
            return
        extra = 1 if self.flaw == "overproduce" else 0
        for _ in range(k + extra):
            if self.i >= self.n:
                self.done = True
                self.subscriber.on_complete()
                return
            self.i += 1
            self.subscriber.on_next(self.i)
            if self.flaw == "recurse":
                return  # each on_next's own request() recurses into the next on_next

    def cancel(self) -> None:
        self.cancelled = True


class BrokenPublisher:
    kept: list[Any] = []

    def __init__(self, n: int, flaw: str) -> None:
        self.n = n
        self.flaw = flaw

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            if self.flaw == "accept_none":
                return
            raise TypeError("§1.9")
        if self.flaw == "keep_reference":
            BrokenPublisher.kept.append(subscriber)
        subscriber.on_subscribe(_NaiveSubscription(subscriber, self.n, self.flaw))


class RaisingFailedPublisher:
    def subscribe(self, subscriber: Subscriber[int]) -> None:
        raise RuntimeError("fails by raising instead of on_error")


def _publisher_verification(flaw: str | None) -> PublisherVerification[int]:
    class V(PublisherVerification[int]):
        def env(self) -> TestEnvironment:
            return FAST

        def create_publisher(self, elements: int) -> Publisher[int]:
            if flaw is None:
                return from_iterable(range(elements))
            return BrokenPublisher(elements, flaw)

        def create_failed_publisher(self) -> Publisher[int] | None:
            if flaw == "raise_from_subscribe":
                return RaisingFailedPublisher()
            return from_iterable(_Unusable())

    return V()


class _Unusable:
    def __iter__(self) -> Any:
        raise RuntimeError("cannot iterate")


PUBLISHER_CASES = [
    ("overproduce", "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements", "§1.1"),  # noqa: E501
    ("recurse", "test_required_spec303_must_not_allow_unbounded_recursion", "§3.3"),
    ("ignore_3_9", "test_required_spec309_request_zero_must_signal_illegal_argument_exception", "§3.9"),  # noqa: E501
    ("keep_reference", "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber", "§3.13"),  # noqa: E501
    ("signal_after_complete", "test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled", "§1.7"),  # noqa: E501
    ("ignore_cancel", "test_required_spec306_after_subscription_is_cancelled_request_must_be_nops", "§3.6"),  # noqa: E501
    ("accept_none", "test_required_spec109_subscribe_throw_npe_on_null_subscriber", "§1.9"),
    ("raise_from_subscribe", "test_optional_spec104_must_signal_on_error_when_fails", "§1.4"),
]
_IDS = [c[0] for c in PUBLISHER_CASES]


@pytest.mark.parametrize(("flaw", "test", "rule"), PUBLISHER_CASES, ids=_IDS)
def test_broken_publisher_fails_the_named_rule(flaw: str, test: str, rule: str) -> None:
    """The broken publisher fails the TCK test with a message starting with its rule."""
    with pytest.raises(TCKFailure) as failure:
        getattr(_publisher_verification(flaw), test)()
    assert str(failure.value).startswith(rule), str(failure.value)


@pytest.mark.parametrize(("flaw", "test", "rule"), PUBLISHER_CASES, ids=_IDS)
def test_correct_publisher_passes_the_same_test(flaw: str, test: str, rule: str) -> None:
    """from_iterable passes each test a broken publisher fails."""
    getattr(_publisher_verification(None), test)()


# -- broken subscribers ------------------------------------------------------------------------


class BrokenSubscriber(BaseSubscriber[int]):
    """A BaseSubscriber with one flaw; BaseSubscriber itself is the correct reference."""

    def __init__(self, flaw: str | None) -> None:
        super().__init__()
        self.flaw = flaw
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        if self.flaw == "keep_second" and self._subscription is not None:
            return  # §2.5 broken: neither cancels nor ignores properly
        if self.flaw == "accept_none" and subscription is None:
            return
        self._subscription = subscription
        super().on_subscribe(subscription)

    def on_next(self, element: int) -> None:
        if self.flaw == "accept_none" and element is None:
            return
        super().on_next(element)

    def hook_on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(1)

    def hook_on_complete(self) -> None:
        if self.flaw == "request_in_on_complete" and self._subscription is not None:
            self._subscription.request(1)  # §2.3 broken

    def hook_on_error(self, error: Exception) -> None:
        if self.flaw == "request_in_on_complete" and self._subscription is not None:
            self._subscription.cancel()  # §2.3 broken


def _blackbox(flaw: str | None) -> SubscriberBlackboxVerification[int]:
    class V(SubscriberBlackboxVerification[int]):
        def env(self) -> TestEnvironment:
            return FAST

        def create_subscriber(self) -> Subscriber[int]:
            return BrokenSubscriber(flaw)

        def create_element(self, i: int) -> int:
            return i

    return V()


class _RequestPuppet:
    def __init__(self, subscriber: BrokenSubscriber) -> None:
        self.subscriber = subscriber

    def trigger_request(self, n: int) -> None:
        self.subscriber.request(n)

    def signal_cancel(self) -> None:
        self.subscriber.cancel()


def _whitebox(flaw: str | None) -> SubscriberWhiteboxVerification[int]:
    class V(SubscriberWhiteboxVerification[int]):
        def env(self) -> TestEnvironment:
            return FAST

        def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
            inner = BrokenSubscriber(flaw)
            return ProbedSubscriber(inner, probe, lambda _: _RequestPuppet(inner))

        def create_element(self, i: int) -> int:
            return i

    return V()


SUBSCRIBER_CASES = [
    ("request_in_on_complete", "test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete", "§2.3"),  # noqa: E501
    ("request_in_on_complete", "test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error", "§2.3"),  # noqa: E501
    ("keep_second", "test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal", "§2.5"),  # noqa: E501
    ("accept_none", "test_required_spec213_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null", "§2.13"),  # noqa: E501
    ("accept_none", "test_required_spec213_blackbox_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null", "§2.13"),  # noqa: E501
]


@pytest.mark.parametrize(("flaw", "test", "rule"), SUBSCRIBER_CASES)
def test_broken_subscriber_fails_the_named_rule(flaw: str, test: str, rule: str) -> None:
    """The broken subscriber fails the black-box and white-box tests of its rule."""
    with pytest.raises(TCKFailure) as failure:
        getattr(_blackbox(flaw), test)()
    assert str(failure.value).startswith(rule), str(failure.value)
    whitebox_test = test.replace("_blackbox", "")
    with pytest.raises(TCKFailure) as failure:
        getattr(_whitebox(flaw), whitebox_test)()
    assert str(failure.value).startswith(rule), str(failure.value)


@pytest.mark.parametrize(("flaw", "test", "rule"), SUBSCRIBER_CASES)
def test_correct_subscriber_passes_the_same_test(flaw: str, test: str, rule: str) -> None:
    """BaseSubscriber passes each test a broken subscriber fails."""
    getattr(_blackbox(None), test)()
    getattr(_whitebox(None), test.replace("_blackbox", ""))()


# -- a processor ---------------------------------------------------------------------------------


class _QueueProcessor:
    """A minimal unicast identity processor on the drain loop (PrefetchQueue + publish-like
    DrainSubscription), with an optional flaw: swallowing upstream errors (§4.1)."""

    def __init__(self, buffer_size: int, swallow_errors: bool) -> None:
        from rs_core._drain import DrainSubscription

        self._queue: PrefetchQueue[int] = PrefetchQueue(buffer_size)
        self._swallow = swallow_errors
        self._drain = DrainSubscription
        self._subscribed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self._queue.on_subscribe(subscription)

    def on_next(self, element: int) -> None:
        self._queue.on_next(element)

    def on_error(self, error: Exception) -> None:
        if self._swallow:
            return
        self._queue.on_error(error)

    def on_complete(self) -> None:
        self._queue.on_complete()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("§1.9")
        if self._subscribed:
            from rs_core._subscription import reject

            reject(subscriber, RuntimeError("unicast"))
            return
        self._subscribed = True
        self._drain(subscriber, self._queue).start()


def _processor_verification(swallow: bool) -> IdentityProcessorVerification[int]:
    class V(IdentityProcessorVerification[int]):
        def env(self) -> TestEnvironment:
            return FAST

        def create_identity_processor(self, buffer_size: int) -> Any:
            return _QueueProcessor(buffer_size, swallow)

        def create_element(self, i: int) -> int:
            return i

        def max_supported_subscribers(self) -> int:
            return 1

    return V()


def test_processor_swallowing_errors_fails_4_1() -> None:
    """A processor that drops upstream on_error fails §4.1; a correct one passes."""
    name = "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream"  # noqa: E501
    with pytest.raises(TCKFailure, match="^§4.1"):
        getattr(_processor_verification(True), name)()
    getattr(_processor_verification(False), name)()


def test_reference_processor_passes_the_delegated_publisher_and_subscriber_tests() -> None:
    """The processor verification's delegated tests run, and pass on a correct processor."""
    v = _processor_verification(False)
    v.test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements()  # type: ignore[attr-defined]  # noqa: E501
    v.test_required_spec201_must_signal_demand_via_subscription_request()  # type: ignore[attr-defined]  # noqa: E501
