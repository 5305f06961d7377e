"""PublisherVerification: the Publisher rules of the TCK, one test method per official test."""

from __future__ import annotations

import gc
import random
import threading
import weakref
from typing import Any, Generic, TypeVar

from rs_core._demand import UNBOUNDED
from rs_core.api import Publisher, Subscription
from rs_core.tck._env import ManualSubscriber, TCKFailure, TestEnvironment, rule, skip

__all__ = ["PublisherVerification"]

T = TypeVar("T")

_UNTESTED = "untested: the official TCK has no way to verify this rule"


class PublisherVerification(Generic[T]):
    """Subclass it, implement ``create_publisher(elements)``, and name the subclass ``Test…``.

    Optional: ``create_failed_publisher()`` (a publisher that fails every subscriber; None
    skips the §1.4/§1.9 rejection tests), ``max_elements_from_publisher()`` (default
    ``UNBOUNDED - 1``: tests needing more elements skip), ``env()`` (timeouts),
    ``bounded_depth_of_on_next_and_request_recursion()`` (default 1),
    ``skip_stochastic_tests()``.

    Failures raise :class:`~rs_core.tck.TCKFailure` naming the rule; skips raise
    ``unittest.SkipTest`` saying why.
    """

    def create_publisher(self, elements: int) -> Publisher[T]:
        """A publisher that emits exactly ``elements`` elements, then completes."""
        raise NotImplementedError

    def create_failed_publisher(self) -> Publisher[T] | None:
        """A publisher that signals ``on_subscribe`` then ``on_error`` to every subscriber."""
        return None

    def max_elements_from_publisher(self) -> int:
        return UNBOUNDED - 1

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        return 1

    def skip_stochastic_tests(self) -> bool:
        return False

    def env(self) -> TestEnvironment:
        return TestEnvironment()

    # -- helpers ------------------------------------------------------------------------------

    def _publisher(self, elements: int) -> Publisher[T]:
        if elements > self.max_elements_from_publisher():
            raise skip(
                f"needs a publisher of {elements} elements; "
                f"max_elements_from_publisher() is {self.max_elements_from_publisher()}"
            )
        return self.create_publisher(elements)

    def _subscribe(
        self, publisher: Publisher[T], subscriber: ManualSubscriber[T] | None = None
    ) -> ManualSubscriber[T]:
        sub = subscriber if subscriber is not None else ManualSubscriber[T](self.env())
        try:
            publisher.subscribe(sub)
        except Exception as exc:
            raise TCKFailure(f"§1.9: subscribe() raised {exc!r} instead of signalling") from exc
        sub.expect_subscribed()
        return sub

    def _failed_publisher(self) -> Publisher[T]:
        publisher = self.create_failed_publisher()
        if publisher is None:
            raise skip("create_failed_publisher() returned None: no failing publisher to verify")
        return publisher

    # -- setup and config -----------------------------------------------------------------------

    @rule("setup")
    def test_required_create_publisher1_must_produce_a_stream_of_exactly1_element(self) -> None:
        sub = self._subscribe(self._publisher(1))
        sub.request(1)
        sub.next_element("1.1", "the single element of create_publisher(1)")
        sub.request_end_of_stream("1.5")
        sub.expect_none("1.7", "nothing after completion")

    @rule("setup")
    def test_required_create_publisher3_must_produce_a_stream_of_exactly3_elements(self) -> None:
        sub = self._subscribe(self._publisher(3))
        for i in range(3):
            sub.request(1)
            sub.next_element("1.1", f"element {i + 1} of create_publisher(3)")
        sub.request_end_of_stream("1.5")
        sub.expect_none("1.7", "nothing after completion")

    @rule("config")
    def test_required_validate_max_elements_from_publisher(self) -> None:
        if self.max_elements_from_publisher() < 0:
            raise TCKFailure("config: max_elements_from_publisher() must not be negative")

    @rule("config")
    def test_required_validate_bounded_depth_of_on_next_and_request_recursion(self) -> None:
        if self.bounded_depth_of_on_next_and_request_recursion() < 1:
            raise TCKFailure(
                "config: bounded_depth_of_on_next_and_request_recursion() must be >= 1"
            )

    # -- §1 -----------------------------------------------------------------------------------

    @rule("1.1")
    def test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements(  # noqa: E501
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(5))
        sub.expect_none("1.1", "no element before any request")
        sub.request(1)
        sub.next_element("1.1")
        sub.expect_none("1.1", "no more than the 1 element requested")
        sub.request(1)
        sub.request(2)
        sub.next_elements(3, "1.1", "3 more elements after request(1) + request(2)")
        sub.expect_none("1.1", "no more than the 4 elements requested")
        sub.cancel()

    @rule("1.2")
    def test_required_spec102_may_signal_less_than_requested_and_terminate_subscription(
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(3))
        sub.request(10)
        sub.next_elements(3, "1.2")
        sub.expect_completion("1.2", "on_complete after fewer elements than requested")

    @rule("1.3", "stochastic")
    def test_stochastic_spec103_must_signal_on_methods_sequentially(self) -> None:
        if self.skip_stochastic_tests():
            raise skip("skip_stochastic_tests() is True")
        elements = 10
        env = self.env()
        for _ in range(100):
            sub = _RequestingSubscriber[T](env, from_other_thread=True)
            self._subscribe(self._publisher(elements), sub)
            sub.request(1)
            sub.expect_completion("1.3", "completion of a stream requested from on_next")
            sub.join_requesters()
            sub.check_problems()
            if sub.total_received != elements:
                raise TCKFailure(f"§1.3: got {sub.total_received} of {elements} elements")

    @rule("1.4", "optional")
    def test_optional_spec104_must_signal_on_error_when_fails(self) -> None:
        publisher = self._failed_publisher()
        sub = ManualSubscriber[T](self.env())
        try:
            publisher.subscribe(sub)
        except Exception as exc:
            raise TCKFailure(
                f"§1.4: the failed publisher raised {exc!r} from subscribe() instead of "
                "signalling on_error"
            ) from exc
        sub.expect_error("1.4")
        sub.expect_none("1.4", "nothing after on_error")
        if sub.subscribe_count != 1 or len(sub.errors) != 1:
            raise TCKFailure("§1.4: expected exactly one on_subscribe and one on_error")

    @rule("1.5")
    def test_required_spec105_must_signal_on_complete_when_finite_stream_terminates(self) -> None:
        sub = self._subscribe(self._publisher(3))
        for _ in range(3):
            sub.request(1)
            sub.next_element("1.5")
        sub.request_end_of_stream("1.5")
        sub.expect_none("1.7", "nothing after on_complete")

    @rule("1.5", "optional")
    def test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete(
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(0))
        sub.request(1)
        sub.expect_completion("1.5", "on_complete of an empty stream")
        if sub.total_received:
            raise TCKFailure("§1.5: an empty publisher signalled on_next")

    @rule("1.6", "untested")
    def test_untested_spec106_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("1.7")
    def test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled(  # noqa: E501
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(1))
        sub.request(10)
        sub.next_element("1.7")
        sub.expect_completion("1.7")
        before = sub.snapshot()
        sub.request(10)
        sub.expect_none("1.7", "no signal after on_complete", since=before)
        if sub.completed != 1:
            raise TCKFailure(f"§1.7: on_complete signalled {sub.completed} times")

    @rule("1.7", "untested")
    def test_untested_spec107_must_not_emit_further_signals_once_on_error_has_been_signalled(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("1.8", "untested")
    def test_untested_spec108_possibly_canceled_subscription_should_not_receive_on_error_or_on_complete_signals(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("1.9", "untested")
    def test_untested_spec109_subscribe_should_not_throw_non_fatal_throwable(self) -> None:
        raise skip(_UNTESTED)

    @rule("1.9")
    def test_required_spec109_subscribe_throw_npe_on_null_subscriber(self) -> None:
        publisher = self._publisher(0)
        try:
            publisher.subscribe(None)  # type: ignore[arg-type]
        except TypeError:
            return
        except Exception as exc:
            raise TCKFailure(f"§1.9: subscribe(None) raised {exc!r}, not TypeError") from exc
        raise TCKFailure("§1.9: subscribe(None) returned instead of raising TypeError")

    @rule("1.9")
    def test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber(self) -> None:
        sub = self._subscribe(self._publisher(0))
        if sub.signal_order[0] != "on_subscribe":
            raise TCKFailure(f"§1.9: first signal was {sub.signal_order[0]}, not on_subscribe")
        if sub.subscribe_count != 1:
            raise TCKFailure(f"§1.9: on_subscribe signalled {sub.subscribe_count} times")
        sub.check_problems()

    @rule("1.9")
    def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe(  # noqa: E501
        self,
    ) -> None:
        publisher = self._failed_publisher()
        sub = self._subscribe(publisher)
        sub.expect_error("1.9")
        if sub.signal_order[:2] != ["on_subscribe", "on_error"]:
            raise TCKFailure(f"§1.9: signals were {sub.signal_order}, not on_subscribe, on_error")
        sub.expect_none("1.7", "nothing after on_error")

    @rule("1.10", "untested")
    def test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice(  # noqa: E501
        self,
    ) -> None:
        raise skip(_UNTESTED)

    def _multi(self, publisher: Publisher[T], n: int) -> list[ManualSubscriber[T]]:
        subs = [self._subscribe(publisher) for _ in range(n)]
        for sub in subs[1:]:
            if sub.errors and not sub.total_received:
                raise skip(
                    f"the publisher rejects more than one subscriber (allowed by §1.11): "
                    f"{sub.errors[0]!r}"
                )
        return subs

    @rule("1.11", "optional")
    def test_optional_spec111_may_support_multi_subscribe(self) -> None:
        publisher = self._publisher(1)
        for sub in self._multi(publisher, 2):
            sub.expect_no_errors("1.11")

    @rule("1.11", "optional")
    def test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals(
        self,
    ) -> None:
        publisher = self._publisher(1)
        subs = self._multi(publisher, 2)
        for sub in subs:
            sub.request(1)
        for sub in subs:
            if not sub._wait(
                lambda s=sub: s.total_received > 0 or s.completed > 0,  # type: ignore[misc]
                sub.env.default_timeout,
            ):
                raise TCKFailure(
                    "§1.11: a registered subscriber got neither on_next nor on_complete"
                )
            sub.expect_no_errors("1.11")

    @rule("1.11", "optional")
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_one_by_one(  # noqa: E501
        self,
    ) -> None:
        publisher = self._publisher(5)
        subs = self._multi(publisher, 3)
        got: list[list[T]] = [[] for _ in subs]
        for _ in range(5):
            for i, sub in enumerate(subs):
                sub.request(1)
                got[i].append(sub.next_element("1.11"))
        for sub in subs:
            sub.request_end_of_stream("1.11")
        if not got[0] == got[1] == got[2]:
            raise TCKFailure(f"§1.11: subscribers saw different sequences: {got}")

    def _many_upfront(self, complete: bool) -> None:
        publisher = self._publisher(3)
        subs = self._multi(publisher, 3)
        for sub in subs:
            sub.request(4)
        got = [sub.next_elements(3, "1.11") for sub in subs]
        if complete:
            for sub in subs:
                sub.expect_completion("1.11")
        if not got[0] == got[1] == got[2]:
            raise TCKFailure(f"§1.11: subscribers saw different sequences: {got}")

    @rule("1.11", "optional")
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront(  # noqa: E501
        self,
    ) -> None:
        self._many_upfront(complete=False)

    @rule("1.11", "optional")
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront_and_complete_as_expected(  # noqa: E501
        self,
    ) -> None:
        self._many_upfront(complete=True)

    # -- §3 -----------------------------------------------------------------------------------

    @rule("3.2")
    def test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe(
        self,
    ) -> None:
        sub = _RequestingSubscriber[T](self.env(), on_subscribe_requests=3)
        self._subscribe(self._publisher(6), sub)
        sub.next_elements(6, "3.2", "6 elements requested from on_subscribe and on_next")
        sub.expect_completion("3.2")

    @rule("3.3")
    def test_required_spec303_must_not_allow_unbounded_recursion(self) -> None:
        bound = self.bounded_depth_of_on_next_and_request_recursion()
        elements = min(bound + 10, 100)
        sub = _RequestingSubscriber[T](self.env(), track_depth=True)
        self._subscribe(self._publisher(elements), sub)
        sub.request(1)
        sub.expect_completion("3.3", "completion of a stream requested one by one from on_next")
        if sub.max_depth > bound:
            raise TCKFailure(
                f"§3.3: on_next was nested {sub.max_depth} deep on one thread through "
                f"request() (bound {bound}): request must not recurse into on_next unboundedly"
            )

    @rule("3.4", "untested")
    def test_untested_spec304_request_should_not_perform_heavy_computations(self) -> None:
        raise skip(_UNTESTED)

    @rule("3.5", "untested")
    def test_untested_spec305_cancel_must_not_synchronously_perform_heavy_computation(
        self,
    ) -> None:
        raise skip(_UNTESTED)

    @rule("3.6")
    def test_required_spec306_after_subscription_is_cancelled_request_must_be_nops(self) -> None:
        sub = self._subscribe(self._publisher(3))
        before = sub.snapshot()
        sub.cancel()
        sub.request(1)
        sub.request(1)
        sub.request(1)
        sub.expect_none("3.6", "request after cancel to be a no-op", since=before)

    @rule("3.7")
    def test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops(  # noqa: E501
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(1))
        before = sub.snapshot()
        sub.cancel()
        sub.cancel()
        sub.cancel()
        sub.expect_none("3.7", "repeated cancel to be a no-op", since=before)

    def _bad_request(self, n: int) -> Exception:
        sub = self._subscribe(self._publisher(10))
        sub.request(n)
        error = sub.expect_error("3.9", ValueError)
        return error

    @rule("3.9")
    def test_required_spec309_request_zero_must_signal_illegal_argument_exception(self) -> None:
        self._bad_request(0)

    @rule("3.9")
    def test_required_spec309_request_negative_number_must_signal_illegal_argument_exception(
        self,
    ) -> None:
        self._bad_request(-random.randint(1, 2**62))

    @rule("3.9", "optional")
    def test_optional_spec309_request_negative_number_may_signal_illegal_argument_exception_with_specific_message(  # noqa: E501
        self,
    ) -> None:
        error = self._bad_request(-random.randint(1, 2**62))
        text = str(error)
        if not any(s in text for s in ("3.9", "non-positive subscription request", "negative")):
            raise TCKFailure(f"§3.9: the error message does not mention rule 3.9: {text!r}")

    @rule("3.12")
    def test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling(
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(20))
        sub.request(15)
        sub.next_element("3.12")
        sub.cancel()
        env = sub.env
        sub._wait(lambda: False, env.no_signals_timeout)  # let in-flight elements land
        if sub.total_received > 15:
            raise TCKFailure(f"§3.12: {sub.total_received} elements for 15 requested")
        sub.expect_none("3.12", "signals to stop after cancel")
        sub.expect_no_errors("3.12")

    @rule("3.13")
    def test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        publisher = self._publisher(3)
        env = self.env()
        sub = self._subscribe(publisher)
        ref = weakref.ref(sub)
        sub.cancel()
        del sub
        collected = threading.Event()
        for _ in range(10):
            gc.collect()
            if ref() is None:
                collected.set()
                break
            collected.wait(env.gc_timeout / 10)
        if ref() is not None:
            raise TCKFailure(
                f"§3.13: the publisher still holds the subscriber {env.gc_timeout}s after cancel"
            )

    @rule("3.17")
    def test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value(
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(3))
        sub.request(UNBOUNDED)
        sub.next_elements(3, "3.17")
        sub.expect_completion("3.17")

    @rule("3.17")
    def test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_long_max_value(  # noqa: E501
        self,
    ) -> None:
        sub = self._subscribe(self._publisher(3))
        half = UNBOUNDED // 2
        sub.request(half)
        sub.request(UNBOUNDED - half)  # adds up to exactly 2**63 - 1
        sub.next_elements(3, "3.17")
        sub.expect_completion("3.17")

    @rule("3.17")
    def test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value(
        self,
    ) -> None:
        sub = _RequestingSubscriber[T](self.env(), request_amount=UNBOUNDED, cancel_after=10)
        self._subscribe(self._publisher(2**31 - 1), sub)
        sub.request(UNBOUNDED)
        sub._wait(lambda: sub.total_received >= 10 or bool(sub.errors), sub.env.default_timeout)
        sub.expect_none("3.17", "no on_error when demand overflows 2**63-1")
        sub.expect_no_errors("3.17")


class _RequestingSubscriber(ManualSubscriber[T]):
    """Requests from inside its signals: ``on_subscribe_requests`` times 1 in on_subscribe,
    then ``request_amount`` per on_next (optionally from another thread), measuring how deep
    on_next nests on one thread (§3.3)."""

    def __init__(
        self,
        env: TestEnvironment,
        *,
        on_subscribe_requests: int = 0,
        request_amount: int = 1,
        from_other_thread: bool = False,
        track_depth: bool = False,
        cancel_after: int = 0,
    ) -> None:
        super().__init__(env)
        self._on_subscribe_requests = on_subscribe_requests
        self._amount = request_amount
        self._other_thread = from_other_thread
        self._track_depth = track_depth
        self._cancel_after = cancel_after
        self._depth = threading.local()
        self.max_depth = 0
        self._threads: list[threading.Thread] = []

    def after_subscribe(self, subscription: Subscription) -> None:
        for _ in range(self._on_subscribe_requests):
            self.count_request(1)
            subscription.request(1)

    def on_next(self, element: Any) -> None:
        depth = getattr(self._depth, "value", 0) + 1
        self._depth.value = depth
        self.max_depth = max(self.max_depth, depth)
        try:
            super().on_next(element)
        finally:
            self._depth.value = depth - 1

    def after_next(self, element: Any) -> None:
        assert self.subscription is not None
        if self._cancel_after and self.total_received >= self._cancel_after:
            self.subscription.cancel()
            return
        self.count_request(self._amount)
        if self._other_thread and self.total_received % 2:
            thread = threading.Thread(target=self.subscription.request, args=(self._amount,))
            self._threads.append(thread)
            thread.start()
        else:
            self.subscription.request(self._amount)

    def join_requesters(self) -> None:
        for thread in self._threads:
            thread.join()
