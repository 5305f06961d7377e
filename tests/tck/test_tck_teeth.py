"""The TCK has teeth: each deliberately broken publisher, subscriber or processor fails the TCK
test for the rule it breaks, with a message starting with that rule, and a correct reference
passes the very same test. A TCK test that did nothing would fail the first half.

Also here: two test-only identity processors on the drain loop (a unicast one on
PrefetchQueue, a multicast one with a queue per subscriber) that pass the whole
IdentityProcessorVerification, so the processor-only tests are shown to run and pass too.
"""

from __future__ import annotations

import threading
import unittest
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from reactive_streams import (
    UNBOUNDED,
    BaseSubscriber,
    Processor,
    Publisher,
    Subscriber,
    Subscription,
)
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
from reactive_streams.tck import (
    IdentityProcessorVerification,
    ProbedSubscriber,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TCKFailure,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)

FAST = TestEnvironment(
    default_timeout_ms=300, no_signals_timeout_ms=30, gc_timeout_ms=100, poll_timeout_ms=5
)
LATE = 0.01  # a late signal comes this many seconds after the test saw what it waited for
QUIET = TestEnvironment(  # a no-signals window that a LATE signal surely falls into
    default_timeout_ms=300, no_signals_timeout_ms=150, gc_timeout_ms=100, poll_timeout_ms=5
)


def _fails(run: Callable[[], None], rule: str) -> None:
    with pytest.raises(TCKFailure) as failure:
        run()
    assert str(failure.value).startswith(rule + ":"), str(failure.value)


# -- broken publishers -------------------------------------------------------------------------


class _NaiveSubscription:
    """A hand-written synchronous subscription (a re-entrancy guard, demand capped at
    UNBOUNDED) with one flaw switched on."""

    def __init__(self, subscriber: Subscriber[int], n: int, flaw: str) -> None:
        self.subscriber = subscriber
        self.n = n
        self.flaw = flaw
        self.i = 0
        self.demand = 0
        self.emitting = False
        self.cancelled = False
        self.done = False
        self.subscribing = False  # inside on_subscribe

    def request(self, k: int) -> None:
        if self.flaw == "raise_in_on_subscribe" and self.subscribing:
            raise RuntimeError("request() before on_subscribe returned")
        if k <= 0:
            if self.flaw == "ignore_3_9":
                return
            if self.flaw == "raise_3_9":
                raise ValueError("§3.9")
            error: Exception = (
                RuntimeError("bad request")
                if self.flaw == "wrong_3_9_error"
                else ValueError("§3.9")
            )
            if self.flaw == "complete_before_3_9_error":
                self.subscriber.on_complete()
            if self.flaw == "next_before_3_9_error":
                self.subscriber.on_next(0)  # nothing was requested
            self.done = True
            self.subscriber.on_error(error)
            if self.flaw == "3_9_error_twice":
                self.subscriber.on_error(error)
            return
        if self.cancelled and self.flaw == "raise_after_cancel":
            raise RuntimeError("cancelled")
        if self.cancelled and self.flaw not in ("ignore_cancel", "raise_after_cancel"):
            return
        if self.done:
            if self.flaw == "signal_after_complete":
                self.subscriber.on_complete()
            return
        if self.flaw == "error_on_overflow" and self.demand + k > UNBOUNDED:
            self.done = True
            self.subscriber.on_error(ArithmeticError("demand overflow"))
            return
        self.demand = min(self.demand + k + (1 if self.flaw == "overproduce" else 0), UNBOUNDED)
        if self.emitting and self.flaw != "recurse":
            return  # the loop below, further up this stack, sees the new demand
        self.emitting = True
        try:
            while self.demand > 0 and not self.done:
                if self.cancelled and self.flaw != "ignore_cancel":
                    return
                if self.i >= self.n:
                    if self.flaw == "extra_element" and self.i == self.n:
                        self.i += 1  # within demand, one element more than the stream holds
                        self.demand -= 1
                        self.subscriber.on_next(0)
                        continue
                    if self.flaw == "late_error":  # on_error instead of on_complete, late
                        self.done = True
                        error = RuntimeError("after the last element")
                        threading.Timer(LATE, self.subscriber.on_error, [error]).start()
                        return
                    if self.flaw != "never_complete":
                        self.done = True
                        self.subscriber.on_complete()
                    return
                self.i += 1
                self.demand -= 1
                self.subscriber.on_next(self.i)
        finally:
            self.emitting = False

    def cancel(self) -> None:
        if self.cancelled and self.flaw == "raise_after_cancel":
            raise RuntimeError("already cancelled")
        self.cancelled = True
        if (self.flaw == "error_on_cancel" and not self.done) or self.flaw == "error_on_any_cancel":
            self.done = True
            self.subscriber.on_error(RuntimeError("cancelled"))  # §3.12/§1.8 (§1.7) broken


