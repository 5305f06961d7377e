"""The per-Subscriber checker behind ``checked``: a Subscriber to the upstream and the
Subscription its Subscriber sees, checking every signal on the way (see ``checked``).

Signals run on whichever thread the publisher uses, ``request`` / ``cancel`` on the caller's.
The reasoning behind each check is in docs/notes/checked.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar, final

from reactive_streams._demand import add_cap, check_request, produced
from reactive_streams._scan import Scan
from reactive_streams._subscription import cancel_quietly, report_dropped
from reactive_streams.api import Publisher, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation, ProtocolViolation

__all__ = ["Checker"]

T = TypeVar("T")

_get_ident: Final = threading.get_ident


class _NoneSignal(ProtocolViolation, TypeError):
    """A signal carried ``None`` (§2.13): a ``ProtocolViolation`` that is also the ``TypeError``
    §2.13 asks a Subscriber to raise."""

    def __init__(self, signal: str) -> None:
        super().__init__("2.13", f"§2.13: {signal}(None): None is never a legal argument")


@final
class Checker(Generic[T]):
    """One Subscriber's checker: a Subscriber to the upstream, the Subscription downstream.

    Rules: those ``checked`` lists. Signals arrive on the publisher's threads, ``request`` and
    ``cancel`` on the caller's. Every check is O(1) under ``_lock``; user code (the Subscriber,
    the upstream Subscription, a violation callable) is always called outside it. A conflict
    detector (``_owner``, ``_depth``, ``_requested_at``, ``_strays``) finds overlapping signals
    (§1.3); in raise mode the Subscriber's ``on_error(violation)`` waits until the signal in
    progress returns, so the checker's own signals stay serial (docs/notes/checked.md).
    """

    __slots__ = (
        "_bad_request",
        "_bad_request_calling",
        "_bad_request_thread",
        "_cancel_thread",
        "_cancelled",
        "_demand",
        "_depth",
        "_down_done",
        "_down_subscribed",
        "_failed",
        "_lock",
        "_open",
        "_owner",
        "_pending",
        "_raise",
        "_raised",
        "_report",
        "_requested_at",
        "_strays",
        "_subscribed",
        "_subscriber",
        "_terminal_thread",
        "_terminated",
        "_upstream",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        raise_: bool,
        report: Callable[[ProtocolViolation], object],
    ) -> None:
        self._lock = threading.Lock()  # guards every field but _raise and _report (fixed)
        self._subscriber: Subscriber[T] | None = subscriber
        self._upstream: Subscription | None = None
        self._raise = raise_
        self._report = report
        self._demand = 0
        self._subscribed = False  # the upstream called on_subscribe
        self._open = False  # subscribed, not terminated, not failed: on_next may take the fast path
        self._terminated = False  # the upstream called on_error / on_complete
        self._cancelled = False  # the Subscriber called cancel
        self._cancel_thread = 0  # on which thread: a request on another may reach it first
        self._bad_request = False  # the Subscriber called request(n <= 0); on_error is due
        # The bad request's thread: a request another thread makes meanwhile may reach the
        # publisher first (its demand still counts).
        self._bad_request_thread = 0
        # The threads inside the upstream's request(n <= 0) (how many such calls deep): an
        # on_complete there answers the bad request. One that comes later, even on the same
        # thread, may have been decided before the publisher saw the request (a publisher
        # that queues its signals, as the JVM examples' AsyncIterablePublisher does), which
        # then is a no-op (§1.6, §3.6); it is not reported.
        self._bad_request_calling: dict[int, int] = {}
        self._failed = False  # raise mode tripped: drop everything from upstream
        self._pending: ProtocolViolation | None = None  # on_error(violation) not yet delivered
        self._down_subscribed = False  # the Subscriber has been given on_subscribe
        self._down_done = False  # the Subscriber has been given (or is owed) a terminal signal
        self._owner = 0  # thread inside a signal, 0 for none (§1.3 conflict detector)
        # Log mode passes an overlapping signal on: its thread's depth is counted here, so
        # signals overlapping it are caught too, until it returns.
        self._strays: dict[int, int] = {}
        self._depth = 0
        self._requested_at = 0  # the signal depth of the innermost request() in progress on
        # _owner's thread (0: none): a signal may nest exactly there, inside it (§3.2, §3.3)
        # What the Subscriber last raised from a signal, per thread (§2.13), so that each
        # thread tells its own Subscriber's exception from its upstream's.
        self._raised: dict[int, BaseException] = {}
        self._terminal_thread = 0  # thread delivering on_error / on_complete (§2.3)

    # -- Subscriber: signals from the upstream ---------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        me = _get_ident()
        violation: ProtocolViolation | None = None
        entered = False
        with self._lock:
            if self._failed:
                refuse = True  # raise mode already tripped: refuse it quietly
            elif self._subscribed and not _is_none(subscription):
                refuse = True
                violation = ProtocolViolation(
                    "2.12", "§2.12: on_subscribe signalled a second time (see §1.9)"
                )
            else:
                refuse = False
                if _is_none(subscription):  # §2.13
                    violation = _NoneSignal("on_subscribe")
                else:
                    violation = self._order_locked("on_subscribe", me)
                if violation is None or not self._raise:
                    if not _is_none(subscription):
                        self._open = not self._terminated
                        self._subscribed = True
                        self._upstream = subscription
                        self._down_subscribed = True
                    self._enter_locked(me)
                    entered = True
        if refuse:
            cancel_quietly(subscription)  # §2.5: keep the first subscription
            if violation is not None:
                self._violated(violation)
            return
        # "log" with None: passed on as it came, and the Subscriber raises TypeError (§2.13)
        given = subscription if _is_none(subscription) else self
        self._pass(lambda s: s.on_subscribe(given), entered, violation=violation)

    def on_next(self, element: T) -> None:
        me = _get_ident()
        lock = self._lock
        with lock:  # the fast path: a correct on_next, checked with one lock to enter
            owner = self._owner
            fast = bool(
                self._open
                and self._demand
                and element is not None
                and (not owner or (owner == me and self._requested_at == self._depth))  # §1.3
                and not self._strays
            )
            if fast:
                self._demand = produced(self._demand, 1)  # §1.1; under _lock
                self._owner = me
                self._depth += 1  # under _lock
        if not fast:
            self._on_next_slow(element, me)
            return
        try:
            subscriber = self._subscriber
            if subscriber is not None:
                subscriber.on_next(element)
        except Exception as exc:  # §2.13: told apart from the upstream's own errors
            with lock:
                self._raised[me] = exc  # under _lock
            raise
        finally:
            with lock:  # and one to leave, unless there is more to do than count down
                slow = self._depth == 1 and (
                    self._pending is not None or (self._raise and self._down_done)
                )
                if not slow:
                    self._depth -= 1  # under _lock
                    if not self._depth:
                        self._owner = 0
            if slow:
                self._leave(me)

    def _on_next_slow(self, element: T, me: int) -> None:
        violation: ProtocolViolation | None = None
        with self._lock:
            if self._failed:
                return  # raise mode: everything after a violation is dropped
            if element is None:  # §2.13
                violation = _NoneSignal("on_next")
            else:
                violation = self._order_locked("on_next", me)
                if self._demand:  # an overlapping element uses demand up all the same (§1.1)
                    self._demand = produced(self._demand, 1)  # under _lock
                elif violation is not None:
                    pass  # one report per signal: the order's
                elif self._bad_request:  # §3.9 (or §1.1 either way: no demand for it)
                    violation = ProtocolViolation(
                        "3.9",
                        f"§3.9: on_next({element!r}) after an invalid request (n <= 0, or "
                        "not an int), beyond the demand registered before it; it must be "
                        "answered with on_error",
                    )
                else:  # §1.1
                    violation = OverflowViolation(
                        f"§1.1: on_next({element!r}) but nothing was requested"
                    )
            entered = violation is None or not self._raise  # raise mode drops it
            if entered:
                self._enter_locked(me)
        self._pass(lambda s: s.on_next(element), entered, violation=violation)

    def on_error(self, error: Exception) -> None:
        me = _get_ident()
        violation: ProtocolViolation | None = None
        entered = dropped = False
        with self._lock:
            if self._failed:
                dropped = True
            else:
                if _is_none(error):  # §2.13
                    violation = _NoneSignal("on_error")
                else:
                    violation = self._order_locked("on_error", me)
                if violation is None or not self._raise:
                    self._terminated = True
                    self._open = False
                    self._bad_request = False  # §3.9 answered
                    self._down_done = True
                    self._terminal_thread = me
                    self._enter_locked(me)
                    entered = True
        if dropped:
            if not _is_none(error):
                report_dropped(error, where="checked(): on_error after a violation was raised")
            return
        self._pass(lambda s: s.on_error(error), entered, terminal=True, violation=violation)

    def on_complete(self) -> None:
        me = _get_ident()
        entered = False
        with self._lock:
            if self._failed:
                return
            violation = self._order_locked("on_complete", me)
            if violation is None and self._bad_request and me in self._bad_request_calling:
                violation = ProtocolViolation(
                    "3.9",
                    "§3.9: on_complete in answer to an invalid request (n <= 0, or not an "
                    "int); it must be answered with on_error",
                )
            if violation is None or not self._raise:
                self._terminated = True
                self._open = False
                self._down_done = True
                self._terminal_thread = me
                self._enter_locked(me)
                entered = True
        self._pass(_on_complete, entered, terminal=True, violation=violation)

    # -- Subscription: signals from the Subscriber ------------------------------------------------

    def request(self, n: int) -> None:
        """Count the demand (saturating, §3.17), note a §3.9 request, and pass it upstream."""
        me = _get_ident()
        invalid = check_request(n)
        with self._lock:
            if self._failed:
                return
            violation = self._in_terminal_locked("request", me)
            if (
                violation is None
                and invalid is None
                and not self._down_done
                and not (self._cancelled and self._cancel_thread == me)
                and not (self._bad_request and self._bad_request_thread == me)
            ):  # §1.6; §3.6 and §3.9: demand after a cancel or a bad request is not owed,
                # except one made on another thread: it may reach the upstream first
                self._demand = add_cap(self._demand, n)  # §3.17; under _lock
            upstream = self._upstream
            nested = upstream is not None and self._owner == me  # from inside a signal
            outer = self._requested_at
            if nested:
                self._requested_at = self._depth  # signals it causes may nest here (§3.2)
            bad = invalid is not None and not (self._cancelled or self._down_done)
            if bad:
                # §3.9: from now on only on_error may end the stream, even one the upstream
                # signals synchronously, inside this call.
                self._bad_request = True
                self._bad_request_thread = me
                calls = self._bad_request_calling
                calls[me] = calls.get(me, 0) + 1  # under _lock
        try:
            if violation is not None:
                self._violated(violation)  # may raise: the marks above are undone below
            if upstream is not None:
                self._pass_request(upstream, n)
        finally:
            if nested or bad:
                with self._lock:
                    if nested:
                        self._requested_at = outer
                    if bad:
                        calls = self._bad_request_calling
                        calls[me] -= 1  # under _lock
                        if not calls[me]:
                            del calls[me]

    def cancel(self) -> None:
        """Pass the cancel upstream; it stays counted for the §1.1 check of in-flight elements."""
        me = _get_ident()
        with self._lock:
            if self._failed:
                return
            violation = self._in_terminal_locked("cancel", me)
            if not self._cancelled:
                self._cancelled = True
                self._cancel_thread = me
            upstream = self._upstream
        if violation is not None:
            self._violated(violation)
        if upstream is None:
            return
        try:
            upstream.cancel()
        except Exception as exc:
            if not isinstance(exc, ProtocolViolation):
                self._violated(self._raised_in("cancel()", exc, "3.15"), exc)
            raise

    def _pass_request(self, upstream: Subscription, n: int) -> None:
        try:
            upstream.request(n)
        except Exception as exc:
            if not isinstance(exc, ProtocolViolation):  # not ours, on its way out
                self._violated(self._raised_in(f"request({n!r})", exc, "3.16"), exc)
            raise

    def scan(self) -> Scan:
        """For :func:`~reactive_streams.snapshot` (any thread, no lock): the demand the
        checker counts (§1.1), and a link to the checked upstream."""
        return Scan(
            "checked",
            requested=self._demand,
            cancelled=self._cancelled,
            terminated=self._terminated,
            subscribed=self._subscribed,
            upstream=self._upstream,
        )

    def cancel_deferring_cleanup(self) -> None:
        """``cancel()``, passed on as the upstream's ``cancel_deferring_cleanup`` when it has
        one (this project's Subscriptions: see ``DrainSubscription``), so that a consumer
        such as ``publish_on`` gets through the checker what it asks of the Subscription
        it wraps. The ``cancel()`` the caller owes afterwards is passed on as any cancel."""
        deferring: Callable[[], None] | None = getattr(
            self._upstream, "cancel_deferring_cleanup", None
        )
        if deferring is None:
            self.cancel()
            return
        with self._lock:
            if self._failed:
                return
            if not self._cancelled:  # counted as any cancel (§1.1 for what is in flight)
                self._cancelled = True
                self._cancel_thread = _get_ident()
        deferring()

    def subscribe_raised(self, publisher: Publisher[Any], exc: Exception) -> None:
        """Handle ``exc``, raised by ``publisher.subscribe(self)`` (§1.9), unless it is ours on
        its way out; raise mode raises the violation, otherwise the caller re-raises ``exc``."""
        if isinstance(exc, ProtocolViolation):  # ours, on its way out through upstream
            return
        advice = "; a Publisher must return normally and signal failures with on_error"
        self._violated(self._raised_in(f"{publisher!r}.subscribe()", exc, "1.9", advice), exc)

    def _raised_in(
        self, call: str, exc: Exception, rule: str, advice: str = ""
    ) -> ProtocolViolation:
        """The violation for ``exc`` coming out of the upstream's ``call``: the Subscriber's
        own exception, raised from a signal the call delivered synchronously on this thread,
        is its fault (§2.13), not the Subscription's (``rule``)."""
        with self._lock:
            subscribers = self._raised.get(_get_ident()) is exc
        if subscribers:
            return ProtocolViolation(
                "2.13", f"§2.13: the Subscriber raised {exc!r} from a signal (inside {call})"
            )
        return ProtocolViolation(rule, f"§{rule}: {call} raised {exc!r}{advice}")

    # -- violations ---------------------------------------------------------------------------

    def _violated(self, violation: ProtocolViolation, cause: Exception | None = None) -> None:
        """Handle ``violation``: in raise mode tear down and raise it, otherwise report it."""
        if cause is not None:
            violation.__cause__ = cause
        if not self._raise:
            self._report(violation)
            return
        me = _get_ident()
        with self._lock:
            if self._failed:  # only the first violation tears the stream down
                raise violation
            self._failed = True
            self._open = False
            upstream = None if self._terminated else self._upstream
            self._upstream = None
            subscriber: Subscriber[T] | None = None
            deliver = need_subscribe = False
            if not self._down_done:
                self._down_done = True
                if self._depth == 0:  # nobody inside a signal: deliver on_error now
                    self._owner, self._depth = me, 1
                    need_subscribe = not self._down_subscribed
                    self._down_subscribed = True
                    subscriber, self._subscriber = self._subscriber, None  # under _lock
                    deliver = True
                else:  # after the signal in progress returns (§1.3)
                    self._pending = violation
        if upstream is not None:
            cancel_quietly(upstream)
        if deliver:
            self._deliver(subscriber, violation, need_subscribe, me)
        raise violation

    def _deliver(
        self,
        subscriber: Subscriber[T] | None,
        violation: ProtocolViolation,
        need_subscribe: bool,
        me: int,
    ) -> None:
        """Give ``subscriber`` (taken from ``_subscriber`` under the lock: §3.13, it is never
        signalled again) ``on_error(violation)``, preceded by ``on_subscribe`` if it had none."""
        try:
            if subscriber is not None:
                if need_subscribe:  # §1.9: on_subscribe before on_error
                    subscriber.on_subscribe(self)
                subscriber.on_error(violation)
        except Exception as exc:  # §2.13
            report_dropped(exc, rule="2.13", where="on_error(violation) raised")
        finally:
            self._leave(me)

    # -- the conflict detector and its helpers (lock held where named _locked) -----------------

    def _order_locked(self, signal: str, me: int) -> ProtocolViolation | None:
        owner = self._owner
        if (owner and owner != me) or any(t != me for t in self._strays):  # §1.3
            return ProtocolViolation(
                "1.3", f"§1.3: {signal} overlapped another signal in progress on another thread"
            )
        if owner and self._requested_at != self._depth:  # §1.3: nested, not in a request
            return ProtocolViolation(
                "1.3",
                f"§1.3: {signal} was signalled from inside another signal on the same thread, "
                "not through request()",
            )
        if signal == "on_subscribe":
            if self._terminated:
                return ProtocolViolation("1.7", "§1.7: on_subscribe after a terminal signal")
            return None
        if not self._subscribed:
            return ProtocolViolation("1.9", f"§1.9: {signal} before on_subscribe")
        if self._terminated:
            return ProtocolViolation("1.7", f"§1.7: {signal} after a terminal signal")
        return None

    def _in_terminal_locked(self, call: str, me: int) -> ProtocolViolation | None:
        if self._terminal_thread == me:  # §2.3
            return ProtocolViolation(
                "2.3", f"§2.3: {call}() called from inside on_error/on_complete"
            )
        return None

    def _enter_locked(self, me: int) -> None:
        """A signal is passed on: track it, until ``_leave``, as the owner's (nested) or, an
        overlap that log mode passes on, as a stray of its thread's."""
        owner = self._owner
        if owner and owner != me:
            self._strays[me] = self._strays.get(me, 0) + 1  # under _lock
            return
        self._owner = me
        self._depth += 1  # under _lock

    def _leave(self, me: int) -> None:
        with self._lock:
            if self._terminal_thread == me:
                self._terminal_thread = 0
            if me != self._owner and me in self._strays:  # an overlapping signal returns
                depth = self._strays.pop(me) - 1  # under _lock
                if depth:
                    self._strays[me] = depth
                return
            self._depth -= 1  # under _lock
            if self._depth:
                return
            self._owner = 0
            pending = self._pending
            if pending is None:
                if self._raise and self._down_done:
                    self._subscriber = None  # §3.13: raise mode never signals after a terminal
                return
            self._pending = None
            self._owner, self._depth = me, 1
            need_subscribe = not self._down_subscribed
            self._down_subscribed = True
            subscriber, self._subscriber = self._subscriber, None  # under _lock
        self._deliver(subscriber, pending, need_subscribe, me)

    def _pass(
        self,
        signal: Callable[[Subscriber[T]], None],
        entered: bool,
        terminal: bool = False,
        violation: ProtocolViolation | None = None,
    ) -> None:
        """Handle ``violation`` if any, pass ``signal`` to the Subscriber (exceptions
        propagate), then leave the detector: also when either raises (a violation callable
        that raises must not leave the detector believing a signal is still in progress)."""
        subscriber = self._subscriber
        me = _get_ident() if entered else 0
        try:
            if violation is not None:
                self._violated(violation)
            if subscriber is not None:
                try:
                    signal(subscriber)
                except Exception as exc:  # §2.13: told apart from the upstream's own errors
                    with self._lock:
                        self._raised[_get_ident()] = exc  # under _lock
                    raise
        finally:
            if entered:
                self._leave(me)
            elif terminal:
                with self._lock:
                    if self._terminal_thread == _get_ident():
                        self._terminal_thread = 0

    def __repr__(self) -> str:
        return f"<checked subscription demand={self._demand} failed={self._failed}>"


def _is_none(value: object) -> bool:
    """``value is None``, for arguments typed non-optional that a broken caller may pass."""
    return value is None


def _on_complete(subscriber: Subscriber[Any]) -> None:
    subscriber.on_complete()
