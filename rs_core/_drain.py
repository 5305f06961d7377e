"""The one drain loop every publisher in the project reuses.

A publisher supplies a :class:`Source` (what to emit) and a :class:`DrainPolicy` (where the
drain runs: inline, on an executor, on an asyncio loop); :class:`DrainSubscription` does the
rest: demand accounting, serial emission, reentrancy without recursion, §3.9 errors, cancel,
terminal state, dropping references, and reporting a subscriber that raises.

The loop is the work-in-progress ("WIP / missed") loop of reactor-core and RxJava, on a lock
because pure Python has no CAS: every entry point changes state under the lock and bumps
``_wip``; only the call that moved it from 0 to 1 drains, any other returns at once. A
single-producer push source may also hold the WIP as an *emitter lease* and deliver its
elements straight from the producer's thread, one lock per lease instead of three per element
(see :meth:`DrainSubscription.lease`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from functools import partial
from itertools import islice, repeat, starmap, takewhile
from operator import is_, is_not
from threading import get_ident
from typing import Any, Final, Generic, TypeVar, final

from reactive_streams._demand import UNBOUNDED, add_cap, check_request, produced
from reactive_streams._subscription import logger, report_dropped, start_daemon
from reactive_streams.api import Subscriber

__all__ = [
    "EMPTY",
    "END",
    "INLINE",
    "DrainPolicy",
    "DrainSubscription",
    "OnExecutor",
    "OnLoop",
    "QueueSink",
    "Source",
]

T = TypeVar("T")


@final
class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


EMPTY: Final = _Marker("EMPTY")
"""Returned by :meth:`Source.poll`: nothing available now; the source calls ``wake()`` later."""
END: Final = _Marker("END")
"""Returned by :meth:`Source.poll`: the source is exhausted; the drain signals ``on_complete``."""


class Source(Generic[T]):
    """What a publisher plugs into the drain: a pull interface over its elements.

    Every method but ``interrupt`` is called by the drain only, serially, never while the
    drain's lock is held.
    ``poll`` is called only while the subscriber has unmet demand: a pull source pulls one
    element per call, so it is pulled exactly as far as demand reaches.

    A queue-backed source may instead expose its ``collections.deque`` as ``queue``: the drain
    then pops from it directly, in rounds of at most ``until_replenish`` elements (read before
    each round), reports each round with ``consumed(n)`` (queue fusion, as in Reactor), and
    calls ``want(n)`` when the queue ran dry with demand left; ``poll`` still serves the
    terminal check.
    """

    __slots__ = ()

    queue: deque[T] | None = None
    in_memory: bool = False
    """True when ``values()`` iterates elements already in memory (a list, a range): pulling
    never blocks, so the drain may copy a chunk of them into a fused sink at once (C speed)
    before its consumer sees any, without holding back an element that is slow to come."""
    plain: bool = False
    """True when ``values()`` yields elements only, never ``EMPTY`` (a source that returns a
    plain iterator): the drain's loop then skips that check for each element."""

    @property
    def until_replenish(self) -> int:
        """A fused source's next round: elements to pop before reporting them (0: no limit)."""
        return 0

    def consumed(self, n: int) -> None:
        """A fused source's ``n`` elements were delivered (only called when ``queue`` is set)."""

    def want(self, n: int) -> None:
        """A fused source's queue ran dry with ``n`` elements of demand unmet (only called
        when ``queue`` is set): a pull source may fetch up to ``n`` more, then ``wake()``."""

    def bind(self, wake: Callable[[], None]) -> None:
        """Receive the drain's ``wake`` callable; a push source calls it when it has news."""

    def poll(self) -> T | _Marker:
        """Return the next element, ``EMPTY`` (nothing yet) or ``END``; raise to fail (§1.4)."""
        raise NotImplementedError

    def values(self) -> Iterator[T | _Marker]:
        """``poll()`` as an iterator that stops at ``END``: what the drain's loop iterates
        (it stops early at ``EMPTY``).

        A source backed by a plain iterator may return that iterator itself (the loop then
        runs at C speed); the drain never pulls it beyond demand (it slices it). ``END`` is
        found by identity (``is_not``): ``iter(poll, END)`` would compare every element with
        ``==``, which a numpy array or a DataFrame answers with an array, or an error.
        """
        return takewhile(partial(is_not, END), starmap(self.poll, repeat(())))

    def at_end(self) -> bool:
        """True when ``poll`` would return ``END`` or raise without producing an element.

        Lets the drain signal a terminal event without demand (an empty or failed queue,
        §1.2, §2.9, §2.10). A pull source that cannot know without pulling returns False.
        """
        return False

    def interrupt(self) -> None:
        """Cancel arrived while the drain, or a producer holding the emitter lease, is busy:
        stop producing now if that can be done from any thread (dispose or cancel an upstream
        subscription). Unlike the other methods, called on the cancelling thread (or from
        inside ``on_next``), concurrently with the drain; ``close()`` still follows, from the
        drain. Must be thread-safe; does nothing by default."""

    def close(self) -> None:
        """Release what the source holds (close a generator, cancel upstream). Called once."""