class BrokenPublisher:
    """Serves each subscriber a ``_NaiveSubscription`` with ``flaw``; keeps subscribers
    forever when the flaw is ``keep_reference``; rejects every subscriber but the first with
    a late on_error when it is ``late_reject_second``."""

    def __init__(self, n: int, flaw: str) -> None:
        self.n = n
        self.flaw = flaw
        self.kept: list[Subscriber[int]] = []
        self.subscribers = 0

    def subscribe(self, subscriber: Subscriber[int] | None) -> None:
        if subscriber is None:
            if self.flaw == "accept_none":
                return
            raise TypeError("§1.9")
        if self.flaw == "no_on_subscribe":
            return
        if self.flaw == "keep_reference":
            self.kept.append(subscriber)
        subscription = _NaiveSubscription(subscriber, self.n, self.flaw)
        subscription.subscribing = True
        subscriber.on_subscribe(subscription)
        subscription.subscribing = False
        self.subscribers += 1
        if self.flaw == "late_reject_second" and self.subscribers > 1:
            threading.Timer(LATE, subscriber.on_error, [RuntimeError("one subscriber")]).start()


class ThreadHoppingPublisher:
    """Emits each element from a new thread and waits for it, so an on_next that requests
    the next element sees it delivered on another thread while it is still running (§1.3)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        require_subscriber(subscriber)
        subscriber.on_subscribe(_ThreadHoppingSubscription(subscriber, self.n))


class _ThreadHoppingSubscription:
    def __init__(self, subscriber: Subscriber[int], n: int) -> None:
        self.subscriber = subscriber
        self.n = n
        self.i = 0
        self.lock = threading.Lock()
        self.finished = False

    def _on_thread(self, call: Callable[[], None]) -> None:
        thread = threading.Thread(target=call)
        thread.start()
        thread.join()

    def request(self, k: int) -> None:
        for _ in range(k):
            with self.lock:
                if self.i >= self.n:
                    break
                self.i += 1
                value = self.i
            self._on_thread(lambda value=value: self.subscriber.on_next(value))  # type: ignore[misc]
        with self.lock:
            finish = self.i >= self.n and not self.finished
            self.finished = self.finished or finish
        if finish:
            self._on_thread(self.subscriber.on_complete)

    def cancel(self) -> None:
        with self.lock:
            self.i = self.n
            self.finished = True


class RaisingPublisher:
    """Fails by raising from ``subscribe`` instead of signalling ``on_error``."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        raise RuntimeError("fails by raising instead of on_error")


