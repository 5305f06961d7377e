"""RxPY (reactivex 4.x to 6.x) and Reactive Streams, both directions.

- ``from_observable``: an Observable ignores demand, so an ``overflow`` strategy (RxJava's
  BackpressureStrategy) applies and at most ``buffer_size`` elements are held: ``block``
  (default, lossless) subscribes on a thread the adapter owns and makes the emitting thread
  wait for room, so a cold Observable is paced by demand (and delivered straight from that
  thread under a lease of demand: no lock per element); never on an event-loop thread (a
  clear error instead); ``buffer`` fails with ``OverflowViolation`` naming the bound; ``drop``
  drops the newest, ``latest`` the oldest (counted, passed to ``on_drop``); ``error`` fails
  on an element that arrives without demand.
- ``to_observable``: requests ``prefetch`` and re-requests 75% as the observer takes them.
- ``rx_processor``: an operator chain in a pipeline; upstream is requested in batches, only
  while the output buffer has room for what the chain may make of them.
- Signals reach a subscriber on the thread that emits (or requests); Rx observers on the
  publisher's thread. Cancel disposes the Rx subscription and releases a blocked emitter;
  ``dispose()`` of a ``to_observable`` subscription cancels the publisher.
"""

from __future__ import annotations

import asyncio
import enum
import sys
import threading
from collections import deque
from collections.abc import Callable
from threading import get_ident
from typing import Any, Final, Generic, TypeVar, cast, final

from reactive_streams.adapters._extras import missing_extra

try:
    import reactivex
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra(exc, "reactive_streams.adapters.rx", "rx") from exc
from reactivex import Observable
from reactivex.abc import DisposableBase, ObserverBase, SchedulerBase
from reactivex.disposable import Disposable, SingleAssignmentDisposable
from reactivex.scheduler import CurrentThreadScheduler, NewThreadScheduler, TimeoutScheduler
from reactivex.scheduler.periodicscheduler import PeriodicScheduler
from reactivex.subject import Subject

from reactive_streams._demand import UNBOUNDED, add_cap
from reactive_streams._drain import EMPTY, END, DrainSubscription, Source, _Marker
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._subscription import (
    CANCELLED,
    reject,
    report_dropped,
    require_element,
    require_error,
    require_publisher,
    require_subscriber,
    require_subscription,
)
from reactive_streams.api import Processor, Publisher, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation

__all__ = [
    "ObservablePublisher",
    "Overflow",
    "RxProcessor",
    "from_observable",
    "rx_processor",
    "to_observable",
]

T = TypeVar("T")
R = TypeVar("R")


class Overflow(enum.Enum):
    """What ``from_observable`` does when the Observable emits faster than demand."""

    BLOCK = "block"  # the emitting thread waits for room (lossless)
    BUFFER = "buffer"  # keep up to buffer_size, then fail with OverflowViolation
    DROP = "drop"  # keep up to buffer_size, drop the newest beyond
    LATEST = "latest"  # keep the newest buffer_size, drop the oldest
    ERROR = "error"  # fail on the first element that arrives without demand


class _Stop(Exception):
    """Raised into a synchronous Rx producer to end it: on the adapter's own thread after
    cancel, or by ``rx_processor`` into a chain's subscribe-time producer that overflowed;
    never raised on any other thread."""


_ON_LOOP: Final = (
    "from_observable(overflow='block'): the Observable emits on a thread that runs an asyncio "
    "event loop, and blocking it would stall the loop; use overflow='latest' (or 'drop', "
    "'buffer'), or move the emission off the loop (e.g. ops.observe_on(a thread pool))"
)


_FEEDBACK: Final = (
    "from_observable(overflow='block'): the Observable emitted from inside the subscriber's "
    "on_next (a feedback loop) while the buffer of buffer_size={} elements was full; waiting "
    "for room there would wait for itself; use a larger buffer_size, overflow='latest' (or "
    "'drop', 'buffer'), or emit from another thread"
)


def _nothing() -> None:
    pass


def _dispose(disposable: DisposableBase | None) -> None:
    if disposable is not None:
        try:
            disposable.dispose()
        except Exception as exc:
            report_dropped(exc, where="disposing an Rx subscription")


class _DirectObserver(Generic[T]):
    """Rx's ``AutoDetachObserver`` less its frame on each element: ``on_next`` is the
    caller's callable itself, an attribute the Observable looks up at each call. The
    terminal signals do what Rx's do: the first one is passed on, later ones are ignored,
    and the Rx subscription is disposed after it. What Rx's observer checks per element is
    left to the callable, which must ignore an element after the end (ours do: the source
    has ended), and to one swap: ``dispose()`` (our cancel or failure) points ``on_next`` at
    ``on_next_disposed``, the source's regular path, which ends the lease, so a producer
    that ignores disposal delivers nothing more and is unwound (one that kept
    ``observer.on_next`` in a variable may deliver one element more: the lease's bound).
    ``is_stopped`` and ``fail`` are Rx's observer's too (a subscribe function may read it)."""

    __slots__ = (
        "_on_completed",
        "_on_error",
        "_on_next_disposed",
        "is_stopped",
        "on_next",
        "subscription",
    )

    def __init__(
        self,
        on_next: Callable[[T], None],
        on_error: Callable[[Exception], None],
        on_completed: Callable[[], None],
        on_next_disposed: Callable[[T], None],
    ) -> None:
        self.on_next = on_next
        self._on_error = on_error
        self._on_completed = on_completed
        self._on_next_disposed = on_next_disposed
        self.is_stopped = False
        self.subscription = SingleAssignmentDisposable()

    def on_error(self, error: Exception) -> None:
        if self.is_stopped:
            return
        self.is_stopped = True
        try:
            self._on_error(error)
        finally:
            self.subscription.dispose()

    def on_completed(self) -> None:
        if self.is_stopped:
            return
        self.is_stopped = True
        try:
            self._on_completed()
        finally:
            self.subscription.dispose()

    def fail(self, error: Exception) -> bool:
        """Rx's: an error raised by the subscribe call, signalled unless the stream ended."""
        if self.is_stopped:
            return False
        self.is_stopped = True
        self._on_error(error)
        return True

    def dispose(self) -> None:
        self.is_stopped = True
        self.on_next = self._on_next_disposed
        self.subscription.dispose()


