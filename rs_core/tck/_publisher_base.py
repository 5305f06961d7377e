"""The base of PublisherVerification: the hooks a user implements and the helpers every
Publisher test uses (subscribing a ManualSubscriber, skipping, closing a test's subscribers).

Every helper runs on the test thread; the publisher's signals arrive on any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from reactive_streams._demand import UNBOUNDED
from reactive_streams.api import Publisher
from reactive_streams.tck._env import TCKFailure, TestEnvironment, skip
from reactive_streams.tck._manual import ManualSubscriber

__all__ = ["PublisherVerificationBase"]

T = TypeVar("T")


class PublisherVerificationBase(Generic[T]):
    """The hooks of :class:`~reactive_streams.tck.PublisherVerification` and its helpers."""

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
