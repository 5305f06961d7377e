"""The whitebox TCK's probe: what the subscriber under test reports to, the puppet that makes
it act, and ProbedSubscriber, which wraps a subscriber to report for it.

The subscriber reports on whichever thread it processes a signal; the test thread waits on
the probe's condition, with a deadline.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from reactive_streams.api import Subscriber, Subscription
from reactive_streams.tck._env import TCKFailure, TestEnvironment

__all__ = ["ProbedSubscriber", "SubscriberPuppet", "WhiteboxSubscriberProbe"]

T = TypeVar("T")


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
        self._cond = threading.Condition()  # guards every field below
        self.puppet: SubscriberPuppet | None = None
        self.elements: deque[T] = deque()
        self.completed = False
        self.error: Exception | None = None
        self.problems: list[str] = []

    def register_on_subscribe(self, puppet: SubscriberPuppet) -> None:
        with self._cond:
            if self.puppet is None:  # the first registration wins; under _cond
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
        self._lock = threading.Lock()
        self._registered = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self.inner.on_subscribe(subscription)
        with self._lock:
            first = not self._registered and subscription is not None
            self._registered = self._registered or first  # under _lock
        if first:  # a second subscription is the inner's to cancel (§2.5), not the probe's
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
