"""reactive_streams.publish_on: the asynchronous boundary and its bounded in-flight window."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import pytest

from reactive_streams import (
    UNBOUNDED,
    OverflowViolation,
    Publisher,
    Subscriber,
    Subscription,
    checked,
    publish_on,
)
from reactive_streams._drain import EMPTY, END, DrainSubscription
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import (
    CountedIterable,
    HoldFirst,
    RecordingSubscriber,
    RecordingSubscription,
    cancelled_while_delivering,
)

T = TypeVar("T")


# -- instruments ---------------------------------------------------------------------------------


class Meter:
    """Counts what flows across the upstream side of publish_on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[int] = []
        self.cancels = 0
        self.pulled = 0  # next() calls on the upstream generator

    @property
    def requested(self) -> int:
        with self.lock:
            return sum(self.requests)


class _MeteredSubscription:
    def __init__(self, inner: Subscription, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    def request(self, n: int) -> None:
        with self._meter.lock:
            self._meter.requests.append(n)
        self._inner.request(n)

    def cancel(self) -> None:
        with self._meter.lock:
            self._meter.cancels += 1
        self._inner.cancel()


class _MeteredSubscriber(Generic[T]):
    def __init__(self, downstream: Subscriber[T], meter: Meter) -> None:
        self._down = downstream
        self._meter = meter

    def on_subscribe(self, subscription: Subscription) -> None:
        self._down.on_subscribe(_MeteredSubscription(subscription, self._meter))

    def on_next(self, element: T) -> None:
        self._down.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._down.on_error(error)

    def on_complete(self) -> None:
        self._down.on_complete()


class Metered(Generic[T]):
    """An upstream over a counting generator; records each request and cancel it receives."""

    def __init__(self, n: int | None, meter: Meter, *, fail_after: Exception | None = None):
        self._n = n
        self._meter = meter
        self._fail_after = fail_after
        self.closed = threading.Event()

    def _items(self) -> Iterator[int]:
        try:
            i = 0
            while self._n is None or i < self._n:
                self._meter.pulled += 1
                yield i
                i += 1
            if self._fail_after is not None:
                raise self._fail_after
        finally:
            self.closed.set()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        from_iterable(self._items()).subscribe(_MeteredSubscriber(subscriber, self._meter))


def settle(pool: ThreadPoolExecutor) -> None:
    """Wait until every task already queued on the one-thread ``pool`` has run."""
    pool.submit(lambda: None).result(5)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """A one-thread executor (FIFO, so settle() is meaningful)."""
    with ThreadPoolExecutor(1, thread_name_prefix="publish-on") as executor:
        yield executor


def pool_thread(pool: ThreadPoolExecutor) -> int:
    """The id of the pool's only thread."""
    return pool.submit(threading.get_ident).result(5)


# -- tests -----------------------------------------------------------------------------------------


def test_signals_arrive_on_the_executor_thread(pool: ThreadPoolExecutor) -> None:
    """on_next / on_complete run on the executor; on_subscribe on the subscribing thread."""
    worker = pool_thread(pool)
    threads: set[int] = set()
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    sub.on_next_hook = lambda element: threads.add(threading.get_ident())
    publish_on(from_iterable(range(1000)), pool, prefetch=16).subscribe(sub)
    sub.await_terminal()
    assert sub.elements == list(range(1000))
    assert sub.completed
    assert threads == {worker}
    assert sub.signal_threads == {threading.get_ident(), worker}
    sub.assert_no_violations()


def test_in_flight_never_exceeds_prefetch(pool: ThreadPoolExecutor) -> None:
    """The upstream never has more than prefetch requested beyond what was delivered, and the
    queue never holds more than prefetch; the window is actually used up to prefetch."""
    prefetch = 8
    meter = Meter()
    seen: list[int] = []
    ahead: list[int] = []  # asserted on the test thread: the drain would swallow it (§2.13)

    def check(element: int) -> None:
        delivered = element + 1
        seen.append(meter.requested - delivered)  # in flight
        ahead.append(meter.pulled - delivered)  # queued (+ nothing pulled ahead)

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = check
    publish_on(Metered(200, meter), pool, prefetch=prefetch).subscribe(sub)
    assert meter.requested == 0  # nothing before the subscriber's first demand
    for i in range(200):  # a consumer that takes one at a time
        sub.request(1)
        sub.await_count(i + 1)
        if i == 0:  # then the whole window, no more
            assert (meter.requested, meter.pulled) == (prefetch, prefetch)
    sub.await_terminal()
    assert sub.elements == list(range(200))
    assert max(ahead) <= prefetch
    assert max(seen) == prefetch - 1  # never beyond prefetch, and the window is used
    sub.assert_no_violations()


def test_replenishes_at_75_percent(pool: ThreadPoolExecutor) -> None:
    """Upstream gets request(prefetch) at the subscriber's first demand, then request(limit)
    each time limit elements (75% of prefetch) were delivered, and not before."""
    meter = Meter()
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    publish_on(Metered(None, meter), pool, prefetch=8).subscribe(sub)
    settle(pool)
    assert meter.requests == []
    for i in range(5):
        sub.request(1)
        sub.await_count(i + 1)
    settle(pool)
    assert meter.requests == [8]  # 5 of 8 consumed: below 75%
    sub.request(1)
    sub.await_count(6)
    settle(pool)
    assert meter.requests == [8, 6]  # 6 of 8 consumed: replenish 6
    for i in range(6, 12):
        sub.request(1)
        sub.await_count(i + 1)
    settle(pool)
    assert meter.requests == [8, 6, 6]
    sub.cancel()


class _Hand:
    """A hot upstream the test signals by hand; each request is recorded with the number of
    elements the subscriber had received when it was made."""

    def __init__(self, received: list[int]) -> None:
        self.received = received
        self.requests: list[tuple[int, int]] = []
        self.subscriber: Subscriber[int] | None = None

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        hand = self

        class _Recorded:
            def request(self, n: int) -> None:
                hand.requests.append((len(hand.received), n))

            def cancel(self) -> None:
                pass

        self.subscriber = subscriber
        subscriber.on_subscribe(_Recorded())

    def burst(self, pool: ThreadPoolExecutor, start: int, n: int) -> None:
        """Send ``n`` elements while the pool is held, so its drain finds them all queued."""
        gate = threading.Event()
        pool.submit(gate.wait, 5)
        assert self.subscriber is not None
        for i in range(start, start + n):
            self.subscriber.on_next(i)
        gate.set()
        settle(pool)


def test_replenishes_at_the_limit_and_refills_the_window_when_it_runs_dry(
    pool: ThreadPoolExecutor,
) -> None:
    """A whole window queued at once is delivered in rounds that end at the limit: request(6)
    (75% of prefetch=8) goes upstream after exactly the 6th element since the last request,
    with 2 still queued, not a round later; and when the queue runs dry with the 2 more
    consumed (the window's slack, a quarter of it), they are requested at once, so the
    upstream can refill the whole window in one go (the rounds used to run past the limit,
    so each request went out only once the queue was empty)."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    upstream = _Hand(sub.elements)
    publish_on(upstream, pool, prefetch=8).subscribe(sub)
    settle(pool)
    assert upstream.requests == [(0, 8)]
    upstream.burst(pool, 0, 8)
    assert upstream.requests == [(0, 8), (6, 6), (8, 2)]
    upstream.burst(pool, 8, 8)  # all that is outstanding: a full window again
    assert upstream.requests == [(0, 8), (6, 6), (8, 2), (14, 6), (16, 2)]
    assert sub.elements == list(range(16))
    sub.cancel()
    sub.assert_no_violations()


def test_slow_consumer_slows_the_producer(pool: ThreadPoolExecutor) -> None:
    """A consumer that stops requesting stops the producer within the prefetch window."""
    meter = Meter()
    sub: RecordingSubscriber[int] = RecordingSubscriber(3)
    publish_on(Metered(None, meter), pool, prefetch=8).subscribe(sub)
    sub.await_count(3)
    settle(pool)
    settle(pool)
    assert sub.elements == [0, 1, 2]
    assert meter.pulled == 8  # an endless generator pulled only as far as the window
    assert meter.requested == 8
    sub.cancel()


def test_cancel_cancels_upstream(pool: ThreadPoolExecutor) -> None:
    """Cancel downstream cancels the upstream subscription and closes its generator."""
    meter = Meter()
    upstream = Metered(None, meter)
    sub: RecordingSubscriber[int] = RecordingSubscriber(4)
    publish_on(upstream, pool, prefetch=8).subscribe(sub)
    sub.await_count(4)
    sub.cancel()
    assert upstream.closed.wait(5)
    settle(pool)
    assert meter.cancels == 1
    assert not sub.is_terminated
    sub.request(10)
    settle(pool)
    assert sub.elements == [0, 1, 2, 3]


def test_error_passes_after_the_elements_before_it(pool: ThreadPoolExecutor) -> None:
    """An upstream error reaches the subscriber on the executor, after every earlier element."""
    worker = pool_thread(pool)
    boom = RuntimeError("boom")
    errors_on: list[int] = []

    class Sub(RecordingSubscriber[int]):
        def on_error(self, error: Exception) -> None:
            errors_on.append(threading.get_ident())
            super().on_error(error)

    sub = Sub(UNBOUNDED)
    publish_on(Metered(20, Meter(), fail_after=boom), pool, prefetch=4).subscribe(sub)
    sub.await_terminal()
    assert sub.elements == list(range(20))
    assert sub.error is boom
    assert errors_on == [worker]
    sub.assert_no_violations()


def test_error_waits_for_demand_to_deliver_queued_elements_first(
    pool: ThreadPoolExecutor,
) -> None:
    """Elements queued before an upstream error are not skipped: the error comes after them,
    even when the subscriber requests them only later."""
    boom = RuntimeError("boom")
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    publish_on(Metered(3, Meter(), fail_after=boom), pool, prefetch=8).subscribe(sub)
    settle(pool)
    assert sub.error is None  # three elements wait for demand ahead of the error
    sub.request(3)
    sub.await_terminal()
    assert sub.elements == [0, 1, 2]
    assert sub.error is boom


def test_elements_pushed_later_from_another_thread_are_delivered(
    pool: ThreadPoolExecutor,
) -> None:
    """An upstream that emits later, from its own thread, wakes the delivery each time: every
    element arrives without any further request, and completion follows."""
    holder: list[Subscriber[int]] = []

    class Later:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            class Quiet:
                def request(self, n: int) -> None:
                    pass

                def cancel(self) -> None:
                    pass

            holder.append(subscriber)
            subscriber.on_subscribe(Quiet())

    later: Publisher[int] = Later()
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    publish_on(later, pool, prefetch=8).subscribe(sub)
    settle(pool)
    for i in range(3):
        producer = threading.Thread(target=holder[0].on_next, args=(i,))
        producer.start()
        producer.join(5)
        sub.await_count(i + 1)
        settle(pool)
        assert sub.elements == list(range(i + 1))
    assert not sub.is_terminated
    threading.Thread(target=holder[0].on_complete).start()
    sub.await_terminal()
    assert sub.completed


def test_spec101_upstream_overproduction_is_an_overflow_violation(
    pool: ThreadPoolExecutor,
) -> None:
    """§1.1: an upstream that ignores demand is cancelled and the subscriber gets
    OverflowViolation instead of an unbounded queue."""
    cancelled = threading.Event()

    class Flood:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            class Ignored:
                def request(self, n: int) -> None:
                    pass

                def cancel(self) -> None:
                    cancelled.set()

            subscriber.on_subscribe(Ignored())
            for i in range(100):
                subscriber.on_next(i)

    flood: Publisher[int] = Flood()
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    publish_on(flood, pool, prefetch=8).subscribe(sub)
    sub.await_terminal()
    assert cancelled.is_set()
    assert isinstance(sub.error, OverflowViolation)
    assert sub.error.rule == "1.1"
    assert len(sub.elements) <= 8


def test_raising_upstream_subscribe_becomes_on_error(pool: ThreadPoolExecutor) -> None:
    """§1.9: an upstream whose subscribe raises reaches the subscriber as on_error."""
    boom = RuntimeError("cannot subscribe")

    class Broken:
        def subscribe(self, subscriber: Any) -> None:
            raise boom

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    publish_on(Broken(), pool).subscribe(sub)  # returns normally
    sub.await_terminal()
    assert sub.error is boom


def test_spec313_upstream_subscribe_raising_after_on_subscribe_is_cancelled(
    pool: ThreadPoolExecutor,
) -> None:
    """§1.9/§3.13: an upstream whose subscribe raises after it called on_subscribe: the
    subscriber gets the error, and the live subscription the queue was given is cancelled."""
    boom = RuntimeError("subscribe failed after on_subscribe")
    meter = Meter()
    upstream = Metered(None, meter)

    class HalfBroken:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            upstream.subscribe(subscriber)
            raise boom

    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    publish_on(HalfBroken(), pool, prefetch=4).subscribe(sub)  # returns normally
    sub.await_terminal()
    assert sub.elements == []  # nothing was requested before it raised
    assert sub.error is boom
    assert meter.cancels == 1 and meter.requests == []  # cancelled, never asked (§3.13)


def test_bad_arguments_raise_at_once(pool: ThreadPoolExecutor) -> None:
    """publish_on(None), a non-executor, or prefetch <= 0 fail when called, not at subscribe."""
    with pytest.raises(TypeError):
        publish_on(None, pool)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        publish_on(from_iterable([1]), object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        publish_on(from_iterable([1]), pool, prefetch=0)


def test_a_synchronous_upstream_is_pulled_on_the_executor_only(pool: ThreadPoolExecutor) -> None:
    """Every request upstream is made on the executor, the first one included: a generator
    behind from_iterable is pulled there, never on the thread that subscribed (an event
    loop's, say), and not before the subscriber's first demand. It used to pull its first
    prefetch window on the subscribing thread, inside subscribe."""
    pulled_on: list[str] = []

    def numbers() -> Iterator[int]:
        for i in range(100):
            pulled_on.append(threading.current_thread().name)
            yield i

    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    publish_on(from_iterable(numbers()), pool, prefetch=16).subscribe(sub)
    settle(pool)
    assert pulled_on == []  # no demand yet
    sub.request(UNBOUNDED)  # from this thread
    sub.await_terminal()
    assert sub.elements == list(range(100))
    worker = pool.submit(lambda: threading.current_thread().name).result()
    assert set(pulled_on) == {worker}


class _Late:
    """An upstream that hands its subscription over later, when ``arrive()`` is called (from
    any thread): the subscription records the thread of each request, and sends nothing."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[int] | None = None
        self.requests: list[tuple[int, str]] = []
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscriber = subscriber

    def arrive(self) -> None:
        late = self

        class _Recorded:
            def request(self, n: int) -> None:
                late.requests.append((n, threading.current_thread().name))

            def cancel(self) -> None:
                late.cancelled.set()

        assert self.subscriber is not None
        self.subscriber.on_subscribe(_Recorded())


def test_an_upstream_subscribing_late_is_still_requested_on_the_executor(
    pool: ThreadPoolExecutor,
) -> None:
    """Upstream's on_subscribe arriving on another thread after the subscriber's first demand
    (the drain found nothing to request from): the first request is still made once, on the
    executor. It used to be made inside that on_subscribe, on upstream's thread, which then
    ran a synchronous upstream there for the whole stream (an event loop's thread, say)."""
    upstream = _Late()
    sub: RecordingSubscriber[int] = RecordingSubscriber(5)
    publish_on(upstream, pool, prefetch=8).subscribe(sub)
    settle(pool)  # the drain looked for the first request: no upstream yet
    arriving = threading.Thread(target=upstream.arrive, name="upstream-thread")
    arriving.start()
    arriving.join()
    settle(pool)
    worker = pool.submit(lambda: threading.current_thread().name).result()
    assert upstream.requests == [(8, worker)]
    sub.cancel()
    assert upstream.cancelled.wait(5)


def test_an_element_before_the_first_request_is_an_overflow(pool: ThreadPoolExecutor) -> None:
    """§1.1: nothing is requested before the subscriber's first demand, so an upstream that
    sends on_next inside on_subscribe is cancelled and the subscriber gets OverflowViolation.
    The lazy queue used to count its window as requested from the start, and took it."""

    class Eager:
        def __init__(self) -> None:
            self.subscription = RecordingSubscription()

        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_subscribe(self.subscription)
            for i in range(3):
                subscriber.on_next(i)

    upstream = Eager()
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    publish_on(upstream, pool, prefetch=8).subscribe(sub)
    sub.await_terminal()
    assert sub.elements == []
    assert isinstance(sub.error, OverflowViolation) and "beyond the 0 requested" in str(sub.error)
    assert upstream.subscription.cancelled.is_set() and upstream.subscription.total == 0


def test_spec312_cancel_while_a_synchronous_upstream_fills_a_window_stops_it_at_once(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.12: a generator pulled inside the drain's request upstream (a whole window, on the
    executor) stops at the element in progress when the subscriber cancels, not at the end of
    the window: the cancel reaches upstream from the cancelling thread, and the generator is
    closed."""
    reads = 0
    third = threading.Event()
    gate = threading.Event()
    closed = threading.Event()

    def blocking() -> Iterator[int]:
        nonlocal reads
        try:
            while True:
                reads += 1
                if reads == 3:
                    third.set()
                    gate.wait(5)  # a read that blocks, while the subscriber cancels
                yield reads
        finally:
            closed.set()

    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    publish_on(from_iterable(blocking()), pool, prefetch=256).subscribe(sub)
    assert third.wait(5)  # the executor is inside the first request(256), at read 3
    sub.cancel()
    gate.set()
    assert closed.wait(5)
    assert reads == 3  # not 256: the window in progress was abandoned


class _RequestRaises:
    """An upstream breaking §3.16: it emits synchronously what each request asks for, and
    its request number ``fail_at`` raises; it records its cancel."""

    def __init__(self, fail_at: int = 2) -> None:
        self.fail_at = fail_at
        self.calls = 0
        self.cancelled = threading.Event()
        self.subscriber: Subscriber[int] | None = None

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscriber = subscriber
        outer = self

        class _Subscription:
            def request(self, n: int) -> None:
                outer.calls += 1
                if outer.calls >= outer.fail_at:
                    raise RuntimeError("request raised")
                for i in range(n):
                    subscriber.on_next(i)

            def cancel(self) -> None:
                outer.cancelled.set()

        subscriber.on_subscribe(_Subscription())


def test_spec316_an_upstream_request_raising_mid_stream_fails_the_subscriber(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.16 broken upstream at the replenishing request: the subscriber gets the elements
    queued, then on_error naming the rule, caused by the upstream's error, and upstream is
    cancelled (the error vanished into the drain's task: the subscriber waited for ever)."""
    upstream = _RequestRaises()
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    publish_on(upstream, pool, prefetch=4).subscribe(sub)
    sub.await_terminal(5)
    assert sub.elements == [0, 1, 2, 3]
    assert isinstance(sub.error, RuntimeError) and "§3.16" in str(sub.error)
    assert isinstance(sub.error.__cause__, RuntimeError) and upstream.cancelled.is_set()
    sub.assert_no_violations()


def test_spec316_an_upstream_first_request_raising_fails_the_subscriber(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.16 broken at the first request (made lazily, on the executor): on_error naming
    the rule, and upstream cancelled."""
    upstream = _RequestRaises(fail_at=1)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    publish_on(upstream, pool).subscribe(sub)
    sub.await_terminal(5)
    assert isinstance(sub.error, RuntimeError) and "§3.16" in str(sub.error)
    assert sub.elements == [] and upstream.cancelled.is_set()


@pytest.mark.parametrize("signal", ["on_next", "on_error"])
def test_spec213_a_none_signal_from_upstream_cancels_it_and_fails_the_subscriber(
    pool: ThreadPoolExecutor, signal: str
) -> None:
    """§2.13: upstream's on_next(None) or on_error(None) raises TypeError back to it, and
    the subscription counts as cancelled: upstream is cancelled and the subscriber told why
    (it waited for ever once the upstream's thread died of the TypeError)."""
    cancelled = threading.Event()
    result: list[BaseException] = []

    class NoneSender:
        def subscribe(self, subscriber: Subscriber[Any]) -> None:
            class _Subscription:
                def request(self, n: int) -> None:
                    def send() -> None:
                        subscriber.on_next(1)
                        try:
                            getattr(subscriber, signal)(None)
                        except TypeError as exc:
                            result.append(exc)

                    threading.Thread(target=send).start()

                def cancel(self) -> None:
                    cancelled.set()

            subscriber.on_subscribe(_Subscription())

    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    publish_on(NoneSender(), pool).subscribe(sub)
    sub.await_terminal(5)
    assert sub.elements == [1] and isinstance(sub.error, TypeError)
    assert f"§2.13: upstream signalled {signal}(None)" in str(sub.error)
    assert cancelled.is_set() and len(result) == 1


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "checked"])
def test_spec305_a_cancel_while_delivering_closes_an_idle_upstream_on_the_executor(
    pool: ThreadPoolExecutor, wrapped: bool
) -> None:
    """§3.5: a cancel from another thread (an event loop's, in a real pipeline) while the
    drain delivers: the idle synchronous upstream is closed on the executor once on_next
    returns, not on the cancelling thread, where its generator's finally (which may block)
    would run, nor on a helper thread, where a thread-bound resource (a sqlite connection)
    could not be closed. The same through checked(), which passes the deferral on."""
    source = CountedIterable(1000)
    upstream = from_iterable(source)
    publisher = publish_on(checked(upstream) if wrapped else upstream, pool, prefetch=16)
    with cancelled_while_delivering(publisher, 10):  # upstream is idle (16 queued)
        assert source.closed_on == []  # not closed here
    settle(pool)
    assert source.closed_on == [pool_thread(pool)]


def test_spec312_a_cancel_while_delivering_stops_an_asynchronous_upstream_at_once(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.12: an upstream producing on its own executor is cancelled when the consumer is,
    not once the slow on_next in progress returns: it stops pulling its source short of
    the window it was asked for."""
    pulled = 0
    closed = threading.Event()

    def slow_numbers() -> Iterator[int]:
        nonlocal pulled
        try:
            for i in range(1000):
                pulled += 1
                yield i
                time.sleep(0.002)  # a source slower than the cancel
        finally:
            closed.set()

    with ThreadPoolExecutor(1) as producer:
        source = from_iterable(slow_numbers(), executor=producer)
        with cancelled_while_delivering(publish_on(source, pool, prefetch=256), 10) as sub:
            assert closed.wait(5)  # while on_next still holds the drain
            assert pulled < 256
        settle(pool)
    assert sub.elements == [0]


def test_spec306_an_interrupting_cancel_reaches_a_foreign_upstream_at_once() -> None:
    """§3.12: a Subscription of no project of ours is cancelled as soon as the consumer's
    cancel interrupts the queue (its drain busy), as Reactor's publishOn does (§3.5 asks
    that cancel to be timely); a replenishment the drain was about to make never reaches
    it (§3.6), and close() does not cancel it again."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    upstream = RecordingSubscription()
    cancels: list[int] = []
    cancel = upstream.cancel

    def counted_cancel() -> None:
        cancels.append(1)
        cancel()

    upstream.cancel = counted_cancel  # type: ignore[method-assign]
    queue.on_subscribe(upstream)
    for i in range(4):
        queue.on_next(i)
    assert upstream.requests == [4]
    queue.interrupt()  # the consumer cancelled while delivering
    assert upstream.cancelled.is_set()
    queue.consumed(3)  # the drain's pending replenishment, after the cancel
    assert upstream.requests == [4]
    queue.close()
    assert cancels == [1]


def test_spec306_an_interrupting_cancel_leaves_an_idle_upstreams_cleanup_to_close() -> None:
    """An idle synchronous upstream of ours is cancelled by the interrupt with its clean-up
    deferred (closing the generator there would run its finally on the interrupting
    thread), gets no new request (§3.6), and is closed by close(), on the consumer's
    thread."""
    source = CountedIterable()
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    from_iterable(source).subscribe(queue)  # requests 4, pulled at once, here
    assert source.pulled == 4
    interrupter = threading.Thread(target=queue.interrupt)
    interrupter.start()
    interrupter.join(5)
    assert source.closed_on == []
    queue.consumed(3)  # the drain's pending replenishment, after the cancel
    assert source.pulled == 4
    queue.close()
    assert source.closed_on == [threading.get_ident()]


def test_spec312_a_cancel_from_on_next_closes_the_upstream_on_the_executor(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.12: a cancel from inside on_next needs no interrupt: the drain sees it as soon as
    on_next returns, and closes the idle synchronous upstream on the executor."""
    source = CountedIterable(1000)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    sub.on_next_hook = lambda element: sub.cancel() if element == 2 else None
    publish_on(from_iterable(source), pool, prefetch=16).subscribe(sub)
    settle(pool)
    assert sub.elements == [0, 1, 2]
    assert source.closed_on == [pool_thread(pool)]


def test_spec213_on_next_none_after_the_end_raises_and_reports_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.13: on_next(None) raises TypeError to the upstream even after its on_complete;
    with the stream over there is no one to tell, and it is not logged as a §1.8 error
    after our own cancel (there was none)."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    upstream = RecordingSubscription()
    queue.on_subscribe(upstream)
    queue.on_complete()
    with caplog.at_level(logging.ERROR, logger="reactive_streams"), pytest.raises(TypeError):
        queue.on_next(None)  # type: ignore[arg-type]
    assert caplog.records == []
    assert not upstream.cancelled.is_set()


def test_spec312_a_cancel_from_inside_the_upstreams_request_stops_it_at_once(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.12: a cancel made on the drain's thread while a synchronous upstream fills a
    window inside request (its generator checking a stop condition, say) reaches that busy
    upstream at once: it stops at the element in progress, not at the window's end."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    pulled = 0

    def numbers() -> Iterator[int]:
        nonlocal pulled
        for i in range(1000):
            pulled += 1
            if i == 3:
                sub.cancel()  # set by on_subscribe, before the first request
            yield i

    publish_on(from_iterable(numbers()), pool, prefetch=256).subscribe(sub)
    settle(pool)
    assert sub.error is None
    assert pulled <= 5


@pytest.mark.parametrize("ended", [False, True])
def test_spec108_an_upstream_error_after_an_interrupting_cancel_is_reported(
    ended: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream's on_error racing the consumer's cancel (§1.8) is logged as dropped, not
    kept unseen for a cancelled consumer; one after its own end is §1.7."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    queue.on_subscribe(RecordingSubscription())
    if ended:
        queue.on_complete()
    queue.interrupt()
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.on_error(RuntimeError("read aborted by cancel"))
    assert [r.getMessage()[:5] for r in caplog.records] == ["§1.7:" if ended else "§1.8:"]


def test_spec305_an_unschedulable_upstreams_cleanup_never_runs_on_the_cancelling_thread(
    pool: ThreadPoolExecutor,
) -> None:
    """An idle upstream whose executor was shut down cannot schedule its clean-up: a cancel
    from another thread while the drain delivers leaves it to close(), on publish_on's
    executor, instead of running the generator's finally on the cancelling thread."""
    source = CountedIterable(1000)
    numbers = iter(source)  # kept here: only the owed clean-up closes it, not the collector
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    sub.on_next_hook = gate = HoldFirst()
    producer = ThreadPoolExecutor(1)
    publish_on(from_iterable(numbers, executor=producer), pool, prefetch=2).subscribe(sub)
    assert gate.delivering.wait(5)
    producer.shutdown(wait=True)  # the upstream is idle (its window of 2 filled), and stays so
    canceller = threading.Thread(target=sub.cancel)
    canceller.start()
    canceller.join(5)
    assert source.closed_on == []
    gate.release.set()
    settle(pool)
    assert source.closed_on == [pool_thread(pool)]


def test_spec306_a_deferring_cancel_runs_an_idle_executor_drains_cleanup_there_at_once(
    pool: ThreadPoolExecutor,
) -> None:
    """§3.12: cancel_deferring_cleanup() on an idle drain under an executor owes nothing:
    the drain is scheduled there at once, and closes the source on the executor."""
    source = CountedIterable(1000)
    numbers = iter(source)
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    from_iterable(numbers, executor=pool).subscribe(sub)
    settle(pool)
    subscription = sub.subscription
    assert isinstance(subscription, DrainSubscription) and sub.elements == [0, 1]
    subscription.cancel_deferring_cleanup()
    settle(pool)
    assert source.closed_on == [pool_thread(pool)]


def test_spec107_a_second_on_error_is_reported_as_after_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§1.7: an on_error after the upstream's on_error is logged as §1.7, and the consumer
    still gets the first error."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    queue.on_subscribe(RecordingSubscription())
    queue.on_error(RuntimeError("first"))
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.on_error(RuntimeError("second"))
    assert [r.getMessage()[:5] for r in caplog.records] == ["§1.7:"]
    with pytest.raises(RuntimeError, match="first"):
        queue.poll()


def test_spec108_an_on_error_answering_the_queues_own_cancel_is_reported_not_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§1.1, §1.8: an upstream that answers the cancel of an overflow (§1.1) with on_error,
    inside cancel: the consumer gets the OverflowViolation, and the upstream's error is
    logged as racing the cancel."""
    queue: PrefetchQueue[int] = PrefetchQueue(1)

    class AnswersCancel(RecordingSubscription):
        def cancel(self) -> None:
            super().cancel()
            queue.on_error(RuntimeError("cancelled"))

    queue.on_subscribe(AnswersCancel())
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.on_next(0)
        queue.on_next(1)  # one more than the one requested
    assert [r.getMessage()[:5] for r in caplog.records] == ["§1.8:"]
    assert queue.poll() == 0
    with pytest.raises(OverflowViolation):
        queue.poll()


class _RaisingCancel(RecordingSubscription):
    def cancel(self) -> None:
        super().cancel()
        raise RuntimeError("cancel failed")


def test_spec315_a_foreign_cancel_that_raises_inside_an_interrupt_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§3.15: a foreign upstream whose cancel raises, cancelled by the interrupt on the
    cancelling thread: the error is logged, never raised into that thread."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    queue.on_subscribe(_RaisingCancel())
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.interrupt()
    assert [r.getMessage()[:6] for r in caplog.records] == ["§3.15:"]


def test_spec315_an_overflowing_upstream_whose_cancel_raises_still_fails_the_consumer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§1.1, §3.15: an upstream that sends one element too many and whose cancel raises: the
    raising cancel is logged, not raised into the upstream's on_next, and the consumer
    still gets the OverflowViolation after the elements before it (it used to be lost, so
    a consumer waiting for the end waited for ever)."""
    queue: PrefetchQueue[int] = PrefetchQueue(1)
    upstream = _RaisingCancel()
    queue.on_subscribe(upstream)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.on_next(0)
        queue.on_next(1)  # one more than requested: returns normally (§2.13)
    assert upstream.cancelled.is_set()
    assert [r.getMessage()[:6] for r in caplog.records] == ["§3.15:"]
    assert queue.poll() == 0
    with pytest.raises(OverflowViolation):
        queue.poll()


def test_spec315_close_with_an_upstream_whose_cancel_raises_still_drops_the_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§3.13, §3.15: close() cancels upstream, and a cancel that raises is logged: close()
    returns normally and the queued elements are dropped all the same."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    queue.on_subscribe(_RaisingCancel())
    queue.on_next(0)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.close()
    assert [r.getMessage()[:6] for r in caplog.records] == ["§3.15:"]
    assert len(queue) == 0


def test_spec315_a_second_on_subscribe_whose_cancel_raises_is_refused_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.5, §3.15: a second subscription is cancelled; its cancel raising is logged, not
    raised out of on_subscribe (§2.13), and the first subscription stays in use."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    first = RecordingSubscription()
    queue.on_subscribe(first)
    second = _RaisingCancel()
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        queue.on_subscribe(second)
    assert second.cancelled.is_set() and not first.cancelled.is_set()
    assert [r.getMessage()[:6] for r in caplog.records] == ["§3.15:"]


def test_spec303_a_request_from_inside_the_queues_own_request_goes_straight_through() -> None:
    """A synchronous upstream delivers inside request(); the consumer takes each element
    as it is queued and, at the limit, asks again on the same thread: that is serial
    (§2.7), so it reaches the upstream at once, from inside the first call, as
    BaseSubscriber's does (the upstream bounds the recursion, §3.3)."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)  # limit 3
    depths: list[tuple[int, int]] = []  # (n, calls in progress)
    inside = 0

    class Sync:
        sent = 0

        def request(self, n: int) -> None:
            nonlocal inside
            inside += 1
            depths.append((n, inside))
            try:
                for _ in range(n):
                    if self.sent < 6:
                        self.sent += 1
                        queue.on_next(self.sent)
            finally:
                inside -= 1

        def cancel(self) -> None:
            pass

    def take() -> None:  # the consumer, woken on this thread as each element is queued
        while queue.poll() is not EMPTY:
            pass

    queue.bind(take)
    queue.on_subscribe(Sync())
    assert depths == [(4, 1), (3, 2), (3, 3)]


@pytest.mark.parametrize("end", ["complete", "error"])
def test_spec204_no_request_after_the_upstreams_terminal_signal(end: str) -> None:
    """§2.4: after on_complete / on_error the subscription counts as cancelled: consuming
    what is still queued (past the 75% mark) asks the upstream for nothing more."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)
    upstream = RecordingSubscription()
    queue.on_subscribe(upstream)
    for i in range(4):
        queue.on_next(i)
    if end == "complete":
        queue.on_complete()
    else:
        queue.on_error(RuntimeError("the end"))
    assert [queue.poll() for _ in range(4)] == [0, 1, 2, 3]
    queue.want(1)
    assert upstream.requests == [4]


class _GatedLock:
    """The queue's lock, with a gate: once ``armed`` for a thread, that thread's next
    acquisition first calls ``at_gate()`` (an interleaving a test forces: a thread
    preempted right before the lock, or an interrupt landing there)."""

    def __init__(self) -> None:
        self.real = threading.Lock()
        self.armed = 0
        self.at_gate: Callable[[], None] = lambda: None

    def __enter__(self) -> bool:
        if self.armed == threading.get_ident():
            self.armed = 0
            self.at_gate()
        return self.real.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)


def _drain_on_a_thread(queue: PrefetchQueue[int], got: list[object]) -> threading.Thread:
    """A consumer polling ``queue`` on a thread of its own until the end or an error."""

    def consume() -> None:
        while True:
            try:
                value = queue.poll()
            except Exception as exc:
                got.append(exc)
                return
            if value is END:
                return
            if value is EMPTY:
                time.sleep(0.001)
            else:
                got.append(value)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    return consumer


def test_spec207_an_interrupt_between_two_requests_fails_the_consumer_it_parked() -> None:
    """§2.7: the publisher's first request is still in progress on this thread when the
    consumer's request is parked behind it; a KeyboardInterrupt lands right after that
    call returns, before the parked request is made: it never will be, so the consumer
    hears why, naming it (after the four elements), instead of waiting for ever."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)  # limit 3
    lock = queue._upstream._lock = _GatedLock()  # type: ignore[assignment]

    def interrupt() -> None:
        raise KeyboardInterrupt

    lock.at_gate = interrupt
    got: list[object] = []

    class Upstream(RecordingSubscription):
        def request(self, n: int) -> None:
            super().request(n)
            for i in range(4):
                queue.on_next(i)
            deadline = time.monotonic() + 5
            while len(got) < 3:  # the consumer took 3: its request(3) is parked
                assert time.monotonic() < deadline
                time.sleep(0.001)
            lock.armed = threading.get_ident()  # the interrupt lands once this returns

    upstream = Upstream()
    consumer = _drain_on_a_thread(queue, got)
    with pytest.raises(KeyboardInterrupt):
        queue.on_subscribe(upstream)
    consumer.join(5)
    assert not consumer.is_alive(), f"the consumer waits for ever, after {got}"
    assert got[:4] == [0, 1, 2, 3] and len(got) == 5
    assert isinstance(got[4], RuntimeError)
    assert str(got[4]).startswith("request(3) upstream was never made: KeyboardInterrupt()")
    assert upstream.requests == [4]


def test_an_interrupt_between_two_requests_with_none_parked_fails_nothing() -> None:
    """The same interrupt, landing after the publisher's first request returned, with no
    request parked behind it: nothing was lost, so the stream goes on (the interrupt goes
    to the caller alone), and the consumer's request at 75% is made as usual."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)  # limit 3
    lock = queue._upstream._lock = _GatedLock()  # type: ignore[assignment]

    def interrupt() -> None:
        raise KeyboardInterrupt

    lock.at_gate = interrupt

    class Upstream(RecordingSubscription):
        def request(self, n: int) -> None:
            super().request(n)
            if len(self.requests) == 1:
                for i in range(4):
                    queue.on_next(i)
                lock.armed = threading.get_ident()  # lands once this returns

    upstream = Upstream()
    with pytest.raises(KeyboardInterrupt):
        queue.on_subscribe(upstream)
    assert [queue.poll() for _ in range(4)] == [0, 1, 2, 3]
    assert upstream.requests == [4, 3]
    assert queue.poll() is EMPTY  # no error: the stream goes on


def test_spec204_a_request_decided_as_the_upstream_completes_is_not_made() -> None:
    """§2.4, §2.7: the consumer decides on its request (75% taken) while the publisher is
    still in its first request; it is held right before taking the queue's lock until the
    publisher has completed and its call has returned. The request is then not made: the
    end is checked under the lock the end is recorded under."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)  # limit 3
    lock = queue._upstream._lock = _GatedLock()  # type: ignore[assignment]
    at_gate, returned = threading.Event(), threading.Event()

    def hold() -> None:
        at_gate.set()
        assert returned.wait(5)

    lock.at_gate = hold
    upstream = RecordingSubscription()

    class Completes(RecordingSubscription):
        def request(self, n: int) -> None:
            upstream.request(n)
            for i in range(4):
                queue.on_next(i)
            assert at_gate.wait(5)  # the consumer is held on its way to the lock
            queue.on_complete()

    def publish() -> None:
        queue.on_subscribe(Completes())
        returned.set()

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    deadline = time.monotonic() + 5
    while len(queue) < 4:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert [queue.poll(), queue.poll()] == [0, 1]
    lock.armed = threading.get_ident()
    assert queue.poll() == 2  # 3 taken: the request of 3 is due, after the end
    publisher.join(5)
    assert [queue.poll(), queue.poll()] == [3, END]
    assert upstream.requests == [4]


def test_spec316_an_interrupt_in_a_request_made_from_inside_a_request_fails_the_queue_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A synchronous upstream delivers inside its first request; the consumer, on the same
    thread, asks again from there, and that nested request raises a KeyboardInterrupt: the
    queue fails once, with §3.16's error naming that request, after the elements already
    queued, and the interrupt goes on to the caller; no second failure is logged."""
    queue: PrefetchQueue[int] = PrefetchQueue(4)  # limit 3

    class Nested(RecordingSubscription):
        def request(self, n: int) -> None:
            super().request(n)
            if len(self.requests) > 1:
                raise KeyboardInterrupt
            for i in range(4):
                queue.on_next(i)
            for _ in range(3):  # the 3rd poll makes request(3), from inside this call
                queue.poll()

    with (
        caplog.at_level(logging.DEBUG, logger="reactive_streams"),
        pytest.raises(KeyboardInterrupt),
    ):
        queue.on_subscribe(Nested())
    assert caplog.records == []
    assert queue.poll() == 3
    with pytest.raises(RuntimeError, match=r"request\(3\) raised KeyboardInterrupt"):
        queue.poll()
