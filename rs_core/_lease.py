"""The emitter lease: a push source's producer delivering on its own thread, one lock a lease.

A single-producer push source (``from_observable(block)`` on its own thread) may hold the
drain's WIP together with a credit of demand, and hand each element straight to ``on_next``
with no lock per element. Reached through ``DrainSubscription.emitter`` / ``lease`` /
``release_lease`` / ``revoke_lease``; why it is safe, and what it costs: docs/notes/lease.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final

from reactive_streams._demand import add_cap, produced
from reactive_streams.api import Subscriber

if TYPE_CHECKING:
    from reactive_streams._drain import DrainSubscription

__all__ = ["EmitterLease"]

T = TypeVar("T")


@final
class EmitterLease(Generic[T]):
    """The WIP and a credit of demand, held for one :class:`DrainSubscription` by its producer.

    The credit travels in ``_baton``, a deque of at most one int: whoever pops it owns the
    credit and is the one thread delivering under the lease, until it appends it back
    (``deque`` pop and append are documented thread-safe; no claim rests on the GIL). A
    second thread calling the emitter meanwhile finds no baton and takes the source's
    regular path; so does a reentrant push from inside ``on_next`` (§1.3).

    Rules: §1.1 (the credit is demand taken out of the drain's, given back when the lease
    ends), §1.3 (one holder delivers at a time), §3.4 (``request`` / ``cancel`` / ``wake``
    still only bump the WIP: the holder settles after its next element), §3.12 / §3.13
    (nothing is delivered under a lease once the subscription is released).
    Threads: :meth:`emit` on the producer's, whichever it is (its calls are serial);
    :meth:`grant`, :meth:`end` and the holder's settling under the drain's lock.
    """

    __slots__ = ("_baton", "_fallback", "_granted", "_held", "_let_go", "_revoked", "_sub", "emit")

    def __init__(
        self, subscription: DrainSubscription[T], subscriber: Subscriber[T] | None
    ) -> None:
        self._sub = subscription
        self._baton: deque[int] = deque()  # the credit, while no one is delivering under it
        self._held = False  # a lease is granted and not ended: under the drain's lock
        self._granted = 0  # the credit the lease started with: under the drain's lock
        self._revoked = subscriber is None  # no lease from now on: under the drain's lock
        self._fallback: Callable[[T], None] = _no_fallback
        # emit(element): the producer's call; _let_go(): drops the subscriber (§3.13).
        self.emit, self._let_go = _emitter(self, subscriber)

    def bind(self, fallback: Callable[[T], None]) -> Callable[[T], None]:
        """Set the source's regular ``on_next``; return the emitter callable."""
        self._fallback = fallback
        return self.emit

    def grant(self) -> bool:
        """Under the drain's lock: take the lease for the calling producer if the drain is
        idle with demand, nothing is buffered, cancelled or illegally requested (§3.9), and
        none was revoked."""
        sub = self._sub
        source = sub._source
        queue = source.queue if source is not None else None
        demand = sub._demand
        if (
            queue is None
            or sub._wip
            or not demand
            or queue
            or sub._cancelled
            or sub._bad_request is not None
            or self._revoked
        ):
            return False
        sub._wip = 1  # under _lock: the lease holds the WIP
        sub._demand = produced(demand, demand)  # under _lock: the credit leaves the demand
        self._granted = demand  # under _lock
        self._held = True
        self._baton.append(demand)  # publishes the credit to its first holder
        return True

    def end(self, *, revoke: bool) -> None:
        """End the lease, from any thread: give the unused credit back (§1.1) and drain what
        was missed. Mid-delivery, the holder does it after its element. ``revoke``: for good."""
        sub = self._sub
        with sub._lock:
            if revoke:
                self._revoked = True  # under _lock
            credit = self._take()
            if credit is None:
                return  # no lease, or a holder is delivering: it settles after its element
            self._held = False
            sub._demand = add_cap(sub._demand, credit)  # under _lock
            sub._delivered += self._granted - credit  # under _lock: what the lease delivered
            if sub._wip == 1:  # nothing missed: the loop's exit, without a pass
                sub._wip = 0
                return
        sub._drain()  # from the WIP the lease held; released by the missed-count exit

    def credit(self) -> int:
        """The credit, if no element is being delivered under it (else 0); a snapshot."""
        try:
            return self._baton[0]  # a look at a thread-safe deque, not a claim
        except IndexError:
            return 0

    def scan(self, demand: int, delivered: int) -> tuple[int, int]:
        """The drain's ``demand`` and ``delivered`` with this lease's credit at rest counted
        in (a snapshot, for ``DrainSubscription.scan``); as given while none is at rest."""
        credit = self.credit()
        if not credit:
            return demand, delivered
        return add_cap(demand, credit), delivered + self._granted - credit

    def delivering(self) -> bool:
        """True while an element is delivered under the lease (a hint, for the producer)."""
        return self._held and not self._baton

    def retire(self) -> None:
        """Under the drain's lock, once the subscription is released (§3.13): no lease after
        this, and the subscriber is let go. No one holds the lease then (see lease.md)."""
        self._revoked = True
        self._held = False
        self._baton.clear()  # already empty: the ender or the failed holder took it
        self._let_go()

    def _take(self) -> int | None:
        """Under the drain's lock: claim the baton and return its credit; None when there is
        no lease, or when a holder has the baton: then the WIP is bumped first, so that
        holder, appending it back afterwards, sees the WIP moved and settles."""
        if not self._held:
            return None
        sub = self._sub
        sub._wip += 1  # under _lock; before the pop (see docs/notes/lease.md)
        try:
            credit = self._baton.pop()
        except IndexError:
            return None
        sub._wip -= 1  # under _lock: the baton is ours, nobody needs to settle
        return credit

    def _settle(self, credit: int | None) -> None:
        """The holder's look under the lock after an element whose WIP moved, or that spent
        the credit (``credit``: kept, or None if appended back): renew the lease if only
        demand came (§3.3), else give the credit back (§1.1) and drain."""
        sub = self._sub
        source = sub._source
        queue = source.queue if source is not None else None
        renewable = False
        if source is not None and queue is not None:
            try:  # an end signalled from inside on_next must reach the drain loop
                renewable = not source.at_end()
            except Exception:
                pass  # the drain loop asks again, and reports the failure
        with sub._lock:
            if credit is None:
                credit = self._take()
                if credit is None:  # ended meanwhile (its ender drained), or a second
                    return  # thread holds the baton: it settles after its element
            demand = add_cap(sub._demand, credit)
            if (
                renewable
                and demand
                and not queue
                and not sub._cancelled
                and sub._bad_request is None
                and not self._revoked
            ):
                sub._wip = 1  # under _lock: what was missed was only new demand (§3.3)
                sub._demand = produced(demand, demand)
                sub._delivered += self._granted - credit  # under _lock
                self._granted = demand
                self._baton.append(demand)
                return
            sub._demand = demand  # under _lock: §1.1, the unused credit goes back
            sub._delivered += self._granted - credit  # under _lock
            self._held = False
            if sub._wip == 1 and renewable:  # nothing missed: the loop's exit, without a pass
                sub._wip = 0
                return
        sub._drain()  # cancel (§3.12), §3.9, buffered elements, the end; then releases


