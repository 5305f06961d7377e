"""RxPY (reactivex 4.x to 6.x) and Reactive Streams, both directions.

- ``from_observable``: an Observable has no demand, so the adapter applies an ``overflow``
  strategy and never holds more than ``buffer_size`` elements. ``block`` (the default,
  lossless) subscribes on a thread the adapter owns and makes the emitting thread wait
  for room, so a cold Observable is paced by demand (``buffer_size`` ahead); ``buffer`` fails
  with ``OverflowViolation`` when full; ``drop`` drops the newest, ``latest`` the oldest;
  ``error`` fails on the first element that arrives without demand.
- ``to_observable``: requests ``prefetch`` and re-requests 75% as the observer takes them.
- ``rx_processor``: any operator chain inside a pipeline; upstream is requested only while
  the bounded output buffer has room.
- Signals reach the Reactive Streams subscriber on the thread that emits (or requests);
  Rx observers are called on the thread that delivers. Cancel disposes the Rx subscription
  (and releases a blocked emitter); ``dispose()`` of ``to_observable`` cancels upstream.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar, final

import reactivex
from reactivex import Observable
from reactivex.abc import DisposableBase, ObserverBase, SchedulerBase
from reactivex.disposable import Disposable
from reactivex.subject import Subject

from rs_core._demand import UNBOUNDED
from rs_core._drain import EMPTY, END, DrainSubscription, Source, _Marker
from rs_core._prefetch import PrefetchQueue
from rs_core._subscription import (
    CANCELLED,
    reject,
    report_dropped,
    require_element,
    require_error,
    require_subscriber,
    require_subscription,
)
from rs_core.api import Processor, Publisher, Subscriber, Subscription
from rs_core.errors import OverflowViolation

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
    """Raised into a synchronous Rx producer on the owned thread to end it after cancel."""


_ON_LOOP: Final = (
    "from_observable(overflow='block'): the Observable emits on a thread that runs an asyncio "
    "event loop, and blocking it would stall the loop; use overflow='buffer', 'drop' or "
    "'latest', or move the emission off the loop (observe_on a thread pool)"
)


class _BufferSource(Source[T]):
    """A bounded deque the Rx side fills and the drain empties (fused: popped directly)."""

    __slots__ = ("_done", "_error", "_items", "_wake", "queue", "replenish_every")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self.queue: deque[T] | None = self._items  # None: the drain polls instead of popping
        self.replenish_every = 1
        self._done = False
        self._error: Exception | None = None
        self._wake: Callable[[], None] = _nothing

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def push(self, element: T) -> None:
        self._items.append(element)
        self._wake()

    def finish(self, error: Exception | None) -> None:
        if self._done:
            if error is not None:
                report_dropped(error, rule="1.7", where="an Rx error after the end")
            return
        self._error = error
        self._done = True
        self._wake()

    def poll(self) -> T | _Marker:
        done = self._done  # read before the queue: every push happened before _done was set
        if self._items:
            return self._items.popleft()
        if done:
            if self._error is not None:
                raise self._error
            return END
        return EMPTY

    def at_end(self) -> bool:
        return self._done and not self._items


def _nothing() -> None:
    pass


@final
class _ObservableSource(_BufferSource[T]):
    """The Rx observer and the drain's source of one ``from_observable`` subscription."""

    __slots__ = (
        "_buffer_size",
        "_cond",
        "_disposable",
        "_observable",
        "_on_drop",
        "_publisher",
        "_started",
        "_strategy",
        "subscription",
    )

    def __init__(self, publisher: ObservablePublisher[T]) -> None:
        super().__init__()
        self._publisher = publisher
        self._observable = publisher._observable
        self._strategy = publisher._strategy
        self._buffer_size = publisher._buffer_size
        self._on_drop = publisher._on_drop
        self._cond = threading.Condition()
        self._disposable: DisposableBase | None = None
        self._started = False
        self.subscription: DrainSubscription[T] | None = None

    # -- Rx observer ------------------------------------------------------------------------

    def on_next(self, element: T) -> None:
        if self._done:
            if self._strategy is Overflow.BLOCK:
                raise _Stop  # ends a synchronous producer on the owned thread
            return
        require_element(element)
        queue = self._items
        strategy = self._strategy
        if strategy is Overflow.BLOCK:
            if len(queue) >= self._buffer_size:
                if asyncio._get_running_loop() is not None:
                    self._fail(RuntimeError(_ON_LOOP))
                    return
                with self._cond:
                    while len(queue) >= self._buffer_size and not self._done:
                        self._cond.wait()
                if self._done:
                    raise _Stop
        elif strategy is Overflow.ERROR:
            subscription = self.subscription
            demand = subscription.demand if subscription is not None else 0
            if len(queue) >= demand:
                self._fail(
                    OverflowViolation(
                        "§1.1: from_observable(overflow='error'): an element arrived without "
                        "demand"
                    )
                )
                return
        elif len(queue) >= self._buffer_size:
            if strategy is Overflow.BUFFER:
                self._fail(
                    OverflowViolation(
                        f"§1.1: from_observable(overflow='buffer'): the buffer of "
                        f"buffer_size={self._buffer_size} elements is full: the Observable "
                        "emits faster than the subscriber requests"
                    )
                )
                return
            if strategy is Overflow.DROP:
                self._dropped(element)
                return
            self._dropped(queue.popleft())  # LATEST: make room for the newest
        self.push(element)

    def on_error(self, error: Exception) -> None:
        if isinstance(error, _Stop):
            return
        require_error(error)
        self.finish(error)

    def on_completed(self) -> None:
        self.finish(None)

    def _dropped(self, element: T) -> None:
        self._publisher._count_drop()
        if self._on_drop is not None:
            try:
                self._on_drop(element)
            except Exception as exc:
                report_dropped(exc, where="from_observable on_drop callback")

    def _fail(self, error: Exception) -> None:
        self.finish(error)
        self._dispose()

    # -- Source -------------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to the Observable: on an owned thread for ``block``, else right here."""
        if self._strategy is Overflow.BLOCK:
            threading.Thread(
                target=self._subscribe, name="rs-from-observable", daemon=True
            ).start()
            return
        self._subscribe()

    def _subscribe(self) -> None:
        self._started = True
        try:
            disposable = self._observable.subscribe(
                on_next=self.on_next, on_error=self.on_error, on_completed=self.on_completed
            )
        except _Stop:
            return
        except Exception as exc:
            self.finish(exc)
            return
        if self._done:
            disposable.dispose()
        else:
            self._disposable = disposable

    def poll(self) -> T | _Marker:
        value = super().poll()
        if value is not EMPTY and value is not END:
            self.consumed(1)  # the first pass pops through poll(): room again here too
        return value

    def consumed(self, n: int) -> None:
        if self._strategy is Overflow.BLOCK:
            with self._cond:
                self._cond.notify()  # room again: release the waiting emitter

    def close(self) -> None:
        self._done = True
        with self._cond:
            self._cond.notify_all()  # a blocked emitter wakes, sees _done and stops
        self._dispose()
        self._items.clear()

    def _dispose(self) -> None:
        disposable, self._disposable = self._disposable, None
        if disposable is not None:
            try:
                disposable.dispose()
            except Exception as exc:
                report_dropped(exc, where="disposing an Rx subscription")