ObserverBase.register(_DirectObserver)  # an Observer to whoever checks: it is one


def _rx_subscribe() -> Callable[..., Any] | None:
    """Rx's own ``Observable.subscribe``; None if it was replaced (patched to trace, say)
    before this module was imported: then every Observable is subscribed through it."""
    subscribe = Observable.subscribe
    code = getattr(subscribe, "__code__", None)
    module = sys.modules.get(Observable.__module__)
    if code is None or code.co_filename != getattr(module, "__file__", None):
        return None
    return subscribe


_RX_SUBSCRIBE: Final = _rx_subscribe()


def _subscribe_direct(
    observable: Observable[T],
    on_next: Callable[[T], None],
    on_error: Callable[[Exception], None],
    on_completed: Callable[[], None],
    on_next_disposed: Callable[[T], None],
    scheduler: SchedulerBase | None,
) -> DisposableBase:
    """``observable.subscribe(on_next, on_error, on_completed, scheduler=scheduler)``, with
    Rx calling ``on_next`` directly: one Python frame less per element (the rx benchmark's
    ``block`` went from 0.48x to 0.56x of RxPY's own ``subscribe`` with it). Called inside
    Rx's trampoline (see ``_ObservableSource._subscribe``), where ``subscribe`` sets none up.
    An Observable with a ``subscribe`` of its own (its class's, its instance's, or Rx's
    patched) is subscribed through it."""
    subscribe = getattr(observable.subscribe, "__func__", None)
    if _RX_SUBSCRIBE is None or subscribe is not _RX_SUBSCRIBE:
        return observable.subscribe(on_next, on_error, on_completed, scheduler=scheduler)
    observer = _DirectObserver(on_next, on_error, on_completed, on_next_disposed)
    try:
        subscribed: Any = observable._subscribe_core(cast(ObserverBase[T], observer), scheduler)
    except _Stop:
        raise
    except Exception as exc:
        if not observer.fail(exc):  # §1.4; once ended, the caller reports it (§1.7)
            raise
    else:
        if not isinstance(subscribed, DisposableBase) and not hasattr(subscribed, "dispose"):
            subscribed = Disposable(subscribed)  # a function, or None, as Rx accepts
        observer.subscription.disposable = subscribed
    return Disposable(observer.dispose)


class _BufferSource(Source[T]):
    """A deque the Rx side fills and the drain empties (fused: the drain pops it directly).

    ``_pushing`` orders every append against the end: ``finish`` and ``close`` set ``_done``
    under it, and a push re-checks ``_done`` under it. So an element is either in the buffer
    before the end is recorded (delivered before the terminal signal) or dropped (it came
    after the end, §1.7, or after a cancel, §3.13), even when two threads feed one Subject.
    """

    __slots__ = (
        "_done",
        "_error",
        "_items",
        "_pushing",
        "_wake",
        "queue",
    )

    until_replenish = 1  # consumed() after each element

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._pushing = threading.Lock()
        self.queue: deque[T] | None = self._items
        self._done = False
        self._error: Exception | None = None
        self._wake: Callable[[], None] = _nothing

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def push(self, element: T) -> None:
        items = self._items
        # Wake only on empty -> non-empty: the drain stops only when it has seen the buffer
        # empty (the push that refills it wakes it) or the demand met (the next request
        # drains); a push behind a slow subscriber then costs no drain pass. Rx's on_next
        # calls should be serial, but two threads feeding one Subject at once is a common
        # mistake: under the lock, exactly one of two racing pushes sees the buffer go from
        # empty to one element, so neither can leave the other's element stranded.
        with self._pushing:
            if self._done:
                return  # after the end (§1.7) or a cancel (§3.13): never held
            items.append(element)
            first = len(items) == 1
        if first:
            self._wake()

    def finish(self, error: Exception | None) -> None:
        with self._pushing:
            ended = self._done
            if not ended:
                self._error = error
                self._done = True  # set after the error: a poll that sees _done sees _error
        if ended:
            if error is not None:
                report_dropped(error, rule="1.7", where="an Rx error after the end")
            return
        self._wake()

    def _discard(self) -> None:
        """Close: record the end and drop the buffer and the error, ordered against pushes
        (§3.13). The error goes too: raised by ``poll``, its traceback holds the drain's
        frames, and through them the subscriber, for as long as this source lives (an
        ``rx_processor`` keeps it). The elements are let go after the lock: a finalizer of
        theirs never runs under it."""
        with self._pushing:
            self._done = True
            dropped = self._items.copy()
            self._items.clear()
            self._error = None  # the subscriber has had it, or never will (cancelled)
        dropped.clear()

    def poll(self) -> T | _Marker:
        done = self._done  # read before the queue: every push happened before _done was set
        if self._items:
            return self._items.popleft()
        if done:
            if self._error is not None:
                raise self._error  # §1.4, after every buffered element
            return END
        return EMPTY

    def at_end(self) -> bool:
        return self._done and not self._items


