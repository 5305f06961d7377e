"""Test tools for code built on this library: a recording subscriber with explicit request control,
and a recording subscription to hand a subscriber under test.

``RecordingSubscriber`` records every signal, counts demand, notices protocol violations
(overlapping signals §1.3, more ``on_next`` than requested §1.1, a signal after a terminal
one §1.7, a second ``on_subscribe`` §2.12, a signal before ``on_subscribe`` §1.9) and lets a
test wait for conditions instead of sleeping. Modelled on RxJava's TestSubscriber and
Reactor's StepVerifier.
"""

from __future__ import annotations

import inspect
import itertools
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from types import FrameType, FunctionType
from typing import Any, Final, Generic, TypeVar

from reactive_streams._demand import UNBOUNDED
from reactive_streams._subscription import require_element, require_error, require_subscription
from reactive_streams.api import Publisher, Subscription

__all__ = [
    "CountedIterable",
    "HoldFirst",
    "Incomparable",
    "PausedAt",
    "RecordingSubscriber",
    "RecordingSubscription",
    "REQUEST_PATTERNS",
    "cancelled_while_delivering",
    "longest_turn",
    "shutting_down",
    "stack_depth",
    "race",
    "switch_interval",
    "taking_turns",
]

T = TypeVar("T")


class Incomparable:
    """An element that refuses ``==``, as a numpy array or a DataFrame does (their ``==``
    answers with an array, whose truth is an error). A publisher must pass elements along
    without comparing them: one that tests ``element == marker`` (``iter(f, sentinel)``,
    ``x in queue``) fails with these. ``value`` tells them apart in assertions."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        raise ValueError("Incomparable: an element was compared with ==")

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Incomparable({self.value})"


class HoldFirst:
    """An ``on_next_hook`` that holds the first element's delivery until ``release`` is set
    (or ``timeout`` passes): the test acts while the drain is busy inside ``on_next``, from
    another thread, once ``delivering`` is set."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.delivering = threading.Event()
        self.release = threading.Event()
        self._timeout = timeout
        self._held = False

    def __call__(self, element: object) -> None:
        if not self._held:
            self._held = True
            self.delivering.set()
            self.release.wait(self._timeout)


@contextmanager
def cancelled_while_delivering(
    publisher: Publisher[T], demand: int = UNBOUNDED, timeout: float = 5.0
) -> Iterator[RecordingSubscriber[T]]:
    """Subscribe a ``RecordingSubscriber(demand)`` to ``publisher``, hold its first
    ``on_next`` (``HoldFirst``), and once it is held cancel from this thread; the block
    then checks what stopped while that ``on_next`` is still in progress (a cancel must
    not wait for it, §3.12). Leaving the block lets ``on_next`` return."""
    subscriber: RecordingSubscriber[T] = RecordingSubscriber(demand)
    subscriber.on_next_hook = gate = HoldFirst()
    publisher.subscribe(subscriber)
    try:
        if not gate.delivering.wait(timeout):
            raise AssertionError(f"no on_next within {timeout}s")
        subscriber.cancel()
        yield subscriber
    finally:
        gate.release.set()