@final
class ObservablePublisher(Generic[T]):
    """A Publisher over an RxPY Observable, with an explicit overflow strategy.

    Each Subscriber subscribes to the Observable afresh (cold Observables replay, hot ones
    share). ``dropped`` counts elements dropped by ``drop`` / ``latest``.
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

    Args:
        observable: any ``reactivex.Observable``.
        overflow: ``"block"`` (default; lossless; never on an event-loop thread),
            ``"buffer"``, ``"drop"``, ``"latest"`` or ``"error"`` (see :class:`Overflow`).
        buffer_size: the most elements held between the Observable and the subscriber.
        on_drop: called with each element ``drop`` / ``latest`` discards.

    Example:
        >>> from adapters.iterables import to_iterator
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
    return ObservablePublisher(observable, strategy, buffer_size, on_drop)


# -- to_observable ---------------------------------------------------------------------------


@final
class _ObserverSubscriber(Generic[T]):
    """Delivers the drain's signals to an Rx observer (``on_complete`` -> ``on_completed``)."""

    __slots__ = ("_observer",)

    def __init__(self, observer: ObserverBase[T]) -> None:
        self._observer = observer

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(UNBOUNDED)  # the window is the PrefetchQueue's

    def on_next(self, element: T) -> None:
        self._observer.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._observer.on_error(error)

    def on_complete(self) -> None:
        self._observer.on_completed()


def to_observable(publisher: Publisher[T], *, prefetch: int = 256) -> Observable[T]:
    """An RxPY Observable over any Publisher, at most ``prefetch`` requested ahead.

    Each Rx subscription subscribes to ``publisher`` afresh; elements reach the observer on
    the thread the publisher signals on, and ``dispose()`` cancels.
    """
    if publisher is None:
        raise TypeError("to_observable() requires a Publisher, got None")
    PrefetchQueue[T](prefetch)  # validates prefetch now

    def subscribe(
        observer: ObserverBase[T], scheduler: SchedulerBase | None = None
    ) -> DisposableBase:
        queue: PrefetchQueue[T] = PrefetchQueue(prefetch)
        subscription = DrainSubscription(_ObserverSubscriber(observer), queue)
        subscription.start()
        try:
            publisher.subscribe(queue)
        except Exception as exc:
            queue.on_error(exc)
        return Disposable(subscription.cancel)

    return reactivex.create(subscribe)