@final
class _ObservableSource(_BufferSource[T]):
    """The Rx observer and the drain's source of one ``from_observable`` subscription.

    Rx calls ``on_next`` serially (the Observable contract); the drain calls ``poll`` /
    ``consumed`` / ``close``. ``_cond`` guards the disposable and the blocked emitter's wait.

    ``block`` on the adapter's own thread (a cold source producing synchronously there) uses
    the drain's emitter lease (:meth:`DrainSubscription.lease`): Rx's ``on_next`` is the
    drain's emitter, which hands each element straight to the subscriber while this thread
    holds a lease with credit, with no lock per element; ``on_next`` below is its fallback
    (the regular path), and takes a lease (one lock) on the owned thread when the buffer is
    empty and there is demand. The loop check of ``block`` runs there too: the owned thread
    runs no event loop of ours, so the check per lease stands for the elements it covers,
    except those of a producer that moves onto a loop thread while the owned thread still
    subscribes: they go through under the lease until its credit runs out, then fail (no
    loop ever waits; a check per element would cost what the lease saves).
    The lease is returned before the emitter waits for room and when Rx ends the stream,
    and revoked when the owned thread's subscribe returns (the Observable then emits, if at
    all, on threads that are not ours: never under a new lease). An emission that moves to
    another thread meanwhile goes on under the lease (the calls are serial: the lease is
    the producer's, not a thread's), until that revocation.
    While a lease is held between two elements, a ``request`` or ``cancel`` from another
    thread takes effect once the next element is delivered (§3.12, §3.13 say "eventually"),
    except that ``cancel`` disposes the Rx subscription at once (``interrupt``), so a source
    that waits between two elements for its next one or for disposal (a timer, a socket
    read that dispose closes) stops without delivering it. Hot sources (a
    Subject fed from user threads) keep the regular path: a lease taken and returned around
    each push measured about 1.5x faster there, but on a user's thread it would let a common
    mistake (``on_next`` from two threads at once) reorder elements, which the regular path's
    queue and drain keep in order. (The same mistake while the owned thread holds its lease,
    in its subscribe, overlaps nothing either, but may reorder those elements, and fail the
    stream as a feedback loop if the buffer fills meanwhile: see ``lease``.)
    """

    __slots__ = (
        "_accepted",
        "_buffer_size",
        "_cond",
        "_disposable",
        "_emit",
        "_ended",
        "_interrupted",
        "_observable",
        "_on_drop",
        "_owner",
        "_publisher",
        "_strategy",
        "subscription",
    )

    def __init__(self, publisher: ObservablePublisher[T]) -> None:
        super().__init__()
        self._publisher = publisher
        self._observable = publisher._observable
        self._strategy = publisher._strategy
        if self._strategy is Overflow.LATEST:  # the producer evicts too: the drain pops
            self.queue = None  # through poll(), under the lock the eviction takes
        self._accepted = 0  # overflow='error': elements let in, against the total requested
        self._buffer_size = publisher._buffer_size
        self._on_drop = publisher._on_drop
        self._cond = threading.Condition()
        self._interrupted = False  # cancelled: an emitter waiting for room stops waiting
        self._ended = False  # the Observable signalled its end (an element after it is dropped)
        self._disposable: DisposableBase | None = None
        self._owner = 0  # the id of the thread ``block`` owns, while it subscribes; else 0
        self._emit: Callable[[T], None] = self.on_next  # what Rx calls (see _subscribe_now)
        self.subscription: DrainSubscription[T] | None = None

    # -- Rx observer ------------------------------------------------------------------------

    def on_next(self, element: T) -> None:
        subscription = self.subscription
        if subscription is not None:
            subscription.release_lease()  # this path never runs under a lease
        if self._done:
            if not self._ended:  # cancelled, or failed here: unwind a producer that ignores
                self._stop_if_owned()  # dispose(); after its own end, drop it as Rx does
            return
        if element is None:  # legal in Rx, never an element here: fail, don't raise into Rx
            self._fail(
                TypeError(
                    "§2.13: the Observable emitted None, which is never an element of a "
                    "Reactive Stream; map it to a sentinel first (ops.map)"
                )
            )
            return
        queue = self._items
        strategy = self._strategy
        if strategy is Overflow.BLOCK:
            if asyncio._get_running_loop() is not None:  # never wait on a running loop
                self._fail(RuntimeError(_ON_LOOP))
                return
            if (
                not queue
                and self._owner == get_ident()
                and subscription is not None
                and subscription.lease()
            ):
                self._emit(element)  # under the lease: straight to the subscriber
                return
            if len(queue) >= self._buffer_size:
                if subscription is not None and subscription.delivering_here():
                    self._fail(RuntimeError(_FEEDBACK.format(self._buffer_size)))
                    return  # the subscriber that would make room is up this thread's stack
                if not self._wait_for_room():
                    self._stop_if_owned()  # cancelled while waiting
                    return
        elif strategy is Overflow.ERROR:
            subscription = self.subscription
            requested = subscription.requested if subscription is not None else 0
            if self._accepted >= requested:  # §1.1: no outstanding demand for this element
                self._fail(
                    OverflowViolation(
                        "§1.1: from_observable(overflow='error'): an element arrived without "
                        "demand; use overflow='buffer', 'drop', 'latest' or 'block'"
                    )
                )
                return
            if len(queue) >= self._buffer_size:
                self._fail(self._overflow())
                return
            self._accepted += 1  # serial (Rx's contract); an element after the end is
            # dropped by push, which only makes the count stricter
        elif strategy is Overflow.LATEST:
            self._push_latest(element)
            return
        elif len(queue) >= self._buffer_size:
            if strategy is Overflow.BUFFER:
                self._fail(self._overflow())
                return
            self._dropped(element)  # DROP: the newest gives way
            return
        self.push(element)

    def _push_latest(self, element: T) -> None:
        """LATEST: the oldest gives way when full; decided under the lock the drain's poll
        takes, so an element is never evicted while the drain is making room."""
        items = self._items
        oldest: T | None = None
        with self._pushing:
            if self._done:
                return
            if len(items) >= self._buffer_size:
                oldest = items.popleft()
            items.append(element)
            first = len(items) == 1
        if oldest is not None:
            self._dropped(oldest)
        if first:
            self._wake()

    def on_error(self, error: Exception) -> None:
        if isinstance(error, _Stop):
            return  # our own unwinding, routed to on_error by an Rx source
        require_error(error)
        self._ended = True
        self.finish(error)
        self._end_lease()  # §1.4: the drain delivers it, after the buffered elements

    def on_completed(self) -> None:
        self._ended = True
        self.finish(None)
        self._end_lease()

    def _end_lease(self) -> None:
        subscription = self.subscription
        if subscription is not None:
            subscription.release_lease()

    def _wait_for_room(self) -> bool:
        """Block the emitting thread until the buffer has room; False once cancelled. Two
        threads may wait at once (a Subject fed from two threads): ``consumed`` wakes all."""
        queue = self._items
        with self._cond:
            while len(queue) >= self._buffer_size and not (self._done or self._interrupted):
                self._cond.wait()  # consumed(), interrupt() or close() notifies
            return not (self._done or self._interrupted)

    def _overflow(self) -> OverflowViolation:
        return OverflowViolation(
            f"§1.1: from_observable(overflow={self._strategy.value!r}): the buffer of "
            f"buffer_size={self._buffer_size} elements is full: the Observable emits faster "
            "than the subscriber requests"
        )

    def _stop_if_owned(self) -> None:
        if self._owner == get_ident():
            raise _Stop  # our own thread's stack: unwind a producer that ignores dispose()

    def _dropped(self, element: T) -> None:
        self._publisher._count_drop()
        if self._on_drop is not None:
            try:
                self._on_drop(element)
            except Exception as exc:
                report_dropped(exc, where="from_observable on_drop callback")

    def _fail(self, error: Exception) -> None:
        self.finish(error)
        self._release()

    # -- subscribing --------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to the Observable: on a thread of its own for ``block``, else right here."""
        if self._strategy is Overflow.BLOCK:
            threading.Thread(target=self._run_owned, name="rs-from-observable", daemon=True).start()
        else:
            self._subscribe()

    def _run_owned(self) -> None:
        self._owner = get_ident()
        try:
            self._subscribe()
        except _Stop:
            pass  # cancelled while a synchronous producer was emitting: the thread ends
        finally:
            self._owner = 0  # later emissions come from threads that are not ours
            subscription = self.subscription  # so they never find a lease held by a thread
            if subscription is not None:  # that left; safe while one is delivering under it
                subscription.revoke_lease()

    def _subscribe(self) -> None:
        if self._done:
            return  # cancelled (or failed) before subscribing: never subscribe
        trampoline = CurrentThreadScheduler.singleton()
        if trampoline.schedule_required():
            # As Rx itself does: a cold source's emission is queued on this thread's trampoline
            # and runs after subscribe() returned its disposable, so cancel can dispose it.
            trampoline.schedule(self._subscribe_now)
        else:
            # Inside an Rx callback on this thread: a cold source would queue its emission on
            # the trampoline running that callback, so it would start only once the callback
            # returned, and a consumer waiting here (to_iterator) would wait for ever. The
            # emission gets a thread of its own instead, as reactivex.run() does; a hot source
            # (a Subject) ignores the scheduler and is subscribed right here all the same.
            self._subscribe_now(NewThreadScheduler())

    def _subscribe_now(self, scheduler: SchedulerBase | None = None, _state: Any = None) -> None:
        subscription = self.subscription
        if self._strategy is Overflow.BLOCK and subscription is not None:
            self._emit = subscription.emitter(self.on_next)  # the lease's lock-free path
        if isinstance(scheduler, CurrentThreadScheduler):
            scheduler = None  # the trampoline that runs this: the source's own default
        try:
            disposable = _subscribe_direct(
                self._observable,
                self._emit,
                self.on_error,
                self.on_completed,
                self.on_next,  # after a dispose: the same callable but for block's lease;
                scheduler,  # it ignores what follows, close() and _fail() setting _done first
            )
        except _Stop:
            raise
        except Exception as exc:
            self.finish(exc)  # §1.4
            return
        with self._cond:
            keep = not (self._done or self._interrupted)
            if keep:
                self._disposable = disposable
        if not keep:  # cancelled, failed or completed while subscribing
            _dispose(disposable)

    # -- Source -------------------------------------------------------------------------------

    def poll(self) -> T | _Marker:
        if self._strategy is Overflow.LATEST:
            with self._pushing:  # never while _push_latest decides what to evict
                return super().poll()
        value = super().poll()
        if value is not EMPTY and value is not END:
            self.consumed(1)
        return value

    def consumed(self, n: int) -> None:
        # An emitter waits only after seeing the buffer full (under _cond), so the pop that
        # made room leaves len + n >= buffer_size: only that pop needs the lock and the
        # notify (taking _cond orders it after the emitter's wait()). All waiters wake: with
        # two emitters, the one that pushes first refills the buffer, the other waits again
        # and is woken by the next such pop.
        if self._strategy is Overflow.BLOCK and len(self._items) + n >= self._buffer_size:
            with self._cond:
                self._cond.notify_all()  # room again: release the waiting emitters

    def interrupt(self) -> None:
        # Cancelled while the drain or the emitter lease is busy, or with the clean-up left
        # to a later cancel (publish_on's): dispose now (Rx's dispose is thread-safe), so a
        # source that waits for disposal stops, and release an emitter waiting for room;
        # close() follows, from the drain.
        with self._cond:
            self._interrupted = True
            self._cond.notify_all()
        self._release()

    def close(self) -> None:
        self._discard()  # §3.13: a push racing the cancel is dropped, not left behind
        with self._cond:
            self._cond.notify_all()  # a blocked emitter wakes, sees _done and stops
        self._release()

    def _release(self) -> None:
        with self._cond:
            disposable, self._disposable = self._disposable, None
        _dispose(disposable)


