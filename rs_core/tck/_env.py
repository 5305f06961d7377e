"""The TCK's environment: timeouts, the failure type, rule metadata, and the test doubles
(a manual subscriber the test drives, a manual publisher the test signals through)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import unittest
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from rs_core._demand import add_cap
from rs_core.api import Subscriber, Subscription

__all__ = [
    "ManualPublisher",
    "ManualSubscriber",
    "TCKFailure",
    "TestEnvironment",
    "rule",
    "skip",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class TCKFailure(AssertionError):
    """A TCK test failed; the message starts with the rule it checks (``"§1.1: ..."``)."""


def rule(rule_id: str, kind: str = "required") -> Callable[[F], F]:
    """Attach the rule (``"1.1"``, ``"setup"``) and kind (required / optional / stochastic /
    untested) a test method checks, for ``python -m compat_matrix``."""

    def mark(fn: F) -> F:
        fn.rule = rule_id  # type: ignore[attr-defined]
        fn.kind = kind  # type: ignore[attr-defined]
        return fn

    return mark


def skip(reason: str) -> unittest.SkipTest:
    """The exception a TCK test raises to skip (pytest and compat_matrix both honour it)."""
    return unittest.SkipTest(reason)


def _env_ms(name: str, default: int) -> float:
    value = os.environ.get(name)
    return (int(value) if value else default) / 1000.0


class TestEnvironment:
    """Timeouts for the TCK, each overridable by argument or environment variable (ms).

    Args:
        default_timeout_ms: how long to wait for an expected signal
            (``RS_TCK_DEFAULT_TIMEOUT_MS``, default 1000).
        no_signals_timeout_ms: how long to watch for an unexpected signal
            (``RS_TCK_NO_SIGNALS_TIMEOUT_MS``, default 100).
        gc_timeout_ms: how long a publisher may take to drop a cancelled subscriber
            (``RS_TCK_GC_TIMEOUT_MS``, default 300).
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        default_timeout_ms: int | None = None,
        no_signals_timeout_ms: int | None = None,
        gc_timeout_ms: int | None = None,
    ) -> None:
        self.default_timeout = (
            default_timeout_ms / 1000.0
            if default_timeout_ms is not None
            else _env_ms("RS_TCK_DEFAULT_TIMEOUT_MS", 1000)
        )
        self.no_signals_timeout = (
            no_signals_timeout_ms / 1000.0
            if no_signals_timeout_ms is not None
            else _env_ms("RS_TCK_NO_SIGNALS_TIMEOUT_MS", 100)
        )
        self.gc_timeout = (
            gc_timeout_ms / 1000.0
            if gc_timeout_ms is not None
            else _env_ms("RS_TCK_GC_TIMEOUT_MS", 300)
        )

    _loop: asyncio.AbstractEventLoop | None = None
    _loop_lock = threading.Lock()

    @classmethod
    def event_loop(cls) -> asyncio.AbstractEventLoop:
        """A shared asyncio loop running on a daemon helper thread, for loop-bound publishers."""
        with cls._loop_lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="rs-tck-loop", daemon=True
                )
                thread.start()
                cls._loop = loop
            return cls._loop


