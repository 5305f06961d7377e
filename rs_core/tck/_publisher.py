"""PublisherVerification: the Publisher rules of the TCK, one test method per official test.

Each method follows the procedure of its JVM counterpart
(``PublisherVerification.java``), read the Python way: ``None`` is ``TypeError``,
``IllegalArgumentException`` is ``ValueError``, ``Long.MAX_VALUE`` is ``UNBOUNDED``.
"""

from __future__ import annotations

import gc
import random
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from reactive_streams._demand import UNBOUNDED
from reactive_streams.api import Publisher, Subscription
from reactive_streams.tck._env import (
    ManualSubscriber,
    TCKFailure,
    TestEnvironment,
    rule,
    skip,
    verify_no_async_errors,
)

__all__ = ["PublisherVerification"]

T = TypeVar("T")

_UNTESTED = "untested: the official TCK has no way to verify this rule"


class PublisherVerification(Generic[T]):
    """The Publisher rules (§1, §3) verified over ``create_publisher(n)``.

    Subclass it, implement ``create_publisher(elements)`` and name the subclass ``Test…``
    (pytest collects the ``test_*`` methods; each takes only ``self``).

    Optional hooks: ``create_failed_publisher()`` (a publisher that signals ``on_subscribe``
    then ``on_error`` to every subscriber; None skips the tests that need one),
    ``max_elements_from_publisher()`` (default ``UNBOUNDED - 1``; tests needing more skip;
    ``UNBOUNDED`` means "never completes" and skips the tests that need ``on_complete``),
    ``bounded_depth_of_on_next_and_request_recursion()`` (default 1, §3.3),
    ``skip_stochastic_tests()``, ``env()`` (timeouts).

    Failures raise :class:`~reactive_streams.tck.TCKFailure` whose message starts with the rule;
    skips raise ``unittest.SkipTest`` saying why. As in the JVM TCK, an optional test the
    publisher does not pass is skipped, its message kept in the reason.
    """

    def create_publisher(self, elements: int) -> Publisher[T]:
        """A publisher that emits exactly ``elements`` elements, then completes."""
        raise NotImplementedError

    def create_failed_publisher(self) -> Publisher[T] | None:
        """A publisher that signals ``on_subscribe`` then ``on_error`` to every subscriber."""
        return None

    def max_elements_from_publisher(self) -> int:
        """The most elements ``create_publisher`` can produce; ``UNBOUNDED``: never completes."""
        return UNBOUNDED - 1

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        """How deep ``on_next`` -> ``request`` -> ``on_next`` may nest on one thread (§3.3)."""
        return 1

    def skip_stochastic_tests(self) -> bool:
        return False

    def env(self) -> TestEnvironment:
        return TestEnvironment()

    # -- helpers ------------------------------------------------------------------------------

    def _active(self, elements: int, completion_required: bool) -> Publisher[T]:
        """``create_publisher(elements)``, or skip when the publisher cannot serve the test."""
        most = self.max_elements_from_publisher()
        if elements > most:
            raise skip(
                f"needs a publisher of {elements} elements; max_elements_from_publisher() is {most}"
            )
        if completion_required and most == UNBOUNDED:
            raise skip(
                "needs on_complete, which this publisher never signals "
                "(max_elements_from_publisher() is UNBOUNDED)"
            )
        return self.create_publisher(elements)

    def _optional(self, body: Callable[[], None]) -> None:
        """Run an optional test: if the publisher does not pass it, skip (as the JVM TCK)."""
        try:
            body()
        except TCKFailure as failure:
            raise skip(f"optional requirement not met: {failure}") from failure
        except Exception as exc:
            raise skip(f"optional requirement not met: raised {exc!r}") from exc

    def _subscribe(
        self, publisher: Publisher[T], subscriber: ManualSubscriber[T] | None = None
    ) -> ManualSubscriber[T]:
        sub = subscriber if subscriber is not None else ManualSubscriber[T](self.env())
        try:
            publisher.subscribe(sub)
        except TCKFailure:
            raise  # from inside on_subscribe, naming its rule (e.g. §3.16: request raised)
        except Exception as exc:
            raise TCKFailure(
                f"§1.9: subscribe() raised {exc!r}; a publisher must signal on_subscribe and "
                "report failures through on_error"
            ) from exc
        sub.expect_subscribed()
        return sub

    @contextmanager
    def _closing(self, rule_id: str, *subs: ManualSubscriber[T]) -> Iterator[None]:
        """Run a test's body, then cancel ``subs``; once the body passed, what that closing
        cancel provoked is checked too: no ``on_error`` and no broken rule (a cancel that
        signals ``on_error``, or a signal after ``on_complete``, §1.7), as the JVM runs
        ``verifyNoAsyncErrorsNoDelay()`` after ``activePublisherTest``'s body."""
        try:
            yield
        except BaseException:
            for sub in subs:
                sub.cancel()
            raise
        for sub in subs:
            sub.cancel()
        for sub in subs:
            sub.expect_no_errors(rule_id)

    def _failed_publisher(self) -> Publisher[T]:
        publisher = self.create_failed_publisher()
        if publisher is None:
            raise skip("create_failed_publisher() returned None: no failing publisher to verify")
        return publisher

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
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

    @rule("1.8", "untested")
    def test_untested_spec108_possibly_canceled_subscription_should_not_receive_on_error_or_on_complete_signals(  # noqa: E501
        self,
    ) -> None:
        """Not verifiable: a cancelled subscription eventually stops getting terminal signals."""
        raise skip(_UNTESTED)

    @rule("1.9", "untested")
    def test_untested_spec109_subscribe_should_not_throw_non_fatal_throwable(self) -> None:
        """Not verifiable: subscribe returns normally and reports failures via on_error."""
        raise skip(_UNTESTED)

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
        raise skip(_UNTESTED)

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

    # -- §3 -----------------------------------------------------------------------------------

    @rule("3.2")
    def test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe(
        self,
    ) -> None:
        """request() three times from on_subscribe and once from each on_next: no error."""
        sub = _ReentrantSubscriber[T](self.env())
        self._subscribe(self._active(6, False), sub)
        with self._closing("3.2", sub):
            sub.next_elements(6, "3.2", "6 elements requested from on_subscribe and on_next")
            verify_no_async_errors("3.2", sub)

    @rule("3.3")
    def test_required_spec303_must_not_allow_unbounded_recursion(self) -> None:
        """request(1) from each on_next never nests on_next deeper than the bound on a thread."""
        bound = self.bounded_depth_of_on_next_and_request_recursion()
        signals = bound + 1
        sub = _DepthSubscriber[T](self.env(), bound, signals)
        self._subscribe(self._active(signals, False), sub)
        with self._closing("3.3", sub):
            sub.request(1)  # kicks off request -> on_next -> request -> on_next ...
            if not sub.run_completed.wait(sub.env.default_timeout):
                raise TCKFailure(
                    f"§3.3: neither {signals} elements nor a terminal signal within "
                    f"{sub.env.default_timeout}s while requesting one at a time from on_next"
                )
            sub.check_problems()
            sub.expect_no_errors("3.3")

    @rule("3.4", "untested")
    def test_untested_spec304_request_should_not_perform_heavy_computations(self) -> None:
        """Not verifiable: request() is cheap."""
        raise skip(_UNTESTED)

    @rule("3.5", "untested")
    def test_untested_spec305_cancel_must_not_synchronously_perform_heavy_computation(
        self,
    ) -> None:
        """Not verifiable: cancel() is cheap."""
        raise skip(_UNTESTED)

    @rule("3.6")
    def test_required_spec306_after_subscription_is_cancelled_request_must_be_nops(self) -> None:
        """Requests after cancel produce no element and no error."""
        sub = self._subscribe(self._active(3, False))
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
        """cancel() three times is harmless and produces no signal."""
        sub = self._subscribe(self._active(1, False))
        before = sub.snapshot()
        for _ in range(3):
            sub.cancel()  # a cancel that raises fails with §3.15 named
        sub.expect_none("3.7", "repeated cancel to be a no-op", since=before)

    def _bad_request(self, n: int) -> Exception:
        sub = self._subscribe(self._active(10, False))
        sub.request(n)
        return sub.expect_error("3.9", ValueError)

    @rule("3.9")
    def test_required_spec309_request_zero_must_signal_illegal_argument_exception(self) -> None:
        """request(0) leads to on_error(ValueError)."""
        self._bad_request(0)

    @rule("3.9")
    def test_required_spec309_request_negative_number_must_signal_illegal_argument_exception(
        self,
    ) -> None:
        """A random negative request leads to on_error(ValueError)."""
        self._bad_request(-random.randint(1, 2**31 - 1))

    @rule("3.9", "optional")
    def test_optional_spec309_request_negative_number_may_signal_illegal_argument_exception_with_specific_message(  # noqa: E501
        self,
    ) -> None:
        """The error for a negative request mentions rule 3.9 or a non-positive request."""
        self._active(10, False)

        def body() -> None:
            text = str(self._bad_request(-random.randint(1, 2**31 - 1)))
            wanted = ("3.9", "non-positive subscription request", "negative subscription request")
            if not any(s in text for s in wanted):
                raise TCKFailure(f"§3.9: the error message mentions none of {wanted}: {text!r}")

        self._optional(body)

    @rule("3.12")
    def test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling(
        self,
    ) -> None:
        """With 15 of 20 requested, cancel after the first element: at most 15 arrive, and
        signals stop (further requests, no-ops by §3.6, do not restart them)."""
        demand = 10 + 5
        sub = self._subscribe(self._active(20, False))
        sub.request(10)
        sub.request(5)
        sub.next_element("3.12")  # the publisher is running: cancel now
        sub.cancel()

        def over() -> None:
            if sub.total_received > demand:
                raise TCKFailure(
                    f"§3.12: {sub.total_received} elements arrived for {demand} requested: "
                    "the publisher did not stop signalling after cancel"
                )

        seen = _quiet(sub)  # in-flight elements may still land; wait until none do
        over()
        sub.request(demand)  # §3.6: a no-op; a publisher still running would resume
        if _quiet(sub) != seen:
            over()
            raise TCKFailure(
                "§3.12: the publisher signalled again after cancel when the cancelled "
                "subscriber requested more"
            )
        sub.expect_no_errors("3.12")

    @rule("3.13")
    def test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        """After cancel, the gc timeout and gc.collect(), the subscriber is collectable; and
        it got no on_error and saw no rule broken."""
        publisher = self._active(3, False)
        env = self.env()
        ref, errors, problems = self._subscribe_and_cancel(publisher)
        gone = threading.Event()
        for _ in range(10):  # up to gc_timeout: a cancel may finish asynchronously
            gone.wait(env.gc_timeout / 10)
            gc.collect()
            if ref() is None:
                break
        else:
            raise TCKFailure(
                f"§3.13: {env.gc_timeout}s after cancel and gc.collect(), the publisher "
                f"{publisher!r} still holds a reference to the cancelled subscriber"
            )
        if problems:  # the JVM's env.verifyNoAsyncErrorsNoDelay()
            raise TCKFailure(problems[0])
        if errors:
            raise TCKFailure(f"§3.13: unexpected on_error({errors[0]!r})")

    def _subscribe_and_cancel(
        self, publisher: Publisher[T]
    ) -> tuple[weakref.ref[ManualSubscriber[T]], list[Exception], list[str]]:
        """The subscriber, weakly, and its error and problem lists (which do not keep it)."""
        sub = self._subscribe(publisher)
        sub.request(1)
        sub.next_element("3.13")
        sub.cancel()
        return weakref.ref(sub), sub.errors, sub.problems

    @rule("3.17")
    def test_required_spec317_must_support_a_pending_element_count_up_to_long_max_value(
        self,
    ) -> None:
        """request(UNBOUNDED) on 3 elements: 3 elements and on_complete, no error."""
        sub = self._subscribe(self._active(3, True))
        sub.request(UNBOUNDED)
        sub.next_elements(3, "3.17")
        sub.expect_completion("3.17")

    @rule("3.17")
    def test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_long_max_value(  # noqa: E501
        self,
    ) -> None:
        """Requests adding up to exactly 2**63 - 1: 3 elements and on_complete, no error."""
        sub = self._subscribe(self._active(3, True))
        with self._closing("3.17", sub):
            sub.request(UNBOUNDED // 2)
            sub.request(UNBOUNDED // 2)
            sub.request(1)  # pending is now exactly UNBOUNDED
            sub.next_elements(3, "3.17")
            sub.expect_completion("3.17")

    @rule("3.17")
    def test_required_spec317_must_not_signal_on_error_when_pending_above_long_max_value(
        self,
    ) -> None:
        """request(2**63 - 2) from each of ten on_next overflows demand: no on_error."""
        sub = _OverflowingSubscriber[T](self.env())
        self._subscribe(self._active(2**31 - 1, False), sub)
        with self._closing("3.17", sub):
            sub.request(1)
            if not sub.wait(lambda: sub.total_received > sub.calls or bool(sub.errors)):
                raise TCKFailure(
                    f"§3.17: expected {sub.calls + 1} elements within "
                    f"{sub.env.default_timeout}s, got {sub.total_received}"
                )
            sub.wait(lambda: bool(sub.errors), sub.env.no_signals_timeout)
            sub.expect_no_errors("3.17")


def _quiet(sub: ManualSubscriber[T]) -> tuple[int, int, int]:
    """Wait until ``sub`` receives nothing for ``no_signals_timeout``; return its snapshot."""
    now = sub.snapshot()
    while True:
        seen = now
        sub.wait(lambda: sub.snapshot() != seen, sub.env.no_signals_timeout)  # noqa: B023
        now = sub.snapshot()
        if now == seen or now[0] > 1_000_000:
            return now


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


class _ReentrantSubscriber(ManualSubscriber[T]):
    """§3.2: requests three times from on_subscribe and once from every on_next."""

    def after_subscribe(self, subscription: Subscription) -> None:
        for _ in range(3):
            self.request(1)

    def after_next(self, element: T) -> None:
        if self.subscription is not None:
            self.request(1)


class _DepthSubscriber(ManualSubscriber[T]):
    """§3.3: requests 1 from each on_next and measures, with a thread-local counter, how deep
    on_next nests on one thread; stops after ``signals`` elements or past the bound."""

    def __init__(self, env: TestEnvironment, bound: int, signals: int) -> None:
        super().__init__(env)
        self._bound = bound
        self._signals = signals
        self._depth = threading.local()
        self.run_completed = threading.Event()

    def on_next(self, element: T) -> None:
        depth = getattr(self._depth, "value", 0) + 1
        self._depth.value = depth
        try:
            if depth > self._bound:
                with self._cond:
                    self.problems.append(
                        f"§3.3: on_next was nested {depth} deep on one thread through "
                        f"request() from on_next (bound {self._bound}): the publisher must "
                        "not recurse into on_next from request()"
                    )
                self.run_completed.set()
                return
            super().on_next(element)
        finally:
            self._depth.value = depth - 1

    def after_next(self, element: T) -> None:
        if self.total_received >= self._signals or self.run_completed.is_set():
            self.run_completed.set()
            return
        self.request(1)

    def on_error(self, error: Exception) -> None:
        super().on_error(error)
        self.run_completed.set()

    def on_complete(self) -> None:
        super().on_complete()
        self.run_completed.set()


class _OverflowingSubscriber(ManualSubscriber[T]):
    """§3.17: requests ``UNBOUNDED - 1`` from each of ten on_next, then cancels."""

    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env)
        self.calls = 10

    def after_next(self, element: T) -> None:
        if self.total_received <= self.calls:
            self.request(UNBOUNDED - 1)
        else:
            self.cancel()
