"""``share``: one upstream subscription multicast to every subscriber, paced by the slowest.

Why a drain loop of its own (the WIP / missed loop of rs_core/_drain.py, over all subscribers,
as RxJava's ``FlowablePublish``): ``DrainSubscription`` serves one subscriber, and one per
subscriber costs a whole pass per element per subscriber when the upstream pushes one at a time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter
from typing import Final, Generic, TypeVar, final

from reactive_streams._demand import Replenisher, add_cap, check_request, produced
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    report_dropped,
    require_error,
    require_publisher,
    require_subscriber,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Publisher, Subscriber, Subscription
from reactive_streams.errors import OverflowViolation, ProtocolViolation

__all__ = ["SharePublisher", "share"]

T = TypeVar("T")

_IDLE: Final = "idle"  # fewer than min_subscribers have come: nothing subscribed upstream
_CONNECTED: Final = "connected"  # subscribed upstream (or subscribing)
_DISCONNECTED: Final = "disconnected"  # the last subscriber left early: upstream cancelled
_POS: Final = attrgetter("pos")
_DEMAND: Final = attrgetter("demand")


@dataclass(frozen=True)
class _HubScan(Scan):
    """The hub's record: ``waiting`` says what it waits for before it is subscribed;
    ``paced_by``, the subscriber furthest back of those with no demand (0: none, or alone)."""

    waiting: str = ""
    paced_by: int = 0

    @property
    def state(self) -> str:
        paced = f", paced by subscriber {self.paced_by}" if self.paced_by else ""
        return self.waiting or super().state + paced


@final
class _Inner(Generic[T]):
    """One subscriber's Subscription: its demand and its place in the shared buffer.

    ``request``/``cancel`` may come from any thread, and from inside ``on_next`` (§3.2):
    they change state under the connection's lock and leave the rest to its drain (§3.3).
    Every field is under that lock; the drain alone signals the subscriber (§1.3).
    """

    __slots__ = (
        "_connection",
        "bad",
        "cancelled",
        "demand",
        "first",
        "number",
        "pos",
        "started",
        "subscriber",
    )

    def __init__(self, connection: _Connection[T], subscriber: Subscriber[T]) -> None:
        self._connection = connection
        self.subscriber: Subscriber[T] | None = subscriber  # None once it left (§3.13)
        self.pos = 0  # the absolute index of its next element in the buffer
        self.first = 0  # its pos on arrival: pos - first were given to it
        self.number = 0  # its arrival order in the connection, from 1 (for a snapshot)
        self.demand = 0  # requested and not yet taken for delivery (§1.1)
        self.bad: Exception | None = None  # a §3.9 error, for the drain to deliver
        self.cancelled = False  # one-way: read lock-free as a hint after on_next
        self.started = False  # on_subscribe returned: the drain may signal it (§1.3)

    def request(self, n: int) -> None:
        """Add ``n`` to the demand (§3.8), or the §3.9 error; never blocks (§3.4)."""
        self._connection.request(self, n)

    def cancel(self) -> None:
        """Stop pacing the others now; idempotent, thread-safe (§3.5, §3.7, §3.12)."""
        self._connection.cancel(self)

    def scan(self) -> Scan:
        """This subscriber's row for :func:`~reactive_streams.snapshot` (any thread, no lock):
        its outstanding demand, what it was given, what the buffer holds for it; up: the hub.
        Counts move once per pass of the drain (elements taken for delivery count as given)."""
        connection, pos, live = self._connection, self.pos, self.subscriber is not None
        held = connection.held_from(pos) if live else 0
        return Scan(
            f"share → subscriber {self.number}",
            requested=self.demand if live else 0,
            buffered=held,
            delivered=pos - self.first,
            cancelled=self.cancelled,
            terminated=not live and not self.cancelled,
            upstream=connection,
        )


@final
class _Connection(Generic[T]):
    """One connection of ``SharePublisher``: the upstream subscription, the shared buffer,
    the subscribers and the drain that serves them all. Upstream it is the Subscriber (its
    signals serial, §1.3). Everything shared is under ``_lock``; no lock is held while calling
    out (a subscriber, the upstream). The buffer holds what some current subscriber has not
    been given yet: from the slowest one's place (``_base``) to the newest element.
    """

    __slots__ = (
        "_arrived",
        "_asked",
        "_base",
        "_buffer",
        "_done",
        "_error",
        "_inners",
        "_lock",
        "_min_subscribers",
        "_prefetch",
        "_received",
        "_replenisher",
        "_source",
        "_state",
        "_upstream",
        "_wip",
    )

    def __init__(self, source: Publisher[T], buffer_size: int, min_subscribers: int) -> None:
        self._lock = threading.Lock()
        # Under _lock: the buffer and its absolute start, the subscribers, the state, the WIP.
        self._buffer: deque[T] = deque()
        self._base = 0  # the absolute index of _buffer[0]: the slowest subscriber's pos
        self._inners: list[_Inner[T]] = []  # the current subscribers, in arrival order
        self._arrived = 0  # subscribers that came, all told (numbers them)
        self._wip = 0
        self._state = _IDLE
        self._done = False  # the upstream's terminal signal came (or a failure)
        self._error: Exception | None = None
        self._replenisher = Replenisher(buffer_size)  # under _lock (not thread-safe itself)
        self._source = source
        self._prefetch = buffer_size
        self._min_subscribers = min_subscribers
        self._upstream = Upstream(self._pass, defer_nested=True)  # §2.5 once, §2.7 serial
        self._asked = 0  # owned: the thread whose turn it is to request (§2.7, Upstream)
        self._received = 0  # owned: the upstream's on_next calls are serial (§1.3)

    # -- subscribers (downstream side) ------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> bool:
        """Count ``subscriber`` from the oldest element still held (nothing skipped), signal
        ``on_subscribe``, then serve it; False (nothing signalled) once disconnected."""
        inner = _Inner(self, subscriber)
        with self._lock:
            if self._state is _DISCONNECTED:
                return False
            inner.pos = inner.first = self._base  # under _lock
            self._arrived += 1  # under _lock
            inner.number = self._arrived  # under _lock
            self._inners.append(inner)  # under _lock
        try:
            subscriber.on_subscribe(inner)
        except Exception as exc:  # §2.13: it counts as cancelled
            report_dropped(exc, rule="2.13", where="on_subscribe raised; cancelled")
            inner.cancel()
        with self._lock:
            inner.started = True  # under _lock
            self._wip += 1  # under _lock
            drain = self._wip == 1
        if drain:
            self._drain()
        self._connect_if_ready()
        return True

    def _connect_if_ready(self) -> None:
        """Subscribe upstream once ``min_subscribers`` are here (the autoConnect)."""
        with self._lock:
            if self._state is not _IDLE or len(self._inners) < self._min_subscribers:
                return
            self._state = _CONNECTED  # under _lock: connect once
        try:
            self._source.subscribe(self)
        except Exception as exc:  # a broken upstream (§1.9): every subscriber hears it
            self._fail(exc)

    def request(self, inner: _Inner[T], n: int) -> None:
        error = check_request(n)
        with self._lock:
            if inner.cancelled or inner.subscriber is None:  # §3.6
                return
            if error is not None:  # §3.9: delivered by the drain, so on_error stays serial
                if inner.bad is None:
                    inner.bad = error  # under _lock
            else:
                inner.demand = add_cap(inner.demand, n)  # §3.17; under _lock
            self._wip += 1  # under _lock
            if self._wip != 1:  # §3.3: the drain in progress serves it
                return
        self._drain()

    def cancel(self, inner: _Inner[T]) -> None:
        with self._lock:
            if inner.cancelled:
                return  # §3.7
            inner.cancelled = True  # under _lock
            disconnect = self._remove(inner)
            if not disconnect:  # the others may move on now: the buffer's head, a replenish
                self._wip += 1  # under _lock
                if self._wip != 1:
                    return
        if disconnect:
            self._upstream.cancel()  # §3.12: once (§3.7), quietly (§3.15)
        else:
            self._drain()

    def _remove(self, inner: _Inner[T]) -> bool:
        """Under _lock: ``inner`` leaves (§3.13) and paces no one from now on; True when it
        was the last one of a connection whose end was not reached: cancel upstream."""
        if inner.subscriber is None:
            return False
        inner.subscriber = None  # under _lock
        self._inners.remove(inner)  # under _lock
        if self._inners:
            return False
        # Over for good once the last one was given the end (every element, or the error):
        # later subscribers get the terminal signal. Else the next one connects afresh.
        ended = self._done and (
            self._error is not None or inner.pos == self._base + len(self._buffer)
        )
        disconnect = False
        if self._state is _CONNECTED and not ended:
            self._state = _DISCONNECTED  # under _lock
            disconnect = not self._done
        self._base += len(self._buffer)  # under _lock
        self._buffer.clear()  # §3.13: nobody is left to get them
        return disconnect

    # -- the drain: one WIP loop serves every subscriber ------------------------------------

    def _drain(self) -> None:
        """The loop, run by the entry point that took the WIP from 0 (each changes state and
        bumps ``_wip`` under the lock; the others return at once and it goes round again for
        them, §3.3). Requests upstream while holding it: what a synchronous upstream emits
        inside them is served by the next round, not by a nested drain."""
        missed = 1
        try:
            while True:
                disconnect = False
                for inner, subscriber, batch, end in self._plan():
                    disconnect |= self._serve(inner, subscriber, batch, end)
                with self._lock:
                    due = self._advance() if self._inners else 0
                    if not (due or disconnect):
                        self._wip -= missed  # under _lock
                        missed = self._wip
                        if not missed:
                            return
                        continue
                if disconnect:
                    self._upstream.cancel()  # §3.12: the last one left inside a signal
                else:
                    self._upstream.request(due)  # another round follows
        except BaseException:  # out of a subscriber or the upstream: the caller gets it,
            with self._lock:  # and the next signal drains again
                self._wip = 0  # under _lock
            raise

    def _plan(self) -> list[tuple[_Inner[T], Subscriber[T], Sequence[T], Exception | bool]]:
        """Under the lock, once a pass: what each subscriber gets now; the elements are
        taken out of its demand (§1.1) and its place moves on before they are delivered."""
        plan: list[tuple[_Inner[T], Subscriber[T], Sequence[T], Exception | bool]] = []
        with self._lock:
            buffer = self._buffer
            tail = self._base + len(buffer)
            for inner in list(self._inners):
                subscriber = inner.subscriber
                if not inner.started or subscriber is None:
                    continue
                failure = inner.bad if inner.bad is not None else self._error  # §3.9; or
                # the upstream's error, at once
                if failure is not None:
                    self._remove(inner)
                    plan.append((inner, subscriber, (), failure))
                    continue
                k = min(inner.demand, tail - inner.pos)
                batch: Sequence[T] = ()
                if k > 0:
                    i = inner.pos - self._base
                    batch = (buffer[i],) if k == 1 else list(islice(buffer, i, i + k))
                    inner.pos += k  # under _lock
                    inner.demand = produced(inner.demand, k)  # under _lock
                end = self._done and inner.pos == tail  # §1.2: no demand needed
                if end:
                    self._remove(inner)  # it is given the rest and on_complete below
                if batch or end:
                    plan.append((inner, subscriber, batch, end))
        return plan

    def _serve(
        self,
        inner: _Inner[T],
        subscriber: Subscriber[T],
        batch: Sequence[T],
        end: Exception | bool,
    ) -> bool:
        """Deliver one subscriber's share of a pass, then its terminal signal if due; True
        when it was the last one and left by raising (§2.13): upstream is to be cancelled."""
        for element in batch:
            try:
                subscriber.on_next(element)
            except Exception as exc:  # §2.13: it counts as cancelled, the others go on
                report_dropped(exc, rule="2.13", where="on_next raised; subscription cancelled")
                return self._drop(inner)
            except BaseException:  # KeyboardInterrupt, SystemExit: it ends that subscriber
                if self._drop(inner):  # (§3.13) and goes on to the caller
                    self._upstream.cancel()
                raise
            if inner.cancelled:  # cancel() from on_next or another thread (§3.12); a hint
                return False
        if end is False:
            return False
        try:
            if end is True:
                subscriber.on_complete()
            else:
                subscriber.on_error(end)
        except Exception as exc:  # §2.13
            report_dropped(exc, rule="2.13", where="on_complete/on_error raised")
        return False

    def _drop(self, inner: _Inner[T]) -> bool:
        """A subscriber that raised counts as cancelled (§2.13); True: cancel upstream."""
        with self._lock:
            inner.cancelled = True  # under _lock
            return self._remove(inner)

    def _advance(self) -> int:
        """Under _lock: drop what every current subscriber was given (the buffer starts at
        the slowest one); return what to request upstream now (the 75% rule)."""
        head = min(map(_POS, self._inners))
        gone = head - self._base
        if gone <= 0:
            return 0
        buffer = self._buffer
        for _ in range(gone):
            buffer.popleft()  # under _lock
        self._base = head  # under _lock
        if self._done:  # §2.4: nothing more to ask for
            return 0
        return self._replenisher.consumed(gone, len(buffer))  # under _lock

    @property
    def buffered(self) -> int:
        with self._lock:
            return len(self._buffer)

    def held_from(self, pos: int) -> int:
        """Elements held from the absolute index ``pos`` on (a snapshot, no lock)."""
        return max(0, self._base + len(self._buffer) - pos)

    def scan(self) -> Scan:
        """The hub's row (any thread, no lock): ``requested`` is the smallest outstanding
        demand of the subscribers, ``asked``/``in_flight`` its upstream's, ``delivered`` what
        every subscriber was given (it left the buffer). Upstream: the source's subscription."""
        inners = tuple(self._inners)  # a copy: the list changes under _lock meanwhile
        state, done, base, held = self._state, self._done, self._base, len(self._buffer)
        live = [inner for inner in inners if inner.subscriber is not None]
        asked, linked, count = self._asked, self._upstream.linked, len(live)
        waiting = ""
        if state is _IDLE:
            waiting = f"waiting for min_subscribers: {count} of {self._min_subscribers} here"
        elif state is _CONNECTED and not done and self._upstream.subscription is None:
            waiting = "waiting for the upstream's on_subscribe"
        idle = [inner for inner in live if not inner.demand]  # no demand: holding back?
        paced = count > 1 and idle and state is _CONNECTED and not done
        behind = min(idle, key=_POS) if paced else None  # the furthest back
        return _HubScan(
            f"share ({count} subscriber{'' if count == 1 else 's'})",
            requested=min(map(_DEMAND, live), default=0),
            asked=asked,
            in_flight=0 if done else max(0, asked - self._received),
            buffered=held,
            delivered=base,
            cancelled=state is _DISCONNECTED,
            terminated=done and state is not _DISCONNECTED,
            subscribed=not waiting,
            upstream=linked,
            waiting=waiting,
            paced_by=0 if behind is None else behind.number,
        )

    @property
    def disconnected(self) -> bool:
        return self._state is _DISCONNECTED  # a hint: subscribe() decides under the lock

    # -- Subscriber (upstream side) ---------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        if self._upstream.set_once(subscription):  # §2.5; after a disconnect: cancelled
            self._upstream.request(self._prefetch)  # the window, up front

    def on_next(self, element: T) -> None:
        if element is None:  # §2.13: every subscriber hears why; upstream gets TypeError
            self._fail(TypeError("§2.13: upstream signalled on_next(None)"))
            raise TypeError("§2.13: on_next() requires an element, got None")
        if self._done:  # §2.8: after a failure (a one-way flag, read as a hint)
            return
        self._received += 1  # owned: the upstream's on_next calls are serial (§1.3)
        if self._received > self._asked:
            if self._upstream.subscription is None:
                self._fail(ProtocolViolation("1.9", "§1.9: on_next before on_subscribe"))
            else:
                self._fail(
                    OverflowViolation(
                        f"§1.1: upstream signalled on_next number {self._received}, beyond "
                        f"the {self._asked} requested in all (buffer_size={self._prefetch})"
                    )
                )
            return
        with self._lock:
            if self._done or self._state is _DISCONNECTED:
                return  # §2.8: after a failure or the last cancel
            self._buffer.append(element)  # under _lock
            self._wip += 1  # under _lock
            if self._wip != 1:  # the drain in progress serves it, next round
                return
        self._drain()

    def on_error(self, error: Exception) -> None:
        if error is None:  # §2.13
            self._fail(TypeError("§2.13: upstream signalled on_error(None)"))  # type: ignore[unreachable]
        require_error(error)  # §2.13: raises TypeError for None
        self._terminate(error)

    def on_complete(self) -> None:
        self._terminate(None)

    def _pass(self, upstream: Subscription, n: int) -> None:
        """One ``upstream.request(n)``, made by ``Upstream`` in turn (§2.7), counted first
        (§1.1: a synchronous upstream emits inside it); one that raises fails every
        subscriber (§3.16) instead of escaping into whoever asked."""
        self._asked = add_cap(self._asked, n)  # owned: the thread whose turn it is (§2.7)
        try:
            upstream.request(n)
        except Exception as exc:
            error = RuntimeError(f"§3.16: the upstream's request({n}) raised {exc!r}")
            error.__cause__ = exc
            self._fail(error)

    def _fail(self, error: Exception) -> None:
        """Cancel upstream (§3.13), then end every subscriber with ``error`` (§1.4)."""
        self._upstream.cancel()
        self._terminate(error)

    def _terminate(self, error: Exception | None) -> None:
        """The upstream ended: ``on_complete`` reaches each subscriber after what is held for
        it; ``on_error`` at once, dropping what is held (as Reactor's publish)."""
        with self._lock:
            ended = self._done
            if not ended:
                self._done = True  # under _lock
                if error is not None:
                    self._error = error  # under _lock
                    self._base += len(self._buffer)  # under _lock
                    self._buffer.clear()  # under _lock
                self._wip += 1  # under _lock
                drain = self._wip == 1
        if ended:
            if error is not None:
                report_dropped(error, rule="1.7", where="upstream on_error after its end")
            return
        self._upstream.take()  # §2.4, §3.13: no request after the end; reference dropped
        if drain:
            self._drain()


