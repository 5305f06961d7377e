"""``PrefetchQueue``: the bounded hand-off between an upstream Publisher and one consumer.

Upstream it is a Subscriber that keeps at most ``prefetch`` elements requested ahead of
consumption, replenishing ``limit`` (75% of ``prefetch``) at a time; downstream it is a
:class:`~reactive_streams._drain.Source`, so the drain loop (``publish_on``), a blocking iterator
(``to_iterator``) or an event loop (``to_async_iterator``) consume it alike.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar, final

from reactive_streams._demand import UNBOUNDED, Replenisher, add_cap
from reactive_streams._drain import EMPTY, END, QueueSink, Source, _Marker
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    CANCELLED,
    cancel_quietly,
    report_dropped,
    require_element,
    require_error,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Subscription
from reactive_streams.errors import OverflowViolation, ProtocolViolation

__all__ = ["PrefetchQueue"]

T = TypeVar("T")


def _nothing() -> None:
    pass


@final
class PrefetchQueue(Source[T], QueueSink[T], Generic[T]):
    """A bounded queue that is an upstream Subscriber and a downstream Source.

    Upstream signals may come from any thread; ``poll``/``at_end``/``close`` are called by
    one consumer at a time. An upstream that sends one ``on_next`` more than it was asked
    for in all is cancelled and the consumer gets ``OverflowViolation`` (§1.1), so the queue
    never holds more than ``prefetch`` elements. ``close()`` cancels upstream (§3.12) and
    empties the queue (§3.13).

    It is also a :class:`~reactive_streams._drain.QueueSink`: when the upstream is one of this
    project's drain publishers, the drain appends to the queue directly instead of calling
    ``on_next`` per element (its accounting already keeps §1.1).

    ``lazy=True`` (``publish_on``) makes the first request when the consumer first finds
    the queue empty with demand (``want``), on the consumer's thread, instead of in
    ``on_subscribe``: a synchronous upstream (a blocking generator) then never runs on
    the thread that subscribed, an event loop say, and nothing is pulled before demand.
    """

    __slots__ = (
        "_asked",
        "_cancelled",
        "_done",
        "_ended",
        "_error",
        "_lazy",
        "_lock",
        "_prefetch",
        "_queue",
        "_received",
        "_replenisher",
        "_upstream",
        "_wake",
        "queue",
        "sink",
    )

    def __init__(
        self, prefetch: int = 256, limit: int | None = None, *, lazy: bool = False
    ) -> None:
        self._replenisher = Replenisher(prefetch, limit)
        self._prefetch = prefetch
        self._queue: deque[T] = deque()
        self.queue: deque[T] = self._queue  # fused: the drain pops straight from it
        self.sink: deque[T] = self._queue  # fused: an upstream drain appends straight to it
        self._lock = threading.Lock()
        self._upstream = Upstream(self._pass)  # set once (§2.5), requests serial (§2.7)
        self._done = False  # ended or closed: nothing more is queued
        self._ended = False  # the upstream's terminal signal came
        self._cancelled = False  # the consumer cancelled (close, interrupt, a violation): §1.8
        self._error: Exception | None = None
        self._wake: Callable[[], None] = _nothing
        self._lazy = lazy  # True until the first request is due (see want)
        # §1.1, exactly: on_next counts against everything passed to upstream.request,
        # counted right before each call (a synchronous upstream emits inside it) by the
        # thread whose turn it is to request (§2.7, Upstream); each count has one writer.
        self._asked = 0
        self._received = 0  # the upstream's on_next (a fused upstream drain keeps §1.1 itself)

    @property
    def prefetch(self) -> int:
        return self._replenisher.prefetch

    @property
    def until_replenish(self) -> int:
        """Elements a consumer may pop before reporting them with ``consumed``: the next
        request is due then (see :attr:`Replenisher.until_due`)."""
        return self._replenisher.until_due

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def subscribed(self) -> bool:
        """``False`` while the upstream has not called ``on_subscribe`` (and the queue is
        open): the consumer waits on a publisher that has not subscribed it yet."""
        return self._upstream.subscription is not None

    def describe(self) -> str:
        """The queue's state in a few words, for its consumer's ``repr``: read without the
        lock (a snapshot, maybe a signal stale), at no cost to the per-element path."""
        queued = len(self._queue)
        if self._done:
            end = "completed" if self._ended else "cancelled"
            if self._error is not None:
                end = f"failed with {self._error!r}"
            return f"{end}, {queued} queued" if queued else end
        if not self.subscribed:
            return "waiting: no upstream subscribed yet (was subscribe() called?)"
        asked = self._asked  # owned by the requesting thread: a stale read at worst
        if self._lazy and not asked:
            return "subscribed, nothing requested yet (the first request waits for demand)"
        return f"{queued} queued, {asked} requested in all (prefetch={self._prefetch})"

    # -- diagnostics (reactive_streams.snapshot): read without the lock --------------------

    def asked(self) -> int:
        return self._asked  # owned by the requesting thread: a stale read at worst

    def in_flight(self) -> int | None:
        """Asked and not yet arrived: the window less what was consumed since the last
        request and what is queued (the replenisher asks again exactly what was consumed)."""
        prefetch = self._replenisher.prefetch
        if prefetch == UNBOUNDED:
            return None
        if not self._asked or self._done:
            return 0
        replenisher = self._replenisher
        since = replenisher.limit - replenisher.until_due  # consumed since the last request
        return max(0, prefetch - since - len(self._queue))

    def upstream(self) -> object | None:
        return self._upstream.linked

    def scan_sink(self, name: str, pending: int = 0) -> Scan:
        """The record of the sink that consumes this queue (``to_iterator``…), named ``name``;
        ``pending``: elements it took and has not reported with ``consumed`` yet. Delivered
        is not known once the queue ended (the upstream may end short of the window)."""
        subscribed = self.subscribed or self._done
        in_flight = self.in_flight()
        delivered: int | None = None
        if in_flight is not None and not self._done:
            in_flight = max(0, in_flight - pending)
            delivered = max(0, self._asked - in_flight - len(self._queue))
        return Scan(
            name,
            asked=self._asked,
            in_flight=in_flight,
            buffered=len(self._queue),
            delivered=delivered,
            cancelled=self._cancelled,
            terminated=self._ended,
            subscribed=subscribed,
            upstream=self._upstream.linked,
        )

    # -- Subscriber (upstream side) ----------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        lazy = self._lazy  # read first: want() clears it only once a subscription is kept
        if not self._upstream.set_once(subscription):  # §2.5, or closed before: cancelled
            return
        if lazy:  # the consumer may have found the queue empty with demand already: it
            self._wake()  # looks again, on its own thread, and makes the request there
        else:
            self._ask(self._replenisher.prefetch)

    def on_next(self, element: T) -> None:
        if element is None:  # §2.13: the subscription counts as cancelled, the consumer
            if not self._done:  # hears why (once ended or closed, there is no one to tell),
                self.fail_upstream(TypeError("§2.13: upstream signalled on_next(None)"))
            require_element(element)  # and upstream gets its TypeError
        if self._done:
            return  # §2.8: late elements after close
        self._received += 1  # owned: the upstream's on_next calls are serial (§1.3)
        asked = self._asked
        if self._received > asked:
            if self._upstream.subscription is None:  # §1.9: nothing was requested yet
                self.fail_upstream(
                    ProtocolViolation(
                        "1.9", "§1.9: upstream signalled on_next before on_subscribe"
                    )
                )
                return
            self.fail_upstream(  # §1.1
                OverflowViolation(
                    f"§1.1: upstream signalled on_next number {self._received}, beyond the "
                    f"{asked} requested in all (prefetch={self._prefetch})"
                )
            )
            return
        queue = self._queue
        queue.append(element)
        if len(queue) == 1:
            # Wake only on empty -> non-empty: a consumer stops only after seeing the queue
            # empty, so every later element is either seen by the pass in progress or is the
            # one that makes the queue non-empty again and wakes it (single producer, §1.3).
            self._wake()

    def sink_filled(self) -> None:
        self._wake()  # an upstream drain appended to the empty queue (see on_next)

    def on_error(self, error: Exception) -> None:
        if error is None:  # §2.13, as for on_next(None)
            self.fail_upstream(TypeError("§2.13: upstream signalled on_error(None)"))  # type: ignore[unreachable]
        require_error(error)  # §2.13: raises TypeError for None
        self._upstream.stop_requests()  # §2.4: the subscription counts as cancelled
        with self._lock:
            ended, self._ended = self._ended, True
        if ended:
            report_dropped(error, rule="1.7", where="on_error after the upstream's end")
        elif self._cancelled or not self._finish(error):  # it may race our cancel (§1.8)
            report_dropped(error, rule="1.8", where="on_error after the consumer cancelled")

    def on_complete(self) -> None:
        self._upstream.stop_requests()  # §2.4: the subscription counts as cancelled
        with self._lock:
            if self._ended:
                return
            self._ended = True
            if self._done:  # closed
                return
            self._done = True
        self._wake()

    def _finish(self, error: Exception) -> bool:
        """End the queue with ``error``, after what is queued; False if it was over."""
        with self._lock:
            if self._done:
                return False
            self._error = error
            self._done = True  # set after the error: a consumer that sees _done sees _error
        self._wake()
        return True

    # -- Source (consumer side) ----------------------------------------------------------------

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def poll(self) -> T | _Marker:
        done = self._done  # read before the queue: every append happened before _done was set
        queue = self._queue
        if queue:
            element = queue.popleft()
            due = self._replenisher.consumed(1, len(queue))
            if due:
                self._request(due)
            return element
        if done:
            if self._error is not None:
                raise self._error
            return END
        return EMPTY

    def want(self, n: int) -> None:
        """The consumer found the queue empty (with demand, for a drain): if none of the
        last request has arrived yet, what was consumed since is requested now
        (:meth:`Replenisher.ran_dry`), so the upstream can fill the whole window at once.

        A lazy queue's first request is made here too, on the consumer's thread (once
        upstream has subscribed: on_subscribe wakes the consumer to come back). Until then
        nothing was requested (§1.1)."""
        if not self._lazy:  # a lock-free read: the flag only ever goes to False
            due = self._replenisher.ran_dry()
            if due:
                self._request(due)
            return
        if self._upstream.subscription is None:
            return  # not subscribed yet
        with self._lock:  # under _lock: the first request is made once
            first, self._lazy = self._lazy, False
        if first:
            self._ask(self._replenisher.prefetch)  # a no-op once closed (§3.6)

    def consumed(self, n: int) -> None:
        due = self._replenisher.consumed(n, len(self._queue))
        if due:
            self._request(due)

    def _request(self, due: int) -> None:
        if self._upstream.subscription is not None:  # nothing is asked before on_subscribe
            self._ask(due)

    def _ask(self, n: int) -> None:
        """Request ``n`` upstream, one call at a time (§2.7, :class:`Upstream`): a request
        made while another thread's is in progress is made by that thread when its call
        returns; one from inside it, on its own thread, goes straight through (§3.3).
        Nothing is asked once the upstream ended (§2.4) or the consumer cancelled (§3.6);
        a cancel is not held back behind a request in progress (§3.5).

        An interrupt (a BaseException) that ends a turn with a request left for it fails
        the consumer, naming that request, instead of leaving it waiting for ever; then it
        goes on to the caller (the publisher's thread, maybe). See docs/spec-mapping.md §2.7.
        """
        try:
            self._upstream.request(n)
        except BaseException as exc:
            lost = self._upstream.drop_missed()  # 0 while a turn will still make it
            if lost and not self._done:
                error = RuntimeError(
                    f"request({lost}) upstream was never made: {exc!r} interrupted the "
                    "thread that was to make it (§2.7: it waited for that thread's request)"
                )
                error.__cause__ = exc
                self.fail_upstream(error)
            raise

    def _pass(self, upstream: Subscription, n: int) -> None:
        """One ``upstream.request(n)``, made by ``Upstream`` in turn (§2.7), counted first
        (§1.1). One that raises breaks §3.16: the consumer gets the error after what is
        queued, instead of it escaping into whoever consumed (an element popped and lost,
        or a drain's task); an interrupt ends the queue too, naming this request, then
        goes on (see ``_ask``)."""
        self._asked = add_cap(self._asked, n)  # owned: the thread whose turn it is (§2.7)
        try:
            upstream.request(n)
        except Exception as exc:
            self._request_failed(n, exc)
        except BaseException as exc:
            if not self._done:  # once: a nested request's interrupt passes through here
                self._request_failed(n, exc)
            raise

    def _request_failed(self, n: int, exc: BaseException) -> None:
        error = RuntimeError(f"§3.16: the upstream's request({n}) raised {exc!r}")
        error.__cause__ = exc
        self.fail_upstream(error)

    def at_end(self) -> bool:
        return self._done and not self._queue

    def close(self) -> None:
        self._cancelled = True
        upstream = self._upstream.take()
        with self._lock:  # under _lock
            was_done, self._done = self._done, True
        self._wake = _nothing
        if upstream is not None and upstream is not CANCELLED and not was_done:
            cancel_quietly(upstream)  # §3.12; before the clear, as a QueueSink must (§3.15)
        self._queue.clear()  # §3.13

    def interrupt(self) -> None:
        """The consumer cancelled from another thread while its drain is busy (in a slow
        ``on_next``, or inside upstream's ``request``): cancel upstream now (§3.12), with no
        new request after it (but one already decided on: see ``_ask``). An upstream of
        ours is asked to defer the clean-up of an idle inline drain
        (``cancel_deferring_cleanup``), which must run neither on the cancelling thread (an
        event loop's, say; §3.5) nor on a thread of no one's: ``close()`` cancels again, on
        the drain's thread, and runs it there. Any other upstream is cancelled here, as
        Reactor's ``publishOn`` does (§3.5 asks its ``cancel`` to be timely)."""
        self._cancelled = True
        self._upstream.stop_requests()  # §3.6
        upstream = self._upstream.subscription
        if self._done or upstream is None or upstream is CANCELLED:
            return
        deferring = getattr(upstream, "cancel_deferring_cleanup", None)  # (no lock: user code)
        if deferring is not None:
            deferring()  # idempotent, as cancel is: close() cancels again (§3.7)
            return
        if self._upstream.take() is upstream:  # foreign: cancelled once, here (close() then
            cancel_quietly(upstream)  # skips it)

    def fail_upstream(self, error: Exception) -> None:
        """Cancel the upstream subscription, if any (§3.13), then fail the consumer with
        ``error``: for a violation (§1.1), or an upstream ``subscribe`` that raised after it
        may already have called ``on_subscribe`` (§1.9); ``on_error`` alone would mark the
        queue done, and ``close()`` would then skip the cancel."""
        self._cancelled = True  # an upstream on_error racing this cancel is §1.8
        self._upstream.cancel()  # §3.15: raising here would lose the error below
        if not self._finish(error):
            report_dropped(error, where="upstream failed after the queue was closed or ended")