@final
class ObservablePublisher(Generic[T]):
    """A Publisher over an RxPY Observable, with an explicit overflow strategy.

    Each Subscriber subscribes to the Observable afresh (a cold Observable replays, a hot one
    shares). Rules: §1.1 (never more than requested: the drain), §1.4 (Rx ``on_error`` and
    overflow become ``on_error`` after the buffered elements), §1.9, §2.13 (``None``
    elements), §3.13 (cancel disposes the Rx subscription and drops the buffer).

    Attributes:
        dropped: how many elements ``drop`` / ``latest`` discarded, over all subscribers.
    """

    def __init__(
        self,
        observable: Observable[T],
        overflow: Overflow,
        buffer_size: int,
        on_drop: Callable[[T], None] | None,
    ) -> None:
        self._observable = observable
        self._strategy = overflow
        self._buffer_size = buffer_size
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self.dropped = 0

    @property
    def overflow(self) -> Overflow:
        return self._strategy

    @property
    def buffer_size(self) -> int:
        return self._buffer_size

    def _count_drop(self) -> None:
        with self._lock:
            self.dropped += 1

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        source: _ObservableSource[T] = _ObservableSource(self)
        subscription = DrainSubscription(subscriber, source)
        source.subscription = subscription
        subscription.start()
        source.start()


