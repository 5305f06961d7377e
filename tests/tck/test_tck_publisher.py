"""PublisherVerification has teeth: each deliberately broken publisher fails the TCK test for
the rule it breaks, with a message starting with that rule, and a correct reference passes the
very same test; a publisher that cannot serve a test makes it skip, saying why."""

from __future__ import annotations

import threading
import unittest
from collections.abc import Callable
from typing import Any

import pytest
from tck_helpers import FAST, LATE, QUIET, Unusable, fails

from reactive_streams import UNBOUNDED, Publisher, Subscriber
from reactive_streams._subscription import require_subscriber
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import PublisherVerification, TestEnvironment

# -- broken publishers --------------------------------------------------------------------------


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
            return failed() if failed is not None else from_iterable(Unusable())

    return V()


def _broken(flaw: str, env: TestEnvironment = FAST) -> PublisherVerification[int]:
    return _publisher_verification(lambda n: BrokenPublisher(n, flaw), env=env)


def _reference_publisher() -> PublisherVerification[int]:
    return _publisher_verification(lambda n: from_iterable(range(n)))


# -- each broken publisher fails the test of its rule; the reference passes it ------------------


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
    fails(getattr(verification(), test), rule)


@pytest.mark.parametrize(
    ("flaw", "verification", "test", "rule"), PUBLISHER_CASES, ids=_PUBLISHER_IDS
)  # noqa: E501
def test_reference_publisher_passes_the_same_test(
    flaw: str, verification: Callable[[], PublisherVerification[int]], test: str, rule: str
) -> None:
    """from_iterable (with a failed publisher over an unusable iterable) passes it."""
    getattr(_reference_publisher(), test)()


# -- a rule broken where only the subscriber's problems list shows it ---------------------------


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
    fails(
        verification.test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe,
        "§3.16",
    )


def test_a_request_raising_inside_on_subscribe_names_3_16_in_the_sequential_test() -> None:
    """The 1.3 test's subscriber requests from on_subscribe too: a raise there names §3.16,
    as in 3.2 (a PUBLISHER_CASES entry: _broken("raise_in_on_subscribe") on
    test_stochastic_spec103_must_signal_on_methods_sequentially, "§3.16")."""
    fails(
        _broken(
            "raise_in_on_subscribe"
        ).test_stochastic_spec103_must_signal_on_methods_sequentially,
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
    fails(
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
    fails(
        verification.test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber,
        "§1.9",
    )


# -- skips: a test the publisher cannot serve, or an optional requirement not met ---------------


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


class _NeverCompletes:
    """A publisher of nothing that never completes: fails the optional §1.5 empty test."""

    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_Nothing())


class _Nothing:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


def test_an_optional_test_not_passed_skips_with_its_failure() -> None:
    """As in the JVM TCK, an optional requirement not met skips, keeping the rule's message."""

    class V(PublisherVerification[int]):
        def env(self) -> TestEnvironment:
            return TestEnvironment(default_timeout_ms=100, no_signals_timeout_ms=10)

        def create_publisher(self, elements: int) -> Publisher[int]:
            return _NeverCompletes() if elements == 0 else from_iterable(range(elements))

    with pytest.raises(unittest.SkipTest, match="optional requirement not met: §1.5"):
        V().test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete()


def test_missing_failed_publisher_skips() -> None:
    """Without create_failed_publisher() the tests that need one skip, saying why."""

    class V(PublisherVerification[int]):
        def create_publisher(self, elements: int) -> Publisher[int]:
            return from_iterable(range(elements))

    with pytest.raises(unittest.SkipTest, match="create_failed_publisher"):
        V().test_optional_spec104_must_signal_on_error_when_fails()


def test_too_few_elements_skips() -> None:
    """A test needing more elements than max_elements_from_publisher() skips, saying why."""

    class V(PublisherVerification[int]):
        def create_publisher(self, elements: int) -> Publisher[int]:
            return from_iterable(range(elements))

        def max_elements_from_publisher(self) -> int:
            return 2

    with pytest.raises(unittest.SkipTest, match="max_elements_from_publisher"):
        V().test_required_spec105_must_signal_on_complete_when_finite_stream_terminates()
