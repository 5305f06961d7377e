"""reactive_streams.publish_on: the asynchronous boundary and its bounded in-flight window."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
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
from reactive_streams._drain import DrainSubscription
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import (
    REQUEST_PATTERNS,
    CountedIterable,
    HoldFirst,
    RecordingSubscriber,
    RecordingSubscription,
    cancelled_while_delivering,
    longest_turn,
    shutting_down,
    taking_turns,
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


# -- fairness: streams sharing one executor take turns -------------------------------------------




@pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
def test_two_streams_on_one_worker_take_turns_of_at_most_a_batch(every: int) -> None:
    """Two publish_on streams of 20,000 share a ThreadPoolExecutor(1): a task delivers at
    most 1,024 (the default batch) and gives the thread up, whatever the subscriber's
    request pattern (request(1) or request(16) from on_next once kept it for the whole
    stream)."""
    log: list[str] = []
    gate = threading.Event()  # holds the worker until both streams have subscribed
    with ThreadPoolExecutor(1) as pool:
        pool.submit(gate.wait, 10)
        subs = [taking_turns(log, name, every) for name in "ab"]
        for sub in subs:
            publish_on(from_iterable(range(20_000)), pool).subscribe(sub)
        gate.set()
        for sub in subs:
            sub.await_terminal(30)
    for sub in subs:
        assert sub.completed and sub.elements == list(range(20_000))
        sub.assert_no_violations()
    assert longest_turn(log) <= 1024


@pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
def test_no_stream_outlives_its_executors_shutdown_by_more_than_a_batch(every: int) -> None:
    """shutdown(cancel_futures=True) from the running stream's on_next: it delivers at most
    the rest of its batch, then fails; the stream waiting its turn fails at once."""
    pool = ThreadPoolExecutor(1)
    gate = threading.Event()
    pool.submit(gate.wait, 10)
    log: list[str] = []
    running, queued = shutting_down(log, every, pool)  # at the third element
    for sub in (running, queued):
        publish_on(from_iterable(range(20_000)), pool).subscribe(sub)
    gate.set()
    for sub in (running, queued):
        sub.await_terminal(30)
    assert 3 <= len(running.elements) <= 1024  # the shutdown came inside its first task
    assert isinstance(running.error, RuntimeError)
    assert queued.elements == [] and isinstance(queued.error, RuntimeError)
    running.assert_no_violations()
    queued.assert_no_violations()
