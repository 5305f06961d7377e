"""``Upstream``: the one Subscription a Subscriber holds, accepted once (§2.5) and asked for
elements one call at a time (§2.7). ``BaseSubscriber`` and ``PrefetchQueue`` (and through it
every ``to_…`` adapter and ``publish_on``) keep their upstream in one, as Reactor's
``Operators.setOnce`` / deferred subscription and RxJava's ``SubscriptionHelper`` serve theirs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from threading import get_ident
from typing import final

from reactive_streams._demand import add_cap, check_request
from reactive_streams._subscription import CANCELLED, EmptySubscription, cancel_quietly
from reactive_streams.api import Subscription

__all__ = ["Upstream"]


def _request(subscription: Subscription, n: int) -> None:
    subscription.request(n)


@final
class Upstream:
    """A Subscriber's upstream Subscription: set once, asked serially, cancelled once.

    ``set_once`` keeps the first subscription and cancels any later one, or one that comes
    after ``take``/``cancel`` (§2.5). ``request(n)`` is passed on at once; while another
    thread's request is in progress, or before ``set_once``, it is added up and passed on by
    that thread when its call returns, or by ``set_once`` (§2.7). A request made from inside
    that call on its own thread (``on_next`` asking for more) goes straight through, serial
    all the same (§3.3: the publisher bounds the recursion), or with ``defer_nested`` waits
    for that call to return, as another thread's does. An invalid ``n`` is passed on as it
    came, for the publisher's ``on_error`` (§3.9). ``replenish(due)`` instead asks the owner
    how much each time a call can be made. ``cancel`` and ``take`` never wait for a request
    in progress (§3.5), so one decided just before may follow them (§3.6). Any thread may
    call any method; no lock is held while the subscription, ``pass_request`` or ``due`` is
    called, and a cancel that raises is reported (§3.15).

    Args:
        pass_request: makes one ``subscription.request(n)`` (the default); an owner that
            counts what it asked for (§1.1) wraps the call here. Called serially.
        defer_nested: never call ``request`` from inside ``request`` (no recursion at all).
    """

    __slots__ = (
        "_again",
        "_bad",
        "_defer_nested",
        "_lock",
        "_missed",
        "_pass",
        "_requester",
        "_stopped",
        "_subscription",
    )

    def __init__(
        self,
        pass_request: Callable[[Subscription, int], None] = _request,
        *,
        defer_nested: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self._subscription: Subscription | None = None  # then the one kept, then CANCELLED
        self._requester = 0  # the thread whose turn it is to request (§2.7), 0 for none
        self._missed = 0  # valid demand left for that turn to pass on (saturating)
        self._bad: tuple[object] | None = None  # (n,): the first invalid n left for it
        self._stopped = False  # stop_requests(): no request from now on
        self._again = False  # replenish(): the turn asks due() once more before it ends
        self._pass = pass_request  # read with the subscription; take() drops it
        self._defer_nested = defer_nested

    @property
    def subscription(self) -> Subscription | None:
        """``None`` until ``set_once``; then the subscription; ``CANCELLED`` once taken."""
        return self._subscription

    @property
    def linked(self) -> Subscription | None:
        """The subscription a snapshot walks up to: ``None`` before ``set_once`` and once
        taken (§3.13: no link is kept then)."""
        subscription = self._subscription
        return None if isinstance(subscription, EmptySubscription) else subscription

    def set_once(self, subscription: Subscription, *, hold: bool = False) -> bool:
        """Keep ``subscription`` and pass on the demand asked for before it; ``False`` if
        one came before (or ``take``): that one stays, and this one is cancelled (§2.5).

        With ``hold``, the turn to request stays with this thread until it calls
        :meth:`release`: a hook run from ``on_subscribe`` asks first (§2.7).
        """
        with self._lock:  # under _lock: the subscription and the turn, in one step
            accepted = self._subscription is None
            if accepted:
                self._subscription = subscription
                self._requester = get_ident()  # no request passed on yet, so no turn held
        if not accepted:
            cancel_quietly(subscription)  # §2.5; §3.15: a raising cancel is reported
            return False
        if not hold:
            self.release()
        return True

    def request(self, n: int) -> None:
        """Pass ``request(n)`` on now or leave it to the turn in progress (§2.7); a no-op
        once taken or stopped (§2.4, §3.6). What the subscription raises ends this thread's
        turn and goes on to the caller; demand left meanwhile waits for the next turn."""
        me = get_ident()
        with self._lock:  # under _lock: the turn, and the demand left for it
            subscription, passer = self._subscription, self._pass
            if subscription is CANCELLED or self._stopped:
                return
            requester = self._requester
            if subscription is None or (requester and (requester != me or self._defer_nested)):
                if check_request(n) is None:  # set_once, or the turn's thread, passes it on
                    self._missed = add_cap(self._missed, n)
                elif self._bad is None:
                    self._bad = (n,)  # §3.9: as it came (0, -1, True, None)
                return
            self._requester = me
        if requester:  # from inside this thread's own request: serial (§2.7), §3.3
            passer(subscription, n)
            return
        try:
            passer(subscription, n)
        except BaseException:
            self._end_turn()
            raise
        self.release()

    def release(self) -> None:
        """End this thread's turn: pass on what other threads asked for meanwhile, one call
        at a time, until none is left (§2.7). Only the thread whose turn it is calls this."""
        try:
            while True:
                with self._lock:  # under _lock: what was left, taken once
                    subscription, passer = self._subscription, self._pass
                    missed, self._missed = self._missed, 0
                    bad, self._bad = self._bad, None
                    if (
                        subscription is None
                        or subscription is CANCELLED
                        or self._stopped
                        or (not missed and bad is None)
                    ):
                        self._requester = 0
                        return
                if missed:
                    passer(subscription, missed)
                if bad is not None:
                    passer(subscription, bad[0])  # type: ignore[arg-type]  # §3.9
        except BaseException:
            self._end_turn()
            raise

    def replenish(self, due: Callable[[], int]) -> None:
        """Request ``due()`` more, one call at a time (§2.7), asking ``due`` again after each
        call returns until it says 0: for an owner that decides how much to ask for when the
        call can be made (the room in its buffer). ``due`` counts what it returns as asked
        for, and runs with no lock of ours held. While another thread's turn is in progress
        (or this thread's own call, with ``defer_nested``), this only makes that turn ask
        ``due`` once more before it ends. A no-op before ``set_once``, once taken or stopped.
        An owner uses it instead of ``request``: demand left by ``request`` is not looked at."""
        me = get_ident()
        with self._lock:  # under _lock: the turn, and the call for one more look
            subscription, passer = self._subscription, self._pass
            if subscription is None or subscription is CANCELLED or self._stopped:
                return
            requester = self._requester
            if requester and (requester != me or self._defer_nested):
                self._again = True  # that turn asks due() again before it ends
                return
            self._requester = me
        if requester:  # from inside this thread's own request: serial (§2.7), §3.3
            n = due()
            if n > 0:
                passer(subscription, n)
            return
        try:
            while True:
                n = due()
                if n > 0:
                    passer(subscription, n)
                with self._lock:  # under _lock: ending the turn, or one more look, in one step
                    subscription, passer = self._subscription, self._pass
                    if (
                        subscription is None
                        or subscription is CANCELLED
                        or self._stopped
                        or (n <= 0 and not self._again)
                    ):
                        self._requester = 0
                        return
                    self._again = False
        except BaseException:
            self._end_turn()
            raise

    def _end_turn(self) -> None:
        with self._lock:  # under _lock
            self._requester = 0

    def drop_missed(self) -> int:
        """Take back the valid demand that no turn will pass on (0 while a thread has the
        turn, which will), forgetting an invalid one: after an exception ended a turn, the
        owner may fail instead of waiting for a request that no one makes."""
        with self._lock:  # under _lock
            if self._requester:
                return 0
            missed, self._missed = self._missed, 0
            self._bad = None
        return missed

    def stop_requests(self) -> None:
        """Pass no request on from now on, keeping the subscription for a later ``cancel``:
        after a terminal signal (§2.4), or once the consumer cancelled (§3.6)."""
        with self._lock:  # under _lock: a request checks it there
            self._stopped = True

    def take(self) -> Subscription | None:
        """Put ``CANCELLED`` in place and return what was there: ``None`` (none came yet),
        the subscription (now the caller's to cancel, or drop after a terminal signal,
        §2.4), or ``CANCELLED`` (taken before). Requests are no-ops from now on."""
        with self._lock:  # under _lock
            subscription, self._subscription = self._subscription, CANCELLED
            self._pass = _request  # no request follows: no cycle through the owner's hook
        return subscription

    def cancel(self) -> None:
        """Take the subscription and cancel it: once (§3.7), quietly (§3.15)."""
        subscription = self.take()
        if subscription is not None and subscription is not CANCELLED:
            cancel_quietly(subscription)

    def __repr__(self) -> str:
        return f"Upstream({self._subscription!r})"