def from_observable(
    observable: Observable[T],
    *,
    overflow: Overflow | str = Overflow.BLOCK,
    buffer_size: int = 256,
    on_drop: Callable[[T], None] | None = None,
) -> ObservablePublisher[T]:
    """Wrap an RxPY Observable as a compliant Publisher.

    ``block`` subscribes on a thread it owns (for a cold Observable that thread produces;
    for a hot one it ends once subscribed) and makes whichever thread emits wait while
    ``buffer_size`` elements are waiting for demand; an emission on a thread running an
    asyncio loop fails the stream with a ``RuntimeError`` that says so, whether or not the
    buffer is full (the mistake shows in tests, not under load). While the subscriber has
    demand, a cold Observable's elements go from the owned thread straight to ``on_next``,
    under a credit of demand taken with one lock (an emitter lease); a ``request`` or
    ``cancel`` from another thread then takes effect at the next element. The other
    strategies subscribe on the caller's thread and never wait (inside an Rx callback, a
    cold source gets a thread of its own to emit on, as ``reactivex.run()`` does).

    Args:
        observable: any ``reactivex.Observable``.
        overflow: an :class:`Overflow` or its name: ``"block"`` (default; lossless),
            ``"buffer"``, ``"drop"``, ``"latest"`` or ``"error"``.
        buffer_size: the most elements held between the Observable and the subscriber.
        on_drop: called with each element ``drop`` / ``latest`` discards.

    Returns:
        An :class:`ObservablePublisher` (``.dropped`` counts discarded elements).

    Raises:
        TypeError: ``observable`` is not an Observable, or ``on_drop`` is not callable.
        ValueError: an unknown ``overflow``, a ``buffer_size`` that is not a positive int,
            or an ``on_drop`` given to a strategy that never drops.

    Example:
        >>> from reactive_streams.adapters.iterables import to_iterator
        >>> list(to_iterator(from_observable(reactivex.range(3))))
        [0, 1, 2]
    """
    if not isinstance(observable, Observable):
        raise TypeError(f"from_observable() requires a reactivex.Observable, got {observable!r}")
    try:
        strategy = Overflow(overflow)
    except ValueError:
        choices = ", ".join(repr(o.value) for o in Overflow)
        raise ValueError(f"overflow must be one of {choices}, got {overflow!r}") from None
    if type(buffer_size) is not int or buffer_size <= 0:
        raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
    if on_drop is not None and not callable(on_drop):
        raise TypeError(f"on_drop must be a callable or None, got {type(on_drop).__name__}")
    if on_drop is not None and strategy not in (Overflow.DROP, Overflow.LATEST):
        raise ValueError(
            f"on_drop is called only by overflow='drop' or 'latest' (they discard elements); "
            f"overflow={strategy.value!r} never does"
        )
    return ObservablePublisher(observable, strategy, buffer_size, on_drop)


# -- to_observable ---------------------------------------------------------------------------


@final
class _ObserverSubscriber(Generic[T]):
    """Delivers the drain's signals to an Rx observer (``on_complete`` -> ``on_completed``).

    An observer whose ``on_next`` raises ends the stream with that error, as Rx's own sources
    do (``reactivex.from_iterable`` catches it and calls ``on_error``): the subscription is
    cancelled first (§3.12), so nothing else reaches the observer; the publisher's own
    ``cancel`` follows once that ``on_next`` has returned."""

    __slots__ = ("_observer", "_subscription")

    def __init__(self, observer: ObserverBase[T]) -> None:
        self._observer = observer
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        subscription.request(UNBOUNDED)  # the window is the PrefetchQueue's

    def on_next(self, element: T) -> None:
        try:
            self._observer.on_next(element)
        except Exception as exc:
            assert self._subscription is not None  # on_next comes after on_subscribe (§1.9)
            self._subscription.cancel()  # §3.12: nothing more reaches the observer
            self._observer.on_error(exc)

    def on_error(self, error: Exception) -> None:
        self._observer.on_error(error)

    def on_complete(self) -> None:
        self._observer.on_completed()


def _observer_queue(
    observer: ObserverBase[T], prefetch: int
) -> tuple[PrefetchQueue[T], DrainSubscription[T]]:
    """The subscriber inside ``to_observable``: a prefetch window drained into ``observer``."""
    queue: PrefetchQueue[T] = PrefetchQueue(prefetch)
    subscription = DrainSubscription(_ObserverSubscriber(observer), queue)
    subscription.start()
    return queue, subscription