# -- rx_processor ------------------------------------------------------------------------------


@final
class RxProcessor(Generic[T, R]):
    """A Processor running an RxPY operator chain with demand kept on both sides.

    Upstream is asked for elements only while ``queued + outstanding < buffer_size`` (the
    room is re-requested as the subscriber takes elements), so a 1:1 or filtering chain never
    holds more than
    ``buffer_size``; an expanding operator (``flat_map``) may add what the outstanding
    elements expand into, and a batching one (``buffer_with_count``) holds its partial batch.
    Unicast: one Subscriber; another is rejected (§1.11 allows it). Errors from the chain or
    upstream reach the subscriber after the elements already produced. Cancel cancels
    upstream and disposes the chain.
    """

    def __init__(self, operators: tuple[Callable[[Any], Any], ...], buffer_size: int) -> None:
        if type(buffer_size) is not int or buffer_size <= 0:
            raise ValueError(f"buffer_size must be a positive int, got {buffer_size!r}")
        self._buffer_size = buffer_size
        self._upstream_done = False
        self._lock = threading.Lock()
        self._outstanding = 0
        self._upstream: Subscription | None = None
        self._subscribed = False
        self._source: _ProcessorSource[R] = _ProcessorSource(self)
        self._subject: Subject[T] = Subject()
        chain: Observable[Any] = self._subject.pipe(*operators) if operators else self._subject
        self._chain = chain.subscribe(
            on_next=self._source.push_checked,
            on_error=self._source.finish,
            on_completed=lambda: self._source.finish(None),
        )

    # -- upstream side --------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
        if duplicate:  # §2.5
            subscription.cancel()
            return
        self._replenish()

    def on_next(self, element: T) -> None:
        require_element(element)  # §2.13
        with self._lock:
            if self._outstanding > 0:
                self._outstanding -= 1
        try:
            self._subject.on_next(element)
        except Exception as exc:  # an operator raised outside Rx's own error handling
            self._source.finish(exc)
            self._cancel_upstream()
            return
        self._replenish()

    def on_error(self, error: Exception) -> None:
        require_error(error)  # §2.13
        self._upstream_done = True  # §2.3/§2.4: never call the subscription again
        self._subject.on_error(error)  # §4.1: through the chain to the subscriber

    def on_complete(self) -> None:
        self._upstream_done = True
        self._subject.on_completed()

    def _replenish(self) -> None:
        """Request what fits in the output buffer, in batches (§1.1 bound kept)."""
        with self._lock:
            upstream = self._upstream
            if upstream is None or upstream is CANCELLED or self._source._done:
                return
            if self._upstream_done:
                return
            room = self._buffer_size - len(self._source._items) - self._outstanding
            if room <= 0:
                return
            self._outstanding += room
        upstream.request(room)

    def _cancel_upstream(self) -> None:
        with self._lock:
            upstream, self._upstream = self._upstream, CANCELLED
        if upstream is not None and upstream is not CANCELLED and not self._upstream_done:
            upstream.cancel()  # §3.12, but never after upstream terminated (§2.3)
        self._chain.dispose()

    # -- downstream side ---------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        require_subscriber(subscriber)  # §1.9
        with self._lock:
            taken, self._subscribed = self._subscribed, True
        if taken:
            reject(subscriber, RuntimeError("rx_processor is unicast: it serves one subscriber"))
            return
        DrainSubscription(subscriber, self._source).start()


@final
class _ProcessorSource(_BufferSource[R]):
    __slots__ = ("_processor",)

    def __init__(self, processor: RxProcessor[Any, R]) -> None:
        super().__init__()
        self._processor = processor

    def push_checked(self, element: R) -> None:
        if element is None:
            self.finish(TypeError("§2.13: the operator chain produced None"))
            return
        if not self._done:
            self.push(element)

    def consumed(self, n: int) -> None:
        self._processor._replenish()

    def close(self) -> None:
        self._done = True
        self._items.clear()
        self._processor._cancel_upstream()


def rx_processor(
    *operators: Callable[[Any], Any], buffer_size: int = 256
) -> Processor[Any, Any]:
    """A Processor that runs ``operators`` (``ops.map``, ``ops.filter``, ...) with demand kept.

    Example:
        >>> from reactivex import operators as ops
        >>> from adapters.iterables import from_iterable, to_iterator
        >>> stage = rx_processor(ops.map(lambda x: x * 10), ops.filter(lambda x: x > 10))
        >>> from_iterable(range(4)).subscribe(stage)
        >>> list(to_iterator(stage))
        [20, 30]
    """
    return RxProcessor(operators, buffer_size)
