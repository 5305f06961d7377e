"""Subscriber verifications: whitebox (the subscriber reports to a probe and a puppet makes it
act) and blackbox (only what a publisher sees), one test method per official test.

The test plays the publisher (:class:`~reactive_streams.tck.ManualPublisher`) on the test thread and
sends ``create_element(i)`` elements; procedures follow the JVM TCK's
``SubscriberWhiteboxVerification`` and ``SubscriberBlackboxVerification``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from reactive_streams.api import Subscriber, Subscription
from reactive_streams.tck._env import (
    ManualPublisher,
    ManualSubscription,
    TCKFailure,
    TestEnvironment,
    rule,
    skip,
)

__all__ = [
    "ProbedSubscriber",
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
        """Make the subscriber eventually request at least ``n`` more elements in all
        (it may request them one at a time, each after the previous arrived)."""

    def signal_cancel(self) -> None:
        """Make the subscriber cancel its subscription."""


class WhiteboxSubscriberProbe(Generic[T]):
    """What the subscriber under test reports to: it calls ``register_on_subscribe(puppet)``
    once it holds its subscription, and each ``register_on_*`` after processing the signal."""

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self._cond = threading.Condition()
        self.puppet: SubscriberPuppet | None = None
        self.elements: deque[T] = deque()
        self.completed = False
        self.error: Exception | None = None
        self.problems: list[str] = []

    def register_on_subscribe(self, puppet: SubscriberPuppet) -> None:
        with self._cond:
            if self.puppet is None:  # the first registration wins
                self.puppet = puppet
            self._cond.notify_all()

    def register_on_next(self, element: T) -> None:
        with self._cond:
            if self.completed or self.error is not None:
                self.problems.append(
                    f"§1.7: the probe was told of on_next({element!r}) after a terminal signal"
                )
            self.elements.append(element)
            self._cond.notify_all()

    def register_on_complete(self) -> None:
        with self._cond:
            if self.completed or self.error is not None:
                self.problems.append("§1.7: the probe was told of a second terminal signal")
            self.completed = True
            self._cond.notify_all()

    def register_on_error(self, error: Exception) -> None:
        with self._cond:
            if self.completed or self.error is not None:
                self.problems.append("§1.7: the probe was told of a second terminal signal")
            self.error = error
            self._cond.notify_all()

    def _wait(self, predicate: Callable[[], bool], what: str, rule_id: str) -> None:
        with self._cond:
            if not self.env.wait_for(self._cond, predicate, self.env.default_timeout):
                raise TCKFailure(
                    f"§{rule_id}: the subscriber did not report {what} to the probe within "
                    f"{self.env.default_timeout}s"
                )

    def expect_puppet(self, rule_id: str) -> SubscriberPuppet:
        self._wait(lambda: self.puppet is not None, "register_on_subscribe(puppet)", rule_id)
        assert self.puppet is not None
        return self.puppet

    def expect_next(self, element: T, rule_id: str) -> None:
        self._wait(lambda: bool(self.elements), f"on_next({element!r})", rule_id)
        with self._cond:
            got = self.elements.popleft()
        if got != element:
            raise TCKFailure(
                f"§{rule_id}: the probe was told of on_next({got!r}), expected {element!r}"
            )

    def expect_none(self, rule_id: str) -> None:
        """No further element, nor on_complete or on_error, may be reported within
        ``no_signals_timeout`` (the JVM's ``probe.expectNone()``)."""
        with self._cond:
            self.env.wait_for(
                self._cond,
                lambda: bool(self.elements) or self.completed or self.error is not None,
                self.env.no_signals_timeout,
            )
            if self.elements:
                raise TCKFailure(
                    f"§{rule_id}: the probe was told of on_next({self.elements[0]!r}), "
                    "which was never sent"
                )
            if self.completed or self.error is not None:
                signal = "on_complete" if self.completed else f"on_error({self.error!r})"
                raise TCKFailure(
                    f"§{rule_id}: the probe was told of {signal}, while no signal was expected"
                )

    def expect_completion(self, rule_id: str) -> None:
        """on_complete, with no element reported that the test did not take (the JVM's
        ordered receptacle: "expected end-of-stream but got element")."""
        self._wait(lambda: self.completed, "on_complete", rule_id)
        with self._cond:
            if self.elements:
                raise TCKFailure(
                    f"§{rule_id}: expected on_complete, but the probe was also told of "
                    f"on_next({self.elements[0]!r}), which was never sent"
                )

    def expect_error(self, error: Exception, rule_id: str) -> None:
        self._wait(lambda: self.error is not None, f"on_error({error!r})", rule_id)
        if self.error is not error:
            raise TCKFailure(
                f"§{rule_id}: the probe was told of on_error({self.error!r}), expected {error!r}"
            )

    def check_problems(self) -> None:
        if self.problems:
            raise TCKFailure(self.problems[0])

    def verify_no_async_problems(self) -> None:
        """No broken rule reported now, nor within ``no_signals_timeout``: a subscriber that
        processes signals on a thread of its own (§2.2) may report one late (the JVM's
        ``verifyNoAsyncErrors()`` at the end of a whitebox test)."""
        with self._cond:
            self.env.wait_for(self._cond, lambda: bool(self.problems), self.env.no_signals_timeout)
        self.check_problems()


class _Stage(Generic[T]):
    """One subscriber under test, subscribed to a ManualPublisher the test signals through.

    Every call into the subscriber must return normally: a raise fails the test under the
    rule the test checks (it would be a §2.13 violation in the subscriber).
    """

    def __init__(
        self,
        env: TestEnvironment,
        subscriber: Subscriber[T],
        create_element: Callable[[int], T],
        rule_id: str,
    ) -> None:
        self.env = env
        self.subscriber = subscriber
        self.rule = rule_id
        self._create = create_element
        self._next_index = 0
        self.publisher: ManualPublisher[T] = ManualPublisher()
        self.call("on_subscribe", lambda: self.publisher.subscribe(subscriber))
        assert self.publisher.subscription is not None
        self.subscription: ManualSubscription = self.publisher.subscription

    def call(self, signal: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:
            raise TCKFailure(
                f"§{self.rule}: the subscriber raised {exc!r} from {signal}; signals must "
                "return normally (§2.13)"
            ) from exc

    def next_element(self) -> T:
        element = self._create(self._next_index)
        self._next_index += 1
        return element

    def signal_next(self) -> T:
        """Send the next element and return it."""
        element = self.next_element()
        self.call("on_next", lambda: self.publisher.send_next(element))
        return element

    def send_complete(self) -> None:
        self.call("on_complete", self.publisher.send_complete)
        self.check_terminal_calls()

    def send_error(self, error: Exception) -> None:
        self.call("on_error", lambda: self.publisher.send_error(error))
        self.check_terminal_calls()

    def check_terminal_calls(self) -> None:
        calls = self.subscription.calls_in_terminal
        if calls:
            raise TCKFailure(
                f"§2.3: the subscriber called {', '.join(calls)}: a subscriber must not call "
                "its Subscription or Publisher from on_complete or on_error"
            )

    def expect_request(self, rule_id: str | None = None) -> int:
        return self.subscription.expect_request(self.env, rule_id or self.rule)

    def expect_cancelled(self, rule_id: str | None = None) -> None:
        self.subscription.expect_cancelled(self.env, rule_id or self.rule)

    def second_subscription(self, flag_requests: bool) -> ManualSubscription:
        """Offer the subscriber a second subscription; it must cancel it (§2.5)."""
        second = ManualSubscription(name="a second subscription")
        self.call("a second on_subscribe", lambda: self.subscriber.on_subscribe(second))
        second.expect_cancelled(self.env, "2.5")
        if flag_requests and second.all_requests:
            raise TCKFailure(
                f"§2.5: the subscriber called request({second.all_requests[0]!r}) on a second "
                "subscription instead of only cancelling it"
            )
        return second


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
        """The ``i``-th element to send to the subscriber under test (never ``None``)."""
        raise NotImplementedError

    def env(self) -> TestEnvironment:
        return TestEnvironment()


class SubscriberWhiteboxVerification(_VerificationBase[T]):
    """The Subscriber rules (§2, §3.8) verified with the subscriber's cooperation.

    Subclass it and implement ``create_subscriber(probe)``: a fresh subscriber that calls
    ``probe.register_on_subscribe(puppet)`` from ``on_subscribe`` and reports every signal
    to the probe (:class:`ProbedSubscriber` wraps one for you), and ``create_element(i)``;
    name the subclass ``Test…``. Override ``env()`` for slower timeouts.
    """

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        raise NotImplementedError

    def _stage(
        self, rule_id: str
    ) -> tuple[_Stage[T], WhiteboxSubscriberProbe[T], SubscriberPuppet]:
        env = self.env()
        probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env)
        stage = _Stage(env, self.create_subscriber(probe), self.create_element, rule_id)
        return stage, probe, probe.expect_puppet(rule_id)

    def _unsubscribed_stage(self, rule_id: str) -> tuple[_Stage[T], WhiteboxSubscriberProbe[T]]:
        env = self.env()
        probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env)
        return _Stage(env, self.create_subscriber(probe), self.create_element, rule_id), probe

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
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("2.7", "untested")
    def test_untested_spec207_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: calls on the subscription are serial."""
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("2.12", "untested")
    def test_untested_spec212_must_not_call_on_subscribe_more_than_once_based_on_object_equality_spec_violation(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: a subscriber instance is subscribed at most once."""
        raise skip(_UNTESTED)

    @rule("2.13", "untested")
    def test_untested_spec213_failing_on_signal_invocation(self) -> None:
        """Not verifiable: signal methods return normally."""
        raise skip(_UNTESTED)

    @rule("2.13")
    def test_required_spec213_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        """on_subscribe(None) raises TypeError."""
        stage, _, _ = self._stage("2.13")
        _expect_type_error(
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
        _expect_type_error(
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
        _expect_type_error(
            "2.13",
            "on_error(None)",
            lambda: stage.subscriber.on_error(None),  # type: ignore[arg-type]
        )

    @rule("3.1", "untested")
    def test_untested_spec301_must_not_be_called_outside_subscriber_context(self) -> None:
        """Not verifiable: the subscription is used only by its subscriber."""
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("3.11", "untested")
    def test_untested_spec311_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        """Not verifiable: request may call a terminal signal synchronously."""
        raise skip(_UNTESTED)

    @rule("3.14", "untested")
    def test_untested_spec314_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: cancel may shut the publisher down."""
        raise skip(_UNTESTED)

    @rule("3.15", "untested")
    def test_untested_spec315_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        """Not verifiable: cancel returns normally."""
        raise skip(_UNTESTED)

    @rule("3.16", "untested")
    def test_untested_spec316_request_must_not_throw_exception_and_must_on_error_the_subscriber(
        self,
    ) -> None:
        """Not verifiable: request returns normally."""
        raise skip(_UNTESTED)


class SubscriberBlackboxVerification(_VerificationBase[T]):
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

    def _stage(self, rule_id: str) -> _Stage[T]:
        return _Stage(self.env(), self.create_subscriber(), self.create_element, rule_id)

    def _requested_stage(self, rule_id: str) -> tuple[_Stage[T], int]:
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
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("2.7", "untested")
    def test_untested_spec207_blackbox_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: calls on the subscription are serial."""
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("2.12", "untested")
    def test_untested_spec212_blackbox_must_not_call_on_subscribe_more_than_once_based_on_object_equality(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: a subscriber instance is subscribed at most once."""
        raise skip(_UNTESTED)

    @rule("2.13", "untested")
    def test_untested_spec213_blackbox_failing_on_signal_invocation(self) -> None:
        """Not verifiable: signal methods return normally."""
        raise skip(_UNTESTED)

    @rule("2.13")
    def test_required_spec213_blackbox_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        """on_subscribe(None) on a fresh subscriber raises TypeError."""
        subscriber = self.create_subscriber()
        _expect_type_error(
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
        _expect_type_error(
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
        _expect_type_error(
            "2.13",
            "on_error(None)",
            lambda: stage.subscriber.on_error(None),  # type: ignore[arg-type]
        )

    @rule("3.1", "untested")
    def test_untested_spec301_blackbox_must_not_be_called_outside_subscriber_context(self) -> None:
        """Not verifiable: the subscription is used only by its subscriber."""
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("3.11", "untested")
    def test_untested_spec311_blackbox_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        """Not verifiable: request may call a terminal signal synchronously."""
        raise skip(_UNTESTED)

    @rule("3.14", "untested")
    def test_untested_spec314_blackbox_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: cancel may shut the publisher down."""
        raise skip(_UNTESTED)

    @rule("3.15", "untested")
    def test_untested_spec315_blackbox_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        """Not verifiable: cancel returns normally."""
        raise skip(_UNTESTED)

    @rule("3.16", "untested")
    def test_untested_spec316_blackbox_request_must_not_throw_exception_and_must_on_error_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: request returns normally."""
        raise skip(_UNTESTED)


class ProbedSubscriber(Generic[T]):
    """Wraps a subscriber for the whitebox TCK: forwards every signal, then reports it to the
    probe; the first ``on_subscribe`` registers ``puppet(subscription)``. A convenience for
    ``create_subscriber(probe)``.

    Args:
        inner: the subscriber under test.
        probe: the probe the TCK passed to ``create_subscriber``.
        puppet: builds the puppet from the subscription ``inner`` was given; its
            ``trigger_request`` / ``signal_cancel`` should act the way real use of
            ``inner`` would (e.g. consume elements), not call the subscription directly.
    """

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