def _emitter(
    lease: EmitterLease[T], subscriber: Subscriber[T] | None
) -> tuple[Callable[[T], None], Callable[[], None]]:
    """Make a lease's ``emit`` and the call that lets its subscriber go (§3.13).

    ``emit`` is a closure because it runs once per element: its reads are cell reads, which
    cost less than attribute reads on ``self`` (measured: docs/notes/lease.md, "What it costs")."""
    baton = lease._baton
    sub = lease._sub
    # The subscriber's on_next, bound once; let go when the subscription ends (§3.13).
    deliver: Callable[[T], None] = subscriber.on_next if subscriber is not None else _released

    def emit(element: T) -> None:
        """Deliver ``element`` under the lease if its credit is here, else call the fallback.

        The producer's thread. ``None`` always takes the fallback, which owns §2.13."""
        if baton and element is not None:  # a look: the credit may be here
            try:
                credit = baton.pop()  # paused-at: claim
            except IndexError:  # taken meanwhile: by an ender, or by a second thread
                lease._fallback(element)
                return
            try:  # the credit is ours alone until it is appended back
                deliver(element)  # paused-at: deliver
            except Exception as exc:  # §2.13: the subscriber counts as cancelled
                source = sub._source
                if source is not None:
                    sub._subscriber_failed(source, exc)
                return
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: as in the drain
                sub._abort(exc)  # loop, the subscription ends; the producer gets it
                raise
            credit -= 1  # owned: the baton's holder
            if credit:
                baton.append(credit)  # for the next element, or for an ender
                if sub._wip == 1:  # paused-at: returned
                    return  # a lock-free look: nothing came (see docs/notes/lease.md)
                lease._settle(None)  # paused-at: settle
            else:
                lease._settle(0)  # paused-at: spent
            return
        lease._fallback(element)

    def let_go() -> None:
        nonlocal deliver
        deliver = _released

    return emit, let_go


def _no_fallback(element: Any) -> None:
    raise RuntimeError("DrainSubscription.emitter() was not given a fallback")


def _released(element: Any) -> None:
    """Stands for ``on_next`` once the subscription is released; never called (no baton)."""
    raise RuntimeError("§3.13: an element was delivered under a lease after the end")
