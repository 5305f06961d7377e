"""``map_async``: a Processor that awaits an async function on each element, with at most
``concurrency`` calls in flight and a bounded window of elements asked of upstream.

The calls and their results live in ``_map_async_calls.Calls`` (the loop side, and the
queue the subscriber's drain pops); this module holds the upstream side (demand, §1.1),
the subscriber side (unicast) and ``map_async`` itself.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, final

from reactive_streams._demand import Replenisher, add_cap
from reactive_streams._drain import DrainSubscription
from reactive_streams._loop import check_loop, shared_loop
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    reject,
    report_dropped,
    require_element,
    require_error,
    require_subscriber,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Processor, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation
from reactive_streams.publishers._map_async_calls import Calls

__all__ = ["MapAsyncProcessor", "map_async"]

T = TypeVar("T")
R = TypeVar("R")


@final
class MapAsyncProcessor(Generic[T, R]):
    """Calls ``await fn(x)`` for each element on ``loop``, at most ``concurrency`` at once,
    and emits the results in input order (``ordered``) or as they finish.

    Demand: upstream is asked for ``prefetch`` once the subscriber first has demand, then
    for more as results are delivered (``Replenisher``: at most 75% of the window at a time,
    and at least ``concurrency`` still asked for when it asks again), so
    elements asked and not yet delivered (awaited, waiting for a call, or finished and
    waiting) never exceed ``prefetch``; a subscriber that stops requesting stops upstream.
    Threads: calls run on the loop; results are delivered by the drain (INLINE) on the
    thread that wakes it: a caller of ``request``, or, when a call finishes, a thread of
    the delivery pool (``rs-map-async-deliver``), never the loop's: the subscriber's
    ``on_next`` and the upstream pulls it causes never stall the loop's calls.
    Errors: ``fn`` raising (or returning None, §2.13), or upstream's ``on_error``, cancels
    the calls in flight (their tasks get ``CancelledError``) and upstream, and becomes
    ``on_error`` with the original exception after the results already released (§1.4):
    results finished behind an unfinished call are dropped, not delivered. A cancel (§3.12)
    cancels upstream and the calls in flight. Unicast: a second subscriber gets ``on_error``
    (§1.9, §1.11); either side may subscribe first. Rules: §1.1 (an upstream sending more
    than asked fails the stream), §1.3, §2.5, §2.7, §2.13, §3.13.
    """

    __slots__ = (
        "__weakref__",
        "_asked",
        "_calls",
        "_lazy",
        "_lock",
        "_name",
        "_received",
        "_replenisher",
        "_subscription",
        "_taken",
        "_upstream",
    )

    def __init__(
        self,
        fn: Callable[[T], Awaitable[R]],
        concurrency: int,
        ordered: bool,
        prefetch: int,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._name = f"map_async(concurrency={concurrency})"
        self._lock = threading.Lock()
        self._upstream = Upstream(self._pass)  # set once (§2.5), requests serial (§2.7)
        # owned: the drain (want, consumed). It asks again once ``limit`` were delivered, at
        # most 75% of the window (Reactor's rule), and early enough that the window keeps
        # ``concurrency`` elements asked for: never fewer calls than the bound for want of it.
        limit = min(prefetch - (prefetch >> 2), prefetch - concurrency + 1)
        self._replenisher = Replenisher(prefetch, limit)
        self._asked = 0  # owned: Upstream's requesting turn (§2.7)
        self._received = 0  # owned: the upstream's on_next calls, serial (§1.3)
        self._lazy = True  # under _lock: the first request is still to make
        self._taken = False  # under _lock: a subscriber came (unicast)
        self._subscription: DrainSubscription[R] | None = None
        self._calls: Calls[T, R] = Calls(fn, concurrency, ordered, loop, self)

    # -- upstream side: any thread, serially (§1.3) ----------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        if self._upstream.set_once(subscription):  # §2.5; after a cancel: cancelled
            self._calls.wake()  # a demand already waiting makes the first request (want_more)

    def on_next(self, element: T) -> None:
        calls = self._calls
        if element is None:  # §2.13: upstream counts as cancelled; the subscriber hears why
            if not calls.stopped:
                calls.fail(TypeError("§2.13: upstream signalled on_next(None)"))
            require_element(element)  # and upstream gets its TypeError
        if calls.stopped:
            return  # §2.8: after a cancel or a failure
        received = self._received = self._received + 1  # owned: serial on_next (§1.3)
        asked = self._asked  # counted before each request: an on_next it caused sees it
        if received > asked:
            calls.fail(
                OverflowViolation(
                    f"§1.1: map_async: upstream signalled on_next number {received}, beyond "
                    f"the {asked} requested of it"
                )
            )
            return
        calls.push(element)

    def on_error(self, error: Exception) -> None:
        require_error(error)  # §2.13
        self._upstream.take()  # §2.4: never called again
        if not self._calls.stop(error):  # after our cancel (§1.8), or after the end (§1.7)
            report_dropped(error, rule="1.8", where="map_async: upstream on_error after the end")

    def on_complete(self) -> None:
        self._upstream.take()  # §2.4
        self._calls.upstream_ended()

    def _pass(self, subscription: Subscription, n: int) -> None:
        """One ``request(n)`` upstream, in turn (§2.7), counted first (§1.1). One that
        raises breaks §3.16: the stream fails with it."""
        self._asked = add_cap(self._asked, n)  # owned: Upstream's requesting turn
        try:
            subscription.request(n)
        except Exception as exc:
            error = RuntimeError(f"§3.16: the upstream's request({n}) raised {exc!r}")
            error.__cause__ = exc
            self._calls.fail(error)

    # -- what the calls' drain asks of it: the drain's thread, serially --------------------

    def want_more(self) -> None:
        """The subscriber has demand and nothing waits: the first request, once subscribed."""
        if not self._lazy or self._upstream.subscription is None:  # _lazy: one-way, a hint
            return
        with self._lock:  # under _lock: made once
            first, self._lazy = self._lazy, False
        if first:
            self._upstream.request(self._replenisher.prefetch)

    def delivered(self, n: int) -> None:
        """``n`` results were delivered: ask upstream for more when the window says so."""
        due = self._replenisher.consumed(n)
        if due:
            self._upstream.request(due)  # a no-op once cancelled or ended (§2.4, §3.6)

    def until_due(self) -> int:
        return self._replenisher.until_due

    def cancel_upstream(self) -> None:
        self._upstream.cancel()  # once (§3.7); a raising cancel is reported (§3.15)

    # -- subscriber side -------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        require_subscriber(subscriber)  # §1.9
        with self._lock:
            taken, self._taken = self._taken, True
        if taken:
            reject(
                subscriber,
                RuntimeError("§1.9/§1.11: map_async is unicast: it serves one subscriber"),
            )
            return
        subscription = DrainSubscription(
            subscriber, self._calls, name=f"{self._name} → subscriber"
        )
        self._subscription = subscription
        subscription.start()

    # -- diagnostics -----------------------------------------------------------------------

    def scan(self) -> Scan:
        """This stage's record for :func:`~reactive_streams.snapshot` (any thread, no lock):
        its subscriber's outstanding demand, what it asked upstream in all, the calls in
        flight, and what it holds (elements waiting for a call, results waiting)."""
        calls, subscription = self._calls, self._subscription
        return Scan(
            self._name,
            requested=subscription.scan().requested if subscription is not None else 0,
            asked=self._asked,
            in_flight=calls.running,
            buffered=calls.held,
            cancelled=calls.cancelled,
            terminated=calls.done and not calls.cancelled,
            subscribed=self._upstream.subscription is not None,
            upstream=self._upstream.linked,
        )

    def __repr__(self) -> str:
        return f"<MapAsyncProcessor {self._name}>"


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (an object with an async __call__)
    )


def map_async(
    fn: Callable[[T], Awaitable[R]],
    *,
    concurrency: int,
    ordered: bool = True,
    prefetch: int | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Processor[T, R]:
    """A stage that awaits ``fn(x)`` for each element, ``concurrency`` calls at most at once.

    Results come in input order (``ordered=True``), or as the calls finish. Upstream is
    asked only for what fits the window: elements awaited, waiting for a call, or finished
    and not yet delivered stay within ``prefetch``. An exception from ``fn`` cancels the
    calls in flight and upstream, and reaches the subscriber as ``on_error`` (the same
    object); a cancel cancels the calls in flight. Unicast: one subscriber. Details, and
    which thread delivers: :class:`MapAsyncProcessor`.

    Args:
        fn: an async function of one element (``async def``); never returns None.
        concurrency: the most calls in flight, >= 1.
        ordered: results in input order (a result waits for those before it), or not.
        prefetch: the window, >= ``concurrency``; ``2 * concurrency`` by default.
        loop: the event loop the calls run on (running on any thread, or to be run); by
            default the process's one library-owned loop (``rs-map-async-loop`` thread).

    Raises:
        TypeError: ``fn`` is not an async function, or an argument has the wrong type.
        ValueError: ``concurrency < 1``, ``prefetch < concurrency``, or ``loop`` is closed.

    Example:
        >>> from reactive_streams import pipe
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> async def double(x: int) -> int:
        ...     return 2 * x
        >>> list(to_iterator(pipe(from_iterable(range(4)), map_async(double, concurrency=2))))
        [0, 2, 4, 6]
    """
    if not _is_async(fn):
        raise TypeError(
            f"map_async(): fn must be an async function (async def f(x): ...), got {fn!r}"
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise TypeError(f"map_async(): concurrency must be an int, got {concurrency!r}")
    if concurrency < 1:
        raise ValueError(f"map_async(): concurrency must be >= 1, got {concurrency}")
    if not isinstance(ordered, bool):
        raise TypeError(f"map_async(): ordered must be a bool, got {ordered!r}")
    if prefetch is None:
        prefetch = add_cap(concurrency, concurrency)
    elif isinstance(prefetch, bool) or not isinstance(prefetch, int):
        raise TypeError(f"map_async(): prefetch must be an int or None, got {prefetch!r}")
    elif prefetch < concurrency:
        raise ValueError(
            f"map_async(): prefetch must be >= concurrency ({concurrency}), got {prefetch}"
        )
    check_loop(loop)
    resolved: Any = shared_loop() if loop is None else loop
    return MapAsyncProcessor(fn, concurrency, ordered, prefetch, resolved)
