"""The Publisher tests of §3 (the Subscription), one per official test.

Each follows its JVM counterpart (``PublisherVerification.java``); the test thread drives a
ManualSubscriber (or one of the subclasses below, which act from inside signals), and the
publisher signals on whichever thread it uses.
"""

from __future__ import annotations

import gc
import random
import threading
import weakref
from typing import TypeVar

from reactive_streams._demand import UNBOUNDED
from reactive_streams.api import Publisher, Subscription
from reactive_streams.tck._env import UNTESTED, TCKFailure, TestEnvironment, rule, skip
from reactive_streams.tck._manual import ManualSubscriber, verify_no_async_errors
from reactive_streams.tck._publisher_base import PublisherVerificationBase

__all__ = ["SubscriptionTests"]

T = TypeVar("T")


class SubscriptionTests(PublisherVerificationBase[T]):
    """The §3 rules, over ``create_publisher(n)``."""

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
        raise skip(UNTESTED)

    @rule("3.5", "untested")
    def test_untested_spec305_cancel_must_not_synchronously_perform_heavy_computation(
        self,
    ) -> None:
        """Not verifiable: cancel() is cheap."""
        raise skip(UNTESTED)

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