def to_observable(publisher: Publisher[T], *, prefetch: int = 256) -> Observable[T]:
    """An RxPY Observable over any Publisher, at most ``prefetch`` requested ahead.

    Each Rx subscription subscribes to ``publisher`` afresh, through a window that requests
    ``prefetch`` and re-requests 75% of it as the observer returns from ``on_next`` (a slow
    observer slows the publisher). The publisher is subscribed on the subscribe call's
    scheduler (by default this thread's trampoline, after ``subscribe`` has its disposable,
    so ``ops.take(n)`` can stop even a synchronous infinite publisher). Elements reach the
    observer on the thread the publisher signals on; ``dispose()`` cancels (§3.12).

    Example:
        >>> from reactive_streams.adapters.iterables import from_iterable
        >>> to_observable(from_iterable("ab")).subscribe(print)  # doctest: +ELLIPSIS
        a
        b
        <...>
    """
    given: object = publisher  # a user without a type checker may pass an Observable
    if isinstance(given, Observable):
        raise TypeError(
            "to_observable() requires a Publisher, got an Observable: it is one already "
            "(from_observable(observable) makes a Publisher of it)"
        )
    require_publisher(publisher, "to_observable()")
    PrefetchQueue[T](prefetch)  # validates prefetch now, not at subscribe

    def subscribe(
        observer: ObserverBase[T], scheduler: SchedulerBase | None = None
    ) -> DisposableBase:
        queue, subscription = _observer_queue(observer, prefetch)

        def connect(_scheduler: Any = None, _state: Any = None) -> None:
            if subscription.is_cancelled:
                return  # disposed before the publisher was subscribed
            try:
                publisher.subscribe(queue)
            except Exception as exc:  # after on_subscribe, maybe: cancel what it handed over
                queue.fail_upstream(exc)  # (§3.13), then the observer hears the error

        (scheduler or CurrentThreadScheduler.singleton()).schedule(connect)
        return Disposable(subscription.cancel)

    return reactivex.create(subscribe)


# -- rx_processor ------------------------------------------------------------------------------


class _ChainScheduler(CurrentThreadScheduler, PeriodicScheduler):
    """The default scheduler of one processor's chain: a trampoline per thread of its own.

    Work an operator schedules to run now (``reactivex.of`` inside ``flat_map``, the prefix of
    ``start_with``) then runs inside the input's ``on_next``, even when another Rx trampoline
    is running on this thread (an upstream that is an Rx source, or another processor): the
    thread's shared trampoline would queue it until that one's current action returned,
    after ``on_next``. Work due later, and periodic work (``interval``, ``sample``), goes to
    the ``TimeoutScheduler``, where Rx's timed operators put it by default, and never blocks
    the input's thread.
    """

    def schedule_periodic(self, period: Any, action: Any, state: Any = None) -> DisposableBase:
        return TimeoutScheduler.singleton().schedule_periodic(period, action, state)

    def schedule_absolute(self, duetime: Any, action: Any, state: Any = None) -> DisposableBase:
        if self.to_datetime(duetime) > self.now:
            return TimeoutScheduler.singleton().schedule_absolute(duetime, action, state)
        return super().schedule_absolute(duetime, action, state)


