"""The fuzzer's own record of one stream as its receiving end sees it, and a protocol spy.

``SignalLog`` notes each broken rule as it happens: an element beyond the demand requested
(§1.1), two signals overlapping on different threads (§1.3), anything after a terminal
signal (§1.7); and what the judge needs afterwards (the elements, the end, how many elements
had arrived when a cancel returned). ``Spy`` wraps a Publisher and checks the same rules on
what passes between it and a sink that checks nothing itself (``to_iterator`` and the rest).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from reactive_streams import Publisher, Subscriber, Subscription

__all__ = ["SignalLog", "Spy"]


class SignalLog:
    """One stream's signals as received; every method may be called from any thread."""

    def __init__(self, *, count_demand: bool = True) -> None:
        self.cond = threading.Condition()
        self.elements: list[Any] = []
        self.requested = 0
        self.completed = False
        self.error: BaseException | None = None
        self.violations: list[str] = []
        self.cancel_returned_at: int | None = None  # elements received when cancel returned
        self.cancel_bound = 0  # how many more may arrive after that (the documented bound)
        self.ended_before_cancel = False  # the cancel came after a terminal signal: a no-op
        self._count_demand = count_demand
        self._depth = 0
        self._owner = 0

    # -- signals -----------------------------------------------------------------------------

    def enter(self, signal: str) -> None:
        me = threading.get_ident()
        with self.cond:
            if self._depth and self._owner != me:
                self.violations.append(f"§1.3: {signal} overlapped a signal on another thread")
            self._depth += 1
            self._owner = me

    def leave(self) -> None:
        with self.cond:
            self._depth -= 1

    def element(self, value: Any) -> int:
        """Record an ``on_next``; returns its index."""
        with self.cond:
            if self.completed or self.error is not None:
                self.violations.append(f"§1.7: on_next({value!r}) after a terminal signal")
            self.elements.append(value)
            if self._count_demand and len(self.elements) > self.requested:
                self.violations.append(
                    f"§1.1: {len(self.elements)} on_next for {self.requested} requested"
                )
            self.cond.notify_all()
            return len(self.elements) - 1

    def end(self, error: BaseException | None) -> None:
        with self.cond:
            if self.completed or self.error is not None:
                what = "on_complete" if error is None else f"on_error({error!r})"
                self.violations.append(f"§1.7: {what} after a terminal signal")
            elif error is None:
                self.completed = True
            else:
                self.error = error
            self.cond.notify_all()

    # -- the receiving end's own acts --------------------------------------------------------

    def requesting(self, n: int) -> None:
        """Count ``n`` before it is requested, so an element it allows is never early."""
        with self.cond:
            if type(n) is int and n > 0:
                self.requested += n
            self.cond.notify_all()

    def cancelled(self, bound: int) -> None:
        """Note that a cancel just returned; at most ``bound`` more elements may follow."""
        with self.cond:
            if self.cancel_returned_at is None:
                self.cancel_returned_at = len(self.elements)
                self.cancel_bound = bound
                self.ended_before_cancel = self.terminated
            self.cond.notify_all()

    def poke(self) -> None:
        """Wake the waiters: something they look at besides the log changed."""
        with self.cond:
            self.cond.notify_all()

    # -- waiting -------------------------------------------------------------------------------

    @property
    def terminated(self) -> bool:
        return self.completed or self.error is not None

    def count(self) -> int:
        with self.cond:
            return len(self.elements)

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` (checked under the lock at every signal); False on
        timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.05))
        return True

    def summary(self) -> str:
        with self.cond:
            end = "completed" if self.completed else (repr(self.error) if self.error else "open")
            return f"{len(self.elements)} elements {self.elements[:20]}..., {end}"


class _SpySubscription:
    __slots__ = ("_log", "_upstream")

    def __init__(self, upstream: Subscription, log: SignalLog) -> None:
        self._upstream = upstream
        self._log = log

    def request(self, n: int) -> None:
        self._log.requesting(n)
        self._upstream.request(n)

    def cancel(self) -> None:
        self._upstream.cancel()


class _SpySubscriber:
    __slots__ = ("_downstream", "_log")

    def __init__(self, downstream: Subscriber[Any], log: SignalLog) -> None:
        self._downstream = downstream
        self._log = log

    def on_subscribe(self, subscription: Subscription) -> None:
        self._log.enter("on_subscribe")
        try:
            self._downstream.on_subscribe(_SpySubscription(subscription, self._log))
        finally:
            self._log.leave()

    def on_next(self, element: Any) -> None:
        self._log.enter("on_next")
        try:
            self._log.element(element)
            self._downstream.on_next(element)
        finally:
            self._log.leave()

    def on_error(self, error: Exception) -> None:
        self._log.enter("on_error")
        try:
            self._log.end(error)
            self._downstream.on_error(error)
        finally:
            self._log.leave()

    def on_complete(self) -> None:
        self._log.enter("on_complete")
        try:
            self._log.end(None)
            self._downstream.on_complete()
        finally:
            self._log.leave()


class Spy:
    """A Publisher passing ``upstream``'s signals through, checked against one ``SignalLog``
    (one subscriber only). It hides the sink's type from the publisher, so the library's
    fused paths between its own pieces are not taken: the fuzzer runs half its schedules of
    the iterator and observable sinks with one, half without."""

    def __init__(self, upstream: Publisher[Any]) -> None:
        self.upstream = upstream
        self.log = SignalLog()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.upstream.subscribe(_SpySubscriber(subscriber, self.log))