class LateSecondErrorPublisher:
    """A failed publisher that signals on_error, and a second one a little later (§1.7)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        subscriber.on_subscribe(_NaiveSubscription(subscriber, 0, "never_complete"))
        subscriber.on_error(RuntimeError("failed"))
        threading.Timer(LATE, subscriber.on_error, [RuntimeError("failed again")]).start()


class _Unusable:
    def __iter__(self) -> Any:
        raise RuntimeError("cannot iterate")


def _publisher_verification(
    create: Callable[[int], Publisher[int]],
    failed: Callable[[], Publisher[int]] | None = None,
    env: TestEnvironment = FAST,
) -> PublisherVerification[int]:
    class V(PublisherVerification[int]):
        def env(self) -> TestEnvironment:
            return env

        def create_publisher(self, elements: int) -> Publisher[int]:
            return create(elements)

        def create_failed_publisher(self) -> Publisher[int] | None:
            return failed() if failed is not None else from_iterable(_Unusable())

    return V()


def _broken(flaw: str, env: TestEnvironment = FAST) -> PublisherVerification[int]:
    return _publisher_verification(lambda n: BrokenPublisher(n, flaw), env=env)


def _reference_publisher() -> PublisherVerification[int]:
    return _publisher_verification(lambda n: from_iterable(range(n)))


PUBLISHER_CASES: list[tuple[str, Callable[[], PublisherVerification[int]], str, str]] = [
    ("overproduction", lambda: _broken("overproduce"),
     "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements", "§1.1"),  # noqa: E501
    ("never completes", lambda: _broken("never_complete"),
     "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription", "§1.2"),  # noqa: E501
    ("never completes", lambda: _broken("never_complete"),
     "test_required_spec105_must_signal_on_complete_when_finite_stream_terminates", "§1.5"),  # noqa: E501
    ("an element too many before on_complete", lambda: _broken("extra_element"),
     "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription", "§1.2"),  # noqa: E501
    ("an element too many before on_complete", lambda: _broken("extra_element"),
     "test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled", "§1.7"),  # noqa: E501
    ("overlapping signals", lambda: _publisher_verification(ThreadHoppingPublisher),
     "test_stochastic_spec103_must_signal_on_methods_sequentially", "§1.3"),
    ("subscribe raises", lambda: _publisher_verification(lambda n: from_iterable(range(n)), RaisingPublisher),  # noqa: E501
     "test_optional_spec104_must_signal_on_error_when_fails", "§1.4"),
    ("a late second on_error", lambda: _publisher_verification(lambda n: from_iterable(range(n)), LateSecondErrorPublisher, QUIET),  # noqa: E501
     "test_optional_spec104_must_signal_on_error_when_fails", "§1.4"),
    ("subscribe raises", lambda: _publisher_verification(lambda n: from_iterable(range(n)), RaisingPublisher),  # noqa: E501
     "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe", "§1.9"),  # noqa: E501
    ("signal after completion", lambda: _broken("signal_after_complete"),
     "test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled", "§1.7"),  # noqa: E501
    ("subscribe(None) accepted", lambda: _broken("accept_none"),
     "test_required_spec109_subscribe_throw_npe_on_null_subscriber", "§1.9"),
    ("on_subscribe missing", lambda: _broken("no_on_subscribe"),
     "test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber", "§1.9"),
    ("on_error late after the last element", lambda: _broken("late_error", QUIET),
     "test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe", "§3.2"),  # noqa: E501
    ("request raises inside on_subscribe", lambda: _broken("raise_in_on_subscribe"),
     "test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe", "§3.16"),  # noqa: E501
    ("unbounded recursion", lambda: _broken("recurse"),
     "test_required_spec303_must_not_allow_unbounded_recursion", "§3.3"),
    ("cancel ignored", lambda: _broken("ignore_cancel"),
     "test_required_spec306_after_subscription_is_cancelled_request_must_be_nops", "§3.6"),
    ("cancel ignored", lambda: _broken("ignore_cancel"),
     "test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling", "§3.12"),  # noqa: E501
    ("§3.9 ignored", lambda: _broken("ignore_3_9"),
     "test_required_spec309_request_zero_must_signal_illegal_argument_exception", "§3.9"),
    ("§3.9 ignored", lambda: _broken("ignore_3_9"),
     "test_required_spec309_request_negative_number_must_signal_illegal_argument_exception", "§3.9"),  # noqa: E501
    ("§3.9 wrong error", lambda: _broken("wrong_3_9_error"),
     "test_required_spec309_request_zero_must_signal_illegal_argument_exception", "§3.9"),
    ("§3.9 after on_complete", lambda: _broken("complete_before_3_9_error"),
     "test_required_spec309_request_zero_must_signal_illegal_argument_exception", "§1.7"),
    ("§3.9 after an unrequested on_next", lambda: _broken("next_before_3_9_error"),
     "test_required_spec309_request_negative_number_must_signal_illegal_argument_exception", "§1.1"),  # noqa: E501
    ("§3.9 error twice", lambda: _broken("3_9_error_twice"),
     "test_required_spec309_request_zero_must_signal_illegal_argument_exception", "§1.7"),
    ("§3.9 raised", lambda: _broken("raise_3_9"),
     "test_required_spec309_request_zero_must_signal_illegal_argument_exception", "§3.16"),
    ("request after cancel raises", lambda: _broken("raise_after_cancel"),
     "test_required_spec306_after_subscription_is_cancelled_request_must_be_nops", "§3.16"),
    ("second cancel raises", lambda: _broken("raise_after_cancel"),
     "test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops", "§3.15"),  # noqa: E501
    ("reference kept after cancel", lambda: _broken("keep_reference"),
     "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber", "§3.13"),  # noqa: E501
    ("on_error on cancel", lambda: _broken("error_on_cancel"),
     "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber", "§3.13"),  # noqa: E501
    ("on_error on the closing cancel", lambda: _broken("error_on_cancel"),
     "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements", "§1.1"),  # noqa: E501
    ("on_error on the closing cancel", lambda: _broken("error_on_cancel"),
     "test_required_spec303_must_not_allow_unbounded_recursion", "§3.3"),
    ("on_error on a cancel after on_complete", lambda: _broken("error_on_any_cancel"),
     "test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_long_max_value", "§3.17"),  # noqa: E501
    ("on_error on a cancel after on_complete", lambda: _broken("error_on_any_cancel"),
     "test_stochastic_spec103_must_signal_on_methods_sequentially", "§1.3"),
    ("on_error on the closing cancel", lambda: _broken("error_on_cancel"),
     "test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber", "§1.9"),
    ("on_error on a cancel after on_complete", lambda: _broken("error_on_any_cancel"),
     "test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe", "§3.2"),  # noqa: E501
    ("demand overflow errors", lambda: _broken("error_on_overflow"),
     "test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value", "§3.17"),  # noqa: E501
]  # fmt: skip
_PUBLISHER_IDS = [f"{c[0]}-{c[3]}" for c in PUBLISHER_CASES]


@pytest.mark.parametrize(
    ("flaw", "verification", "test", "rule"), PUBLISHER_CASES, ids=_PUBLISHER_IDS
)  # noqa: E501
def test_broken_publisher_fails_the_named_rule(
    flaw: str, verification: Callable[[], PublisherVerification[int]], test: str, rule: str
) -> None:
    """The broken publisher fails the TCK test with a message starting with its rule."""
    _fails(getattr(verification(), test), rule)


@pytest.mark.parametrize(
    ("flaw", "verification", "test", "rule"), PUBLISHER_CASES, ids=_PUBLISHER_IDS
)  # noqa: E501
def test_reference_publisher_passes_the_same_test(
    flaw: str, verification: Callable[[], PublisherVerification[int]], test: str, rule: str
) -> None:
    """from_iterable (with a failed publisher over an unusable iterable) passes it."""
    getattr(_reference_publisher(), test)()


@pytest.mark.parametrize(
    "test",
    [
        "test_optional_spec111_may_support_multi_subscribe",
        "test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals",
    ],
)
def test_late_rejection_of_a_second_subscriber_skips_the_optional_test(test: str) -> None:
    """A second subscriber's on_error that comes late is still seen (the optional test
    skips, naming §1.11); the reference passes."""
    with pytest.raises(unittest.SkipTest, match="optional requirement not met: §1.11"):
        getattr(_broken("late_reject_second", QUIET), test)()
    getattr(_reference_publisher(), test)()


def test_publisher_without_on_complete_skips_completion_tests() -> None:
    """max_elements_from_publisher() == UNBOUNDED skips the tests that need on_complete."""

    class Endless(PublisherVerification[int]):
        def env(self) -> TestEnvironment:
            return FAST

        def create_publisher(self, elements: int) -> Publisher[int]:
            return from_iterable(range(elements))

        def max_elements_from_publisher(self) -> int:
            return UNBOUNDED

    with pytest.raises(unittest.SkipTest, match="on_complete"):
        Endless().test_required_spec102_may_signal_less_than_requested_and_terminate_subscription()
    Endless().test_required_spec303_must_not_allow_unbounded_recursion()


# -- broken subscribers ------------------------------------------------------------------------


class BrokenSubscriber(BaseSubscriber[int]):
    """A BaseSubscriber with one flaw switched on; with none it is the correct reference.

    It requests ``initial`` in on_subscribe, then whatever ``request(n)`` asks for.
    """

    def __init__(self, flaw: str | None, initial: int) -> None:
        super().__init__()
        self.flaw = flaw
        self.initial = initial
        self.raw: Subscription | None = None
        self.requested_once = False
        self.requested_any = initial > 0
        self.outstanding = initial
        self.report_end: Callable[[], None] = lambda: None  # to the probe (whitebox)
        self.report_next: Callable[[int], None] = lambda _: None  # to the probe (whitebox)

    def on_subscribe(self, subscription: Any) -> None:
        if subscription is None and self.flaw == "accept_none":
            return
        if self.raw is not None and subscription is not None:
            if self.flaw == "keep_second":
                return  # neither cancels nor uses the second subscription
            if self.flaw == "request_second":
                subscription.request(1)
        elif subscription is not None:
            self.raw = subscription
        super().on_subscribe(subscription)

    def on_next(self, element: Any) -> None:
        if element is None and self.flaw == "accept_none":
            return
        if self.flaw == "raise_after_cancel" and self.is_disposed:
            raise RuntimeError("on_next after cancel")
        super().on_next(element)

    def on_error(self, error: Any) -> None:
        if error is None and self.flaw == "accept_none":
            return
        super().on_error(error)

    def on_complete(self) -> None:
        if self.flaw == "raise_on_unrequested_complete" and not self.requested_any:
            raise RuntimeError("on_complete before anything was requested")
        super().on_complete()

    def request(self, n: int) -> None:
        if self.flaw == "never_request":
            return
        if self.flaw == "request_once":
            if self.requested_once:
                return
            self.requested_once = True
            n = 1
        self.requested_any = True
        self.outstanding += n
        super().request(n)

    def hook_on_subscribe(self, subscription: Subscription) -> None:
        if self.initial:
            self.request(self.initial)

    def hook_on_next(self, element: int) -> None:
        self.outstanding -= 1
        if self.flaw == "end_when_satisfied" and self.outstanding == 0:
            self.cancel()  # takes "no demand left" for the end of the stream
            self.report_end()

    def hook_on_complete(self) -> None:
        if self.flaw == "request_in_on_complete" and self.raw is not None:
            self.raw.request(1)  # §2.3 broken
        if self.flaw == "report_phantom_element":
            self.report_next(-1)  # an element nobody sent, before the completion
        if self.flaw == "report_late_second_complete":  # as from a worker thread (§2.2)
            threading.Timer(LATE, self.report_end).start()

    def hook_on_error(self, error: Exception) -> None:
        if self.flaw == "cancel_in_on_error" and self.raw is not None:
            self.raw.cancel()  # §2.3 broken


def _blackbox(flaw: str | None) -> SubscriberBlackboxVerification[int]:
    class V(SubscriberBlackboxVerification[int]):
        def env(self) -> TestEnvironment:
            return FAST

        def create_subscriber(self) -> Subscriber[int]:
            return BrokenSubscriber(flaw, initial=4)

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
            return QUIET if flaw == "report_late_second_complete" else FAST

        def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
            inner = BrokenSubscriber(flaw, initial=0)
            inner.report_end = probe.register_on_complete
            inner.report_next = probe.register_on_next
            return ProbedSubscriber(inner, probe, lambda _: _RequestPuppet(inner))

        def create_element(self, i: int) -> int:
            return i

    return V()


_BB = "test_required_spec{}_blackbox_{}"
_WB = "test_required_spec{}_{}"
SUBSCRIBER_CASES: list[tuple[str, str, str, str]] = [
    # (flaw, verification: blackbox/whitebox, test, rule)
    ("never_request", "blackbox", _BB.format(201, "must_signal_demand_via_subscription_request"), "§2.1"),  # noqa: E501
    ("never_request", "whitebox", _WB.format(201, "must_signal_demand_via_subscription_request"), "§2.1"),  # noqa: E501
    ("request_in_on_complete", "blackbox", _BB.format(203, "must_not_call_methods_on_subscription_or_publisher_in_on_complete"), "§2.3"),  # noqa: E501
    ("request_in_on_complete", "whitebox", _WB.format(203, "must_not_call_methods_on_subscription_or_publisher_in_on_complete"), "§2.3"),  # noqa: E501
    ("cancel_in_on_error", "blackbox", _BB.format(203, "must_not_call_methods_on_subscription_or_publisher_in_on_error"), "§2.3"),  # noqa: E501
    ("cancel_in_on_error", "whitebox", _WB.format(203, "must_not_call_methods_on_subscription_or_publisher_in_on_error"), "§2.3"),  # noqa: E501
    ("keep_second", "blackbox", _BB.format(205, "must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal"), "§2.5"),  # noqa: E501
    ("keep_second", "whitebox", _WB.format(205, "must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal"), "§2.5"),  # noqa: E501
    ("request_second", "blackbox", _BB.format(205, "must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal"), "§2.5"),  # noqa: E501
    ("raise_after_cancel", "whitebox", _WB.format(208, "must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel"), "§2.8"),  # noqa: E501
    ("raise_on_unrequested_complete", "whitebox", _WB.format(209, "must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call"), "§2.9"),  # noqa: E501
    ("report_phantom_element", "whitebox", _WB.format(209, "must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call"), "§2.9"),  # noqa: E501
    ("report_phantom_element", "whitebox", _WB.format(209, "must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call"), "§2.9"),  # noqa: E501
    ("report_late_second_complete", "whitebox", _WB.format(209, "must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call"), "§1.7"),  # noqa: E501
    ("report_late_second_complete", "whitebox", _WB.format(209, "must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call"), "§1.7"),  # noqa: E501
    ("accept_none", "blackbox", _BB.format(213, "on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null"), "§2.13"),  # noqa: E501
    ("accept_none", "whitebox", _WB.format(213, "on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null"), "§2.13"),  # noqa: E501
    ("accept_none", "blackbox", _BB.format(213, "on_next_must_throw_null_pointer_exception_when_parameters_are_null"), "§2.13"),  # noqa: E501
    ("accept_none", "whitebox", _WB.format(213, "on_next_must_throw_null_pointer_exception_when_parameters_are_null"), "§2.13"),  # noqa: E501
    ("accept_none", "blackbox", _BB.format(213, "on_error_must_throw_null_pointer_exception_when_parameters_are_null"), "§2.13"),  # noqa: E501
    ("accept_none", "whitebox", _WB.format(213, "on_error_must_throw_null_pointer_exception_when_parameters_are_null"), "§2.13"),  # noqa: E501
    ("request_once", "whitebox", _WB.format(308, "request_must_register_given_number_elements_to_be_produced"), "§3.8"),  # noqa: E501
    ("end_when_satisfied", "whitebox", _WB.format(308, "request_must_register_given_number_elements_to_be_produced"), "§3.8"),  # noqa: E501
]  # fmt: skip
_SUBSCRIBER_IDS = [f"{c[0]}-{c[1]}-{c[3]}" for c in SUBSCRIBER_CASES]


def _subscriber_verification(kind: str, flaw: str | None) -> Any:
    return _blackbox(flaw) if kind == "blackbox" else _whitebox(flaw)


@pytest.mark.parametrize(("flaw", "kind", "test", "rule"), SUBSCRIBER_CASES, ids=_SUBSCRIBER_IDS)
def test_broken_subscriber_fails_the_named_rule(flaw: str, kind: str, test: str, rule: str) -> None:
    """The broken subscriber fails the black- or white-box test of its rule, naming it."""
    _fails(getattr(_subscriber_verification(kind, flaw), test), rule)


@pytest.mark.parametrize(("flaw", "kind", "test", "rule"), SUBSCRIBER_CASES, ids=_SUBSCRIBER_IDS)
def test_reference_subscriber_passes_the_same_test(
    flaw: str, kind: str, test: str, rule: str
) -> None:
    """The same BaseSubscriber without the flaw passes the test."""
    getattr(_subscriber_verification(kind, None), test)()


# -- processors: two test-only references on the drain loop, and broken variants ----------------


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
        from_iterable(_Unusable()).subscribe(processor)
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


class TestQueueProcessor(QueueProcessorVerification):
    """Every processor test passes over the unicast reference (multi-subscriber ones skip)."""


class TestMulticastProcessor(MulticastProcessorVerification):
    """Every processor test passes over the multicast reference."""


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
    _fails(getattr(broken(), test), rule)
    getattr(reference(), test)()


# -- found by a mutation audit: rules broken where only the problems list shows them -------------


class SwallowingPublisher(BrokenPublisher):
    """A BrokenPublisher that catches whatever on_subscribe raises (it would log it), so
    a TCK failure raised inside on_subscribe never reaches the test that subscribed."""

    def subscribe(self, subscriber: Subscriber[int] | None) -> None:
        try:
            super().subscribe(subscriber)
        except Exception:
            pass


def test_a_request_raising_inside_a_swallowed_on_subscribe_still_names_3_16() -> None:
    """request() raising inside on_subscribe fails naming §3.16 even when the publisher
    swallows what on_subscribe raised: the failure was kept, and the test finds it."""
    verification = _publisher_verification(
        lambda n: SwallowingPublisher(n, "raise_in_on_subscribe")
    )
    _fails(
        verification.test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe,
        "§3.16",
    )


class ResubscribesBeforeCompletingPublisher:
    """Sends its n elements from a thread of its own once requested; once the test has taken
    them, signals on_subscribe a second time (§1.9 broken: recorded as a problem, no element,
    no terminal signal), then on_complete."""

    def __init__(self, n: int) -> None:
        self.n = n

    def subscribe(self, subscriber: Any) -> None:
        n = self.n

        class Once:
            started = False

            def request(self, k: int) -> None:
                if self.started:
                    return
                self.started = True
                threading.Thread(target=run, daemon=True).start()

            def cancel(self) -> None:
                pass

        def run() -> None:
            for i in range(1, n + 1):
                subscriber.on_next(i)
            taken = threading.Event()
            while not taken.wait(0.001):  # until the test took the elements (next_elements)
                if not subscriber.received:
                    taken.set()
            subscriber.on_subscribe(Once())
            subscriber.on_complete()

        subscriber.on_subscribe(Once())


def test_a_rule_broken_before_on_complete_fails_the_test_that_expected_completion() -> None:
    """A rule broken after the last element taken and before on_complete (a second
    on_subscribe) fails the test waiting for on_complete, naming that rule, though no later
    check follows expect_completion there."""
    verification = _publisher_verification(ResubscribesBeforeCompletingPublisher)
    _fails(
        verification.test_required_spec102_may_signal_less_than_requested_and_terminate_subscription,
        "§1.9",
    )


class ResubscribesOnCancelPublisher:
    """Sends its elements as requested; cancel signals on_subscribe a second time (§1.9
    broken: a rule broken around the cancel, with no on_error)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def subscribe(self, subscriber: Any) -> None:
        n = self.n

        class Sub:
            def __init__(self) -> None:
                self.sent = 0
                self.cancelled = False

            def request(self, k: int) -> None:
                while k > 0 and self.sent < n and not self.cancelled:
                    self.sent += 1
                    k -= 1
                    subscriber.on_next(self.sent)

            def cancel(self) -> None:
                if not self.cancelled:
                    self.cancelled = True
                    subscriber.on_subscribe(Sub())

        subscriber.on_subscribe(Sub())