@final
class SharePublisher(Generic[T]):
    """Multicasts ``source`` to every subscriber over one upstream subscription.

    Upstream is subscribed once ``min_subscribers`` are here and asked for ``buffer_size``,
    then for more each time 75% of that left the buffer, i.e. was given to every current
    subscriber: it is never asked more than ``buffer_size`` ahead of the slowest, which paces
    the rest. A subscriber that cancels paces no one from then on; when the last one leaves
    before the end, upstream is cancelled (§3.12) and the next subscriber connects afresh
    (the source is subscribed again; a one-shot source refuses it with ``on_error``, §1.9).
    A late subscriber gets the elements from its subscription on, after those still held
    (not yet given to every earlier one). ``on_complete`` reaches each after its elements;
    ``on_error`` at once, dropping what is held. Once the end was reached, a new subscriber
    gets ``on_subscribe`` and the terminal signal at once. Rules per subscriber: §1.1, §1.3,
    §2.13 (one that raises is dropped, reported; the others go on), §3.3, §3.9, §3.13.
    Threads: signals arrive on whichever thread runs the one drain: the upstream's, or one
    calling ``request``/``cancel`` (which may then run a synchronous upstream).
    """

    __slots__ = ("_buffer_size", "_connection", "_lock", "_min_subscribers", "_source")

    def __init__(
        self, source: Publisher[T], *, buffer_size: int = 256, min_subscribers: int = 1
    ) -> None:
        require_publisher(source, "share()")
        for name, value in (("buffer_size", buffer_size), ("min_subscribers", min_subscribers)):
            if type(value) is not int or value < 1:
                raise ValueError(f"share(): {name} must be an int >= 1, got {value!r}")
        self._source = source
        self._buffer_size = buffer_size
        self._min_subscribers = min_subscribers
        self._lock = threading.Lock()
        self._connection: _Connection[T] | None = None  # under _lock

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        while True:
            with self._lock:
                connection = self._connection
                if connection is None or connection.disconnected:
                    connection = _Connection(self._source, self._buffer_size, self._min_subscribers)
                    self._connection = connection  # under _lock
            if connection.subscribe(subscriber):  # False: disconnected meanwhile; again
                return

    def scan(self) -> Scan:
        """The hub's row for :func:`~reactive_streams.snapshot` (any thread, no lock), so a
        snapshot of this publisher starts there; before any subscriber, an idle hub's."""
        connection = self._connection  # a snapshot: replaced under _lock
        if connection is not None:
            return connection.scan()
        return _HubScan(
            "share (0 subscribers)",
            requested=0,
            subscribed=False,
            waiting=f"waiting for min_subscribers: 0 of {self._min_subscribers} here",
        )

    @property
    def buffered(self) -> int:
        """Elements held now for subscribers that have not been given them (a snapshot)."""
        with self._lock:
            connection = self._connection
        return connection.buffered if connection is not None else 0