class ManualSubscriber(Generic[T]):
    """The TCK's own subscriber: records every signal, requests only when told, and flags
    overlapping signals (§1.3) and anything after a terminal signal (§1.7)."""

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self._cond = threading.Condition()
        self.subscription: Subscription | None = None
        self.subscribe_count = 0
        self.received: deque[T] = deque()
        self.total_received = 0
        self.requested = 0
        self.completed = 0
        self.errors: list[Exception] = []
        self.problems: list[str] = []
        self._busy_thread: int | None = None
        self._busy_depth = 0
        self.signal_order: list[str] = []

    # -- signals ---------------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        with self._cond:
            me = threading.get_ident()
            if self._busy_thread is not None and self._busy_thread != me:
                self.problems.append(f"§1.3: {name} overlapped another signal on another thread")
            self._busy_thread = me
            self._busy_depth += 1
            self.signal_order.append(name)
            if name != "on_subscribe" and self.subscription is None:
                self.problems.append(f"§1.9: {name} before on_subscribe")
            if name != "on_subscribe" and (self.completed or self.errors):
                self.problems.append(f"§1.7: {name} after a terminal signal")

    def _leave(self) -> None:
        with self._cond:
            self._busy_depth -= 1
            if self._busy_depth <= 0:  # nested signals (request from on_next) unwind first
                self._busy_depth = 0
                self._busy_thread = None
            self._cond.notify_all()

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("§2.13: on_subscribe(None)")
        self._enter("on_subscribe")
        try:
            with self._cond:
                self.subscribe_count += 1
                if self.subscription is not None:
                    self.problems.append("§1.9/§2.12: on_subscribe signalled twice")
                else:
                    self.subscription = subscription
            self.after_subscribe(subscription)
        finally:
            self._leave()

    def after_subscribe(self, subscription: Subscription) -> None:
        """Hook for subclasses (e.g. request from inside on_subscribe)."""

    def on_next(self, element: T) -> None:
        if element is None:
            raise TypeError("§2.13: on_next(None)")
        self._enter("on_next")
        try:
            with self._cond:
                self.received.append(element)
                self.total_received += 1
                if self.total_received > self.requested:
                    self.problems.append(
                        f"§1.1: on_next #{self.total_received} exceeds the {self.requested} "
                        "elements requested"
                    )
            self.after_next(element)
        finally:
            self._leave()

    def after_next(self, element: T) -> None:
        """Hook for subclasses (e.g. request from inside on_next)."""

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("§2.13: on_error(None)")
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
                self.completed += 1
        finally:
            self._leave()

    # -- the test's side -----------------------------------------------------------------------

    def _wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.01))
            return True

    def expect_subscribed(self, rule_id: str = "1.9") -> Subscription:
        if not self._wait(lambda: self.subscription is not None, self.env.default_timeout):
            raise TCKFailure(
                f"§{rule_id}: on_subscribe not signalled within {self.env.default_timeout}s"
            )
        assert self.subscription is not None
        return self.subscription

    def count_request(self, n: int) -> None:
        """Record demand about to be requested (before the call: emission may be inline)."""
        if isinstance(n, int) and n > 0:
            with self._cond:
                self.requested = add_cap(self.requested, n)

    def request(self, n: int) -> None:
        subscription = self.expect_subscribed()
        self.count_request(n)
        subscription.request(n)

    def cancel(self) -> None:
        self.expect_subscribed().cancel()

    def next_element(self, rule_id: str, what: str = "an element") -> T:
        return self.next_elements(1, rule_id, what)[0]

    def next_elements(self, n: int, rule_id: str, what: str = "") -> list[T]:
        if not self._wait(
            lambda: len(self.received) >= n or bool(self.errors) or self.completed > 0,
            self.env.default_timeout,
        ):
            raise TCKFailure(
                f"§{rule_id}: expected {what or f'{n} elements'} within "
                f"{self.env.default_timeout}s, got {len(self.received)}"
            )
        self.check_problems()
        if self.errors:
            raise TCKFailure(
                f"§{rule_id}: expected {what or f'{n} elements'}, got on_error({self.errors[0]!r})"
            )
        if len(self.received) < n:
            raise TCKFailure(
                f"§{rule_id}: expected {what or f'{n} elements'}, the stream completed after "
                f"{len(self.received)}"
            )
        return [self.received.popleft() for _ in range(n)]

    def expect_completion(self, rule_id: str, what: str = "on_complete") -> None:
        done = self._wait(lambda: self.completed > 0 or bool(self.errors), self.env.default_timeout)
        if not done:
            raise TCKFailure(
                f"§{rule_id}: expected {what} within {self.env.default_timeout}s "
                f"(got {self.total_received} elements)"
            )
        if self.errors:
            raise TCKFailure(f"§{rule_id}: expected {what}, got on_error({self.errors[0]!r})")
        self.check_problems()

    def request_end_of_stream(self, rule_id: str) -> None:
        """Request one more and expect completion with no further element."""
        self.request(1)
        self.expect_completion(rule_id, "on_complete after the last element")
        if self.received:
            raise TCKFailure(f"§{rule_id}: got {list(self.received)} instead of completion")

    def expect_error(self, rule_id: str, kind: type[BaseException] = Exception) -> Exception:
        if not self._wait(lambda: bool(self.errors), self.env.default_timeout):
            raise TCKFailure(
                f"§{rule_id}: expected on_error({kind.__name__}) within "
                f"{self.env.default_timeout}s (completed={self.completed}, "
                f"{self.total_received} elements)"
            )
        error = self.errors[0]
        if not isinstance(error, kind):
            raise TCKFailure(f"§{rule_id}: expected on_error({kind.__name__}), got {error!r}")
        return error

    def snapshot(self) -> tuple[int, int, int]:
        """Counts of elements, completions and errors so far (for ``expect_none(since=...)``)."""
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
        time.sleep(self.env.no_signals_timeout if timeout is None else timeout)
        after = (self.total_received, self.completed, len(self.errors))
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
        if self.problems:
            raise TCKFailure(self.problems[0])


