"""``share``: one upstream subscription multicast to every subscriber, paced by the slowest.

Each subscriber gets the one drain loop (``DrainSubscription``) over a cursor into a buffer that
all of them share: the drain keeps §1.1, §1.3, §2.13, §3.3, §3.9 and §3.13 per subscriber as for
every other publisher; the cursors, the buffer and the upstream live in ``_Connection``, under
its lock. Why no multicast drain (RxJava's ``FlowablePublish`` moves all subscribers in
lockstep, at the least demand): each subscriber here moves at its own demand, so it has its own
position, and the drain per subscriber is already the WIP loop for one position.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from threading import get_ident
from typing import Final, Generic, TypeVar, final

from reactive_streams._demand import Replenisher, add_cap
from reactive_streams._drain import EMPTY, END, DrainSubscription, Source, _Marker
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
_DISCONNECTED: Final = "disconnected"  # the last subscriber left: upstream cancelled


def _nothing() -> None:
    pass


def _wake(cursors: list[_Cursor[T]]) -> None:
    """Wake each cursor's drain; one that raises a BaseException (out of a subscriber's
    ``on_next``, run here inline) does not leave the others waiting for ever."""
    for i, cursor in enumerate(cursors):
        try:
            cursor.wake()
        except BaseException:
            _wake(cursors[i + 1 :])
            raise


@final
class _Cursor(Source[T]):
    """One subscriber's place in the shared buffer: the Source its drain polls. ``pos`` (the
    absolute index of its next element), ``waiting`` and ``joined`` are under the connection's
    lock; every method but ``interrupt`` is called by its drain, serially (see Source)."""

    __slots__ = ("_connection", "_wake", "joined", "pos", "waiting")

    def __init__(self, connection: _Connection[T]) -> None:
        self._connection = connection
        self._wake: Callable[[], None] = _nothing
        self.pos = 0
        self.waiting = False  # found nothing new: the next element wakes its drain
        self.joined = False  # counted among the connection's subscribers

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def wake(self) -> None:
        self._wake()

    def poll(self) -> T | _Marker:
        return self._connection.take(self)

    def at_end(self) -> bool:
        return self._connection.at_end(self)

    def interrupt(self) -> None:
        self._connection.leave(self)  # cancelled while busy: stop pacing the others now

    def close(self) -> None:
        self._connection.leave(self)  # idempotent: after interrupt, a no-op
        self._wake = _nothing  # §3.13: the drain let go of its subscriber


@final
class _Connection(Generic[T]):
    """One connection of ``SharePublisher``: the upstream subscription, the shared buffer and
    the subscribers' cursors. Upstream it is the Subscriber (signals from the upstream's
    thread, serial, §1.3); downstream each cursor's drain calls ``take``/``at_end``/``leave``.
    Everything shared is under ``_lock``; no lock is held while calling out (user code, the
    upstream, a drain's ``wake``). The buffer holds the elements some current subscriber has
    not had yet: from the slowest cursor (``_base``) to the newest element.
    """

    __slots__ = (
        "_asked",
        "_base",
        "_buffer",
        "_cursors",
        "_done",
        "_error",
        "_lock",
        "_min_subscribers",
        "_prefetch",
        "_received",
        "_replenisher",
        "_requester",
        "_source",
        "_state",
        "_upstream",
        "_waiting",
    )

    def __init__(self, source: Publisher[T], buffer_size: int, min_subscribers: int) -> None:
        self._lock = threading.Lock()
        # Under _lock: the buffer and its absolute start, the cursors, the state.
        self._buffer: deque[T] = deque()
        self._base = 0  # the absolute index of _buffer[0]: the slowest cursor's pos
        self._cursors: list[_Cursor[T]] = []
        self._waiting: list[_Cursor[T]] = []  # cursors that found nothing new to take
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
        self._requester = 0  # the thread inside upstream.request now; written by it alone

    # -- subscribers (downstream side) ------------------------------------------------------

    def join(self, cursor: _Cursor[T]) -> bool:
        """Count ``cursor`` as a subscriber from the oldest element still held; False once
        this connection was disconnected (the caller makes a fresh one)."""
        with self._lock:
            if self._state is _DISCONNECTED:
                return False
            cursor.pos = self._base  # under _lock: nothing older is held, nothing skipped
            cursor.joined = True  # under _lock
            self._cursors.append(cursor)  # under _lock
        return True

    def connect_if_ready(self) -> None:
        """Subscribe upstream once ``min_subscribers`` are here (the autoConnect)."""
        with self._lock:
            if self._state is not _IDLE or len(self._cursors) < self._min_subscribers:
                return
            self._state = _CONNECTED  # under _lock: connect once
        try:
            self._source.subscribe(self)
        except Exception as exc:  # a broken upstream (§1.9): every subscriber hears it
            self._fail(exc)

    def take(self, cursor: _Cursor[T]) -> T | _Marker:
        """The cursor's next element, ``EMPTY`` (it is then woken by the next one) or
        ``END``; raises the upstream's error at once (§1.4; the buffer was dropped)."""
        due = 0
        with self._lock:
            error = self._error
            if error is None:
                buffer = self._buffer
                i = cursor.pos - self._base
                if not cursor.joined:  # left meanwhile (a cancel from another thread)
                    element: T | _Marker = EMPTY
                elif i < len(buffer):
                    element = buffer[i]
                    cursor.pos += 1  # under _lock
                    if i == 0:  # it was at the head: the head may move (the min, below)
                        due = self._advance()
                elif self._done:
                    element = END
                else:
                    element = EMPTY
                    if not cursor.waiting:
                        cursor.waiting = True  # under _lock
                        self._waiting.append(cursor)  # under _lock
        if error is not None:
            raise error
        if due:
            self._upstream.request(due)  # made after the lock; serial (§2.7)
        return element

    def at_end(self, cursor: _Cursor[T]) -> bool:
        """True when ``take`` would give ``END`` or raise: the terminal signal needs no
        demand (§1.2, §2.9, §2.10)."""
        with self._lock:
            if not cursor.joined:
                return False
            if self._error is not None:
                return True
            return self._done and cursor.pos == self._base + len(self._buffer)

    def leave(self, cursor: _Cursor[T]) -> None:
        """The cursor's subscriber cancelled or terminated: it stops pacing the others; the
        last one to leave a running connection cancels upstream (§3.12, refCount)."""
        due = 0
        cancel = False
        with self._lock:
            if not cursor.joined:
                return  # §3.7
            cursor.joined = False  # under _lock
            self._cursors.remove(cursor)  # under _lock
            if cursor.waiting:
                cursor.waiting = False  # under _lock
                self._waiting.remove(cursor)  # under _lock
            if not self._cursors:
                # Over for good once its end was reached (all delivered, or failed): later
                # subscribers get the terminal signal. Else the next one connects afresh.
                if self._state is _CONNECTED and (
                    not self._done or (self._error is None and self._buffer)
                ):
                    self._state = _DISCONNECTED  # under _lock
                    cancel = not self._done
                self._base += len(self._buffer)  # under _lock
                self._buffer.clear()  # §3.13: nobody is left to get them
            elif cursor.pos == self._base:  # it may have been the one pacing the rest
                due = self._advance()
        if cancel:
            self._upstream.cancel()  # §3.12: once (§3.7), quietly (§3.15)
        elif due:
            self._upstream.request(due)

    def _advance(self) -> int:
        """Under _lock: drop what every current subscriber has had (the buffer starts at
        the slowest cursor); return what to request upstream now (75% rule)."""
        head = min(cursor.pos for cursor in self._cursors)
        gone = head - self._base
        if not gone:
            return 0
        buffer = self._buffer
        for _ in range(gone):
            buffer.popleft()  # under _lock
        self._base = head  # under _lock
        return self._replenisher.consumed(gone, len(buffer))  # under _lock

    @property
    def buffered(self) -> int:
        with self._lock:
            return len(self._buffer)

    @property
    def disconnected(self) -> bool:
        return self._state is _DISCONNECTED  # a hint: join() decides under the lock

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
            if self._requester == get_ident():  # emitted inside our request: the waiting
                return  # are woken once it returns, for all it brought (see _pass)
        self._wake_waiting()

    def _wake_waiting(self) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, []  # under _lock
            for cursor in waiting:
                cursor.waiting = False  # under _lock
        _wake(waiting)  # after the lock: their drains may run here, inline

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
        subscriber (§3.16) instead of escaping into a subscriber's drain."""
        self._asked = add_cap(self._asked, n)  # owned: the thread whose turn it is (§2.7)
        # A synchronous upstream emits inside request: on_next then only appends, and the
        # waiting are woken once, below. Only this thread can see its own id here.
        self._requester = get_ident()  # owned: the turn's thread (one at a time, §2.7)
        try:
            upstream.request(n)
        except Exception as exc:
            error = RuntimeError(f"§3.16: the upstream's request({n}) raised {exc!r}")
            error.__cause__ = exc
            self._fail(error)
        finally:
            self._requester = 0
            self._wake_waiting()

    def _fail(self, error: Exception) -> None:
        """Cancel upstream (§3.13), then end every subscriber with ``error`` (§1.4)."""
        self._upstream.cancel()
        self._terminate(error)

    def _terminate(self, error: Exception | None) -> None:
        """The upstream ended: ``on_complete`` reaches each subscriber after its buffered
        elements; ``on_error`` at once, dropping the buffer (as Reactor's publish)."""
        cursors: list[_Cursor[T]] = []
        with self._lock:
            ended = self._done
            if not ended:
                self._done = True  # under _lock
                if error is not None:
                    self._error = error  # under _lock
                    self._base += len(self._buffer)  # under _lock
                    self._buffer.clear()  # under _lock
                for cursor in self._waiting:
                    cursor.waiting = False  # under _lock
                self._waiting = []  # under _lock
                cursors = list(self._cursors)
        if ended:
            if error is not None:
                report_dropped(error, rule="1.7", where="upstream on_error after its end")
            return
        self._upstream.take()  # §2.4, §3.13: no request after the end; reference dropped
        _wake(cursors)  # after the lock: each drain delivers it (§1.3)


@final
class SharePublisher(Generic[T]):
    """Multicasts ``source`` to every subscriber over one upstream subscription.

    Upstream is subscribed once ``min_subscribers`` are here and asked for ``buffer_size``,
    then for 75% of it each time that many elements left the buffer, i.e. reached every
    current subscriber: upstream is never asked more than ``buffer_size`` ahead of the
    slowest subscriber, which paces the rest. A subscriber that cancels stops pacing at
    once; when the last one leaves, upstream is cancelled (§3.12) and the next subscriber
    starts a fresh connection (the source is subscribed again; a one-shot source then
    refuses it with ``on_error``, §1.9). A late subscriber gets the elements from its
    subscription on, after those still held (not yet had by every earlier one).
    ``on_complete`` reaches each after its buffered elements; ``on_error`` at once (the
    buffer is dropped). A subscriber of a terminated share gets the terminal signal at once.
    Rules per subscriber, by its drain: §1.1, §1.3, §2.13, §3.3, §3.9, §3.13. Threads: each
    subscriber's signals arrive on the thread that made them possible: the upstream's (a
    new element), or one calling ``request``/``cancel`` (which may then run upstream).
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
            cursor: _Cursor[T] = _Cursor(connection)
            if connection.join(cursor):  # False: disconnected meanwhile; take a fresh one
                break
        DrainSubscription(subscriber, cursor).start()  # on_subscribe, then its drain
        connection.connect_if_ready()

    @property
    def buffered(self) -> int:
        """Elements held now for subscribers that have not had them (a snapshot)."""
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
