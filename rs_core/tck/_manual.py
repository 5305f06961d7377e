"""The TCK's test doubles: a subscriber the test requests through (and which notes every rule
a publisher breaks), and a publisher and subscription the test signals through by hand.

Signals may arrive on any thread; nothing here blocks a caller of ``request`` or ``cancel``,
and only the test thread waits, on a condition with a deadline.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reactive_streams._demand import add_cap
from reactive_streams._subscription import require_subscriber
from reactive_streams.api import Subscriber, Subscription
from reactive_streams.tck._env import ConflictDetector, TCKFailure, TestEnvironment

__all__ = [
    "ManualPublisher",
    "ManualSubscriber",
    "ManualSubscription",
    "verify_no_async_errors",
]

T = TypeVar("T")


class ManualSubscriber(Generic[T]):
    """The TCK's own subscriber: records every signal, requests only when the test says so,
    and notes every rule the publisher breaks on the way (checked by ``check_problems``):
    overlapping signals (§1.3), more ``on_next`` than requested (§1.1), a signal before
    ``on_subscribe`` or a second ``on_subscribe`` (§1.9), anything after a terminal signal
    (§1.7).

    Subclasses act from inside signals through ``after_subscribe`` and ``after_next``.
    Signals may arrive on any thread; the test's ``expect_*`` / ``next_*`` calls wait for them.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self._cond = threading.Condition()  # guards the counts and lists below
        self._guard = ConflictDetector()
        self.subscription: Subscription | None = None
        self.subscribe_count = 0
        self.received: deque[T] = deque()
        self.total_received = 0
        self.requested = 0
        self.completed = 0
        self.errors: list[Exception] = []
        self.problems: list[str] = []
        self.signal_order: list[str] = []

    # -- signals ---------------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        conflict = self._guard.enter(name)
        with self._cond:
            if conflict is not None:
                self.problems.append(f"§1.3: signals overlapped: {conflict}")  # under _cond
            if len(self.signal_order) < 1000:
                self.signal_order.append(name)
            if name != "on_subscribe" and self.subscription is None:
                self.problems.append(f"§1.9: {name} was signalled before on_subscribe")
            if self.completed or self.errors:
                self.problems.append(f"§1.7: {name} was signalled after a terminal signal")

    def _leave(self) -> None:
        self._guard.leave()
        with self._cond:
            self._cond.notify_all()

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("§2.13: on_subscribe() requires a Subscription, got None")
        self._enter("on_subscribe")
        try:
            with self._cond:
                self.subscribe_count += 1  # under _cond
                first = self.subscription is None
                if first:
                    self.subscription = subscription
                else:
                    self.problems.append("§1.9: on_subscribe was signalled twice")
            if first:
                self.after_subscribe(subscription)
        finally:
            self._leave()

    def after_subscribe(self, subscription: Subscription) -> None:
        """Hook: runs inside ``on_subscribe`` (e.g. to request from there, §3.2)."""

    def on_next(self, element: T) -> None:
        if element is None:
            raise TypeError("§2.13: on_next() requires an element, got None")
        self._enter("on_next")
        try:
            with self._cond:
                self.received.append(element)
                self.total_received += 1  # under _cond
                if self.total_received > self.requested:
                    self.problems.append(
                        f"§1.1: on_next #{self.total_received} arrived, but only "
                        f"{self.requested} were requested"
                    )
            self.after_next(element)
        finally:
            self._leave()

    def after_next(self, element: T) -> None:
        """Hook: runs inside ``on_next`` (e.g. to request from there, §3.2/§3.3)."""

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("§2.13: on_error() requires an exception, got None")
        self._enter("on_error")
        try:
            with self._cond:
                self.errors.append(error)
        finally:
            self._leave()

    def on_complete(self) -> None:
        self._enter("on_complete")
        try:
            with self._cond:
                self.completed += 1  # under _cond
        finally:
            self._leave()

    # -- the test's side ---------------------------------------------------------------------

    def wait(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate()`` holds (checked under this subscriber's lock)."""
        with self._cond:
            return self.env.wait_for(
                self._cond, predicate, self.env.default_timeout if timeout is None else timeout
            )

    def expect_subscribed(self, rule_id: str = "1.9") -> Subscription:
        if not self.wait(lambda: self.subscription is not None):
            raise TCKFailure(
                f"§{rule_id}: on_subscribe was not signalled within {self.env.default_timeout}s"
            )
        assert self.subscription is not None
        return self.subscription

    def count_request(self, n: int) -> None:
        """Record demand about to be requested (before the call: emission may be inline)."""
        if isinstance(n, int) and n > 0:
            with self._cond:
                self.requested = add_cap(self.requested, n)  # under _cond

    def request(self, n: int) -> None:
        """``request(n)`` on the subscription (also from ``after_subscribe`` / ``after_next``).
        A raise fails naming §3.16, and is kept in ``problems`` too, in case it came from
        inside a signal whose caller swallows it."""
        subscription = self.expect_subscribed()
        self.count_request(n)
        try:
            subscription.request(n)
        except Exception as exc:
            failure = TCKFailure(f"§3.16: request({n!r}) raised {exc!r}; it must return normally")
            with self._cond:
                self.problems.append(str(failure))
            raise failure from exc

    def cancel(self) -> None:
        try:
            self.expect_subscribed().cancel()
        except Exception as exc:
            raise TCKFailure(f"§3.15: cancel() raised {exc!r}; it must return normally") from exc

    def next_element(self, rule_id: str, what: str = "an element") -> T:
        return self.next_elements(1, rule_id, what)[0]

    def next_elements(
        self, n: int, rule_id: str, what: str = "", timeout: float | None = None
    ) -> list[T]:
        """Take the next ``n`` elements, failing on timeout, an error or an early end."""
        what = what or f"{n} elements"
        done = self.wait(
            lambda: len(self.received) >= n or bool(self.errors) or self.completed > 0, timeout
        )
        self.check_problems()
        with self._cond:
            if len(self.received) >= n:
                return [self.received.popleft() for _ in range(n)]
            got = len(self.received)
        if not done:
            raise TCKFailure(
                f"§{rule_id}: expected {what} within {self.env.default_timeout}s, got {got}"
            )
        if self.errors:
            raise TCKFailure(f"§{rule_id}: expected {what}, got on_error({self.errors[0]!r})")
        raise TCKFailure(f"§{rule_id}: expected {what}, the stream completed after {got}")

    def next_element_or_end(self, rule_id: str) -> T | None:
        """Wait for an element (returned) or completion (None); fail on error or timeout."""
        done = self.wait(lambda: bool(self.received) or bool(self.errors) or self.completed > 0)
        self.check_problems()
        with self._cond:
            if self.received:
                return self.received.popleft()
        if not done:
            raise TCKFailure(
                f"§{rule_id}: neither on_next nor on_complete within {self.env.default_timeout}s"
            )
        if self.errors:
            raise TCKFailure(f"§{rule_id}: unexpected on_error({self.errors[0]!r})")
        return None

    def request_next_element_or_end(self, rule_id: str) -> T | None:
        """``request(1)``, then the element (returned) or completion (None)."""
        self.request(1)
        return self.next_element_or_end(rule_id)

    def expect_completion(
        self, rule_id: str, what: str = "on_complete", timeout: float | None = None
    ) -> None:
        """Expect the next signal to be on_complete: an element not yet taken (by
        ``next_element(s)``) fails, as in the JVM's ``expectCompletion``."""
        done = self.wait(
            lambda: self.completed > 0 or bool(self.errors) or bool(self.received), timeout
        )
        self.check_problems()
        if self.received:
            raise TCKFailure(f"§{rule_id}: expected {what}, got on_next({self.received[0]!r})")
        if not done:
            raise TCKFailure(
                f"§{rule_id}: expected {what} within "
                f"{self.env.default_timeout if timeout is None else timeout}s "
                f"(got {self.total_received} elements)"
            )
        if self.errors:
            raise TCKFailure(f"§{rule_id}: expected {what}, got on_error({self.errors[0]!r})")

    def request_end_of_stream(self, rule_id: str) -> None:
        """Request one more and expect completion with no further element."""
        self.request(1)
        self.expect_completion(rule_id, "on_complete after the last element")

    def expect_error(self, rule_id: str, kind: type[BaseException] = Exception) -> Exception:
        if not self.wait(lambda: bool(self.errors)):
            raise TCKFailure(
                f"§{rule_id}: expected on_error({kind.__name__}) within "
                f"{self.env.default_timeout}s (completed={self.completed}, "
                f"{self.total_received} elements)"
            )
        self.check_problems()  # an unrequested on_next, or a signal after a terminal one
        error = self.errors[0]
        if not isinstance(error, kind):
            raise TCKFailure(f"§{rule_id}: expected on_error({kind.__name__}), got {error!r}")
        return error

    def snapshot(self) -> tuple[int, int, int]:
        """Counts of elements, completions and errors so far (for ``expect_none(since=...)``)."""
        with self._cond:
            return (self.total_received, self.completed, len(self.errors))

    def expect_none(
        self,
        rule_id: str,
        what: str = "no signal",
        timeout: float | None = None,
        since: tuple[int, int, int] | None = None,
    ) -> None:
        """Watch for ``no_signals_timeout``: no element, completion or error may arrive
        (counting from ``since`` when given, e.g. from before a ``cancel()``)."""
        self.check_problems()
        before = since if since is not None else self.snapshot()
        window = self.env.no_signals_timeout if timeout is None else timeout
        self.wait(lambda: self.snapshot() != before, window)
        after = self.snapshot()
        if before != after:
            raise TCKFailure(
                f"§{rule_id}: expected {what}, but got "
                f"{after[0] - before[0]} on_next, {after[1] - before[1]} on_complete, "
                f"{after[2] - before[2]} on_error"
                + (f" ({self.errors[-1]!r})" if after[2] > before[2] else "")
            )
        self.check_problems()

    def expect_no_errors(self, rule_id: str) -> None:
        if self.errors:
            raise TCKFailure(f"§{rule_id}: unexpected on_error({self.errors[0]!r})")
        self.check_problems()

    def check_problems(self) -> None:
        """Fail with the first rule the publisher broke, if any."""
        if self.problems:
            raise TCKFailure(self.problems[0])


def verify_no_async_errors(rule_id: str, *subscribers: ManualSubscriber[Any]) -> None:
    """The JVM's ``env.verifyNoAsyncErrors()``: no ``on_error`` and no broken rule now, nor
    within ``no_signals_timeout`` (so a late ``on_error`` or a late second terminal signal
    fails too)."""
    for sub in subscribers:
        sub.expect_no_errors(rule_id)
    deadline = time.monotonic() + subscribers[0].env.no_signals_timeout
    for sub in subscribers:
        left = max(deadline - time.monotonic(), 0.0)
        sub.wait(lambda: bool(sub.errors or sub.problems), left)  # noqa: B023 (called at once)
        sub.expect_no_errors(rule_id)


class ManualSubscription:
    """A subscription the test hands to the subscriber under test: records requests and
    cancel, and every call the subscriber makes while inside ``on_complete``/``on_error`` on
    the thread delivering it (§2.3; the JVM TCK inspects the stack for the same thing)."""

    def __init__(self, publisher: ManualPublisher[Any] | None = None, name: str = "") -> None:
        self._publisher = publisher
        self.name = name or "the subscription"
        self.requests: deque[int] = deque()
        self.all_requests: list[int] = []
        self.total_requested = 0
        self.cancelled = threading.Event()
        self.calls_in_terminal: list[str] = []
        self._cond = threading.Condition()  # guards requests, totals and calls_in_terminal

    def _in_terminal(self, call: str) -> None:
        publisher = self._publisher
        if publisher is not None and publisher.terminal_thread == threading.get_ident():
            with self._cond:
                self.calls_in_terminal.append(  # under _cond
                    f"{call} from inside {publisher.terminal_signal}"
                )

    def request(self, n: int) -> None:
        self._in_terminal(f"request({n!r})")
        with self._cond:
            self.requests.append(n)
            self.all_requests.append(n)
            if isinstance(n, int) and n > 0:
                self.total_requested = add_cap(self.total_requested, n)  # under _cond
            self._cond.notify_all()

    def cancel(self) -> None:
        self._in_terminal("cancel()")
        self.cancelled.set()
        with self._cond:
            self._cond.notify_all()

    def expect_request(self, env: TestEnvironment, rule_id: str) -> int:
        """Wait for the next ``request(n)`` and return ``n`` (which must be positive)."""
        with self._cond:
            if not env.wait_for(self._cond, lambda: bool(self.requests), env.default_timeout):
                raise TCKFailure(
                    f"§{rule_id}: expected the subscriber to call request(n) on {self.name} "
                    f"within {env.default_timeout}s"
                )
            n = self.requests.popleft()
        if not isinstance(n, int) or n <= 0:
            raise TCKFailure(
                f"§{rule_id}: the subscriber called request({n!r}); demand must be a positive "
                "int (§3.9)"
            )
        return n

    def await_total(self, env: TestEnvironment, total: int) -> bool:
        """Wait until the subscriber has requested at least ``total`` in all."""
        with self._cond:
            return env.wait_for(
                self._cond, lambda: self.total_requested >= total, env.default_timeout
            )

    def expect_cancelled(self, env: TestEnvironment, rule_id: str) -> None:
        if not self.cancelled.wait(env.default_timeout):
            raise TCKFailure(
                f"§{rule_id}: expected the subscriber to cancel {self.name} within "
                f"{env.default_timeout}s"
            )

    def __repr__(self) -> str:
        return f"ManualSubscription({self.name})"


class ManualPublisher(Generic[T]):
    """A Publisher the test signals through by hand, serving one subscriber."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[T] | None = None
        self.subscription: ManualSubscription | None = None
        self.terminal_thread: int | None = None
        self.terminal_signal = ""

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        self.subscriber = subscriber
        self.subscription = ManualSubscription(self, "its subscription")
        subscriber.on_subscribe(self.subscription)

    def send_next(self, element: T) -> None:
        assert self.subscriber is not None
        self.subscriber.on_next(element)

    def send_complete(self) -> None:
        assert self.subscriber is not None
        self._terminal("on_complete", self.subscriber.on_complete)

    def send_error(self, error: Exception) -> None:
        assert self.subscriber is not None
        subscriber = self.subscriber
        self._terminal("on_error", lambda: subscriber.on_error(error))

    def _terminal(self, signal: str, call: Callable[[], None]) -> None:
        # owned: the one thread signalling through this publisher (the test thread)
        self.terminal_thread, self.terminal_signal = threading.get_ident(), signal
        try:
            call()
        finally:
            self.terminal_thread = None
