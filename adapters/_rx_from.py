"""``from_observable``: an RxPY Observable as a Publisher, with an overflow strategy.

An Observable ignores demand, so one of the strategies of :class:`Overflow` applies and at
most ``buffer_size`` elements wait between it and the subscriber (§1.1). Reasoning and
measurements: docs/adapters.md, "RxPY".
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from threading import get_ident
from typing import Any, Final, Generic, TypeVar, final

from reactivex import Observable
from reactivex.abc import DisposableBase, SchedulerBase
from reactivex.scheduler import CurrentThreadScheduler, NewThreadScheduler

from reactive_streams._drain import EMPTY, END, DrainSubscription, _Marker
from reactive_streams._loop import running_loop
from reactive_streams._subscription import report_dropped, require_error, require_subscriber
from reactive_streams.adapters._rx_buffer import _BufferSource, _dispose, _Stop
from reactive_streams.api import Subscriber
from reactive_streams.errors import OverflowViolation

__all__ = ["ObservablePublisher", "Overflow", "from_observable"]

T = TypeVar("T")


class Overflow(enum.Enum):
    """What ``from_observable`` does when the Observable emits faster than demand."""

    BLOCK = "block"  # the emitting thread waits for room (lossless)
    BUFFER = "buffer"  # keep up to buffer_size, then fail with OverflowViolation
    DROP = "drop"  # keep up to buffer_size, drop the newest beyond
    LATEST = "latest"  # keep the newest buffer_size, drop the oldest
    ERROR = "error"  # fail on the first element that arrives without demand


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


@final
class _ObservableSource(_BufferSource[T]):
    """The Rx observer and the drain's source of one ``from_observable`` subscription.

    Rx calls the observer serially (its contract), through the public ``subscribe``; the
    drain calls ``poll`` / ``consumed`` / ``close``; ``interrupt`` comes from a cancelling
    thread. ``_pushing`` guards the buffer and the end, ``_cond`` the disposable and the
    wait for room. ``block`` subscribes on a thread it owns (``start`` waits until it has);
    there Rx calls the drain's emitter lease, which delivers straight to the subscriber
    while its credit lasts (§1.1), and ``on_next`` is the lease's fallback (the regular
    path: buffer or wait).
    Cancel disposes the Rx subscription at once (§3.12); a producer that goes on emitting on
    the owned thread inside its subscribe call (no disposable yet) is unwound with ``_Stop``.
    Rules: §1.1, §1.4, §2.13, §3.12, §3.13. Why the lease is taken only on the owned thread:
    docs/adapters.md, "Cost of block".
    """

    __slots__ = (
        "_accepted",
        "_buffer_size",
        "_cond",
        "_disposable",
        "_emit",
        "_interrupted",
        "_observable",
        "_on_drop",
        "_opening",
        "_owner",
        "_publisher",
        "_strategy",
        "_subscribed",
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
        self._disposable: DisposableBase | None = None
        self._owner = 0  # the id of the thread ``block`` owns, while it subscribes; else 0
        # block: subscribe() waits on _subscribed until the owned thread has subscribed, or its
        # producer signalled; _opening is the one-way hint (True until then) that spares
        # every later element a look at the Event.
        self._subscribed = threading.Event()
        self._opening = False
        self._emit: Callable[[T], None] = self.on_next  # what Rx calls (see _subscribe_now)
        self.subscription: DrainSubscription[T] | None = None

    # -- Rx observer ------------------------------------------------------------------------

    def on_next(self, element: T) -> None:
        if self._opening:  # block: a producer emitting inside its subscribe call
            self._opened()
        subscription = self.subscription
        if subscription is not None:
            subscription.release_lease()  # this path never runs under a lease
        if self._done:  # cancelled, failed or ended: dropped (§1.7, §3.13); on our own thread,
            self._stop_if_owned()  # unwind a producer that goes on inside its subscribe call
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
            if running_loop() is not None:  # never wait on a running loop
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
            if not self._accept():
                return
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

    def _accept(self) -> bool:
        """ERROR: let an element in only against demand (§1.1) and room, else fail."""
        subscription = self.subscription
        requested = subscription.requested if subscription is not None else 0
        error: OverflowViolation | None = None
        with self._pushing:
            if self._accepted >= requested:  # §1.1: no outstanding demand for this element
                error = OverflowViolation(
                    "§1.1: from_observable(overflow='error'): an element arrived without "
                    "demand; use overflow='buffer', 'drop', 'latest' or 'block'"
                )
            elif len(self._items) >= self._buffer_size:
                error = self._overflow()
            else:
                self._accepted += 1  # under _pushing (a Subject fed from two threads at once)
        if error is not None:
            self._fail(error)
            return False
        return True

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
        if self._opening:
            self._opened()
        self.finish(error)
        self._end_lease()  # §1.4: the drain delivers it, after the buffered elements

    def on_completed(self) -> None:
        if self._opening:
            self._opened()
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
        """Subscribe to the Observable: on a thread of its own for ``block``, else right here.

        Either way the Observable is subscribed when this returns, so a hot source's next
        element is kept: ``block`` waits until the owned thread's subscribe call has returned,
        or until the Observable signalled (a producer inside that call, which may go on to
        wait for demand). Why: docs/adapters.md, "When elements start to be kept"."""
        if self._strategy is Overflow.BLOCK:
            self._opening = True
            threading.Thread(target=self._run_owned, name="rs-from-observable", daemon=True).start()
            self._subscribed.wait()  # set by the owned thread, whatever way it goes
        else:
            self._subscribe()

    def _opened(self) -> None:
        self._opening = False  # one-way: the Event below is what subscribe() waits on
        self._subscribed.set()

    def _run_owned(self) -> None:
        self._owner = get_ident()
        try:
            self._subscribe()
        except _Stop:
            pass  # cancelled while a synchronous producer was emitting: the thread ends
        finally:
            self._opened()  # cancelled before subscribing, or failed: subscribe() returns
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
            # Rx's public subscribe: its observer drops what follows the end or a dispose,
            # disposes the subscription at the end, and makes the subscribe call's error ours.
            disposable = self._observable.subscribe(
                self._emit, self.on_error, self.on_completed, scheduler=scheduler
            )
        except _Stop:
            raise
        except Exception as exc:
            self.finish(exc)  # §1.4
            return
        finally:
            if self._opening:
                self._opened()  # subscribed (or failed): subscribe() may return
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

    Each Subscriber subscribes to the Observable afresh, before ``subscribe`` returns (a cold
    Observable replays, a hot one shares from then on). Rules: §1.1 (never more than
    requested: the drain), §1.4 (Rx ``on_error`` and overflow become ``on_error`` after the
    buffered elements), §1.9, §2.13 (``None`` elements), §3.13 (cancel disposes the Rx
    subscription and drops the buffer).

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
            self.dropped += 1  # under _lock: drops come from every subscriber's emitters

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        source: _ObservableSource[T] = _ObservableSource(self)
        name = f"from_observable({self._strategy.value})"  # upstream: Rx, not scanned
        subscription = DrainSubscription(subscriber, source, name=name)
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
    """Wrap an RxPY Observable as a Publisher that holds at most ``buffer_size`` (§1.1).

    ``block`` (lossless) produces a cold Observable on a thread it owns, as demand allows; the
    emitting thread waits for room, never on a running loop or in the subscriber's ``on_next``
    (the stream fails, saying so). The others never wait. Every strategy has subscribed to
    the Observable when ``subscribe()`` returns, so what a hot source emits from then on is
    kept. Details: docs/adapters.md.

    Args:
        observable: any ``reactivex.Observable``.
        overflow: an :class:`Overflow` or its name; ``"block"`` (lossless) by default.
        buffer_size: the most elements held between the Observable and the subscriber.
        on_drop: called with each element ``drop`` / ``latest`` discards.

    Raises:
        TypeError: not an Observable, or an ``on_drop`` that is not callable.
        ValueError: an unknown ``overflow``, a bad ``buffer_size``, or a needless ``on_drop``.

    Example:
        >>> import reactivex
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
