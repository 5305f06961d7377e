"""The Subscriber verifications have teeth: each deliberately broken subscriber fails the
black- or white-box TCK test for the rule it breaks, naming it, and the same subscriber without
the flaw passes; the whitebox probe flags what a subscriber reports out of order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from tck_helpers import FAST, LATE, QUIET, fails

from reactive_streams import BaseSubscriber, Subscriber, Subscription
from reactive_streams.tck import (
    ProbedSubscriber,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
)

# -- broken subscribers -------------------------------------------------------------------------


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


# -- each broken subscriber fails the test of its rule; the reference passes it -----------------


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
    fails(getattr(_subscriber_verification(kind, flaw), test), rule)


@pytest.mark.parametrize(("flaw", "kind", "test", "rule"), SUBSCRIBER_CASES, ids=_SUBSCRIBER_IDS)
def test_reference_subscriber_passes_the_same_test(
    flaw: str, kind: str, test: str, rule: str
) -> None:
    """The same BaseSubscriber without the flaw passes the test."""
    getattr(_subscriber_verification(kind, None), test)()


# -- the whitebox probe, and ProbedSubscriber ---------------------------------------------------


def test_the_probe_flags_an_element_reported_after_a_terminal_signal() -> None:
    """§1.7: a subscriber that tells the whitebox probe of an element after its completion
    fails the next check of the probe's problems."""
    probe: WhiteboxSubscriberProbe[int] = WhiteboxSubscriberProbe(FAST)
    probe.register_on_complete()
    probe.check_problems()  # a completion alone is no problem
    probe.register_on_next(1)
    fails(probe.check_problems, "§1.7")
