"""``retry``: subscribe to a cold Publisher again after ``on_error``, keeping the demand.

A small source plugged into the drain, as ``publish_on`` is: each attempt's elements go
through the source's queue; the drain delivers them, so signals stay serial across attempts.
"""

from __future__ import annotations

import math
import reprlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Final, Generic, Protocol, TypeVar, final

from reactive_streams._demand import add_cap, produced
from reactive_streams._drain import DrainSubscription, Source, _Marker
from reactive_streams._source import poll_queued
from reactive_streams._subscription import (
    report_dropped,
    require_element,
    require_error,
    require_publisher,
    require_subscriber,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Publisher, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation

__all__ = ["RetryPublisher", "retry"]

T = TypeVar("T")

WINDOW: Final = 256
"""The most elements an attempt is asked for beyond those delivered (see RetryPublisher)."""
_NAMED: Final = 3  # the earlier errors a final error's note names
_REPR: Final = reprlib.Repr()
_REPR.maxother = 200  # an error's repr, cut to a line or two


class Cancellable(Protocol):
    """**Protocol:** what a timer hook returns: a pending call that ``cancel()`` stops."""

    def cancel(self) -> None: ...


Timer = Callable[[float, Callable[[], None]], Cancellable]
"""``timer(delay, action)``: run ``action()`` once, ``delay`` seconds from now, on a thread
of its own, and return at once; the result's ``cancel()`` stops it if it has not run."""


def thread_timer(delay: float, action: Callable[[], None]) -> Cancellable:
    """The default timer hook: a daemon ``threading.Timer`` (one thread per backoff)."""
    timer = threading.Timer(delay, action)
    timer.daemon = True
    timer.name = "rs-retry-backoff"
    timer.start()
    return timer


@final
class RetryPublisher(Generic[T]):
    """Subscribes to ``upstream`` up to ``attempts`` times per Subscriber, after each
    ``on_error`` but the last, ``backoff`` seconds later (doubling each time; 0: at once).

    Each Subscriber gets one ``on_subscribe``, then the attempts' elements in order: a cold
    upstream starts from its beginning, so it sees the first elements again. The demand left
    carries over: an attempt is asked for what was requested and not yet received from the
    attempts before (§3.17: saturating), at most ``WINDOW`` ahead of delivery (an unbounded
    request goes up in windows). The last error ends the stream, with a note (PEP 678)
    naming the attempt count and the last errors before it (not ``__context__``, which
    Python overwrites when the drain raises it); ``on_complete`` passes through.
    Rules: §1.3 (the drain delivers; a replaced attempt's late signals are ignored), §3.5,
    §3.7 (``cancel`` stops the attempt (§3.12) or the pending timer, once), §3.6, §3.9
    (``request(n <= 0)``: ``on_error``, the attempt cancelled), §1.1 (an attempt sending
    more than asked fails the stream, unretried). A resubscription after a backoff is made
    on the ``timer`` hook's thread; with no backoff, by the thread that delivered the error,
    in a loop (no recursion). Signals arrive on whichever thread drives the drain: the
    upstream's, a caller of ``request``, or the timer's. Nothing waits on a caller of
    ``request`` or ``cancel``.
    """

    __slots__ = ("_attempts", "_backoff", "_timer", "_upstream")

    def __init__(
        self,
        upstream: Publisher[T],
        *,
        attempts: int,
        backoff: float = 0.0,
        timer: Timer = thread_timer,
    ) -> None:
        require_publisher(upstream, "retry()")
        if type(attempts) is not int:
            raise TypeError(f"retry(): attempts must be an int, got {type(attempts).__name__}")
        if attempts < 1:
            raise ValueError(f"retry(): attempts must be >= 1 (1: no retry), got {attempts}")
        if not isinstance(backoff, int | float) or isinstance(backoff, bool):
            raise TypeError(
                f"retry(): backoff must be a number of seconds, got {type(backoff).__name__}"
            )
        if not math.isfinite(backoff) or backoff < 0:
            raise ValueError(f"retry(): backoff must be finite and >= 0 seconds, got {backoff}")
        if not callable(timer):
            raise TypeError(f"retry(): timer must be callable, got {type(timer).__name__}")
        self._upstream = upstream
        self._attempts = attempts
        self._backoff = float(backoff)
        self._timer = timer

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        source: _RetrySource[T] = _RetrySource(
            self._upstream, self._attempts, self._backoff, self._timer
        )
        subscription = DrainSubscription(subscriber, source, name="retry")
        subscription.start()  # on_subscribe first, as Reactor does
        source.launch()  # then the first attempt (none if cancelled meanwhile)


@final
class _Attempt(Generic[T]):
    """One subscription to the upstream: the subscriber the upstream sees, tagged by
    identity; its signals count only while it is its source's current attempt (§1.3)."""

    __slots__ = ("asked", "base", "number", "received", "upstream", "_source")

    def __init__(self, source: _RetrySource[T], number: int, base: int) -> None:
        self._source = source
        self.number = number  # 1 for the first subscription
        self.base = base  # elements accepted from the attempts before this one
        self.asked = 0  # owned: the drain (want), the only caller of upstream.request
        self.received = 0  # under the source's _lock
        self.upstream = Upstream()  # set once (§2.5), requests serial (§2.7)

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        if self.upstream.set_once(subscription):  # §2.5; after cancel: cancelled
            self._source.wake()  # the drain asks for the demand left (want)

    def on_next(self, element: T) -> None:
        if element is None:  # §2.13: not retried (a bug, not a transient failure)
            self._source.violation(self, TypeError("§2.13: upstream signalled on_next(None)"))
            require_element(element)  # raises TypeError to the upstream
        self._source.accept(self, element)

    def on_error(self, error: Exception) -> None:
        if error is None:  # §2.13
            self._source.violation(self, TypeError("§2.13: upstream signalled on_error(None)"))  # type: ignore[unreachable]
        require_error(error)
        self._source.failed(self, error)

    def on_complete(self) -> None:
        self._source.completed(self)

    def __repr__(self) -> str:
        return f"<retry attempt {self.number}: {self.received} of {self.asked} received>"


@final
class _RetrySource(Source[T]):
    """The per-subscriber state: the attempts, the backoff timer, and the queue the drain
    pops (fused). Upstream signals come from any thread; ``want``/``consumed``/``poll`` from
    the drain, serially. Every field shared between them is under ``_lock``."""

    __slots__ = (
        "_attempts",
        "_backoff",
        "_base",
        "_cancelled",
        "_count",
        "_current",
        "_delivered",
        "_done",
        "_due",
        "_error",
        "_earlier",
        "_launching",
        "_lock",
        "_pending",
        "_publisher",
        "_timer",
        "_wake",
        "queue",
    )

    def __init__(
        self, publisher: Publisher[T], attempts: int, backoff: float, timer: Timer
    ) -> None:
        self._publisher = publisher
        self._attempts = attempts
        self._backoff = backoff
        self._timer = timer
        self._lock = threading.Lock()
        self.queue: deque[T] = deque()  # fused: appended under _lock, popped by the drain
        self._wake: Callable[[], None] = _nothing
        self._delivered = 0  # owned: the drain (consumed); every element delivered, all attempts
        # Under _lock:
        self._count = 1  # subscriptions made or due so far
        self._base = 0  # elements accepted from the attempts that failed
        self._current: _Attempt[T] | None = _Attempt(self, 1, 0)  # whose signals count
        self._due: _Attempt[T] | None = self._current  # to subscribe (launch)
        self._launching = 0  # the launch loop's work-in-progress count
        self._pending: Cancellable | None = None  # the backoff timer, while one waits
        self._cancelled = False  # one-way: closed or interrupted
        self._done = False  # one-way: the stream's end is decided (see _error)
        self._error: Exception | None = None
        self._earlier: deque[str] = deque(maxlen=_NAMED)  # the last errors, named

    # -- launching attempts: a loop, never recursion ------------------------------------------

    def launch(self) -> None:
        """Subscribe the attempt that is due, and any that falls due meanwhile (an upstream
        failing inside ``subscribe`` or ``request`` on this thread): only the first caller
        loops, a nested or concurrent one returns at once, as the drain does."""
        with self._lock:
            self._launching += 1  # under _lock
            if self._launching != 1:
                return
        missed = 1
        while True:
            with self._lock:  # under _lock: taken once
                attempt, self._due = self._due, None
            if attempt is not None:
                try:
                    self._publisher.subscribe(attempt)
                except Exception as exc:  # §1.9 broken: it counts as that attempt's error,
                    attempt.upstream.cancel()  # after cancelling what it may have set up
                    self.failed(attempt, exc)
            with self._lock:
                self._launching -= missed  # under _lock
                missed = self._launching
                if not missed:
                    return

    def _fire(self, attempt: _Attempt[T]) -> None:
        """The backoff is over: the timer's thread subscribes ``attempt``, unless cancelled."""
        with self._lock:  # under _lock
            if self._cancelled or self._current is not attempt:
                return
            self._pending = None
            self._due = attempt
        self.launch()

    # -- the attempts' signals ------------------------------------------------------------

    def accept(self, attempt: _Attempt[T], element: T) -> None:
        wake = False
        with self._lock:  # under _lock: one appender at a time, so the wake test is exact
            if self._current is not attempt:  # cancelled, or replaced: a late signal (§2.8)
                return
            received = attempt.received = attempt.received + 1
            if received <= attempt.asked:
                self.queue.append(element)
                wake = len(self.queue) == 1  # empty -> non-empty: the drain looks again
        if received > attempt.asked:
            self.violation(
                attempt,
                OverflowViolation(
                    f"§1.1: retry attempt {attempt.number} signalled on_next number "
                    f"{received}, beyond the {attempt.asked} requested of it"
                ),
            )
        elif wake:
            self._wake()

    def failed(self, attempt: _Attempt[T], error: Exception) -> None:
        """``attempt`` ended with ``error``: retry it, now or after a backoff, or end."""
        named = f"attempt {attempt.number}: {_REPR.repr(error)}"  # no lock: user code
        with self._lock:  # under _lock: the decision and the next attempt, in one step
            current = self._current is attempt
            if current:
                self._current = None
                number = self._count
                retrying = number < self._attempts
                earlier = list(self._earlier)
                if retrying:
                    self._earlier.append(named)  # under _lock
                    self._base = attempt.base + attempt.received
                    self._count = number + 1
                    nxt = self._current = _Attempt(self, number + 1, self._base)
                    if self._backoff == 0:
                        self._due = nxt
            cancelled = self._cancelled
        if not current:  # §1.8 after our cancel; else the upstream broke §1.7
            report_dropped(
                error, rule="1.8" if cancelled else "1.7", where="a retry attempt's late on_error"
            )
            return
        attempt.upstream.stop_requests()  # §2.4
        if not retrying:
            if number > 1:
                error.add_note(_note(number, earlier))
            self._finish(error)
        elif self._backoff == 0:
            self.launch()
        else:
            self._schedule(nxt, error)

    def _schedule(self, attempt: _Attempt[T], error: Exception) -> None:
        delay = min(self._backoff * 2.0 ** min(attempt.number - 2, 1000), threading.TIMEOUT_MAX)
        try:
            pending = self._timer(delay, lambda: self._fire(attempt))  # no lock held
        except Exception as exc:  # no thread can start (interpreter exit, a limit): §1.4
            failure = RuntimeError(
                f"retry: could not schedule attempt {attempt.number} after {_REPR.repr(error)}"
            )
            failure.__cause__ = exc
            with self._lock:  # under _lock
                ended = self._current is attempt
                if ended:
                    self._current = None
            if ended:
                self._finish(failure)
            return
        with self._lock:  # under _lock
            keep = not self._cancelled and self._current is attempt
            if keep:
                self._pending = pending
        if not keep:  # cancelled while the timer was being set: it must not fire (§3.12)
            pending.cancel()

    def completed(self, attempt: _Attempt[T]) -> None:
        with self._lock:  # under _lock
            if self._current is not attempt:
                return  # cancelled, or a replaced attempt's late signal
            self._current = None
        attempt.upstream.stop_requests()  # §2.4
        self._finish(None)

    def violation(self, attempt: _Attempt[T], error: Exception) -> None:
        """``attempt``'s upstream broke a rule: cancel it (§3.13) and end, with no retry."""
        with self._lock:  # under _lock
            if self._current is not attempt:
                return
            self._current = None
        attempt.upstream.cancel()
        self._finish(error)

    def _finish(self, error: Exception | None) -> None:
        with self._lock:  # under _lock
            if self._done:
                return
            self._error = error
            self._done = True  # after the error: a drain that sees _done sees _error
        self._wake()

    # -- Source: called by the drain, serially ------------------------------------------

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def wake(self) -> None:
        """An attempt's ``on_subscribe``: the drain looks again (and asks it, in ``want``)."""
        self._wake()

    def want(self, n: int) -> None:
        """The queue ran dry with ``n`` elements of demand unmet: ask the current attempt
        for what makes its outstanding elements plus those queued ``min(n, WINDOW)``. In
        totals, it is asked for what was requested (delivered plus ``n``) less what earlier
        attempts gave: the demand carries over, and a new attempt starts at ``n``."""
        with self._lock:  # under _lock: the attempt, read once
            attempt = self._current
        if attempt is None:  # between attempts (a backoff), or over: its start wakes us
            return
        target = produced(add_cap(min(n, WINDOW), self._delivered), attempt.base)
        due = produced(target, attempt.asked) if target != attempt.asked else 0
        if due:
            attempt.asked = add_cap(attempt.asked, due)  # owned: the drain; before the call
            attempt.upstream.request(due)  # serial (§2.7); a no-op once ended (§2.4, §3.6)

    def consumed(self, n: int) -> None:
        self._delivered += n  # owned: the drain

    def poll(self) -> T | _Marker:
        return poll_queued(self._done, self.queue, self._error)  # in this order (see there)

    def at_end(self) -> bool:
        return self._done and not self.queue

    def interrupt(self) -> None:
        """Cancel from any thread: the current attempt (§3.12) and the timer, once (§3.7);
        no attempt starts after it."""
        with self._lock:  # under _lock: what to stop, taken once
            self._cancelled = True
            attempt, self._current = self._current, None
            pending, self._pending = self._pending, None
            self._due = None
        if pending is not None:
            pending.cancel()
        if attempt is not None:
            attempt.upstream.cancel()  # §3.15: a raising cancel is reported

    # -- diagnostics (reactive_streams.snapshot): any thread, read without locks ------------

    def asked(self) -> int | None:
        """Asked of the current attempt, plus what the failed ones gave: less ``in_flight``,
        every element accepted (delivered plus queued). Between attempts: what they gave."""
        attempt = self._current  # a snapshot: replaced under _lock
        return self._base if attempt is None else add_cap(attempt.base, attempt.asked)

    def in_flight(self) -> int | None:
        attempt = self._current
        return 0 if attempt is None else max(0, attempt.asked - attempt.received)

    def upstream(self) -> object | None:
        """The live attempt's subscription; None between attempts (a backoff) and after."""
        attempt = self._current
        return None if attempt is None else attempt.upstream.linked

    def close(self) -> None:
        self.interrupt()
        self._wake = _nothing
        self.queue.clear()  # §3.13


def _nothing() -> None:
    pass


def _note(number: int, earlier: list[str]) -> str:
    """The note on the error that ended the stream: the attempt count, the last errors."""
    before = "; ".join(earlier)
    more = number - 1 - len(earlier)
    if more:
        before = f"{more} more, then {before}"
    return f"reactive_streams.retry: attempt {number} of {number} failed; before it: {before}"


def retry(publisher: Publisher[T], *, attempts: int, backoff: float = 0.0) -> Publisher[T]:
    """Subscribe to the cold ``publisher`` again after ``on_error``, up to ``attempts`` times.

    Each Subscriber gets one ``on_subscribe``; after an ``on_error`` with attempts left, the
    publisher is subscribed again, ``backoff`` seconds later (doubling each time; 0: at once,
    on the thread that delivered the error), asked for the demand the Subscriber has left.
    A cold source starts from its beginning: the Subscriber sees its first elements again.
    The last error is delivered, with a note (PEP 678) naming the attempt count and the last
    three errors before it. A backoff waits on a timer thread, never on the caller.

    Args:
        publisher: a cold Publisher (each subscription starts over).
        attempts: subscriptions in all, >= 1 (1: no retry).
        backoff: seconds before the first resubscription, doubled before each next one.

    Returns:
        A Publisher; each Subscriber gets its own attempts, timer and demand.

    Raises:
        TypeError: ``publisher`` is no Publisher, ``attempts`` no int, ``backoff`` no number.
        ValueError: ``attempts < 1``, or ``backoff`` negative, infinite or NaN.

    Example:
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> list(to_iterator(retry(from_iterable(range(3)), attempts=3)))
        [0, 1, 2]
    """
    return RetryPublisher(publisher, attempts=attempts, backoff=backoff)