class QueueSink(Generic[T]):
    """A subscriber of this project's own that the drain may fill directly (fusion).

    Its ``sink`` deque receives the elements the drain would pass to ``on_next`` (appended
    at C speed, no call per element); the drain calls ``sink_filled()`` each time the deque
    goes from empty to non-empty, so a consumer waiting on it wakes at once. Terminal
    signals still go through ``on_error`` / ``on_complete``. A sink trusts the drain's
    accounting (§1.1 is enforced by the drain) and must cancel the subscription *before*
    it clears ``sink`` on close: the drain then clears it again after an append that raced
    the close (§3.13), so a closed sink never yields an element.
    """

    __slots__ = ()

    sink: deque[T]

    def sink_filled(self) -> None:
        """The drain appended to an empty ``sink``: wake whoever consumes it."""


class DrainPolicy:
    """Where the drain runs. ``INLINE`` runs it on the caller of ``request``; subclasses hand it
    to an executor or an event loop, ``batch`` elements at a time, then reschedule."""

    __slots__ = ("batch",)

    def __init__(self, batch: int = 0) -> None:
        self.batch = batch

    def run(self, drain: Callable[[], None]) -> Future[Any] | None:
        """Run ``drain`` now, on this thread (a trampoline, thanks to the WIP counter).

        A policy that hands it on raises when it cannot (``RuntimeError`` from a closed loop
        or a shut-down executor, ``queue.Full`` from a bounded one, ...), and may
        return the ``Future`` of the task it queued: if that is cancelled before it ran
        (``shutdown(cancel_futures=True)``), the subscription fails as if it had raised."""
        drain()
        return None


INLINE: Final = DrainPolicy()


@final
class OnExecutor(DrainPolicy):
    """Run the drain as a task of a ``concurrent.futures.Executor``, ``batch`` items a task."""

    __slots__ = ("executor",)

    def __init__(self, executor: Executor, batch: int = 1024) -> None:
        if not isinstance(executor, Executor):  # checked here, for every user of the policy
            raise TypeError(
                f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}"
            )
        super().__init__(batch)
        self.executor = executor

    def run(self, drain: Callable[[], None]) -> Future[Any]:
        return self.executor.submit(drain)  # raises after shutdown, or when full: see _schedule


@final
class OnLoop(DrainPolicy):
    """Run the drain on ``loop``: inline when already on it, else via ``call_soon_threadsafe``.

    A wake from a task or callback on the loop (an ``__anext__`` that just produced, an
    ``asend``, a same-loop consumer's ``request``) drains at once instead of costing a loop
    iteration and a self-pipe write per element. A drain that reschedules itself after
    ``batch`` elements always goes through ``call_soon``, so the loop gets its turn and the
    stack never grows. One per subscription: ``_draining`` is touched only on the loop.
    """

    __slots__ = ("_draining", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, batch: int = 1024) -> None:
        super().__init__(batch)
        self.loop = loop
        self._draining = False

    def run(self, drain: Callable[[], None]) -> None:
        loop = self.loop
        if asyncio._get_running_loop() is not loop:
            loop.call_soon_threadsafe(self._enter, drain)  # RuntimeError once closed: the
            # caller treats it as cancellation
        elif self._draining:
            loop.call_soon(self._enter, drain)  # a batch is done: yield to the loop
        else:
            self._enter(drain)

    def _enter(self, drain: Callable[[], None]) -> None:
        self._draining = True
        try:
            drain()
        finally:
            self._draining = False


