"""SubscriberWhiteboxVerification: the Subscriber rules verified with the subscriber's
cooperation (it reports to a probe, and a puppet makes it act), one method per official test.

Procedures follow the JVM TCK's ``SubscriberWhiteboxVerification``; the test thread plays the
publisher (a ManualPublisher) and sends ``create_element(i)`` elements.
"""

from __future__ import annotations

from typing import TypeVar

from reactive_streams.api import Subscriber
from reactive_streams.tck._env import UNTESTED, rule, skip
from reactive_streams.tck._subscriber_probe import SubscriberPuppet, WhiteboxSubscriberProbe
from reactive_streams.tck._subscriber_stage import (
    Stage,
    SubscriberVerificationBase,
    expect_type_error,
)

__all__ = ["SubscriberWhiteboxVerification"]

T = TypeVar("T")


class SubscriberWhiteboxVerification(SubscriberVerificationBase[T]):
    """The Subscriber rules (§2, §3.8) verified with the subscriber's cooperation.

    Subclass it and implement ``create_subscriber(probe)``: a fresh subscriber that calls
    ``probe.register_on_subscribe(puppet)`` from ``on_subscribe`` and reports every signal
    to the probe (:class:`ProbedSubscriber` wraps one for you), and ``create_element(i)``;
    name the subclass ``Test…``. Override ``env()`` for slower timeouts.
    """

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        raise NotImplementedError

    def _stage(self, rule_id: str) -> tuple[Stage[T], WhiteboxSubscriberProbe[T], SubscriberPuppet]:
        env = self.env()
        probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env)
        stage = Stage(env, self.create_subscriber(probe), self.create_element, rule_id)
        return stage, probe, probe.expect_puppet(rule_id)

    def _unsubscribed_stage(self, rule_id: str) -> tuple[Stage[T], WhiteboxSubscriberProbe[T]]:
        env = self.env()
        probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env)
        return Stage(env, self.create_subscriber(probe), self.create_element, rule_id), probe

    @rule("setup")
    def test_required_exercise_whitebox_happy_path(self) -> None:
        """Puppet requests reach upstream, two elements reach the probe, cancel reaches upstream."""
        stage, probe, puppet = self._stage("2.1")
        puppet.trigger_request(1)
        puppet.trigger_request(1)
        requested = stage.expect_request()
        probe.expect_next(stage.signal_next(), "2.1")
        puppet.trigger_request(1)
        if requested == 1:
            stage.expect_request()
        probe.expect_next(stage.signal_next(), "2.1")
        puppet.signal_cancel()
        stage.expect_cancelled("2.6")
        probe.verify_no_async_problems()

    @rule("2.1")
    def test_required_spec201_must_signal_demand_via_subscription_request(self) -> None:
        """Asked by the puppet, the subscriber requests upstream and accepts an element."""
        stage, probe, puppet = self._stage("2.1")
        puppet.trigger_request(1)
        stage.expect_request()
        stage.signal_next()
        probe.check_problems()

    @rule("2.2", "untested")
    def test_untested_spec202_should_asynchronously_dispatch(self) -> None:
        """Not verifiable: heavy processing is dispatched asynchronously."""
        raise skip(UNTESTED)

    @rule("2.3")
    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete(
        self,
    ) -> None:
        """on_complete does not call request or cancel on the subscription."""
        stage, probe = self._unsubscribed_stage("2.3")
        stage.send_complete()
        probe.check_problems()

    @rule("2.3")
    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error(
        self,
    ) -> None:
        """on_error does not call request or cancel on the subscription."""
        stage, probe = self._unsubscribed_stage("2.3")
        stage.send_error(RuntimeError("TCK: a test error for §2.3"))
        probe.check_problems()

    @rule("2.4", "untested")
    def test_untested_spec204_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: the subscription counts as cancelled after a terminal signal."""
        raise skip(UNTESTED)

    @rule("2.5")
    def test_required_spec205_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        """A second on_subscribe on a subscribed subscriber cancels that second subscription."""
        stage, probe, _ = self._stage("2.5")
        stage.second_subscription(flag_requests=False)
        probe.verify_no_async_problems()

    @rule("2.6", "untested")
    def test_untested_spec206_must_call_subscription_cancel_if_it_is_no_longer_valid(self) -> None:
        """Not verifiable: cancel once the subscription is no longer needed."""
        raise skip(UNTESTED)

    @rule("2.7", "untested")
    def test_untested_spec207_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: calls on the subscription are serial."""
        raise skip(UNTESTED)

    @rule("2.8")
    def test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        """After the subscriber cancelled, a late on_next and more puppet requests do no harm."""
        stage, probe, puppet = self._stage("2.8")
        puppet.trigger_request(1)
        stage.expect_request()
        puppet.signal_cancel()
        stage.expect_cancelled()
        stage.signal_next()  # a late element: must be accepted quietly
        puppet.trigger_request(1)
        puppet.trigger_request(1)
        probe.verify_no_async_problems()

    @rule("2.9")
    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete after a request is accepted and reported."""
        stage, probe, puppet = self._stage("2.9")
        puppet.trigger_request(1)
        stage.send_complete()
        probe.expect_completion("2.9")
        probe.verify_no_async_problems()

    @rule("2.9")
    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete before any request is accepted and reported."""
        stage, probe, _ = self._stage("2.9")
        stage.send_complete()
        probe.expect_completion("2.9")
        probe.verify_no_async_problems()

    @rule("2.10")
    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error after requests is accepted and the same exception reported."""
        stage, probe, puppet = self._stage("2.10")
        puppet.trigger_request(1)
        puppet.trigger_request(1)
        error = RuntimeError("TCK: a test error for §2.10")
        stage.send_error(error)
        probe.expect_error(error, "2.10")
        probe.check_problems()

    @rule("2.10")
    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error before any request is accepted and the same exception reported."""
        stage, probe, _ = self._stage("2.10")
        error = RuntimeError("TCK: a test error for §2.10")
        stage.send_error(error)
        probe.expect_error(error, "2.10")
        probe.check_problems()

    @rule("2.11", "untested")
    def test_untested_spec211_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: signal calls happen-before their processing."""
        raise skip(UNTESTED)

    @rule("2.12", "untested")
    def test_untested_spec212_must_not_call_on_subscribe_more_than_once_based_on_object_equality_spec_violation(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: a subscriber instance is subscribed at most once."""
        raise skip(UNTESTED)

    @rule("2.13", "untested")
    def test_untested_spec213_failing_on_signal_invocation(self) -> None:
        """Not verifiable: signal methods return normally."""
        raise skip(UNTESTED)

    @rule("2.13")
    def test_required_spec213_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        """on_subscribe(None) raises TypeError."""
        stage, _, _ = self._stage("2.13")
        expect_type_error(
            "2.13",
            "on_subscribe(None)",
            lambda: stage.subscriber.on_subscribe(None),  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        """on_next(None) raises TypeError."""
        stage, _, _ = self._stage("2.13")
        expect_type_error(
            "2.13",
            "on_next(None)",
            lambda: stage.subscriber.on_next(None),  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_on_error_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        """on_error(None) raises TypeError."""
        stage, _, _ = self._stage("2.13")
        expect_type_error(
            "2.13",
            "on_error(None)",
            lambda: stage.subscriber.on_error(None),  # type: ignore[arg-type]
        )

    @rule("3.1", "untested")
    def test_untested_spec301_must_not_be_called_outside_subscriber_context(self) -> None:
        """Not verifiable: the subscription is used only by its subscriber."""
        raise skip(UNTESTED)

    @rule("3.8")
    def test_required_spec308_request_must_register_given_number_elements_to_be_produced(
        self,
    ) -> None:
        """Asked for 2, the subscriber takes two elements (maybe one request each), no more."""
        stage, probe, puppet = self._stage("3.8")
        puppet.trigger_request(2)
        requested = stage.expect_request()
        probe.expect_next(stage.signal_next(), "3.8")
        if requested < 2:  # it may request one at a time
            stage.expect_request()
        probe.expect_next(stage.signal_next(), "3.8")
        probe.expect_none("3.8")
        puppet.trigger_request(3)
        probe.verify_no_async_problems()

    @rule("3.10", "untested")
    def test_untested_spec310_request_may_synchronously_call_on_next_on_subscriber(self) -> None:
        """Not verifiable: request may call on_next synchronously."""
        raise skip(UNTESTED)

    @rule("3.11", "untested")
    def test_untested_spec311_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        """Not verifiable: request may call a terminal signal synchronously."""
        raise skip(UNTESTED)

    @rule("3.14", "untested")
    def test_untested_spec314_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: cancel may shut the publisher down."""
        raise skip(UNTESTED)

    @rule("3.15", "untested")
    def test_untested_spec315_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        """Not verifiable: cancel returns normally."""
        raise skip(UNTESTED)

    @rule("3.16", "untested")
    def test_untested_spec316_request_must_not_throw_exception_and_must_on_error_the_subscriber(
        self,
    ) -> None:
        """Not verifiable: request returns normally."""
        raise skip(UNTESTED)
