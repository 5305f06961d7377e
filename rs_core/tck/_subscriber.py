"""Subscriber verifications: whitebox (the subscriber reports to a probe, a puppet drives it)
and blackbox (only what a publisher sees), one test method per official test."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from rs_core.api import Subscriber, Subscription
from rs_core.tck._env import (
    ManualPublisher,
    TCKFailure,
    TestEnvironment,
    _ManualSubscription,
    rule,
    skip,
)

__all__ = [
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "WhiteboxSubscriberProbe",
]

T = TypeVar("T")

_UNTESTED = "untested: the official TCK has no way to verify this rule"


class SubscriberPuppet(Protocol):
    """**Protocol:** how the whitebox TCK makes the subscriber under test act."""

    def trigger_request(self, n: int) -> None:
        """Make the subscriber want ``n`` more elements (so it calls ``request``)."""

    def signal_cancel(self) -> None:
        """Make the subscriber cancel its subscription."""


class WhiteboxSubscriberProbe(Generic[T]):
    """What the subscriber under test reports to: call each ``register_*`` from the matching
    signal, after the subscriber has processed it."""

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self._cond = threading.Condition()
        self.puppet: SubscriberPuppet | None = None
        self.elements: deque[T] = deque()
        self.completed = False
        self.error: Exception | None = None

    def register_on_subscribe(self, puppet: SubscriberPuppet) -> None:
        with self._cond:
            self.puppet = puppet
            self._cond.notify_all()

    def register_on_next(self, element: T) -> None:
        with self._cond:
            self.elements.append(element)
            self._cond.notify_all()

    def register_on_complete(self) -> None:
        with self._cond:
            self.completed = True
            self._cond.notify_all()

    def register_on_error(self, error: Exception) -> None:
        with self._cond:
            self.error = error
            self._cond.notify_all()

    def _wait(self, predicate: Callable[[], bool], what: str, rule_id: str) -> None:
        deadline = time.monotonic() + self.env.default_timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TCKFailure(
                        f"§{rule_id}: the probe did not see {what} within "
                        f"{self.env.default_timeout}s"
                    )
                self._cond.wait(min(left, 0.01))

    def expect_puppet(self) -> SubscriberPuppet:
        self._wait(lambda: self.puppet is not None, "register_on_subscribe", "2.1")
        assert self.puppet is not None
        return self.puppet

    def expect_next(self, element: T, rule_id: str) -> None:
        self._wait(lambda: bool(self.elements), f"on_next({element!r})", rule_id)
        got = self.elements.popleft()
        if got != element:
            raise TCKFailure(f"§{rule_id}: the probe saw on_next({got!r}), expected {element!r}")

    def expect_completion(self, rule_id: str) -> None:
        self._wait(lambda: self.completed, "on_complete", rule_id)

    def expect_error(self, error: Exception, rule_id: str) -> None:
        self._wait(lambda: self.error is not None, "on_error", rule_id)
        if self.error is not error:
            raise TCKFailure(f"§{rule_id}: the probe saw {self.error!r}, expected {error!r}")


class _Stage(Generic[T]):
    """One subscriber under test, subscribed to a ManualPublisher the test signals through."""

    def __init__(self, env: TestEnvironment, subscriber: Subscriber[T]) -> None:
        self.env = env
        self.subscriber = subscriber
        self.publisher: ManualPublisher[T] = ManualPublisher()
        self._call("2.13", lambda: self.publisher.subscribe(subscriber))
        assert self.publisher.subscription is not None
        self.subscription: _ManualSubscription = self.publisher.subscription

    def _call(self, rule_id: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:
            raise TCKFailure(f"§{rule_id}: the subscriber raised {exc!r} from a signal") from exc

    def send_next(self, element: T) -> None:
        self._call("2.13", lambda: self.publisher.send_next(element))

    def send_complete(self) -> None:
        self._call("2.13", self.publisher.send_complete)
        self._check_terminal_calls("on_complete")

    def send_error(self, error: Exception) -> None:
        self._call("2.13", lambda: self.publisher.send_error(error))
        self._check_terminal_calls("on_error")

    def _check_terminal_calls(self, signal: str) -> None:
        calls = self.subscription.calls_in_terminal
        if calls:
            raise TCKFailure(
                f"§2.3: the subscriber called {', '.join(calls)} on its subscription from "
                f"inside {signal}"
            )

    def expect_request(self, rule_id: str) -> int:
        return self.subscription.expect_request(self.env, rule_id)

    def expect_cancelled(self, rule_id: str) -> None:
        if not self.subscription.cancelled.wait(self.env.default_timeout):
            raise TCKFailure(f"§{rule_id}: the subscription was not cancelled")


def _expect_type_error(rule_id: str, what: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except TypeError:
        return
    except Exception as exc:
        raise TCKFailure(f"§{rule_id}: {what} raised {exc!r}, not TypeError") from exc
    raise TCKFailure(f"§{rule_id}: {what} returned instead of raising TypeError")


class _VerificationBase(Generic[T]):
    def create_element(self, i: int) -> T:
        """The ``i``-th element to send to the subscriber under test."""
        raise NotImplementedError

    def env(self) -> TestEnvironment:
        return TestEnvironment()


class SubscriberWhiteboxVerification(_VerificationBase[T]):
    """Subclass it and implement ``create_subscriber(probe)`` (a subscriber that reports each
    signal to ``probe`` and registers a puppet in ``on_subscribe``) and ``create_element(i)``;
    name the subclass ``Test…``."""

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        raise NotImplementedError

    def _stage(self) -> tuple[_Stage[T], WhiteboxSubscriberProbe[T], SubscriberPuppet]:
        env = self.env()
        probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env)
        stage = _Stage(env, self.create_subscriber(probe))
        return stage, probe, probe.expect_puppet()

    @rule("setup")
    def test_required_exercise_whitebox_happy_path(self) -> None:
        stage, probe, puppet = self._stage()
        for i in range(2):
            puppet.trigger_request(1)
            stage.expect_request("2.1")
            element = self.create_element(i)
            stage.send_next(element)
            probe.expect_next(element, "2.1")
        puppet.signal_cancel()
        stage.expect_cancelled("2.6")

    @rule("2.1")
    def test_required_spec201_must_signal_demand_via_subscription_request(self) -> None:
        stage, probe, puppet = self._stage()
        puppet.trigger_request(1)
        stage.expect_request("2.1")
        element = self.create_element(0)
        stage.send_next(element)
        probe.expect_next(element, "2.1")

    @rule("2.2", "untested")
    def test_untested_spec202_should_asynchronously_dispatch(self) -> None:
        raise skip(_UNTESTED)

    @rule("2.3")
    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete(
        self,
    ) -> None:
        stage, probe, _ = self._stage()
        stage.send_complete()
        probe.expect_completion("2.3")

    @rule("2.3")
    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error(
        self,
    ) -> None:
        stage, probe, _ = self._stage()
        error = RuntimeError("TCK: a test error for §2.3")
        stage.send_error(error)
        probe.expect_error(error, "2.3")

    @rule("2.4", "untested")
    def test_untested_spec204_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.5")
    def test_required_spec205_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        stage, _, _ = self._stage()
        second: _ManualSubscription = _ManualSubscription(ManualPublisher())
        stage._call("2.13", lambda: stage.subscriber.on_subscribe(second))
        if not second.cancelled.wait(stage.env.default_timeout):
            raise TCKFailure("§2.5: a second on_subscribe did not cancel the second subscription")

    @rule("2.6", "untested")
    def test_untested_spec206_must_call_subscription_cancel_if_it_is_no_longer_valid(self) -> None:
        raise skip(_UNTESTED)

    @rule("2.7", "untested")
    def test_untested_spec207_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.8")
    def test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        stage, _, puppet = self._stage()
        puppet.trigger_request(1)
        stage.expect_request("2.8")
        puppet.signal_cancel()
        stage.expect_cancelled("2.8")
        stage.send_next(self.create_element(0))  # a late element: must not raise
        puppet.trigger_request(1)
        puppet.trigger_request(1)

    @rule("2.9")
    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage, probe, puppet = self._stage()
        puppet.trigger_request(1)
        stage.expect_request("2.9")
        stage.send_complete()
        probe.expect_completion("2.9")

    @rule("2.9")
    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage, probe, _ = self._stage()
        stage.send_complete()
        probe.expect_completion("2.9")

    @rule("2.10")
    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage, probe, puppet = self._stage()
        puppet.trigger_request(1)
        stage.expect_request("2.10")
        error = RuntimeError("TCK: a test error for §2.10")
        stage.send_error(error)
        probe.expect_error(error, "2.10")

    @rule("2.10")
    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage, probe, _ = self._stage()
        error = RuntimeError("TCK: a test error for §2.10")
        stage.send_error(error)
        probe.expect_error(error, "2.10")

    @rule("2.11", "untested")
    def test_untested_spec211_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.12", "untested")
    def test_untested_spec212_must_not_call_on_subscribe_more_than_once_based_on_object_equality_spec_violation(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.13", "untested")
    def test_untested_spec213_failing_on_signal_invocation(self) -> None:
        raise skip(_UNTESTED)

    @rule("2.13")
    def test_required_spec213_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(self.env())
        subscriber = self.create_subscriber(probe)
        _expect_type_error(
            "2.13", "on_subscribe(None)", lambda: subscriber.on_subscribe(None)  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_on_next_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        stage, _, _ = self._stage()
        _expect_type_error(
            "2.13", "on_next(None)", lambda: stage.subscriber.on_next(None)  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_on_error_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        stage, _, _ = self._stage()
        _expect_type_error(
            "2.13", "on_error(None)", lambda: stage.subscriber.on_error(None)  # type: ignore[arg-type]
        )

    @rule("3.1", "untested")
    def test_untested_spec301_must_not_be_called_outside_subscriber_context(self) -> None:
        raise skip(_UNTESTED)

    @rule("3.8")
    def test_required_spec308_request_must_register_given_number_elements_to_be_produced(
        self,
    ) -> None:
        stage, probe, puppet = self._stage()
        puppet.trigger_request(2)
        requested = stage.expect_request("3.8")
        for i in range(2):
            if i == 1 and requested < 2:  # as the official TCK: it may request one at a time
                stage.expect_request("3.8")
            element = self.create_element(i)
            stage.send_next(element)
            probe.expect_next(element, "3.8")

    @rule("3.10", "untested")
    def test_untested_spec310_request_may_synchronously_call_on_next_on_subscriber(self) -> None:
        raise skip(_UNTESTED)

    @rule("3.11", "untested")
    def test_untested_spec311_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.14", "untested")
    def test_untested_spec314_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.15", "untested")
    def test_untested_spec315_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.16", "untested")
    def test_untested_spec316_request_must_not_throw_exception_and_must_on_error_the_subscriber(
        self,
    ) -> None:
        raise skip(_UNTESTED)


class SubscriberBlackboxVerification(_VerificationBase[T]):
    """Subclass it and implement ``create_subscriber()`` and ``create_element(i)``; override
    ``trigger_request(subscriber)`` if the subscriber only requests when told; name the
    subclass ``Test…``."""

    def create_subscriber(self) -> Subscriber[T]:
        raise NotImplementedError

    def trigger_request(self, subscriber: Subscriber[T]) -> None:
        """Make ``subscriber`` request (default: nothing, it requests on its own)."""

    def _stage(self) -> _Stage[T]:
        return _Stage(self.env(), self.create_subscriber())

    def _requested_stage(self, rule_id: str) -> _Stage[T]:
        stage = self._stage()
        self.trigger_request(stage.subscriber)
        stage.expect_request(rule_id)
        return stage

    @rule("2.1")
    def test_required_spec201_blackbox_must_signal_demand_via_subscription_request(self) -> None:
        stage = self._requested_stage("2.1")
        stage.send_complete()

    @rule("2.2", "untested")
    def test_untested_spec202_blackbox_should_asynchronously_dispatch(self) -> None:
        raise skip(_UNTESTED)

    @rule("2.3")
    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        self.trigger_request(stage.subscriber)
        stage.send_complete()

    @rule("2.3")
    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        self.trigger_request(stage.subscriber)
        stage.send_error(RuntimeError("TCK: a test error for §2.3"))

    @rule("2.4", "untested")
    def test_untested_spec204_blackbox_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.5")
    def test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        second: _ManualSubscription = _ManualSubscription(ManualPublisher())
        stage._call("2.13", lambda: stage.subscriber.on_subscribe(second))
        if not second.cancelled.wait(stage.env.default_timeout):
            raise TCKFailure("§2.5: a second on_subscribe did not cancel the second subscription")
        if second.requests:
            raise TCKFailure("§2.5: the subscriber requested from its second subscription")

    @rule("2.6", "untested")
    def test_untested_spec206_blackbox_must_call_subscription_cancel_if_it_is_no_longer_valid(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.7", "untested")
    def test_untested_spec207_blackbox_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.8", "untested")
    def test_untested_spec208_blackbox_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        raise skip("untested: needs a way to make a black-box subscriber cancel")

    @rule("2.9")
    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        self._requested_stage("2.9").send_complete()

    @rule("2.9")
    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        self._stage().send_complete()

    @rule("2.10")
    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        self._requested_stage("2.10").send_error(RuntimeError("TCK: a test error for §2.10"))

    @rule("2.10")
    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        self._stage().send_error(RuntimeError("TCK: a test error for §2.10"))

    @rule("2.11", "untested")
    def test_untested_spec211_blackbox_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.12", "untested")
    def test_untested_spec212_blackbox_must_not_call_on_subscribe_more_than_once_based_on_object_equality(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("2.13", "untested")
    def test_untested_spec213_blackbox_failing_on_signal_invocation(self) -> None:
        raise skip(_UNTESTED)

    @rule("2.13")
    def test_required_spec213_blackbox_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        subscriber = self.create_subscriber()
        _expect_type_error(
            "2.13", "on_subscribe(None)", lambda: subscriber.on_subscribe(None)  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        _expect_type_error(
            "2.13", "on_next(None)", lambda: stage.subscriber.on_next(None)  # type: ignore[arg-type]
        )

    @rule("2.13")
    def test_required_spec213_blackbox_on_error_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        _expect_type_error(
            "2.13", "on_error(None)", lambda: stage.subscriber.on_error(None)  # type: ignore[arg-type]
        )

    @rule("3.1", "untested")
    def test_untested_spec301_blackbox_must_not_be_called_outside_subscriber_context(self) -> None:
        raise skip(_UNTESTED)

    @rule("3.8", "untested")
    def test_untested_spec308_blackbox_request_must_register_given_number_elements_to_be_produced(  # noqa: E501
        self,
    ) -> None:
        raise skip("untested: not verifiable in black-box mode")

    @rule("3.10", "untested")
    def test_untested_spec310_blackbox_request_may_synchronously_call_on_next_on_subscriber(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.11", "untested")
    def test_untested_spec311_blackbox_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.14", "untested")
    def test_untested_spec314_blackbox_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.15", "untested")
    def test_untested_spec315_blackbox_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.16", "untested")
    def test_untested_spec316_blackbox_request_must_not_throw_exception_and_must_on_error_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)


class ProbedSubscriber(Generic[T]):
    """Wraps a subscriber for the whitebox TCK: forwards every signal, then reports it to the
    probe; ``on_subscribe`` registers ``puppet``. A convenience for ``create_subscriber``."""

    def __init__(
        self,
        inner: Subscriber[T],
        probe: WhiteboxSubscriberProbe[T],
        puppet: Callable[[Subscription], SubscriberPuppet],
    ) -> None:
        self.inner = inner
        self.probe = probe
        self._puppet = puppet
        self._registered = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self.inner.on_subscribe(subscription)
        if subscription is not None and not self._registered:  # a second one is the inner's
            self._registered = True  # to cancel (§2.5), not the probe's business
            self.probe.register_on_subscribe(self._puppet(subscription))

    def on_next(self, element: T) -> None:
        self.inner.on_next(element)
        self.probe.register_on_next(element)

    def on_error(self, error: Exception) -> None:
        self.inner.on_error(error)
        self.probe.register_on_error(error)

    def on_complete(self) -> None:
        self.inner.on_complete()
        self.probe.register_on_complete()