@final
class RxProcessor(Generic[T, R]):
    """A Processor running an RxPY operator chain with demand kept on both sides.

    Demand policy (upstream side). Outputs wait in a buffer of ``buffer_size`` that the
    downstream subscriber drains through the drain loop. The processor tracks ``E``, the most
    outputs one input has produced so far during its ``on_next`` (``map``, ``filter`` and
    ``buffer_with_count`` give 1, ``flat_map(x -> k items)`` gives k; the first input is
    requested alone, to measure it), and reserves ``E`` slots per outstanding input: it
    requests only ``(buffer_size - queued) // E - outstanding`` inputs, in batches of at
    least 75% of ``buffer_size // E`` (fewer ``request`` calls). With nothing queued and
    nothing outstanding it always asks for one input, so an input that expands into more
    than ``buffer_size`` still makes progress. Hence the buffer never exceeds ``buffer_size``,
    except when an input expands into more than any before it (by at most that surprise times
    the inputs outstanding; the policy then adapts) or into more than ``buffer_size`` on its
    own. A batching operator also holds its partial batch. Operators that shift elements in
    time (``delay``, ``observe_on``, time windows, inner Observables that emit later) would
    hold elements outside this accounting, in their own Rx buffers: the first output that
    comes outside an input's signals fails the stream with a ``RuntimeError`` naming the way
    out (``from_observable(..., overflow=...)``). Operators that emit when their input ends
    (``take_last``, ``to_list``, ``concat``, ``catch``, ``default_if_empty``) may fill the
    buffer up to ``buffer_size`` beyond the subscriber's demand; past that the stream fails
    with ``OverflowViolation`` (an endless fallback would otherwise hold upstream's thread
    and grow the buffer for ever); so do operators that emit while the chain is subscribed
    (``start_with``, ``merge`` with a cold Observable), before any subscriber. Work an
    operator schedules at once runs on the chain's own trampoline (``_ChainScheduler``), so
    it emits inside the input's signal; an operator that subscribes to the input late
    (``subscribe_on``) gets every element: nothing is requested before the chain listens.
    Operators whose outputs are hot Observables (``window*``,
    ``group_by``) must be flattened inside the chain
    (``ops.flat_map(lambda w: w.pipe(ops.to_list()))``): a window waiting in the buffer
    misses the elements emitted into it meanwhile. The chain is fed
    once: an operator that subscribes to its input again (``repeat``, ``retry``) fails the
    stream with a clear error (repeat or retry the upstream Publisher instead).

    Unicast: one Subscriber; another is rejected with ``on_subscribe`` + ``on_error``
    (§1.11 allows it). Signals reach the subscriber on the thread that delivers upstream's
    ``on_next`` or calls ``request``. Errors from the chain or upstream arrive after the
    outputs already buffered (§1.4). The chain ending by itself (``take``, an operator error)
    cancels upstream at once (§3.12); downstream cancel cancels upstream and disposes the
    chain. Rules: §1.1, §1.3, §1.9, §2.5, §2.7, §2.13, §3.13 (with the drain).
    """

    def __init__(self, operators: tuple[Callable[[Any], Any], ...], buffer_size: int) -> None:
        if type(buffer_size) is not int or buffer_size <= 0:
            raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
        for position, operator in enumerate(operators):
            if not callable(operator):
                raise TypeError(
                    f"rx_processor(): operator {position} must be an Rx operator (ops.map(f), "
                    f"...), got {type(operator).__name__}"
                )
        self._buffer_size = buffer_size
        self._lock = threading.Lock()
        self._outstanding = 0  # inputs requested from upstream and not yet received
        self._expansion = 1  # E: the most outputs one input produced during its on_next
        self._measured = False  # E is known once the first input went through the chain
        self._upstream: Subscription | None = None
        self._upstream_done = False
        self._subscribed = False
        self._source: _ProcessorSource[R] = _ProcessorSource(self)
        self._subject: Subject[T] = Subject()
        self._fed = False  # the chain subscribed to its input (once: see _feed)
        self._listening = False  # ... and now hears it: nothing is requested before
        self._replenishing = False  # a thread is passing requests upstream (§2.7)
        self._chain: DisposableBase = Disposable()
        chain: Observable[Any] = reactivex.create(self._feed)
        for position, operator in enumerate(operators):  # as pipe() does, naming the culprit
            try:
                chain = operator(chain)
            except Exception as exc:
                raise TypeError(
                    f"rx_processor(): operator {position} ({operator!r}) raised {exc!r} when "
                    "applied to the chain's Observable: pass Rx operators, ops.map(f), not a "
                    "function of the elements"
                ) from exc
            if not isinstance(chain, Observable):
                raise TypeError(
                    f"rx_processor(): operator {position} ({operator!r}) made "
                    f"{type(chain).__name__}, not an Observable: pass operators applied to "
                    "their arguments, ops.map(f), not ops.map nor a function of the elements"
                )
        # Outputs while the chain is being subscribed (start_with, merge with a cold
        # Observable) are paced by no request: at most buffer_size of them (see push_checked).
        self._subscribing = True
        self._feeding = get_ident()
        try:
            self._chain = chain.subscribe(
                on_next=self._source.push_checked,
                on_error=self._chain_ended,
                on_completed=lambda: self._chain_ended(None),
                scheduler=_ChainScheduler(),
            )
        except _Stop:
            pass  # an endless subscribe-time producer, unwound (the stream has failed)
        finally:
            self._feeding = 0
            self._subscribing = False
        if self._source._done:
            _dispose(self._chain)  # it ended while subscribing

    @property
    def buffer_size(self) -> int:
        return self._buffer_size

    def _feed(self, observer: ObserverBase[T], _scheduler: Any = None) -> DisposableBase:
        """The chain's input: upstream's elements, once. A second subscription (``repeat``,
        ``retry``) would meet a Subject that has ended and end again at once, for ever,
        inside upstream's on_complete: the stream fails instead, from outside the chain."""
        with self._lock:
            again, self._fed = self._fed, True
        if self._source._done:  # cancelled before a late subscription (subscribe_on)
            return Disposable()
        if not again:
            # An operator may subscribe late (subscribe_on, delay_subscription): the Subject
            # is hot, so upstream is asked for elements only once the chain hears them.
            disposable = self._subject.subscribe(observer)
            self._listening = True
            self._replenish()
            return disposable
        self._chain_ended(
            RuntimeError(
                "rx_processor: an operator subscribed to the chain's input a second time "
                "(ops.repeat, ops.retry, ...); the upstream Publisher feeds the chain once: "
                "repeat or retry the Publisher itself"
            )
        )
        return Disposable()

    # -- upstream side --------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
        if duplicate:  # §2.5, or cancelled before upstream subscribed
            subscription.cancel()
            return
        self._replenish()

    def on_next(self, element: T) -> None:
        require_element(element)  # §2.13
        source = self._source
        if source._done:
            return  # the stream is over: an element in flight after our cancel (§3.12)
        before = source.produced
        self._feeding = get_ident()  # an output on another thread, or after this returns,
        try:  # comes from an operator that shifts it in time: see _ProcessorSource
            self._subject.on_next(element)
        except Exception as exc:  # an operator raised outside Rx's own error handling
            if not source._done:  # (else: the input was released meanwhile, see _close)
                self._chain_ended(exc)
            return
        finally:
            self._feeding = 0
        made = source.produced - before  # outputs of this input (a synchronous chain)
        with self._lock:
            if self._outstanding > 0:
                self._outstanding -= 1
            self._measured = True
            if made > self._expansion:
                self._expansion = made
        self._replenish()

    def on_error(self, error: Exception) -> None:
        require_error(error)  # §2.13
        self._upstream_done = True  # §2.3/§2.4: never call the subscription again
        if self._source._done:  # after our cancel it may race in (§1.8); never lose it
            report_dropped(error, rule="1.8", where="rx_processor: on_error after the end")
            return
        self._input(self._subject.on_error, error)  # §4.1: through the chain (catch may
        # emit here)

    def on_complete(self) -> None:
        self._upstream_done = True
        if not self._source._done:
            self._input(self._subject.on_completed)  # take_last, to_list, concat emit here

    def _input(self, signal: Callable[..., None], *args: Any) -> None:
        """An upstream terminal signal into the chain, whose outputs count as the input's."""
        self._feeding = get_ident()
        try:
            signal(*args)
        except Exception as exc:
            # An operator raised outside Rx's own error handling: fail the stream, as on_next
            # does, never raise into upstream (§2.13). Once the stream is over, the input was
            # released meanwhile (see _close), and this is its refusal: nothing to tell.
            if not self._source._done:
                self._chain_ended(exc)
        finally:
            self._feeding = 0

    def _chain_ended(self, error: Exception | None) -> None:
        if isinstance(error, _Stop):
            return  # our own unwinding (push_checked), routed to on_error by an Rx source
        self._source.finish(error)
        self._cancel_upstream()  # no-op when upstream's own end caused it

    def _room(self) -> int:
        """How many inputs to request now (called under ``_lock``); see the class docstring."""
        expansion = self._expansion
        queued = len(self._source._items)
        outstanding = self._outstanding
        if not self._measured:
            return 0 if outstanding else 1  # one input first, to measure E
        free = (self._buffer_size - queued) // expansion - outstanding
        if outstanding == 0 and queued == 0:
            return free if free > 0 else 1  # progress, even for a huge expansion
        window = max(1, self._buffer_size // expansion)
        return free if free >= window - window // 4 else 0

    def _replenish(self) -> None:
        """Request what fits in the output buffer (§1.1 bound kept downstream).

        Called from upstream's ``on_next`` and from the subscriber's drain, maybe on two
        threads: one of them requests at a time (§2.7), and looks again after each request
        until nothing fits, so what another thread freed meanwhile is requested too. A
        call made while a request is in progress (another thread's, or this thread's own,
        from an ``on_next`` inside ``request``) leaves it to that loop."""
        with self._lock:
            if self._replenishing:
                return
            self._replenishing = True
        n = 0
        try:
            while True:
                with self._lock:
                    upstream = self._upstream
                    n = self._room() if self._requestable(upstream) else 0
                    if n <= 0:
                        self._replenishing = False
                        return
                    self._outstanding += n
                upstream.request(n)  # type: ignore[union-attr]  # _requestable: not None
        except Exception as exc:  # §3.16 broken: request must return normally. The upstream
            failure = RuntimeError(f"§3.16: the upstream's request({n}) raised {exc!r}")
            failure.__cause__ = exc  # has failed: it is cancelled, and its error goes
            self._detach_upstream()  # through the chain as its on_error would, after the
            self.on_error(failure)  # outputs already buffered (as PrefetchQueue does)
        finally:
            if n > 0:  # request raised: whatever it recorded is not outstanding any more
                with self._lock:
                    self._outstanding = max(0, self._outstanding - n)
                    self._replenishing = False

    def _requestable(self, upstream: Subscription | None) -> bool:
        """Under ``_lock``: upstream may be asked for more now."""
        return (
            upstream is not None
            and upstream is not CANCELLED
            and self._listening
            and not self._upstream_done
            and not self._source._done
        )

    def _cancel_upstream(self) -> None:
        self._detach_upstream()
        self._chain.dispose()

    def _detach_upstream(self) -> None:
        with self._lock:
            upstream, self._upstream = self._upstream, CANCELLED
        if upstream is not None and upstream is not CANCELLED and not self._upstream_done:
            upstream.cancel()  # §3.12, but never after upstream terminated (§2.3)

    def _close(self) -> None:
        """The stream is over (cancelled or ended): cancel upstream, dispose the chain, and
        release the chain's input. That Subject keeps upstream's error to replay to late
        subscribers (it has none: it is fed once), and the error's traceback holds the
        frames that delivered it to the subscriber, so the subscriber with them (§3.13)."""
        self._cancel_upstream()
        self._subject.dispose()

    # -- downstream side ---------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        require_subscriber(subscriber)  # §1.9
        with self._lock:
            taken, self._subscribed = self._subscribed, True
        if taken:
            reject(
                subscriber,
                RuntimeError("§1.11: rx_processor is unicast: it serves one subscriber"),
            )
            return
        subscription = DrainSubscription(subscriber, self._source)
        self._source.subscription = subscription
        subscription.start()


@final
class _ProcessorSource(_BufferSource[R]):
    """The processor's output buffer; ``produced`` counts outputs (written by the chain's
    serial on_next only)."""

    __slots__ = ("_processor", "produced", "subscription")

    def __init__(self, processor: RxProcessor[Any, R]) -> None:
        super().__init__()
        self._processor = processor
        self.produced = 0
        self.subscription: DrainSubscription[R] | None = None  # the subscriber's, once there

    def push_checked(self, element: R) -> None:
        processor = self._processor
        if self._done:
            if processor._subscribing and processor._feeding == get_ident():
                raise _Stop  # the chain ended while the constructor subscribes it: unwind a
                # producer on the constructor's own stack, which has no disposable to stop it
            return
        if element is None:  # legal in Rx, never an element here
            processor._chain_ended(
                TypeError("§2.13: the operator chain produced None, which is never an element")
            )
            return
        self.produced += 1
        if processor._feeding != get_ident():  # outside the input's signals: §1.1 unkeepable
            processor._chain_ended(
                RuntimeError(
                    "rx_processor: the operator chain emitted outside its input's signals "
                    "(delay, observe_on, a timer, an inner Observable that emits later): no "
                    "request can pace such an operator, and its own buffer takes upstream "
                    "without bound; apply it to an Observable instead: "
                    "from_observable(to_observable(publisher).pipe(...), overflow=...)"
                )
            )
            return
        if processor._upstream_done or processor._subscribing:  # no request paces these
            subscription = self.subscription
            demand = subscription.demand if subscription is not None else 0
            if len(self._items) >= add_cap(processor._buffer_size, demand):
                when = (
                    "while it was being subscribed (start_with, merge with a cold Observable, ...)"
                    if processor._subscribing
                    else "after its input ended (take_last, concat, catch, ...)"
                )
                processor._chain_ended(
                    OverflowViolation(
                        f"§1.1: rx_processor: the operator chain emitted more than "
                        f"buffer_size={processor._buffer_size} outputs beyond the subscriber's "
                        f"demand {when}, which no request can pace: raise buffer_size, or "
                        "bound the operator"
                    )
                )
                return  # (while subscribing, the producer's next output unwinds it)
        self.push(element)

    def consumed(self, n: int) -> None:
        self._processor._replenish()

    def want(self, n: int) -> None:
        self._processor._replenish()  # the buffer ran dry with demand: room to request?

    def close(self) -> None:
        self._discard()  # §3.13
        self.subscription = None
        self._processor._close()


def rx_processor(*operators: Callable[[Any], Any], buffer_size: int = 256) -> Processor[Any, Any]:
    """A Processor that runs ``operators`` (``ops.map``, ``ops.filter``, ...) with demand kept.

    See :class:`RxProcessor` for the demand policy and its bound.

    Example:
        >>> from reactivex import operators as ops
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> stage = rx_processor(ops.map(lambda x: x * 10), ops.filter(lambda x: x > 10))
        >>> from_iterable(range(4)).subscribe(stage)
        >>> list(to_iterator(stage))
        [20, 30]
    """
    return RxProcessor(operators, buffer_size)