class PausedAt:
    """Run an action on a thread of its own and stop that thread the first time it reaches
    the line of ``function`` marked ``# paused-at: <marker>`` (before the line runs), until
    :meth:`resume`: an interleaving with another thread chosen, not hoped for. The marker
    comment ends the marked line, or stands on a line of its own just above it. The thread is
    traced with ``sys.settrace`` (that thread only), so keep the action short.

    Args:
        function: a plain function or method holding exactly one line with that marker.
        marker: the marker's name (``settle`` for ``# paused-at: settle``).

    Raises:
        ValueError: naming the marker, when ``function`` holds it on no line, or on several.
    """

    def __init__(self, function: Callable[..., Any], marker: str) -> None:
        assert isinstance(function, FunctionType), "a function or method, not a builtin"
        lines, first = inspect.getsourcelines(function)
        found = [i for i, text in enumerate(lines) if marker in _MARKER.findall(text)]
        if len(found) != 1:
            raise ValueError(
                f"{len(found)} lines of {function.__qualname__} hold the marker "
                f"'# paused-at: {marker}'"
            )
        index = found[0]
        if lines[index].lstrip().startswith("#"):  # a line of its own: it marks the next one
            index += 1
            while lines[index].lstrip().startswith("#") or not lines[index].strip():
                index += 1
        self._line = first + index
        self._marker = marker
        self._code = function.__code__
        self.reached = threading.Event()
        self._go = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, action: Callable[[], object], timeout: float = 5.0) -> None:
        """Start ``action`` on a new thread; return once it is stopped at the marked line."""

        def run() -> None:
            sys.settrace(self._trace)
            try:
                action()
            finally:
                sys.settrace(None)

        self._thread = threading.Thread(target=run, name="rs-paused", daemon=True)
        self._thread.start()
        if not self.reached.wait(timeout):
            raise AssertionError(f"the thread never reached '# paused-at: {self._marker}'")

    def resume(self, timeout: float = 5.0) -> None:
        """Let the thread go on, and wait for ``action`` to return."""
        assert self._thread is not None, "start() first"
        self._go.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError("the action did not return after resume()")

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._stop if event == "call" and frame.f_code is self._code else None

    def _stop(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == self._line and not self.reached.is_set():
            self.reached.set()
            self._go.wait()
        return self._stop


_MARKER: Final = re.compile(r"#\s*paused-at:\s*([\w-]+)")
"""A ``PausedAt`` marker comment in library code; its group is the marker's name."""


@contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """Run the block with ``sys.setswitchinterval(seconds)`` (1e-6: a thread switch at almost
    every chance, so a race shows at once), and restore the interval afterwards."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class CountedIterable:
    """An iterable of ``0, 1, ...`` (``n`` of them, or without end) whose generators count
    how far they were pulled (``pulled``) and set ``closed`` when they end or are closed,
    noting in ``closed_on`` the thread that ran their ``finally``: a test sees a source
    pulled only as far as demand reaches, and closed on cancel, where it should be."""

    def __init__(self, n: int | None = None) -> None:
        self.pulled = 0
        self.closed = threading.Event()
        self.closed_on: list[int] = []
        self._n = n

    def __iter__(self) -> Iterator[int]:
        try:
            for i in itertools.count() if self._n is None else range(self._n):
                self.pulled += 1
                yield i
        finally:
            self.closed_on.append(threading.get_ident())
            self.closed.set()


class RecordingSubscription:
    """A Subscription a test hands to the subscriber under test: it records each
    ``request(n)`` (from any thread) and ``cancel``, and emits nothing."""

    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancelled = threading.Event()
        self.requested_event = threading.Event()  # set by every request
        self._lock = threading.Lock()

    def request(self, n: int) -> None:
        with self._lock:
            self.requests.append(n)
        self.requested_event.set()

    def cancel(self) -> None:
        self.cancelled.set()

    @property
    def total(self) -> int:
        """Everything requested so far, added up."""
        with self._lock:
            return sum(self.requests)


class RecordingSubscriber(Generic[T]):
    """A Subscriber that records what it is told and requests only when the test says so.

    Args:
        initial_request: demand to request from inside ``on_subscribe`` (0 for none).
        request_on_next: demand to request again from inside each ``on_next`` (0 for none),
            synchronously, exercising §3.2/§3.3.

    Attributes:
        elements: the ``on_next`` elements, in order.
        error: the ``on_error`` exception, if any.
        completed: True after ``on_complete``.
        violations: one line per rule the publisher broke, each starting with ``§x.y``.
        requested: the total demand this subscriber requested (saturation not applied).
    """

    def __init__(self, initial_request: int = 0, *, request_on_next: int = 0) -> None:
        self._cond = threading.Condition()
        self._initial_request = initial_request
        self._request_on_next = request_on_next
        self._in_signal = False
        self._depth = 0
        self._owner = 0
        self.subscription: Subscription | None = None
        self.subscribe_count = 0
        self.elements: list[T] = []
        self.error: Exception | None = None
        self.completed = False
        self.cancelled = False
        self.violations: list[str] = []
        self.requested = 0
        self.signal_threads: set[int] = set()
        self.on_next_hook: Callable[[T], None] | None = None

    # -- Subscriber ------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)
        self._enter("on_subscribe")
        try:
            with self._cond:
                self.subscribe_count += 1
                if self.subscription is not None:
                    self._violation("§2.12: on_subscribe signalled more than once")
                    duplicate = True
                else:
                    self.subscription = subscription
                    duplicate = False
                self._cond.notify_all()
            if duplicate:
                subscription.cancel()  # §2.5
                return
            if self._initial_request:
                self.request(self._initial_request)
        finally:
            self._leave()

    def on_next(self, element: T) -> None:
        require_element(element)
        self._enter("on_next")
        try:
            with self._cond:
                if self.subscription is None:
                    self._violation("§1.9: on_next before on_subscribe")
                if self.completed or self.error is not None:
                    self._violation(f"§1.7: on_next({element!r}) after a terminal signal")
                self.elements.append(element)
                if len(self.elements) > self.requested:
                    self._violation(
                        f"§1.1: {len(self.elements)} on_next signals for {self.requested} requested"
                    )
                self._cond.notify_all()
            if self.on_next_hook is not None:
                self.on_next_hook(element)
            if self._request_on_next and not self.cancelled:
                self.request(self._request_on_next)
        finally:
            self._leave()

    def on_error(self, error: Exception) -> None:
        require_error(error)
        self._enter("on_error")
        try:
            with self._cond:
                self._terminal_check("on_error")
                self.error = error
                self._cond.notify_all()
        finally:
            self._leave()

    def on_complete(self) -> None:
        self._enter("on_complete")
        try:
            with self._cond:
                self._terminal_check("on_complete")
                self.completed = True
                self._cond.notify_all()
        finally:
            self._leave()

    # -- control ---------------------------------------------------------------------------

    def request(self, n: int) -> None:
        """Request ``n`` more elements from the subscription."""
        with self._cond:
            subscription = self.subscription
            if isinstance(n, int) and n > 0:
                self.requested += n
        if subscription is None:
            raise AssertionError("request() before on_subscribe")
        subscription.request(n)

    def cancel(self) -> None:
        """Cancel the subscription."""
        self.cancelled = True
        subscription = self.subscription
        if subscription is not None:
            subscription.cancel()

    # -- waiting ---------------------------------------------------------------------------

    def await_subscribed(self, timeout: float = 5.0) -> Subscription:
        """Wait for ``on_subscribe``; raise ``AssertionError`` on timeout."""
        self._await(lambda: self.subscription is not None, timeout, "on_subscribe")
        assert self.subscription is not None
        return self.subscription

    def await_count(self, n: int, timeout: float = 5.0) -> list[T]:
        """Wait until ``n`` elements arrived or the stream ended; return the elements."""
        self._await(lambda: len(self.elements) >= n or self.is_terminated, timeout, f"{n} elements")
        return list(self.elements)

    def await_terminal(self, timeout: float = 5.0) -> None:
        """Wait for ``on_complete`` or ``on_error``; raise ``AssertionError`` on timeout."""
        self._await(lambda: self.is_terminated, timeout, "a terminal signal")

    def await_condition(
        self, predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` is true (re-checked on every signal and every 10 ms)."""
        self._await(predicate, timeout, what)

    def expect_no_signals(self, duration: float = 0.05) -> None:
        """Assert that nothing at all is signalled during ``duration`` seconds."""
        with self._cond:
            before = (len(self.elements), self.completed, self.error, self.subscribe_count)
            self._cond.wait(duration)
            after = (len(self.elements), self.completed, self.error, self.subscribe_count)
        if before != after:
            raise AssertionError(f"expected no signals, got {before} -> {after}")

    @property
    def is_terminated(self) -> bool:
        return self.completed or self.error is not None

    def assert_no_violations(self) -> None:
        if self.violations:
            raise AssertionError("; ".join(self.violations))

    # -- internals ---------------------------------------------------------------------------

    def _await(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {what}: "
                        f"{len(self.elements)} elements, completed={self.completed}, "
                        f"error={self.error!r}"
                    )
                self._cond.wait(min(left, 0.01))

    def _terminal_check(self, signal: str) -> None:
        if self.subscription is None:
            self._violation(f"§1.9: {signal} before on_subscribe")
        if self.completed or self.error is not None:
            self._violation(f"§1.7: {signal} after a terminal signal")

    def _violation(self, text: str) -> None:
        self.violations.append(text)

    def _enter(self, signal: str) -> None:
        with self._cond:
            self.signal_threads.add(threading.get_ident())
            if self._in_signal and self._owner != threading.get_ident():
                self._violation(f"§1.3: {signal} overlapped another signal on another thread")
            self._depth += 1
            self._in_signal = True
            self._owner = threading.get_ident()

    def _leave(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._in_signal = False


def race(*actions: Callable[[], object], timeout: float = 10.0) -> None:
    """Run each action on a thread of its own, all released at once by a barrier (as
    reactor-test's RaceTestUtils does); re-raise the first exception an action raised (any
    ``BaseException``, so ``pytest.fail()`` in an action fails the test), and
    fail if one still runs after ``timeout`` seconds (a deadlock, not a slow machine)."""
    barrier = threading.Barrier(len(actions))
    errors: list[BaseException] = []

    def run(action: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout)
            action()
        except BaseException as exc:  # surfaced to the test below, on its own thread: a
            errors.append(exc)  # pytest.fail() or a KeyboardInterrupt too, never lost

    threads = [threading.Thread(target=run, args=(action,), daemon=True) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            raise AssertionError(f"race(): an action still runs after {timeout}s")
    if errors:
        raise errors[0]


# -- fairness: streams sharing one worker or loop --------------------------------------------

REQUEST_PATTERNS: Final = {
    "request(1)-from-on_next": 1,
    "request(16)-every-16th": 16,
    "UNBOUNDED": UNBOUNDED,
}
"""The request patterns a fairness test runs under, by name (``taking_turns``'s ``every``)."""


def taking_turns(log: list[str], name: str, every: int) -> RecordingSubscriber[int]:
    """A recorder that logs ``name`` per element and requests ``every`` from ``on_next`` each
    time the last ``every`` are used up (``UNBOUNDED``: once, up front). The log is appended
    to by whichever thread delivers: share it only between streams of one worker or loop."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(every)

    def turn(element: int) -> None:
        log.append(name)  # owned: the one worker (or loop) that delivers every stream
        if every != UNBOUNDED and len(sub.elements) % every == 0:
            sub.request(every)

    sub.on_next_hook = turn
    return sub


def longest_turn(log: list[str]) -> int:
    """The most elements one stream got in a row on the shared worker."""
    return max(len(list(run)) for _, run in itertools.groupby(log))


def shutting_down(
    log: list[str], every: int, executor: Executor, at: int = 2
) -> tuple[RecordingSubscriber[int], RecordingSubscriber[int]]:
    """Two :func:`taking_turns` recorders, ``"running"`` and ``"queued"``; the running one
    calls ``executor.shutdown(wait=False, cancel_futures=True)`` from ``on_next`` at the
    element ``at``, for a test of what a stream does once its executor is gone."""
    running, queued = taking_turns(log, "running", every), taking_turns(log, "queued", every)
    turn = running.on_next_hook
    assert turn is not None

    def shut_down(element: int) -> None:
        turn(element)
        if element == at:
            executor.shutdown(wait=False, cancel_futures=True)

    running.on_next_hook = shut_down
    return running, queued


def stack_depth() -> int:
    """The number of frames on the calling thread's stack (a test of recursion bounds)."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth
