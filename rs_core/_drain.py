"""The one drain loop every publisher in the project reuses.

A publisher supplies a :class:`Source` (what to emit) and a :class:`DrainPolicy` (where the
drain runs: inline, on an executor, on a loop; see _policy.py); :class:`DrainSubscription` does
the rest: demand accounting, serial emission, reentrancy without recursion, §3.9 errors, cancel,
terminal state, dropping references, and reporting a subscriber that raises.

The loop is the work-in-progress ("WIP / missed") loop of reactor-core and RxJava, on a lock
because pure Python has no CAS: every entry point changes state under the lock and bumps
``_wip``; only the call that moved it from 0 to 1 drains, any other returns at once. A push
source's producer may hold the WIP as an emitter lease instead (rs_core/_lease.py).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from itertools import islice, repeat
from threading import get_ident
from typing import Any, Generic, TypeVar, final

from reactive_streams._demand import UNBOUNDED, add_cap, check_request, produced
from reactive_streams._lease import EmitterLease
from reactive_streams._policy import INLINE, DrainPolicy, OnExecutor, OnLoop
from reactive_streams._scan import Scan, scan_drain
from reactive_streams._source import CHUNK, EMPTY, END, QueueSink, Source, appender, pull_chunk
from reactive_streams._source import _Marker as _Marker  # re-exported for the sources
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
class DrainSubscription(Generic[T]):
    """The Subscription behind every publisher of the project: one source, one subscriber.

    Rules: §1.1 (never more ``on_next`` than requested), §1.3 (only the WIP owner emits), §1.7
    (nothing after a terminal signal), §2.13 (a subscriber that raises counts as cancelled and
    is reported), §3.2/§3.3 (``request`` from ``on_next`` only bumps the counter), §3.5-§3.7
    (``cancel`` idempotent, thread-safe, then ``request`` a no-op), §3.9 (a bad ``n`` becomes
    ``on_error``), §3.13 (subscriber and source dropped at the end), §3.17 (saturating demand).
    Threads: signals arrive where the policy runs the drain, ``on_subscribe`` on the caller of
    :meth:`start`, and under an emitter lease (:meth:`lease`) on the producer's thread.
    """

    __slots__ = (
        "__weakref__",
        "_bad_request",
        "_cancelled",
        "_cleanup_owed",
        "_delivered",
        "_demand",
        "_drainer",
        "_lease",
        "_lock",
        "_name",
        "_policy",
        "_requested",
        "_rescheduler",
        "_resumed",
        "_sink",
        "_source",
        "_subscriber",
        "_terminated",
        "_wip",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        source: Source[T],
        policy: DrainPolicy = INLINE,
        *,
        name: str = "",
    ) -> None:
        self._lock = threading.Lock()
        self._name = name or type(source).__name__  # the stage's name in a snapshot
        # Under _lock: the WIP counter, the demand and the flags the drain decides on.
        self._wip = 1  # held by start() until on_subscribe has returned (§1.3, §1.9)
        self._demand = 0
        self._requested = 0  # every valid request added up (saturating): see ``requested``
        self._delivered = 0  # on_next calls made by the loop (a lease adds its own at its end)
        self._cancelled = self._terminated = False  # one-way; read lock-free, set under _lock
        self._cleanup_owed = False  # cancel_deferring_cleanup() left the drain to cancel()
        self._bad_request: Exception | None = None
        self._subscriber: Subscriber[T] | None = subscriber
        self._source: Source[T] | None = source
        self._policy = policy
        # Fusion: our own queue subscribers are appended to directly (see QueueSink).
        self._sink: QueueSink[T] | None = subscriber if isinstance(subscriber, QueueSink) else None
        self._lease: EmitterLease[T] | None = None  # made once, under _lock, by emitter()
        # Owned by the WIP holder: who runs the drain loop, or hands its next batch on.
        self._drainer = 0  # the id of the thread running the drain loop, while it runs
        self._rescheduler = 0  # the thread handing the next batch to the policy, meanwhile
        self._resumed = 0  # ... that found the policy ran it at once: its loop goes on
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
                with self._lock:
                    self._cancelled = True  # under _lock
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
                self._demand = add_cap(self._demand, n)  # §3.17; under _lock
                self._requested = add_cap(self._requested, n)  # under _lock
            self._wip += 1  # under _lock
            if self._wip != 1:  # §3.3: someone is draining; it will see the new demand
                return
        self._schedule()

    def cancel(self) -> None:
        """Stop emission and release the source; idempotent and thread-safe (§3.5, §3.7).

        A busy drain (or lease's producer) stops after its current call, and the source is
        interrupted here at once (§3.12); an idle drain runs now, under the policy."""
        self._cancel(here=True)

    def cancel_deferring_cleanup(self) -> None:
        """``cancel()``, except that an idle inline drain's clean-up (a generator's ``close``,
        which may block) waits for the next ``cancel()``, which the caller owes on a thread of
        its choosing (``publish_on``'s queue, interrupted from an event loop)."""
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
                self._wip += 1  # under _lock
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
            self._wip += 1  # under _lock
            if self._wip != 1:
                return
        self._schedule()

    @property
    def demand(self) -> int:
        """Requested and not yet delivered (a snapshot; ``UNBOUNDED`` once unbounded), a
        lease's credit included, except while an element is delivered under it."""
        with self._lock:
            lease = self._lease
            return add_cap(self._demand, lease.credit() if lease is not None else 0)

    @property
    def requested(self) -> int:
        """Everything requested so far, added up (saturating; never lowered by emission): a
        push source tells exactly whether one more element was asked for. A snapshot."""
        return self._requested

    def scan(self) -> Scan:
        """This subscription's state for :func:`~reactive_streams.snapshot`: any thread, read
        without the lock (a snapshot); elements delivered under a lease count from its end,
        or while its credit is at rest."""
        source = self._source
        demand, delivered, ended = self._demand, self._delivered, self._terminated
        lease = self._lease
        if lease is not None:
            demand, delivered = lease.scan(demand, delivered)
        return scan_drain(self._name, source, demand, delivered, self._cancelled and not ended)

    def delivering_here(self) -> bool:
        """True on the thread delivering this subscription's signals right now: the drain
        loop's, or the lease's producer from inside an ``on_next`` under its lease. A source
        that would wait there for the subscriber to make room fails instead of deadlocking.
        """
        lease = self._lease
        return self._drainer == get_ident() or (lease is not None and lease.delivering())

    @property
    def is_cancelled(self) -> bool:
        """True once cancelled, or once a terminal signal was delivered (§1.6)."""
        return self._cancelled

    # -- the emitter lease (rs_core/_lease.py) --------------------------------------------

    def emitter(self, fallback: Callable[[T], None]) -> Callable[[T], None]:
        """The ``on_next`` for a single-producer push source's producer: it delivers straight
        to the subscriber under the lease (:meth:`lease`), else calls ``fallback(element)``,
        the source's regular path. Call it first, then serially (see EmitterLease)."""
        return self._leasing().bind(fallback)

    def lease(self) -> bool:
        """Take the emitter lease (the WIP, all outstanding demand as credit) for the calling
        producer, if the drain is idle with demand and nothing buffered; INLINE only. It ends
        with :meth:`release_lease` (the producer) or :meth:`revoke_lease` (any thread)."""
        if self._policy is not INLINE:  # the producer's thread is where the drain would run
            return False
        with self._lock:  # the one lock of a lease: made once, and granted, under it
            if self._lease is None:
                self._lease = EmitterLease(self, self._subscriber)
            return self._lease.grant()

    def release_lease(self) -> None:
        """End the emitter lease, if held: return its unused credit (§1.1) and drain. Within
        a delivery under it (a reentrant push), the producer does so after that element."""
        lease = self._lease
        if lease is not None and lease._held:  # a look; end() decides under the lock
            lease.end(revoke=False)

    def revoke_lease(self) -> None:
        """End the emitter lease for good, from any thread, even while the producer delivers
        elsewhere (it then settles after its element); none is granted after it."""
        self._leasing().end(revoke=True)

    def _leasing(self) -> EmitterLease[T]:
        with self._lock:  # made once, under _lock: every thread gets the same lease
            if self._lease is None:
                self._lease = EmitterLease(self, self._subscriber)
            return self._lease

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
            # Cancelled under the executor's lock: the subscriber hears it on a thread of its
            # own (at exit, when no thread starts, not at all: nobody is left to hear it).
            start_daemon(
                self._unschedulable,
                RuntimeError("the executor cancelled the drain's task"),
                name="rs-drain-cancelled",
            )

    def _unschedulable(self, exc: Exception) -> None:
        """The policy cannot run the drain any more: end the subscription (§3.13). Called by
        the holder of the WIP, so no other signal can overlap (§1.3)."""
        with self._lock:
            cancelled, self._cancelled = self._cancelled, True  # under _lock
        subscriber, source = self._release()
        if source is not None:
            _close(source)
        if cancelled or subscriber is None:  # only the source was left to close: no error
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
            # Our own reschedule, run at once by an executor that runs tasks in submit(): the
            # loop that rescheduled goes on instead of nesting a batch deeper (§3.3). Keyed to
            # this thread: another one still inside submit() never takes it for its own.
            self._resumed = me  # owned: the WIP holder (this thread, one level up)
            return
        self._drainer = me  # owned: the WIP holder; nobody else writes it now
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
        spent = 0  # owned: the WIP holder; elements delivered in this task, all passes
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
                self._stop_cancelled(source)
                return False
            if bad_request is not None:  # §3.9
                self._terminate(subscriber, source, bad_request)
                return False

            # A task's share: at most ``batch`` elements, however the demand came (one
            # request(UNBOUNDED), or request(1) from each on_next), then the thread is yielded.
            limit = demand if not batch or demand < batch - spent else batch - spent
            emitted = self._emit(subscriber, source, limit) if limit else 0
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
                    self._terminate(subscriber, source, exc, emitted)
                    return False
                if over and not self._cancelled:
                    self._terminate(subscriber, source, None, emitted)
                    return False

            spent += emitted
            with self._lock:
                if emitted:
                    self._demand = produced(self._demand, emitted)  # under _lock
                    self._delivered += emitted  # under _lock
                if batch and spent >= batch and self._demand:
                    rescheduled = True  # keep the WIP and yield the thread or the loop
                else:
                    rescheduled = False
                    self._wip -= missed  # under _lock
                    missed = self._wip
                    if missed == 0:
                        self._drainer = 0  # under the lock, before another can take the WIP
            if rescheduled:
                self._drainer = 0  # the next task may start before this call returns
                me = get_ident()
                with self._lock:  # under _lock: a holder before us may be clearing its own
                    self._rescheduler = me
                try:
                    self._schedule()
                finally:
                    with self._lock:  # under _lock: the next holder may have set its own
                        if self._rescheduler == me:
                            self._rescheduler = 0
                if self._resumed != me:
                    return True
                self._resumed = 0  # the policy ran it right here: go on, one level up
                self._drainer = me
                spent = 0  # that was the next task: its own share starts
            if missed == 0:
                return True

    # -- emission: one round loop, two ways to deliver a round ------------------------------

    def _emit(self, subscriber: Subscriber[T], source: Source[T], limit: int) -> int:
        """Emit up to ``limit`` elements (§1.1), in rounds: what is queued, a chunk of values
        in memory, else the source's iterator itself. A fused sink takes a round that is all
        there in one ``extend`` (:meth:`_fill`); else one ``on_next`` each (:meth:`_each`).
        How many, or -1 once terminated."""
        queue = source.queue
        sink = self._sink
        values = source.values() if queue is None else iter(())
        if queue is None and (sink is None or not source.in_memory):
            if limit != UNBOUNDED:  # one round: the iterator, pulled only as far as demand
                values = islice(values, limit)
            on_next = subscriber.on_next if sink is None else appender(sink)
            return self._each(source, values, limit, on_next)
        emitted = 0
        while emitted != limit:
            error: Exception | None = None
            if queue is not None:  # we are its only consumer: the n queued stay till popped
                n = min(len(queue), limit - emitted)
                if sink is None:  # element-wise: tell a pull source when its request is due
                    n = min(n, source.until_replenish or n)
                if not n:
                    return emitted  # empty: the source wakes the drain when it has more
                size = n
                round_: Iterable[T] = map(deque.popleft, repeat(queue, n))  # no __eq__
            else:  # in memory, into a fused sink: a chunk at a time
                size = min(limit - emitted, CHUNK)
                round_, error = pull_chunk(values, size)
                n = len(round_)
            if n:
                # paused-at: round
                if sink is not None:
                    if not self._fill(source, sink, round_, n):
                        return -1
                elif queue is not None:
                    if not self._pop_each(source, round_, subscriber.on_next):
                        return -1
                elif self._each(source, round_, n, subscriber.on_next) < 0:
                    return -1
                emitted += n
                if queue is not None:
                    source.consumed(n)
            if error is not None or n != size:  # the iterator failed (§1.4) or ended (§1.5)
                self._terminate(subscriber, source, error, emitted)
                return -1
        return emitted

    def _each(
        self, source: Source[T], values: Iterable[Any], n: int, on_next: Callable[[T], None]
    ) -> int:
        """Deliver ``values`` one ``on_next`` each, up to ``n``; stop at ``EMPTY``. Fewer than
        ``n`` is the end (§1.5); a failing iterator (§1.4), ``None`` (§2.13) and a raising
        ``on_next`` (§2.13) end the stream too. How many, or -1 once terminated."""
        emitted = 0
        empty = EMPTY
        try:
            for value in values:
                if value is empty:
                    return emitted  # nothing now: the source wakes the drain later
                if value is None:
                    self._fail(TypeError("§2.13: a source produced None"), emitted)
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
            self._fail(exc, emitted)
            return -1
        if emitted != n:  # the iterator ended (END, §1.5)
            self._fail(None, emitted)
            return -1
        return emitted

    def _pop_each(
        self, source: Source[T], popped: Iterable[T], on_next: Callable[[T], None]
    ) -> bool:
        """Deliver a round popped from a source's queue, one ``on_next`` each: ``_each``
        without its checks, as a queue holds elements only (None was refused on the way in,
        §2.13) and the round's length is known. False once terminated (§2.13, §3.12)."""
        for value in popped:
            try:
                on_next(value)
            except Exception as exc:  # §2.13: the subscriber counts as cancelled
                self._subscriber_failed(source, exc)
                return False
            if self._cancelled:  # cancel() from on_next or another thread (§3.12)
                self._stop_cancelled(source)
                return False
        return True

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

    # -- endings ------------------------------------------------------------------------

    def _fail(self, error: Exception | None, emitted: int = 0) -> None:
        """End the stream with ``error`` (§1.4), or complete it (None, §1.5); once."""
        subscriber, source = self._subscriber, self._source
        if subscriber is None or source is None:
            if error is not None:
                report_dropped(error, where="the drain, after the subscription ended")
            return
        self._terminate(subscriber, source, error, emitted)

    def _abort(self, error: BaseException) -> None:
        """A BaseException passes through the drain or a lease: release the subscription
        (§3.13; the WIP stays held); reported when it may vanish in a policy's task."""
        _, source = self._release()
        if source is not None:
            _close(source)
        self._drainer = 0  # owned: the WIP holder, which this is
        if self._policy is not INLINE:
            report_dropped(error, where="a BaseException ended the drain")

    def _stop_cancelled(self, source: Source[T]) -> None:
        """Cancelled: release and close (§3.13). A fused sink is only ever cancelled by its
        own close(), which cancels before it clears: clear it again, so an element appended
        after that clear is not left behind."""
        sink = self._sink
        self._release()
        _close(source)
        if sink is not None:
            sink.sink.clear()

    def _subscriber_failed(self, source: Source[T], error: Exception) -> None:
        """§2.13: a subscriber that raised counts as cancelled; report the error, never signal."""
        self._release()
        _close(source)
        report_dropped(error, rule="2.13", where="on_next raised; subscription cancelled")

    def _terminate(
        self, subscriber: Subscriber[T], source: Source[T], error: Exception | None, n: int = 0
    ) -> None:
        """Count the last pass's ``n``, release everything, deliver one end (§1.6, §1.7)."""
        with self._lock:
            self._cancelled = self._terminated = True  # under _lock; §1.6: counts as cancelled
            self._delivered += n  # under _lock
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
        """§3.13: count as cancelled, drop the subscriber and the source; the WIP stays held,
        so nothing drains again, and no lease is granted or delivers after this."""
        with self._lock:
            subscriber, source = self._subscriber, self._source
            self._cancelled = True  # under _lock
            self._subscriber = None
            self._source = None
            self._sink = None
            if self._lease is not None:
                self._lease.retire()
        return subscriber, source


def _close(source: Source[Any]) -> None:
    try:
        source.close()
    except Exception as exc:
        report_dropped(exc, where="closing a source after cancel or termination")