def share(
    publisher: Publisher[T], *, buffer_size: int = 256, min_subscribers: int = 1
) -> Publisher[T]:
    """Share one subscription to ``publisher`` among all subscribers, paced by the slowest.

    Args:
        publisher: the upstream, subscribed once per connection.
        buffer_size: the most elements held (and asked for) ahead of the slowest subscriber.
        min_subscribers: how many subscribers must be here before upstream is subscribed.

    Returns:
        A :class:`SharePublisher` (Reactor's ``publish().refCount(min_subscribers)``).

    Raises:
        TypeError: ``publisher`` is not a Publisher.
        ValueError: ``buffer_size`` or ``min_subscribers`` is not an int >= 1.

    Example:
        >>> from reactive_streams import UNBOUNDED
        >>> from reactive_streams.adapters.iterables import from_iterable
        >>> from reactive_streams.testing import RecordingSubscriber
        >>> shared = share(from_iterable(range(3)), min_subscribers=2)
        >>> a, b = RecordingSubscriber(UNBOUNDED), RecordingSubscriber(1)
        >>> shared.subscribe(a); shared.subscribe(b); b.request(2)
        >>> a.elements, b.elements, a.completed and b.completed
        ([0, 1, 2], [0, 1, 2], True)
    """
    return SharePublisher(publisher, buffer_size=buffer_size, min_subscribers=min_subscribers)
