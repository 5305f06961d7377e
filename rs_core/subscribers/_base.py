"""``BaseSubscriber``: subclass it and override the hooks; the rules are kept for you."""

from __future__ import annotations

import threading
from threading import get_ident
from typing import Generic, TypeVar

from reactive_streams._demand import UNBOUNDED, add_cap, check_request
from reactive_streams._subscription import (
    CANCELLED,
    EMPTY_SUBSCRIPTION,
    cancel_quietly,
    report_dropped,
    require_element,
    require_error,
    require_subscription,
)
from reactive_streams.api import Subscription

__all__ = ["BaseSubscriber"]

T = TypeVar("T")


class BaseSubscriber(Generic[T]):
    """A Subscriber whose hooks are called only in a protocol-correct order.

    Override ``hook_on_subscribe`` (default: ``request(UNBOUNDED)``, as Reactor does),
    ``hook_on_next``, ``hook_on_error`` (default: report through ``logging``) and
    ``hook_on_complete``; call ``request(n)`` and ``cancel()`` from anywhere.

    ``request`` calls from different threads reach the subscription one at a time (§2.7): a
    call made while another thread's is in progress adds its demand to what that caller
    passes on when its call returns; one made from inside a signal that this thread's
    ``request`` caused (``hook_on_next`` asking for more) goes straight through, as the
    publisher must take it (§3.3 bounds that recursion); demand requested before
    ``on_subscribe`` is passed on after ``hook_on_subscribe``. ``cancel`` goes straight to
    the subscription, even while a ``request`` is in progress there: §3.5 makes ``cancel``
    thread-safe, and waiting for a ``request`` that emits synchronously would delay it for
    as long as the stream lasts (§3.12). A subscription's ``cancel`` that raises (§3.15) is
    reported, never raised into the publisher's signal.

    Rules kept here: §2.5 (a second ``on_subscribe`` is cancelled; if it was a publisher
    rejecting us, ``EMPTY_SUBSCRIPTION`` then ``on_error``, that error still terminates and
    the first upstream, which did not signal it, is cancelled rather than dropped, §3.13),
    §2.3/§2.4 (after a terminal signal the subscription is dropped, so ``request``/``cancel``
    from the terminal hooks do nothing), §2.8 (``on_next`` after ``cancel`` is ignored),
    §2.13 (``None`` arguments raise ``TypeError``; a raising ``hook_on_next`` cancels
    upstream and is routed to ``hook_on_error``, so ``on_next`` itself returns normally).
    Hooks run on whichever thread the publisher signals on, serially (§1.3).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._upstream: Subscription | None = None
        self._done = False
        self._cancelled = False  # by cancel() or a failing hook, not by a terminal signal
        self._rejected = False  # a second publisher rejected us: its on_error is coming
        # §2.7: one thread's request() at a time reaches the upstream; the others leave their
        # demand here for the caller in progress (or on_subscribe) to pass on.
        self._requester = 0  # the thread whose request() is passing demand on, 0 for none
        self._missed = 0  # positive demand not passed on yet (saturating)
        self._missed_bad: tuple[object] | None = None  # (n,): the first invalid request(n)
        # not passed on yet (n may be None itself: request(None) is invalid, §3.9)

    # -- Subscriber ----------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
                # Claimed with the upstream, in one step: another thread's request() from
                # now on waits for the hook's (§2.7), none slips in between.
                self._requester = get_ident()
            elif subscription is EMPTY_SUBSCRIPTION:  # §1.9: reject() sends on_error next
                self._rejected = True
        if duplicate:  # §2.5 (also: cancelled before being subscribed)
            cancel_quietly(subscription)
            return
        try:
            self.hook_on_subscribe(subscription)
        except Exception as exc:
            with self._lock:
                self._requester = 0
            self._fail(exc)
            return
        self._pass_requests()  # the hook's, and any made before on_subscribe

    def on_next(self, element: T) -> None:
        if element is None:
            require_element(element)  # §2.13: raises TypeError
        if self._done:  # §2.8: late elements after cancel are dropped
            return
        try:
            self.hook_on_next(element)
        except Exception as exc:
            self._fail(exc)

    def on_error(self, error: Exception) -> None:
        require_error(error)  # §2.13
        if not self._terminate():  # after cancel it may legally race in (§1.8); after the end, not
            rule = "1.8" if self._cancelled else "1.7"
            report_dropped(error, rule=rule, where="on_error after a terminal signal or cancel")
            return
        try:
            self.hook_on_error(error)
        except Exception as exc:  # §2.13: nobody left to tell
            report_dropped(exc, rule="2.13", where="hook_on_error raised")

    def on_complete(self) -> None:
        if not self._terminate(completed=True):
            return
        try:
            self.hook_on_complete()
        except Exception as exc:  # §2.13
            report_dropped(exc, rule="2.13", where="hook_on_complete raised")

    # -- the subscription ------------------------------------------------------------------

    def request(self, n: int) -> None:
        """Request ``n`` more elements; a no-op once cancelled or terminated (§2.4).

        Serial (§2.7): passed on now, or by the ``request`` already in progress when it
        returns, or after ``hook_on_subscribe`` when called before ``on_subscribe``. A
        non-positive ``n`` is passed on as it is, for the publisher's ``on_error`` (§3.9).
        """
        me = get_ident()
        with self._lock:
            if self._done:
                return
            upstream = self._upstream
            if upstream is None or (self._requester and self._requester != me):
                # on_subscribe, or the other thread's caller, passes it on: valid demand
                # added up, the first invalid n (0, -1, True, None: §3.9) as it is
                if check_request(n) is None:
                    self._missed = add_cap(self._missed, n)
                elif self._missed_bad is None:
                    self._missed_bad = (n,)
                return
            reentrant = self._requester == me  # from inside a signal our own request caused
            self._requester = me
        if reentrant:  # serial all the same (§2.7); §3.3 bounds the recursion upstream
            upstream.request(n)
            return
        try:
            upstream.request(n)
        except BaseException:  # §3.16 broken by the upstream: the caller hears it
            with self._lock:
                self._requester = 0
            raise
        self._pass_requests()  # what other threads asked for meanwhile

    def _pass_requests(self) -> None:
        """Pass the demand left by ``request`` on to the upstream, one call at a time, until
        none is left; only the ``_requester`` thread calls this."""
        while True:
            with self._lock:
                upstream = self._upstream
                missed, self._missed = self._missed, 0
                bad, self._missed_bad = self._missed_bad, None
                if upstream is None or self._done or (not missed and bad is None):
                    self._requester = 0
                    return
            try:
                if missed:
                    upstream.request(missed)
                if bad is not None:
                    upstream.request(bad[0])  # type: ignore[arg-type]  # §3.9: as it came
            except BaseException:  # §3.16 broken by the upstream: the caller hears it
                with self._lock:
                    self._requester = 0
                raise

    def cancel(self) -> None:
        """Cancel upstream once; thread-safe and idempotent (§2.6, §3.7)."""
        with self._lock:
            upstream, self._upstream = self._upstream, CANCELLED
            self._done = self._cancelled = True
        if upstream is not None and upstream is not CANCELLED:
            cancel_quietly(upstream)

    @property
    def is_disposed(self) -> bool:
        """True once cancelled or terminated."""
        return self._done

    # -- hooks -------------------------------------------------------------------------------

    def hook_on_subscribe(self, subscription: Subscription) -> None:
        """Called once with the upstream subscription; requests unbounded demand by default."""
        subscription.request(UNBOUNDED)

    def hook_on_next(self, element: T) -> None:
        """Called for each element; never after a terminal signal, nor for an element that
        arrives after cancel, except one already being delivered on another thread when
        ``cancel()`` was called (§2.8 allows it; the check is not held under a lock)."""

    def hook_on_error(self, error: Exception) -> None:
        """Called once on failure, with the upstream already dropped (§2.3, §2.4)."""
        report_dropped(error, where=f"{type(self).__name__} received on_error")

    def hook_on_complete(self) -> None:
        """Called once on completion, with the upstream already dropped (§2.3, §2.4)."""

    # -- internals -----------------------------------------------------------------------------

    def _terminate(self, completed: bool = False) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
            upstream, self._upstream = self._upstream, CANCELLED  # §2.4: counts as cancelled
            rejected = self._rejected
        if rejected and not completed and upstream is not None and upstream is not CANCELLED:
            # §2.5: an on_error after a rejection is (most likely) the rejecting second
            # publisher's; the first upstream is live: cancel it, not just drop it (§3.13).
            # An on_complete is the first upstream's own (a rejection sends on_error), and
            # §2.3 forbids calling it back; so is any signal from another second publisher.
            cancel_quietly(upstream)
        return True

    def _fail(self, error: Exception) -> None:
        """A hook raised: cancel upstream, then route the error to ``hook_on_error``."""
        with self._lock:
            upstream, self._upstream = self._upstream, CANCELLED
            first = not self._done
            self._done = self._cancelled = True
        if upstream is not None and upstream is not CANCELLED:
            cancel_quietly(upstream)
        if not first:
            report_dropped(error, rule="2.13", where="a hook raised after termination")
            return
        try:
            self.hook_on_error(error)
        except Exception as exc:
            report_dropped(exc, rule="2.13", where="hook_on_error raised")
