"""``BaseSubscriber``: subclass it and override the hooks; the rules are kept for you."""

from __future__ import annotations

from typing import Generic, TypeVar

from reactive_streams._demand import UNBOUNDED
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    CANCELLED,
    EMPTY_SUBSCRIPTION,
    cancel_quietly,
    report_dropped,
    require_element,
    require_error,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Subscription

__all__ = ["BaseSubscriber"]

T = TypeVar("T")


class BaseSubscriber(Generic[T]):
    """A Subscriber whose hooks are called only in a protocol-correct order.

    Override ``hook_on_subscribe`` (default: ``request(UNBOUNDED)``, as Reactor does),
    ``hook_on_next``, ``hook_on_error`` (default: report through ``logging``) and
    ``hook_on_complete``; call ``request(n)`` and ``cancel()`` from any thread. Hooks run on
    whichever thread the publisher signals on, serially (§1.3).

    Rules kept here: §2.7 (``request`` calls reach the subscription one at a time, and
    demand asked before ``on_subscribe`` follows ``hook_on_subscribe``'s; ``cancel`` never
    waits for a request, §3.5, and one that raises is reported, §3.15; see ``Upstream``),
    §2.5 (a second ``on_subscribe`` is cancelled; if it was a publisher rejecting us,
    ``EMPTY_SUBSCRIPTION`` then ``on_error``, that error still terminates and the first
    upstream is cancelled rather than dropped, §3.13), §2.3/§2.4 (after a terminal signal
    the subscription is dropped, so ``request``/``cancel`` from the terminal hooks do
    nothing), §2.8 (``on_next`` after ``cancel`` is ignored), §2.13 (``None`` arguments
    raise ``TypeError``; a raising ``hook_on_next`` cancels upstream and is routed to
    ``hook_on_error``, so ``on_next`` itself returns normally).
    """

    def __init__(self) -> None:
        self._upstream = Upstream()  # set once (§2.5), requests serial (§2.7)
        self._done = False  # one-way: the upstream was taken (cancel, terminal, failed hook)
        self._cancelled = False  # by cancel() or a failing hook, not by a terminal signal
        self._rejected = False  # a second publisher rejected us: its on_error is coming

    # -- Subscriber ----------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        # Held: another thread's request() from now on waits for the hook's (§2.7).
        if not self._upstream.set_once(subscription, hold=True):  # §2.5: cancelled (also
            if subscription is EMPTY_SUBSCRIPTION:  # after our cancel); §1.9: reject()
                self._rejected = True  # sends on_error next, on this thread
            return
        try:
            self.hook_on_subscribe(subscription)
        except Exception as exc:
            self._fail(exc)  # takes the upstream: release() passes nothing on
            self._upstream.release()
            return
        self._upstream.release()  # the hook's requests went through; now any made before

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
        self._upstream.request(n)

    def cancel(self) -> None:
        """Cancel upstream once; thread-safe and idempotent (§2.6, §3.7)."""
        self._done = self._cancelled = True  # set before the take that on_error checks
        self._upstream.cancel()  # §3.15: a raising cancel is reported

    @property
    def is_disposed(self) -> bool:
        """True once cancelled or terminated."""
        return self._done

    # -- hooks -------------------------------------------------------------------------------

    def scan(self) -> Scan:
        """This subscriber's state for :func:`~reactive_streams.snapshot` (any thread, no
        lock): named after its class; it keeps no element counts."""
        upstream = self._upstream
        return Scan(
            type(self).__name__,
            cancelled=self._cancelled,
            terminated=self._done and not self._cancelled,
            subscribed=upstream.subscription is not None,
            upstream=upstream.linked,
        )

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
        self._done = True
        upstream = self._upstream.take()  # §2.4: counts as cancelled from now on
        if upstream is CANCELLED:
            return False  # cancelled or terminated before
        if self._rejected and not completed and upstream is not None:
            # §2.5: an on_error after a rejection is (most likely) the rejecting second
            # publisher's; the first upstream is live: cancel it, not just drop it (§3.13).
            # An on_complete is the first upstream's own (a rejection sends on_error), and
            # §2.3 forbids calling it back; so is any signal from another second publisher.
            cancel_quietly(upstream)
        return True

    def _fail(self, error: Exception) -> None:
        """A hook raised: cancel upstream, then route the error to ``hook_on_error``."""
        self._done = self._cancelled = True
        upstream = self._upstream.take()
        if upstream is CANCELLED:
            report_dropped(error, rule="2.13", where="a hook raised after termination")
            return
        if upstream is not None:
            cancel_quietly(upstream)
        try:
            self.hook_on_error(error)
        except Exception as exc:
            report_dropped(exc, rule="2.13", where="hook_on_error raised")