class _ManualSubscription:
    """The subscription a ManualPublisher hands out: records requests, cancel, and calls
    made while the subscriber was inside a terminal signal (§2.3)."""

    def __init__(self, publisher: ManualPublisher[Any]) -> None:
        self._publisher = publisher
        self.requests: deque[int] = deque()
        self.total_requested = 0
        self.cancelled = threading.Event()
        self.calls_in_terminal: list[str] = []
        self._cond = threading.Condition()

    def request(self, n: int) -> None:
        if self._publisher.in_terminal:
            self.calls_in_terminal.append(f"request({n})")
        with self._cond:
            self.requests.append(n)
            if isinstance(n, int) and n > 0:
                self.total_requested = add_cap(self.total_requested, n)
            self._cond.notify_all()

    def cancel(self) -> None:
        if self._publisher.in_terminal:
            self.calls_in_terminal.append("cancel()")
        self.cancelled.set()
        with self._cond:
            self._cond.notify_all()

    def expect_request(self, env: TestEnvironment, rule_id: str) -> int:
        deadline = time.monotonic() + env.default_timeout
        with self._cond:
            while not self.requests:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TCKFailure(
                        f"§{rule_id}: expected the subscriber to request(n) within "
                        f"{env.default_timeout}s"
                    )
                self._cond.wait(min(left, 0.01))
            n = self.requests.popleft()
        if not isinstance(n, int) or n <= 0:
            raise TCKFailure(f"§{rule_id}: the subscriber requested a non-positive {n!r} (§3.9)")
        return n

    def await_total(self, env: TestEnvironment, total: int) -> bool:
        deadline = time.monotonic() + env.default_timeout
        with self._cond:
            while self.total_requested < total:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.01))
            return True


class ManualPublisher(Generic[T]):
    """A Publisher the test signals through by hand, one subscriber at a time."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[T] | None = None
        self.subscription: _ManualSubscription | None = None
        self.in_terminal = False

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        if subscriber is None:
            raise TypeError("§1.9: subscribe(None)")
        self.subscriber = subscriber
        self.subscription = _ManualSubscription(self)
        subscriber.on_subscribe(self.subscription)

    def send_next(self, element: T) -> None:
        assert self.subscriber is not None
        self.subscriber.on_next(element)

    def send_complete(self) -> None:
        assert self.subscriber is not None
        self.in_terminal = True
        try:
            self.subscriber.on_complete()
        finally:
            self.in_terminal = False

    def send_error(self, error: Exception) -> None:
        assert self.subscriber is not None
        self.in_terminal = True
        try:
            self.subscriber.on_error(error)
        finally:
            self.in_terminal = False