@final
class DrainSubscription(Generic[T]):
    """The Subscription behind every publisher of the project: one source, one subscriber.

    Rules enforced here: §1.1 (never more ``on_next`` than requested), §1.3 (signals are
    serial: only the WIP owner emits), §1.7 (nothing after a terminal signal), §2.13 (a
    subscriber that raises is treated as cancelled and reported), §3.2/§3.3 (``request`` from
    ``on_next`` only bumps the counter: no recursion), §3.5/§3.6/§3.7 (``cancel`` idempotent,
    thread-safe, then ``request`` is a no-op), §3.9 (bad ``n`` becomes ``on_error``),
    §3.13 (subscriber and source dropped on cancel and termination), §3.17 (saturating demand).

    Signals reach the subscriber on the thread the policy runs the drain on; ``on_subscribe``
    is delivered by :meth:`start` on the caller's thread. Under an emitter lease
    (:meth:`lease`) they reach it on the producer's thread.
    """

    __slots__ = (
        "__weakref__",
        "_bad_request",
        "_cancelled",
        "_cleanup_owed",
        "_credit",
        "_demand",
        "_done",
        "_drainer",
        "_deliver",
        "_fallback",
        "_leased",
        "_lock",
        "_policy",
        "_requested",
        "_rescheduler",
        "_resumed",
        "_sink",
        "_source",
        "_subscriber",
        "_wip",
    )

    def __init__(
        self, subscriber: Subscriber[T], source: Source[T], policy: DrainPolicy = INLINE
    ) -> None:
        self._lock = threading.Lock()
        self._wip = 1  # held by start() until on_subscribe has returned (§1.3, §1.9)
        self._demand = 0
        self._requested = 0  # every valid request added up (saturating): see ``requested``
        self._cancelled = False
        self._cleanup_owed = False  # cancel_deferring_cleanup() left the drain to cancel()
        self._done = False
        self._bad_request: Exception | None = None
        self._subscriber: Subscriber[T] | None = subscriber
        self._source: Source[T] | None = source
        self._policy = policy
        # Fusion: our own queue subscribers are appended to directly (see QueueSink).
        self._sink: QueueSink[T] | None = subscriber if isinstance(subscriber, QueueSink) else None
        # The emitter lease (see lease()): held or not, and its credit, the demand it took out
        # of _demand. Written under the lock, or by the producer alone while it holds the
        # lease; _credit is 0 while no lease is held and during each delivery under it (so a
        # reentrant push takes the regular path, and revoke_lease leaves it to the producer).
        self._leased = False
        self._credit = 0
        self._drainer = 0  # the id of the thread running the drain loop, while it runs
        self._rescheduler = 0  # the thread handing the next batch to the policy, meanwhile
        self._resumed = 0  # ... that found the policy ran it at once: its loop goes on
        self._fallback: Callable[[T], None] = _refuse
        self._deliver: Callable[[T], None] = subscriber.on_next  # the lease's, bound once
        source.bind(self.wake)

    # -- entry points -------------------------------------------------------------------

    def start(self) -> None:
        """Signal ``on_subscribe``, then drain whatever it requested (§1.9)."""
        subscriber = self._subscriber
        if subscriber is not None:
            try:
                subscriber.on_subscribe(self)
            except Exception as exc:  # §2.13: treat the subscriber as cancelled
                report_dropped(exc, rule="2.13", where="on_subscribe raised; cancelled")
                self._cancelled = True
        self._schedule()

    def request(self, n: int) -> None:
        """Add ``n`` to the demand (§3.8), or deliver the §3.9 error; never blocks (§3.4)."""
        error = check_request(n)
        with self._lock:
            if self._cancelled:  # §3.6
                return
            if error is not None:  # §3.9: delivered by the drain, so on_error stays serial
                if self._bad_request is None:
                    self._bad_request = error
            else:
                self._demand = add_cap(self._demand, n)  # §3.17
                self._requested = add_cap(self._requested, n)
            self._wip += 1
            if self._wip != 1:  # §3.3: someone is draining; it will see the new demand
                return
        self._schedule()

    def cancel(self) -> None:
        """Stop emission and release the source; idempotent and thread-safe (§3.5, §3.7).

        When the drain or a lease's producer is busy (on another thread, or up this one's
        stack), it does the rest once its current call returns; ``Source.interrupt()`` is
        called here at once, so an upstream that can be stopped from any thread (an Rx
        subscription to dispose, a queue's upstream to cancel) stops now, not after that
        call, which may be a slow ``on_next``, a blocked producer's next element or a
        synchronous upstream filling a whole window inside ``request`` (§3.12). When idle,
        the drain runs now, under the policy: inline (a synchronous publisher), that is on
        this thread.
        """
        self._cancel(here=True)

    def cancel_deferring_cleanup(self) -> None:
        """``cancel()``, except that an idle inline drain does not run on this thread.

        The subscription is cancelled at once: ``request`` becomes a no-op (§3.6), a busy
        drain or lease's producer stops after the element in progress, a drain under an
        executor or a loop is scheduled there, and the source is interrupted (a push source
        disposed).
        Only the clean-up of an idle inline drain (releasing the source: a generator's
        ``close``, whose ``finally`` may block) waits for the next ``cancel()``, which the
        caller owes, on a thread of its choosing. For a consumer cancelling from a thread
        that must not run upstream's clean-up: ``publish_on``'s queue, interrupted from an
        event loop, cancels again from its executor. Thread-safe.
        """
        self._cancel(here=False)

    def _cancel(self, here: bool) -> None:
        drain = False
        with self._lock:
            if self._cancelled:  # §3.7; but the clean-up a deferring cancel left owed
                if not (here and self._cleanup_owed):
                    return
                self._cleanup_owed = False
                source = None
            else:
                self._cancelled = True
                source = self._source
            if here or self._wip or self._policy is not INLINE:
                self._wip += 1
                drain = self._wip == 1
            else:  # idle and inline: the drain would run on this thread; the owed cancel()
                self._cleanup_owed = True  # runs it
        if drain:  # the drain releases the source, so close() never races poll()
            self._schedule(deferrable=not here)
        elif source is not None:  # busy: stop a producer that can be stopped from any thread
            try:
                source.interrupt()
            except Exception as exc:
                report_dropped(exc, where="interrupting a source after cancel")

    def wake(self) -> None:
        """Tell the drain that the source has news (an element, or its end)."""
        with self._lock:
            self._wip += 1
            if self._wip != 1:
                return
        self._schedule()

    @property
    def demand(self) -> int:
        """Requested and not yet delivered (a snapshot; ``UNBOUNDED`` once unbounded).

        Includes a lease's credit, except while it is delivering an element."""
        with self._lock:
            return add_cap(self._demand, self._credit)

    @property
    def requested(self) -> int:
        """Everything requested so far, added up (saturating at ``UNBOUNDED``): never lowered
        by emission, so a push source can tell exactly whether one more element was asked
        for, even while the drain is delivering (``demand`` is settled once per pass)."""
        return self._requested

    def delivering_here(self) -> bool:
        """True when called on the thread that is delivering this subscription's signals right
        now: the drain loop's, or, for a call by the lease's producer (see :meth:`lease`),
        its own while it delivers under the lease: from inside the subscriber's ``on_next``,
        say. Whatever waits there for the subscriber to make progress waits for itself: a
        source uses this to fail instead of deadlocking. (The producer's calls are serial, so
        one it makes while a delivery under its lease is in progress is made from inside it;
        see ``lease`` for a second thread calling at once against that contract.)
        """
        return self._drainer == get_ident() or (self._leased and not self._credit)

    @property
    def is_cancelled(self) -> bool:
        """True once cancelled, or once a terminal signal was delivered (§1.6)."""
        return self._cancelled

    # -- the emitter lease: a single producer delivering on its own thread -------------------

    def emitter(self, fallback: Callable[[T], None]) -> Callable[[T], None]:
        """Return the ``on_next`` to hand a single-producer push source's producer.

        The callable delivers ``element`` straight to ``subscriber.on_next`` while the
        producer holds the emitter lease (see :meth:`lease`) with credit left, with no lock; in
        every other case it calls ``fallback(element)``: the source's regular path (buffer the
        element and ``wake()``, or wait for room, or take a lease and call the emitter again).
        ``None`` always takes the fallback, which owns the §2.13 decision.

        Args:
            fallback: the source's own ``on_next``; called on the producer's thread.

        Returns:
            A callable for the producer; call it serially (one element at a time).
        """
        self._fallback = fallback
        return self._offer

    def lease(self) -> bool:
        """Take the emitter lease for the producer calling this, if the drain is idle; one lock.

        A lease is the WIP held by a push source's producer, together with a credit: all the
        demand outstanding when it was taken (a local budget, removed from ``demand``). While
        it lasts, the :meth:`emitter` callable delivers each element on the producer's thread
        and counts the credit down, without a lock: the other entry points (``request``,
        ``cancel``, ``wake``) still change state under the lock and bump ``_wip``, and return
        because the WIP is taken (§3.3, §3.4). The producer reads ``_wip`` after each element
        (a lock-free hint: it moves off 1 only under the lock, and back only by the
        producer's own renewal, so a stale read only delays the settling to the next element
        or to the release) and settles under the lock when it moved or the credit ran out: if only
        demand arrived, the lease is renewed with it; otherwise the unused credit goes back to
        the demand (§1.1) and the normal drain loop runs from the WIP it holds, so cancel
        (§3.12), a §3.9 error, a buffered element or the source's end are handled there, and
        the WIP is released by the loop's missed-count exit.

        The lease is the producer's, not a thread's: a producer whose calls move to another
        thread (an Observable switching schedulers) goes on delivering under it, its calls
        being serial; no thread check per element. Between two elements the lease stays held:
        a ``request``, ``cancel`` or bad ``request`` from another thread takes effect once the
        producer has delivered its next element, or ends the lease (§3.12/§3.13 ask for
        "eventually"; at most one element arrives after ``cancel`` returned; from inside
        ``on_next`` they take effect before the producer gets control back). Hence only take
        a lease on a thread that keeps producing, and end it there when it stops: the
        producer with :meth:`release_lease`, any other thread (the one the source owns,
        leaving) with :meth:`revoke_lease`, which is safe while the producer is delivering
        elsewhere.

        Preconditions, for the source: one producer at a time, whose calls do not overlap
        (Rx's observer contract), so the lease's lock-free fields are never written by two
        threads at once. (A second thread calling the emitter at once all the same finds the
        credit claimed and takes the regular path, or claims it between two of the first
        one's elements: the credit is always taken in one step, by a claim, which reads and
        zeroes it with no call in between (on CPython with the GIL, and no trace function),
        or under the lock, so no element is delivered twice and no two deliveries overlap;
        the order of such elements is not kept, and ``delivering_here()`` cannot tell that
        thread from the one delivering, so a source that waits for room may fail it as a
        feedback loop.) Every ``wake`` during a lease comes from the producer, which then
        calls :meth:`release_lease`; the source exposes its buffer as ``queue``. The lease is
        granted only under the ``INLINE`` policy (the producer's thread is where the drain
        would run), when the WIP is free, nothing is buffered, nothing was cancelled or
        illegally requested (§3.9), no lease was revoked and demand is > 0. A reentrant push
        (from inside the subscriber's ``on_next``) takes the fallback, and is delivered after
        the element in progress.

        Returns:
            True if the calling producer now holds the lease (with credit >= 1).
        """
        source = self._source
        if self._policy is not INLINE or source is None or source.queue is None:
            return False
        queue = source.queue
        with self._lock:
            demand = self._demand
            if (
                self._wip
                or not demand
                or queue
                or self._cancelled
                or self._bad_request is not None
                or self._deliver is _revoked  # revoked (for good) or released (§3.13)
            ):
                return False
            self._wip = 1
            self._demand = produced(demand, demand)  # the credit leaves the shared demand
            self._credit = demand
            self._leased = True
        return True

    def release_lease(self) -> None:
        """End the emitter lease, if one is held: return its unused credit and drain.

        For the producer (see :meth:`revoke_lease` for any other thread): called before it
        waits, when its source ends (after ``finish``), or on its regular path. A no-op when
        no lease is held; during a delivery under the lease (a reentrant push) it leaves the
        credit to the producer, which settles after that element.
        """
        if self._leased:  # lock-free: written only under the lock or by the producer
            self._end_lease(revoke=False)

    def revoke_lease(self) -> None:
        """End the emitter lease for good, from a thread that may not be the producer: the
        thread a source owns, leaving while its producer may go on elsewhere. No lease is
        granted after it.

        Safe against a producer delivering meanwhile, with no lock on its side: this swaps
        the emitter's target for one that refuses (the producer reads it after marking its
        delivery by zeroing the credit), then looks at the credit. Credit left means no
        delivery is under way: it goes back to the demand (§1.1) and this thread frees the
        lease's WIP, or drains from it if work was missed; an element the producer was just
        about to deliver finds the refusal and takes the regular path. No credit means a
        delivery is under way: the producer settles after it, as for a ``request`` (the WIP
        is bumped), and returns its credit.
        """
        self._end_lease(revoke=True)

    def _end_lease(self, *, revoke: bool) -> None:
        with self._lock:
            if revoke:
                self._deliver = _revoked  # first: a producer claiming from now on finds it
            if not self._leased:
                return
            credit, self._credit = self._credit, 0  # one step: a claim comes before or finds 0
            if not credit:  # a delivery is under way: its producer settles after it
                self._wip += 1
                return
            self._leased = False
            self._demand = add_cap(self._demand, credit)  # §1.1: unused credit goes back
            if self._wip == 1:  # nothing missed: the loop's exit, without a pass
                self._wip = 0
                return
        self._drain()  # from the WIP the lease held; released by the missed-count exit

    def _offer(self, element: T) -> None:
        """The emitter callable: the lease's lock-free path, else the source's fallback."""
        credit = self._credit
        if credit and element is not None:
            self._credit = 0  # delivering: a reentrant push takes the regular path, and a
            try:  # revoke_lease leaves the credit to this call
                self._deliver(element)  # the subscriber's on_next; _revoked once revoked
            except _Revoked:
                self._offer_refused(element, credit)
                return
            except Exception as exc:  # §2.13: the subscriber counts as cancelled
                self._leased = False
                source = self._source
                if source is not None:
                    self._subscriber_failed(source, exc)
                return
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: as in the drain
                self._leased = False  # loop, the subscription ends (§3.13) and the producer
                self._abort(exc)  # gets it; the WIP stays held for good
                raise
            self._credit = credit = credit - 1
            if credit and self._wip == 1:  # credit left; no request, cancel or wake came
                return
            self._settle(credit)  # §1.1: used up; or §3.3, §3.9, §3.12 from anywhere
            return
        self._fallback(element)

    def _offer_refused(self, element: T, credit: int) -> None:
        """The lease was revoked or released as this call claimed its credit: if the revoker
        left that credit to it (it had zeroed it first), give it back (§1.1) and drain from
        the lease's WIP; then take the regular path with the element."""
        with self._lock:
            left = self._leased
            if left:
                self._leased = False
                self._demand = add_cap(self._demand, credit)
        if left:
            self._drain()  # the revoker bumped the WIP: the loop runs, then releases it
        self._fallback(element)

    def _settle(self, restored: int) -> None:
        """The producer's exit, with the credit it put back: renew the lease if only demand
        arrived, else drain and release; nothing if the lease ended meanwhile (its ender has
        the WIP), or if another thread claimed the credit (it settles after its element)."""
        source = self._source
        queue = source.queue if source is not None else None
        renewable = False
        if source is not None and queue is not None:
            try:  # an end signalled from inside on_next (reentrantly) must reach the loop
                renewable = not source.at_end()
            except Exception:
                pass  # the drain loop asks again, and reports the failure
        with self._lock:
            if not self._leased:
                return  # revoked meanwhile, with the credit: the revoker drains
            credit, self._credit = self._credit, 0  # one step, as a claim is (see _offer)
            if restored and not credit:
                # Claimed since it was put back: a second thread calling the emitter at once
                # (against Rx's contract) is delivering; it settles after its element.
                self._wip += 1
                return
            demand = add_cap(self._demand, credit)
            if (
                renewable
                and demand
                and not queue
                and not self._cancelled
                and self._bad_request is None
                and self._deliver is not _revoked
            ):
                self._wip = 1  # the missed work was only new demand (§3.3): absorbed
                self._demand = produced(demand, demand)
                self._credit = demand
                return
            self._demand = demand  # §1.1: the unused credit goes back
            self._leased = False
            if self._wip == 1 and renewable:  # nothing missed: the loop's exit, without a pass
                self._wip = 0
                return
        self._drain()  # cancel (§3.12), §3.9, buffered elements, the end; then releases

    # -- the drain ----------------------------------------------------------------------

    def _schedule(self, deferrable: bool = False) -> None:
        policy = self._policy
        if policy is INLINE:
            self._drain()
            return
        try:
            task = policy.run(self._drain)
        except Exception as exc:  # closed loop, shut-down or full executor: §1.9, §3.16 say
            if deferrable:  # a deferring cancel's: its clean-up would run right here, so it
                with self._lock:  # is owed instead (the WIP let go: only it was left to do)
                    self._wip = 0
                    self._cleanup_owed = True
                return
            self._unschedulable(exc)  # return normally; the subscriber hears it (§1.4)
            return
        if task is not None:
            task.add_done_callback(self._task_done)

    def _task_done(self, task: Future[Any]) -> None:
        if task.cancelled():  # the drain never ran, and the WIP it was given is still held
            # The executor cancels under its own lock (shutdown(cancel_futures=True)): the
            # subscriber hears it on a thread of its own, never under that lock (at exit,
            # when no thread starts, not at all: nothing is left to hear it).
            start_daemon(
                self._unschedulable,
                RuntimeError("the executor cancelled the drain's task"),
                name="rs-drain-cancelled",
            )

    def _unschedulable(self, exc: Exception) -> None:
        """The policy cannot run the drain any more: end the subscription (§3.13). Called by
        the holder of the WIP, so no other signal can overlap (§1.3)."""
        with self._lock:
            cancelled, self._cancelled = self._cancelled, True
        subscriber, source = self._release()
        if source is not None:
            _close(source)
        if cancelled or subscriber is None:
            # Cancelled: the drain only had the source to close, done just now; an executor
            # shut down after its user cancelled (or at interpreter exit) is no error.
            logger.debug("a drain after cancel could not be scheduled (%r)", exc)
            return
        # §1.4: the publisher cannot go on; the subscriber hears why, here.
        error = RuntimeError(
            f"the publisher's drain could not be scheduled ({exc!r}): its event loop is "
            "closed, or its executor shut down or rejected the task"
        )
        error.__cause__ = exc
        try:
            subscriber.on_error(error)
        except Exception as failure:  # §2.13
            report_dropped(failure, rule="2.13", where="on_error raised")

    def _drain(self) -> None:
        me = get_ident()
        if self._rescheduler == me:
            # Our own reschedule, run at once by an executor that runs tasks in submit():
            # the loop that rescheduled goes on instead of nesting a batch deeper (§3.3).
            # Marked with this thread's id: another thread that handed a batch on (and
            # is still inside submit()) never takes it for its own.
            self._resumed = me
            return
        self._drainer = me  # this thread holds the WIP: nobody else writes it now
        try:
            passed = self._drain_loop()
        except Exception as exc:  # escaped the loop's own handling (a source's consumed()
            passed = False  # calling a request upstream that raised): §1.4, the subscriber
            self._fail(exc)  # hears it instead of it vanishing into an executor's Future
        except BaseException as exc:  # KeyboardInterrupt, SystemExit from on_next or the
            self._abort(exc)  # source: the subscription ends (§3.13); the caller gets it
            raise
        if not passed:
            self._drainer = 0  # terminated or cancelled: the WIP stays held for good

    def _drain_loop(self) -> bool:
        """The loop; True once it has passed the WIP on (released or rescheduled), having
        cleared ``_drainer`` first: after that, the next drainer's id must not be wiped."""
        missed = 1
        batch = self._policy.batch
        while True:
            subscriber = self._subscriber
            source = self._source
            if subscriber is None or source is None:  # terminated: hold the WIP for good
                return False
            with self._lock:
                demand = self._demand
                bad_request = self._bad_request
                cancelled = self._cancelled
            if cancelled:
                self._release()
                _close(source)
                return False
            if bad_request is not None:  # §3.9
                self._terminate(subscriber, source, bad_request)
                return False

            limit = demand if not batch or demand < batch else batch
            if source.queue is None:
                emitted = self._emit_polled(subscriber, source, limit)
            else:
                emitted = self._emit_queued(subscriber, source, source.queue, limit)
            if emitted < 0:  # terminated or cancelled inside the loop
                return False

            if emitted != limit or emitted == demand:
                # Not stopped by the batch cap: demand is met or the source had nothing more.
                # The source may be over without another element (§1.2, §2.9, §2.10).
                try:
                    over = source.at_end()
                    if over:
                        source.poll()  # END, or raises the source's error
                    elif emitted != limit and source.queue is not None:
                        source.want(demand - emitted)  # a fused pull source fetches on demand
                except Exception as exc:
                    self._terminate(subscriber, source, exc)
                    return False
                if over and not self._cancelled:
                    self._terminate(subscriber, source, None)
                    return False

            with self._lock:
                if emitted:
                    self._demand = produced(self._demand, emitted)
                if batch and emitted == batch and self._demand:
                    rescheduled = True  # keep the WIP and yield the thread or the loop
                else:
                    rescheduled = False
                    self._wip -= missed
                    missed = self._wip
                    if missed == 0:
                        self._drainer = 0  # under the lock, before another can take the WIP
            if rescheduled:
                self._drainer = 0  # the next task may start before this call returns
                me = get_ident()
                self._rescheduler = me
                try:
                    self._schedule()
                finally:
                    if self._rescheduler == me:
                        self._rescheduler = 0
                if self._resumed != me:
                    return True
                self._resumed = 0  # the policy ran it right here: go on, one level up
                self._drainer = me
            if missed == 0:
                return True

    def _emit_polled(self, subscriber: Subscriber[T], source: Source[T], limit: int) -> int:
        """Emit up to ``limit`` elements pulled one ``poll()`` each; -1 once terminated."""
        emitted = 0
        sink = self._sink
        if sink is not None and source.in_memory:
            return self._copy_values(subscriber, source, sink, limit)
        filled = sink.sink if sink is not None else None
        on_next = subscriber.on_next if filled is None else filled.append  # fused: C speed
        # islice stops the source's iterator after ``limit`` pulls, so it is never pulled
        # beyond demand (§1.1); the loop ends early on EMPTY, or at END / StopIteration.
        values = source.values()
        if limit != UNBOUNDED:
            values = islice(values, limit)
        if filled is None and source.plain:
            return self._emit_plain(subscriber, source, values, limit)
        try:
            for value in values:
                if value is EMPTY:
                    return emitted
                if value is None:
                    self._terminate(subscriber, source, TypeError("§2.13: a source produced None"))
                    return -1
                try:
                    on_next(value)  # type: ignore[arg-type]
                    if filled is not None and len(filled) == 1:
                        sink.sink_filled()  # type: ignore[union-attr]
                except Exception as exc:  # §2.13: the subscriber counts as cancelled
                    self._subscriber_failed(source, exc)
                    return -1
                emitted += 1
                if self._cancelled:  # cancel() from on_next or another thread (§3.12)
                    self._stop_cancelled(source)
                    return -1
        except Exception as exc:  # §1.4: a failing source becomes on_error
            self._terminate(subscriber, source, exc)
            return -1
        if emitted != limit:  # the loop ended on END (§1.5)
            self._terminate(subscriber, source, None)
            return -1
        return emitted

    def _emit_plain(
        self, subscriber: Subscriber[T], source: Source[T], values: Iterator[Any], limit: int
    ) -> int:
        """``_emit_polled``'s loop for its commonest case, a plain iterator to ``on_next``:
        no ``EMPTY`` to look for, no fused sink to wake; -1 once terminated."""
        emitted = 0
        on_next = subscriber.on_next
        try:
            for value in values:
                if value is None:
                    self._terminate(subscriber, source, TypeError("§2.13: a source produced None"))
                    return -1
                try:
                    on_next(value)
                except Exception as exc:  # §2.13: the subscriber counts as cancelled
                    self._subscriber_failed(source, exc)
                    return -1
                emitted += 1
                if self._cancelled:  # cancel() from on_next or another thread (§3.12)
                    self._stop_cancelled(source)
                    return -1
        except Exception as exc:  # §1.4: a failing source becomes on_error
            self._terminate(subscriber, source, exc)
            return -1
        if emitted != limit:  # the iterator ended (§1.5)
            self._terminate(subscriber, source, None)
            return -1
        return emitted

    def _copy_values(
        self, subscriber: Subscriber[T], source: Source[T], sink: QueueSink[T], limit: int
    ) -> int:
        """In-memory values to a fused queue: up to ``limit`` (§1.1) are pulled a chunk at a
        time into a list and moved with one ``extend`` each, no Python call per element. The
        end (§1.5), a failing iterator (§1.4) and ``None`` (§2.13) terminate after the
        elements before them, as on the element-wise path; -1 once terminated."""
        values = source.values()  # an in-memory iterator: never EMPTY, END or _Marker
        emitted = 0
        while emitted != limit:
            size = min(limit - emitted, _CHUNK)
            chunk: list[T] = []
            error: Exception | None = None
            try:  # list.extend keeps what came before an exception
                chunk.extend(islice(values, size))  # type: ignore[arg-type]
            except Exception as exc:  # §1.4
                error = exc
            if any(map(is_, chunk, repeat(None))):  # §2.13; `is`, never an element's __eq__
                del chunk[[value is None for value in chunk].index(True) :]
                error = TypeError("§2.13: a source produced None")
            if chunk:
                if not self._fill(source, sink, chunk, len(chunk)):
                    return -1
                emitted += len(chunk)
            if error is not None or len(chunk) != size:  # failed, or the end (§1.5)
                self._terminate(subscriber, source, error)
                return -1
        return emitted

    def _emit_queued(
        self, subscriber: Subscriber[T], source: Source[T], queue: deque[T], limit: int
    ) -> int:
        """The fused path for a queue-backed source: pop straight from its deque (no ``poll``
        call per element), in rounds of at most ``source.until_replenish`` elements popped
        by a C iterator, telling it ``consumed(n)`` after each, so it can request more
        upstream right when its next request is due; -1 once terminated."""
        sink = self._sink
        if sink is not None:
            return self._move_queued(source, queue, sink, limit)
        emitted = 0
        on_next = subscriber.on_next
        while emitted != limit:
            # We are the only consumer, so the n queued now stay until we pop them.
            n = min(len(queue), limit - emitted, source.until_replenish or limit)
            if not n:
                break  # empty: the source wakes the drain when it has more
            for value in map(deque.popleft, repeat(queue, n)):  # no __eq__, unlike iter()
                try:
                    on_next(value)
                except Exception as exc:  # §2.13
                    self._subscriber_failed(source, exc)
                    return -1
                if self._cancelled:  # §3.12
                    self._stop_cancelled(source)
                    return -1
            emitted += n
            source.consumed(n)
        return emitted

    def _move_queued(
        self, source: Source[T], queue: deque[T], sink: QueueSink[T], limit: int
    ) -> int:
        """Queue to fused queue: what is queued (up to ``limit``, §1.1) moves in C-speed
        ``extend``s; the elements are already there, so batching delays none of them. Until
        the queue is seen empty or the limit met: a push source wakes the drain only when its
        push finds the queue empty, so one made during a move is this loop's to take."""
        moved = 0
        while moved != limit:
            n = len(queue)  # we are its only consumer: the n queued stay until we pop them
            if n > limit - moved:
                n = limit - moved
            if n == 0:
                break
            if not self._fill(source, sink, map(deque.popleft, repeat(queue, n)), n):  # no ==
                return -1
            source.consumed(n)
            moved += n
        return moved

    def _fill(self, source: Source[T], sink: QueueSink[T], values: Iterable[T], n: int) -> bool:
        """Append the ``n`` ``values`` to a fused sink in one ``extend`` and wake its consumer
        if the sink was empty; False once terminated (§2.13, §3.12)."""
        filled = sink.sink
        try:
            filled.extend(values)
            if len(filled) <= n:  # it was empty, or emptied meanwhile: wake its consumer
                sink.sink_filled()
        except Exception as exc:  # §2.13
            self._subscriber_failed(source, exc)
            return False
        if self._cancelled:  # §3.12
            self._stop_cancelled(source)
            return False
        return True

    def _fail(self, error: Exception) -> None:
        """An exception escaped the drain loop: end the stream with it (§1.4), once."""
        subscriber, source = self._subscriber, self._source
        if subscriber is None or source is None:
            report_dropped(error, where="the drain, after the subscription ended")
            return
        self._terminate(subscriber, source, error)

    def _abort(self, error: BaseException) -> None:
        """A BaseException is passing through the drain: count the subscription as cancelled
        and release it (§3.13), so the WIP it keeps blocks nothing that matters; reported
        when it may vanish in a policy's task rather than reach a caller."""
        with self._lock:
            self._cancelled = True
        _, source = self._release()
        if source is not None:
            _close(source)
        self._drainer = 0
        if self._policy is not INLINE:
            report_dropped(error, where="a BaseException ended the drain")

    def _stop_cancelled(self, source: Source[T]) -> None:
        """Cancelled during emission: release and close (§3.13). A fused sink is only ever
        cancelled by its own close(), which cancels before clearing: clear it again, so an
        element appended after that clear is not left behind."""
        sink = self._sink
        self._release()
        _close(source)
        if sink is not None:
            sink.sink.clear()

    def _subscriber_failed(self, source: Source[T], error: Exception) -> None:
        """§2.13: a subscriber that raised counts as cancelled; report the error, never signal."""
        self._cancelled = True
        self._release()
        _close(source)
        report_dropped(error, rule="2.13", where="on_next raised; subscription cancelled")

    def _terminate(
        self, subscriber: Subscriber[T], source: Source[T], error: Exception | None
    ) -> None:
        """Release everything, then deliver one terminal signal (§1.6, §1.7)."""
        with self._lock:
            self._cancelled = True  # §1.6: the subscription now counts as cancelled
            if error is None:  # §3.9: a request(n <= 0) made before this point is answered,
                error = self._bad_request  # even from the last on_next before the end
        self._release()
        _close(source)
        try:
            if error is None:
                subscriber.on_complete()
            else:
                subscriber.on_error(error)
        except Exception as exc:  # §2.13
            report_dropped(exc, rule="2.13", where="on_complete/on_error raised")

    def _release(self) -> tuple[Subscriber[T] | None, Source[T] | None]:
        """§3.13: drop the subscriber and the source; the WIP stays held, so nothing drains."""
        with self._lock:
            subscriber, source = self._subscriber, self._source
            self._subscriber = None
            self._source = None
            self._sink = None
            self._deliver = _revoked  # no lease after this, nor a delivery under one
            self._done = True
        return subscriber, source


_CHUNK: Final = 1024
"""The most in-memory elements :meth:`DrainSubscription._copy_values` moves in one go."""


class _Revoked(Exception):
    """Raised by :func:`_revoked` into :meth:`DrainSubscription._offer` only."""


def _revoked(element: Any) -> None:
    """Stands for the subscriber's ``on_next`` once the lease is revoked or the subscriber
    dropped (§3.13): a producer that claimed its credit just then finds it, and takes the
    regular path instead (see ``revoke_lease``)."""
    raise _Revoked


def _refuse(element: Any) -> None:
    raise RuntimeError("DrainSubscription.emitter() was not given a fallback")


def _close(source: Source[Any]) -> None:
    try:
        source.close()
    except Exception as exc:
        report_dropped(exc, where="closing a source after cancel or termination")
