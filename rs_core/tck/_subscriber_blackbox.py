"""SubscriberBlackboxVerification: the Subscriber rules verified from the outside, as a
publisher sees the subscriber, one method per official test.

Procedures follow the JVM TCK's ``SubscriberBlackboxVerification``; the test thread plays the
publisher (a ManualPublisher) and sends ``create_element(i)`` elements.
"""

from __future__ import annotations

from typing import TypeVar

from reactive_streams.api import Subscriber
from reactive_streams.tck._env import UNTESTED, rule, skip
from reactive_streams.tck._subscriber_stage import (
    Stage,
    SubscriberVerificationBase,
    expect_type_error,
)

__all__ = ["SubscriberBlackboxVerification"]

T = TypeVar("T")


class SubscriberBlackboxVerification(SubscriberVerificationBase[T]):
    """The Subscriber rules (§2) verified from the outside, as a publisher sees the subscriber.

    Subclass it and implement ``create_subscriber()`` and ``create_element(i)``; override
    ``trigger_request(subscriber)`` if the subscriber requests only when told (the default
    does nothing: it is expected to request on its own); name the subclass ``Test…``.
    """

    signals_in_demand_test = 16
    """How many elements the §2.1 test sends within the demand the subscriber signalled."""

    def create_subscriber(self) -> Subscriber[T]:
        raise NotImplementedError

    def trigger_request(self, subscriber: Subscriber[T]) -> None:
        """Make ``subscriber`` request (default: nothing, it requests on its own)."""

    def _stage(self, rule_id: str) -> Stage[T]:
        return Stage(self.env(), self.create_subscriber(), self.create_element, rule_id)

    def _requested_stage(self, rule_id: str) -> tuple[Stage[T], int]:
        stage = self._stage(rule_id)
        self.trigger_request(stage.subscriber)
        return stage, stage.expect_request()

    @rule("2.1")
    def test_required_spec201_blackbox_must_signal_demand_via_subscription_request(self) -> None:
        """The subscriber requests by itself (or after trigger_request), takes elements within
        that demand, then on_complete."""
        stage, requested = self._requested_stage("2.1")
        for _ in range(min(requested, self.signals_in_demand_test)):
            if stage.subscription.cancelled.is_set():
                break
            stage.signal_next()
        stage.send_complete()

    @rule("2.2", "untested")
    def test_untested_spec202_blackbox_should_asynchronously_dispatch(self) -> None:
        """Not verifiable: heavy processing is dispatched asynchronously."""
        raise skip(UNTESTED)

    @rule("2.3")
    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete(  # noqa: E501
        self,
    ) -> None:
        """on_complete does not call request or cancel on the subscription."""
        self._stage("2.3").send_complete()

    @rule("2.3")
    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error(  # noqa: E501
        self,
    ) -> None:
        """on_error does not call request or cancel on the subscription."""
        self._stage("2.3").send_error(RuntimeError("TCK: a test error for §2.3"))

    @rule("2.4", "untested")
    def test_untested_spec204_blackbox_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: the subscription counts as cancelled after a terminal signal."""
        raise skip(UNTESTED)

    @rule("2.5")
    def test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        """A second subscription is cancelled and never requested from."""
        stage = self._stage("2.5")
        stage.second_subscription(flag_requests=True)
        stage.send_complete()

    @rule("2.6", "untested")
    def test_untested_spec206_blackbox_must_call_subscription_cancel_if_it_is_no_longer_valid(
        self,
    ) -> None:
        """Not verifiable: cancel once the subscription is no longer needed."""
        raise skip(UNTESTED)

    @rule("2.7", "untested")
    def test_untested_spec207_blackbox_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: calls on the subscription are serial."""
        raise skip(UNTESTED)

    @rule("2.8", "untested")
    def test_untested_spec208_blackbox_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable in black-box mode (the whitebox test covers it)."""
        raise skip("untested: a black-box subscriber cannot be made to cancel")

    @rule("2.9")
    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete after the subscriber's first request is accepted."""
        self._requested_stage("2.9")[0].send_complete()

    @rule("2.9")
    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete right after on_subscribe is accepted."""
        self._stage("2.9").send_complete()

    @rule("2.10")
    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error after the subscriber's first request is accepted."""
        stage, _ = self._requested_stage("2.10")
        stage.send_error(RuntimeError("TCK: a test error for §2.10"))

    @rule("2.10")
    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error right after on_subscribe is accepted."""
        self._stage("2.10").send_error(RuntimeError("TCK: a test error for §2.10"))

    @rule("2.11", "untested")
    def test_untested_spec211_blackbox_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: signal calls happen-before their processing."""
        raise skip(UNTESTED)

    @rule("2.12", "untested")
    def test_untested_spec212_blackbox_must_not_call_on_subscribe_more_than_once_based_on_object_equality(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: a subscriber instance is subscribed at most once."""
        raise skip(UNTESTED)

    @rule("2.13", "untested")
    def test_untested_spec213_blackbox_failing_on_signal_invocation(self) -> None:
        """Not verifiable: signal methods return normally."""
        raise skip(UNTESTED)

    @rule("2.13")
    def test_required_spec213_blackbox_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        """on_subscribe(None) on a fresh subscriber raises TypeError."""
        subscriber = self.create_subscriber()
        expect_type_error(
            "2.13",
            "on_subscribe(None)",
            lambda: subscriber.on_subscribe(None),  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        """on_next(None) after a valid on_subscribe raises TypeError."""
        stage = self._stage("2.13")
        expect_type_error(
            "2.13",
            "on_next(None)",
            lambda: stage.subscriber.on_next(None),  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_blackbox_on_error_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        """on_error(None) after a valid on_subscribe raises TypeError."""
        stage = self._stage("2.13")
        expect_type_error(
            "2.13",
            "on_error(None)",
            lambda: stage.subscriber.on_error(None),  # type: ignore[arg-type]
        )

    @rule("3.1", "untested")
    def test_untested_spec301_blackbox_must_not_be_called_outside_subscriber_context(self) -> None:
        """Not verifiable: the subscription is used only by its subscriber."""
        raise skip(UNTESTED)

    @rule("3.8", "untested")
    def test_untested_spec308_blackbox_request_must_register_given_number_elements_to_be_produced(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable in black-box mode (the whitebox test covers it)."""
        raise skip("untested: not verifiable in black-box mode")

    @rule("3.10", "untested")
    def test_untested_spec310_blackbox_request_may_synchronously_call_on_next_on_subscriber(
        self,
    ) -> None:
        """Not verifiable: request may call on_next synchronously."""
        raise skip(UNTESTED)

    @rule("3.11", "untested")
    def test_untested_spec311_blackbox_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        """Not verifiable: request may call a terminal signal synchronously."""
        raise skip(UNTESTED)

    @rule("3.14", "untested")
    def test_untested_spec314_blackbox_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: cancel may shut the publisher down."""
        raise skip(UNTESTED)

    @rule("3.15", "untested")
    def test_untested_spec315_blackbox_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        """Not verifiable: cancel returns normally."""
        raise skip(UNTESTED)

    @rule("3.16", "untested")
    def test_untested_spec316_blackbox_request_must_not_throw_exception_and_must_on_error_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: request returns normally."""
        raise skip(UNTESTED)
