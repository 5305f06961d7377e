"""The Publisher tests of setup, configuration and §1 (signals), one per official test.

Each follows its JVM counterpart (``PublisherVerification.java``); the test thread drives a
ManualSubscriber, and the publisher signals on whichever thread it uses.
"""

from __future__ import annotations

from typing import TypeVar

from reactive_streams.api import Publisher, Subscription
from reactive_streams.tck._env import UNTESTED, TCKFailure, TestEnvironment, rule, skip
from reactive_streams.tck._manual import ManualSubscriber, verify_no_async_errors
from reactive_streams.tck._publisher_base import PublisherVerificationBase

__all__ = ["SignalTests"]

T = TypeVar("T")


class SignalTests(PublisherVerificationBase[T]):
    """Setup, configuration and the §1 rules, over ``create_publisher(n)``."""

    # -- setup and config -----------------------------------------------------------------------

    @rule("setup")
    def test_required_create_publisher1_must_produce_a_stream_of_exactly1_element(self) -> None:
        """create_publisher(1) yields one element on request, then completes."""
        sub = self._subscribe(self._active(1, True))
        if sub.request_next_element_or_end("1.1") is None:
            raise TCKFailure("§1.1: create_publisher(1) completed without an element")
        sub.request_end_of_stream("1.5")

    @rule("setup")
    def test_required_create_publisher3_must_produce_a_stream_of_exactly3_elements(self) -> None:
        """create_publisher(3) yields three elements one per request, then completes."""
        sub = self._subscribe(self._active(3, True))
        for i in range(3):
            if sub.request_next_element_or_end("1.1") is None:
                raise TCKFailure(f"§1.1: create_publisher(3) completed after {i} elements")
        sub.request_end_of_stream("1.5")

    @rule("config")
    def test_required_validate_max_elements_from_publisher(self) -> None:
        """max_elements_from_publisher() is not negative."""
        if self.max_elements_from_publisher() < 0:
            raise TCKFailure("config: max_elements_from_publisher() must not be negative")

    @rule("config")
    def test_required_validate_bounded_depth_of_on_next_and_request_recursion(self) -> None:
        """bounded_depth_of_on_next_and_request_recursion() is at least 1."""
        if self.bounded_depth_of_on_next_and_request_recursion() < 1:
            raise TCKFailure(
                "config: bounded_depth_of_on_next_and_request_recursion() must be >= 1"
            )

    # -- §1 -----------------------------------------------------------------------------------

    @rule("1.1")
    def test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements(  # noqa: E501
        self,
    ) -> None:
        """Nothing before the first request; then exactly as many elements as requested."""
        sub = self._subscribe(self._active(5, False))
        with self._closing("1.1", sub):
            sub.expect_none("1.1", "no element before the first request")
            sub.request(1)
            sub.next_element("1.1", "an element after request(1)")
            sub.expect_none("1.1", "no more than the 1 element requested")
            sub.request(1)
            sub.request(2)
            sub.next_elements(3, "1.1", "3 more elements after request(1) + request(2)")
            sub.expect_none("1.1", "no more than the 4 elements requested")

    @rule("1.2")
    def test_required_spec102_may_signal_less_than_requested_and_terminate_subscription(
        self,
    ) -> None:
        """A 3-element publisher asked for 10 gives 3 elements and completes."""
        sub = self._subscribe(self._active(3, True))
        sub.request(10)
        sub.next_elements(3, "1.2")
        sub.expect_completion("1.2", "on_complete after fewer elements than requested")

    @rule("1.3", "stochastic")
    def test_stochastic_spec103_must_signal_on_methods_sequentially(self) -> None:
        """100 runs of 10 elements requested from inside on_next: no two signals overlap."""
        if self.skip_stochastic_tests():
            raise skip("skip_stochastic_tests() is True")
        elements, iterations = 10, 100
        env = self.env()
        for run in range(iterations):
            sub = _SequentialSubscriber[T](env, elements)
            self._subscribe(self._active(elements, True), sub)
            with self._closing("1.3", sub):
                sub.expect_completion(
                    "1.3",
                    f"on_complete after {elements} elements (run {run + 1} of {iterations})",
                    timeout=elements * env.default_timeout,
                )
                sub.check_problems()

    @rule("1.4", "optional")
    def test_optional_spec104_must_signal_on_error_when_fails(self) -> None:
        """The failed publisher signals on_subscribe once, then on_error once."""
        publisher = self._failed_publisher()
        sub = ManualSubscriber[T](self.env())
        try:
            publisher.subscribe(sub)
        except Exception as exc:
            raise TCKFailure(
                f"§1.4: the failed publisher raised {exc!r} from subscribe() instead of "
                "signalling on_error"
            ) from exc
        sub.expect_subscribed("1.4")
        sub.expect_error("1.4")
        sub.expect_none("1.4", "nothing after on_error")  # the JVM's env.verifyNoAsyncErrors()
        if sub.subscribe_count != 1 or len(sub.errors) != 1:
            raise TCKFailure(
                f"§1.4: expected one on_subscribe and one on_error, got {sub.subscribe_count} "
                f"and {len(sub.errors)}"
            )

    @rule("1.5")
    def test_required_spec105_must_signal_on_complete_when_finite_stream_terminates(self) -> None:
        """Three elements one by one, then on_complete on the next request, then silence."""
        sub = self._subscribe(self._active(3, True))
        for _ in range(3):
            sub.request(1)
            sub.next_element("1.5")
        sub.request_end_of_stream("1.5")
        sub.expect_none("1.5", "nothing after on_complete")

    @rule("1.5", "optional")
    def test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete(
        self,
    ) -> None:
        """create_publisher(0) completes, without an element, once a request is made."""
        publisher = self._active(0, True)

        def body() -> None:
            sub = self._subscribe(publisher)
            sub.request(1)
            sub.expect_completion("1.5", "on_complete of an empty stream")
            sub.expect_none("1.5", "nothing after on_complete")
            if sub.total_received:
                raise TCKFailure("§1.5: an empty publisher signalled on_next")

        self._optional(body)

    @rule("1.6", "untested")
    def test_untested_spec106_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: the subscription is treated as cancelled after a terminal signal."""
        raise skip(UNTESTED)

    @rule("1.7")
    def test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled(  # noqa: E501
        self,
    ) -> None:
        """After a 1-element stream completed, more demand produces no signal."""
        sub = self._subscribe(self._active(1, True))
        sub.request(10)
        sub.next_element("1.7")
        sub.expect_completion("1.7")
        before = sub.snapshot()
        sub.request(10)
        sub.expect_none("1.7", "no signal after on_complete", since=before)

    @rule("1.7", "untested")
    def test_untested_spec107_must_not_emit_further_signals_once_on_error_has_been_signalled(
        self,
    ) -> None:
        """Not verifiable: no signal after on_error."""
        raise skip(UNTESTED)

    @rule("1.8", "untested")
    def test_untested_spec108_possibly_canceled_subscription_should_not_receive_on_error_or_on_complete_signals(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: a cancelled subscription eventually stops getting terminal signals."""
        raise skip(UNTESTED)

    @rule("1.9", "untested")
    def test_untested_spec109_subscribe_should_not_throw_non_fatal_throwable(self) -> None:
        """Not verifiable: subscribe returns normally and reports failures via on_error."""
        raise skip(UNTESTED)

    @rule("1.9")
    def test_required_spec109_subscribe_throw_npe_on_null_subscriber(self) -> None:
        """subscribe(None) raises TypeError at once."""
        publisher = self._active(0, False)
        try:
            publisher.subscribe(None)  # type: ignore[arg-type]
        except TypeError:
            return
        except Exception as exc:
            raise TCKFailure(f"§1.9: subscribe(None) raised {exc!r}, not TypeError") from exc
        raise TCKFailure("§1.9: subscribe(None) returned instead of raising TypeError")

    @rule("1.9")
    def test_required_spec109_must_issue_on_subscribe_for_non_null_subscriber(self) -> None:
        """subscribe() signals on_subscribe exactly once, before any other signal."""
        sub = self._subscribe(self._active(0, False))
        with self._closing("1.9", sub):
            sub.check_problems()
            if sub.signal_order[0] != "on_subscribe":
                raise TCKFailure(
                    f"§1.9: the first signal was {sub.signal_order[0]}, not on_subscribe"
                )
            if sub.subscribe_count != 1:
                raise TCKFailure(f"§1.9: on_subscribe was signalled {sub.subscribe_count} times")

    @rule("1.9")
    def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe(  # noqa: E501
        self,
    ) -> None:
        """A rejecting publisher signals on_subscribe first, then on_error once."""
        sub = self._subscribe(self._failed_publisher())
        sub.expect_error("1.9")
        sub.check_problems()
        if sub.signal_order[:2] != ["on_subscribe", "on_error"] or len(sub.errors) != 1:
            raise TCKFailure(
                f"§1.9: the signals were {sub.signal_order}, not on_subscribe then one on_error"
            )

    @rule("1.10", "untested")
    def test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: subscribing the same subscriber twice."""
        raise skip(UNTESTED)

    def _subscribers(self, publisher: Publisher[T], n: int) -> list[ManualSubscriber[T]]:
        return [self._subscribe(publisher) for _ in range(n)]

    @rule("1.11", "optional")
    def test_optional_spec111_may_support_multi_subscribe(self) -> None:
        """Two subscribers may subscribe to one publisher without errors."""
        publisher = self._active(1, False)

        def body() -> None:
            subs = self._subscribers(publisher, 2)
            with self._closing("1.11", *subs):
                verify_no_async_errors("1.11", *subs)

        self._optional(body)

    @rule("1.11", "optional")
    def test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals(
        self,
    ) -> None:
        """Two subscribers of a 1-element publisher each get an element or on_complete."""
        publisher = self._active(1, False)

        def body() -> None:
            subs = self._subscribers(publisher, 2)
            with self._closing("1.11", *subs):
                for sub in subs:
                    sub.request_next_element_or_end("1.11")
                verify_no_async_errors("1.11", *subs)

        self._optional(body)

    @rule("1.11", "optional")
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_one_by_one(  # noqa: E501
        self,
    ) -> None:
        """Three subscribers requesting in interleaved small steps see one sequence."""
        publisher = self._active(5, True)

        def body() -> None:
            s1, s2, s3 = self._subscribers(publisher, 3)

            def take(sub: ManualSubscriber[T], n: int) -> list[T]:
                sub.request(n)
                return sub.next_elements(n, "1.11")

            x = take(s1, 1)
            y = take(s2, 2)
            x += take(s1, 1)
            z = take(s3, 3)
            z += take(s3, 1)
            z += take(s3, 1)
            s3.request_end_of_stream("1.11")
            y += take(s2, 3)
            s2.request_end_of_stream("1.11")
            x += take(s1, 2)
            x += take(s1, 1)
            s1.request_end_of_stream("1.11")
            if not x == y == z:
                raise TCKFailure(f"§1.11: the subscribers saw different sequences: {x}, {y}, {z}")

        self._optional(body)

    def _many_upfront(self, complete: bool) -> None:
        publisher = self._active(3, complete)

        def body() -> None:
            subs = self._subscribers(publisher, 3)
            with self._closing("1.11", *subs):
                for sub in subs:
                    sub.request(4)
                got = [sub.next_elements(3, "1.11") for sub in subs]
                if complete:
                    for sub in subs:
                        sub.expect_completion("1.11")
                if not got[0] == got[1] == got[2]:
                    raise TCKFailure(f"§1.11: the subscribers saw different sequences: {got}")

        self._optional(body)

    @rule("1.11", "optional")
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront(  # noqa: E501
        self,
    ) -> None:
        """Three subscribers requesting 4 of 3 elements each see the same 3 in order."""
        self._many_upfront(complete=False)

    @rule("1.11", "optional")
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront_and_complete_as_expected(  # noqa: E501
        self,
    ) -> None:
        """As above, and each of the three subscribers completes."""
        self._many_upfront(complete=True)


class _SequentialSubscriber(ManualSubscriber[T]):
    """§1.3: requests 1 from on_subscribe and 1 from each on_next, one more than the stream
    holds; the conflict detector of ManualSubscriber flags overlapping signals."""

    def __init__(self, env: TestEnvironment, elements: int) -> None:
        super().__init__(env)
        self._elements = elements

    def after_subscribe(self, subscription: Subscription) -> None:
        self.request(1)

    def after_next(self, element: T) -> None:
        with self._cond:
            self.received.clear()  # only the signals' order is checked, not the elements
        if self.total_received <= self._elements and self.subscription is not None:
            self.request(1)