def test_a_rule_broken_on_cancel_fails_3_13() -> None:
    """The 3.13 test fails on a rule the publisher broke around the cancel, not only on an
    on_error (the JVM's verifyNoAsyncErrorsNoDelay), though the subscriber is collected."""
    verification = _publisher_verification(ResubscribesOnCancelPublisher)
    _fails(
        verification.test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber,
        "§1.9",
    )


def test_a_request_raising_inside_on_subscribe_names_3_16_in_the_sequential_test() -> None:
    """The 1.3 test's subscriber requests from on_subscribe too: a raise there names §3.16,
    as in 3.2 (a PUBLISHER_CASES entry: _broken("raise_in_on_subscribe") on
    test_stochastic_spec103_must_signal_on_methods_sequentially, "§3.16")."""
    _fails(
        _broken(
            "raise_in_on_subscribe"
        ).test_stochastic_spec103_must_signal_on_methods_sequentially,
        "§3.16",
    )


def test_the_probe_flags_an_element_reported_after_a_terminal_signal() -> None:
    """§1.7: a subscriber that tells the whitebox probe of an element after its completion
    fails the next check of the probe's problems."""
    probe: WhiteboxSubscriberProbe[int] = WhiteboxSubscriberProbe(FAST)
    probe.register_on_complete()
    probe.check_problems()  # a completion alone is no problem
    probe.register_on_next(1)
    _fails(probe.check_problems, "§1.7")
