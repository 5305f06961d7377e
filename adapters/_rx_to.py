"""``to_observable``: any Publisher as an RxPY Observable, at most ``prefetch`` requested
ahead (a window re-requested 75% at a time as the observer takes elements)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, final

import reactivex
from reactivex import Observable
from reactivex.abc import DisposableBase, ObserverBase, SchedulerBase
from reactivex.disposable import Disposable
from reactivex.scheduler import CurrentThreadScheduler

from reactive_streams._demand import UNBOUNDED
from reactive_streams._drain import DrainSubscription
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams._subscription import require_publisher
from reactive_streams.api import Publisher, Subscription

__all__ = ["to_observable"]

T = TypeVar("T")


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
    subscription = DrainSubscription(_ObserverSubscriber(observer), queue, name="to_observable")
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
