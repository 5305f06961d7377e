"""reactive_streams.share: one upstream subscription multicast, paced by the slowest subscriber."""

from __future__ import annotations

import gc
import logging
import random
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import pytest

from reactive_streams import (
    UNBOUNDED,
    IllegalRequestError,
    OverflowViolation,
    Publisher,
    Subscriber,
    Subscription,
    share,
)
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.publishers._share import SharePublisher
from reactive_streams.testing import HoldFirst, RecordingSubscriber, race, stack_depth

T = TypeVar("T")


# -- instruments ---------------------------------------------------------------------------------


class Meter(Generic[T]):
    """A Publisher in front of ``source`` that records what the share asks of it: each
    subscription, request and cancel, and every element that went through."""

    def __init__(self, source: Publisher[T]) -> None:
        self.source = source
        self.lock = threading.Lock()
        self.requests: list[int] = []
        self.emitted = 0
        self.cancels = 0
        self.subscriptions = 0
        self.cancelled = threading.Event()

    @property
    def requested(self) -> int:
        with self.lock:
            return sum(self.requests)

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        with self.lock:
            self.subscriptions += 1
        self.source.subscribe(_Metering(subscriber, self))


class _MeteredSubscription:
    def __init__(self, inner: Subscription, meter: Meter[Any]) -> None:
        self._inner = inner
        self._meter = meter

    def request(self, n: int) -> None:
        with self._meter.lock:
            self._meter.requests.append(n)
        self._inner.request(n)

    def cancel(self) -> None:
        with self._meter.lock:
            self._meter.cancels += 1
        self._meter.cancelled.set()
        self._inner.cancel()


class _Metering(Generic[T]):
    def __init__(self, downstream: Subscriber[T], meter: Meter[T]) -> None:
        self._down = downstream
        self._meter = meter

    def on_subscribe(self, subscription: Subscription) -> None:
        self._down.on_subscribe(_MeteredSubscription(subscription, self._meter))

    def on_next(self, element: T) -> None:
        with self._meter.lock:
            self._meter.emitted += 1  # counted before the share has it (see bound_held)
        self._down.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._down.on_error(error)

    def on_complete(self) -> None:
        self._down.on_complete()


def bound_held(meter: Meter[Any], shared: SharePublisher[Any], buffer_size: int) -> None:
    """The share's bound, checked from outside at any moment: what is buffered plus what is
    asked of upstream and not yet come never exceeds ``buffer_size`` (read in the order that
    can only under-estimate, since each count only grows or, for the buffer, is read before
    the element counts that could shrink it)."""
    requested = meter.requested
    buffered = shared.buffered
    with meter.lock:
        emitted = meter.emitted
    assert buffered <= buffer_size, f"{buffered} buffered, beyond buffer_size={buffer_size}"
    assert requested - emitted + buffered <= buffer_size, (requested, emitted, buffered)


def _numbers(n: int) -> Iterator[int]:
    yield from range(n)


class _Failing:
    """A publisher that emits ``n`` elements as asked, then fails with ``error``."""

    def __init__(self, n: int, error: Exception) -> None:
        self._n = n
        self._error = error

    def _items(self) -> Iterator[int]:
        yield from range(self._n)
        raise self._error

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        from_iterable(self._items()).subscribe(subscriber)


class _Flooding:
    """A broken publisher: ``on_next`` ``n`` times whatever was requested (§1.1)."""

    def __init__(self, n: int) -> None:
        self._n = n
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        flood = self

        class _Sub:
            def request(self, k: int) -> None:
                for i in range(flood._n):
                    subscriber.on_next(i)

            def cancel(self) -> None:
                flood.cancelled.set()

        subscriber.on_subscribe(_Sub())


def shared_range(
    n: int, *, buffer_size: int = 16, min_subscribers: int = 1
) -> tuple[SharePublisher[int], Meter[int]]:
    meter: Meter[int] = Meter(from_iterable(range(n)))
    shared = share(meter, buffer_size=buffer_size, min_subscribers=min_subscribers)
    assert isinstance(shared, SharePublisher)
    return shared, meter


# -- every element to every subscriber, paced by the slowest --------------------------------------


def test_two_subscribers_one_ten_times_slower_both_get_every_element_in_order() -> None:
    """The fast one asks 10 a step, the slow one 1: both get all 1000 in order; upstream is
    never asked more than buffer_size ahead of the slow one, and the fast one is held there."""
    n, size = 1000, 16
    shared, meter = shared_range(n, buffer_size=size, min_subscribers=2)
    fast: RecordingSubscriber[int] = RecordingSubscriber()
    slow: RecordingSubscriber[int] = RecordingSubscriber()
    leads: list[int] = []

    def check(element: int) -> None:
        bound_held(meter, shared, size)

    def check_slow(element: int) -> None:  # counted: upstream is asked at most size ahead
        assert meter.requested - len(slow.elements) <= size
        check(element)

    fast.on_next_hook = check
    slow.on_next_hook = check_slow
    shared.subscribe(fast)
    shared.subscribe(slow)
    for _ in range(2 * n):
        if slow.is_terminated:
            break
        fast.request(10)
        slow.request(1)
        assert meter.requested - len(slow.elements) <= size
        leads.append(len(fast.elements) - len(slow.elements))
    assert fast.elements == slow.elements == list(range(n))
    assert fast.completed and slow.completed
    assert max(leads) == size  # the fast one ran ahead as far as the buffer, never further
    assert meter.subscriptions == 1 and meter.cancels == 0
    fast.assert_no_violations()
    slow.assert_no_violations()


def test_upstream_is_asked_buffer_size_up_front_then_75_percent_at_a_time() -> None:
    """Requests upstream: the window, then 3/4 of it each time that many left the buffer."""
    shared, meter = shared_range(100, buffer_size=8)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(sub)
    assert sub.elements == list(range(100)) and sub.completed
    assert meter.requests[0] == 8 and set(meter.requests[1:]) == {6}


def test_min_subscribers_holds_the_connection_until_they_are_all_here() -> None:
    """Nothing is subscribed upstream before the third subscriber; then all three get all."""
    shared, meter = shared_range(50, min_subscribers=3)
    subs = [RecordingSubscriber[int](UNBOUNDED) for _ in range(3)]
    shared.subscribe(subs[0])
    shared.subscribe(subs[1])
    assert meter.subscriptions == 0 and not subs[0].elements
    shared.subscribe(subs[2])
    assert meter.subscriptions == 1
    for sub in subs:
        assert sub.elements == list(range(50)) and sub.completed


def test_a_subscriber_that_cancels_before_the_connection_is_not_counted() -> None:
    """Of min_subscribers=2, one cancels before the second comes: no connection yet."""
    shared, meter = shared_range(5, min_subscribers=2)
    a: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    b: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(a)
    a.cancel()
    shared.subscribe(b)
    assert meter.subscriptions == 0 and not b.elements


# -- cancel: unpacing, refCount --------------------------------------------------------------------


def test_a_cancelled_subscriber_stops_pacing_the_other() -> None:
    """The fast one is held at buffer_size by a slow one without demand; once the slow one
    cancels, the fast one gets the rest and completes."""
    shared, meter = shared_range(100, buffer_size=8)
    fast: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    slow: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(slow)
    shared.subscribe(fast)
    assert fast.elements == list(range(8)) and not fast.completed
    slow.cancel()
    assert fast.elements == list(range(100)) and fast.completed
    assert meter.cancels == 0


def test_a_cancel_during_its_on_next_returns_at_once_and_unpaces_the_other() -> None:
    """The slow one is cancelled from another thread while the drain is busy in its on_next:
    cancel does not wait for it (§3.5), upstream stays, and once that on_next returns the
    fast one gets the rest with no further request (one drain serves both: it was held)."""
    shared, meter = shared_range(100, buffer_size=8)
    fast: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    slow: RecordingSubscriber[int] = RecordingSubscriber()
    slow.on_next_hook = gate = HoldFirst()
    shared.subscribe(slow)
    shared.subscribe(fast)
    assert fast.elements == list(range(8))
    worker = threading.Thread(target=slow.request, args=(1,))
    worker.start()
    try:
        assert gate.delivering.wait(5)
        slow.cancel()  # returns while on_next(0) is held on the worker
        assert not meter.cancelled.is_set() and fast.elements == list(range(8))
    finally:
        gate.release.set()
        worker.join(5)
    fast.await_terminal()
    assert fast.elements == list(range(100)) and fast.completed
    assert slow.elements == [0] and not slow.is_terminated


def test_the_last_cancel_during_its_on_next_cancels_upstream_at_once() -> None:
    """§3.12: the only subscriber, cancelled from another thread while its on_next runs:
    upstream is cancelled before that on_next returns."""
    shared, meter = shared_range(100, buffer_size=8)
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = gate = HoldFirst()
    shared.subscribe(sub)
    worker = threading.Thread(target=sub.request, args=(5,))
    worker.start()
    try:
        assert gate.delivering.wait(5)
        sub.cancel()
        assert meter.cancelled.is_set() and meter.cancels == 1
    finally:
        gate.release.set()
        worker.join(5)
    assert sub.elements == [0] and not sub.is_terminated


def test_the_last_cancel_cancels_upstream() -> None:
    """Upstream is cancelled when the last subscriber cancels, not before (refCount)."""
    shared, meter = shared_range(1000, buffer_size=8)
    a: RecordingSubscriber[int] = RecordingSubscriber(3)
    b: RecordingSubscriber[int] = RecordingSubscriber(5)
    shared.subscribe(a)
    shared.subscribe(b)
    a.cancel()
    assert not meter.cancelled.is_set()
    b.request(10)
    assert b.elements == list(range(3, 18))  # late: from where a was
    b.cancel()
    assert meter.cancelled.is_set() and meter.cancels == 1
    assert shared.buffered == 0  # §3.13


def test_a_subscriber_after_the_last_cancel_starts_a_fresh_connection() -> None:
    """After the last cancel, the next subscriber subscribes upstream again, from the start."""
    shared, meter = shared_range(20, buffer_size=8)
    a: RecordingSubscriber[int] = RecordingSubscriber(5)
    shared.subscribe(a)
    a.cancel()
    b: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(b)
    assert meter.subscriptions == 2
    assert b.elements == list(range(20)) and b.completed


def test_a_fresh_connection_to_a_one_shot_source_gets_its_refusal() -> None:
    """A generator is consumed once: after the last cancel, the next subscriber gets the
    source's §1.9 error, not a hang."""
    shared = share(from_iterable(_numbers(10)))
    a: RecordingSubscriber[int] = RecordingSubscriber(2)
    shared.subscribe(a)
    a.cancel()
    b: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(b)
    assert isinstance(b.error, RuntimeError) and "§1.9" in str(b.error)


# -- late subscribers and the terminal signal -----------------------------------------------------


def test_a_late_subscriber_sees_elements_from_its_subscription_on() -> None:
    """A subscriber that comes after the first one had 0..4 gets 5.. in order: no element the
    others all had, no gap."""
    shared, meter = shared_range(40, buffer_size=8)
    a: RecordingSubscriber[int] = RecordingSubscriber(5)
    shared.subscribe(a)
    b: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(b)
    assert b.elements == [5, 6, 7]  # the rest of the window of 8: paced by a
    a.request(UNBOUNDED)
    assert a.elements == list(range(40)) and b.elements == list(range(5, 40))
    assert a.completed and b.completed and meter.subscriptions == 1


def test_a_late_subscriber_gets_what_is_held_but_nobody_had() -> None:
    """Elements buffered before anyone asked (the window, up front) are not lost to a second
    subscriber that comes before the first asked for them."""
    shared, _ = shared_range(5)
    a: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(a)  # connects: 0..4 and the end are buffered, nobody asked yet
    b: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(b)
    a.request(10)
    assert a.elements == b.elements == list(range(5)) and a.completed and b.completed


def test_on_complete_reaches_each_subscriber_after_its_buffered_elements() -> None:
    """The fast one completes; the slow one completes only once it asked for the rest."""
    shared, _ = shared_range(6, buffer_size=8)
    fast: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    slow: RecordingSubscriber[int] = RecordingSubscriber(2)
    shared.subscribe(slow)
    shared.subscribe(fast)
    assert fast.completed and not slow.completed and slow.elements == [0, 1]
    slow.request(4)  # exactly the rest: completes without another request (§1.2)
    assert slow.elements == list(range(6)) and slow.completed


def test_a_subscriber_after_completion_gets_on_complete_at_once() -> None:
    """on_subscribe, then on_complete without any request; nothing subscribed again."""
    shared, meter = shared_range(3)
    a: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(a)
    assert a.completed
    late: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(late)
    assert late.completed and late.subscription is not None and not late.elements
    assert meter.subscriptions == 1
    late.assert_no_violations()


def test_the_end_given_in_the_same_pass_as_the_last_elements_closes_the_share_for_good() -> None:
    """The upstream completed while nobody asked; one request then takes the elements and
    on_complete at once: a later subscriber gets on_complete, upstream is not subscribed again."""
    shared, meter = shared_range(3)
    a: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(a)
    a.request(UNBOUNDED)
    assert a.elements == [0, 1, 2] and a.completed
    late: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(late)
    assert late.completed and not late.elements and meter.subscriptions == 1


def test_after_the_upstream_ended_a_late_subscriber_gets_what_is_still_held() -> None:
    """The upstream completed; the slow one still holds the buffer from 0, so a newcomer
    gets 0..9; once the slow one had 0..3, the next newcomer gets 4..9 (the buffer moved)."""
    shared, meter = shared_range(10, buffer_size=16, min_subscribers=2)
    fast: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    slow: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(fast)
    shared.subscribe(slow)
    assert fast.completed and not slow.elements
    c: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(c)
    assert c.elements == list(range(10)) and c.completed
    slow.request(4)
    assert shared.buffered == 6
    d: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(d)
    assert d.elements == list(range(4, 10)) and d.completed
    slow.request(6)
    assert slow.elements == list(range(10)) and slow.completed
    assert meter.subscriptions == 1 and shared.buffered == 0


def test_on_error_reaches_every_subscriber_at_once_and_late_ones_too() -> None:
    """The upstream's error reaches a subscriber without demand at once (its buffered elements
    are dropped, as Reactor's publish does), one with demand after what it got, and a
    subscriber that comes after it at once."""
    boom = ConnectionError("boom")
    shared = share(_Failing(3, boom), min_subscribers=2)
    eager: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    idle: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(eager)
    shared.subscribe(idle)
    assert eager.elements == [0, 1, 2] and eager.error is boom
    assert idle.elements == [] and idle.error is boom
    late: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(late)
    assert late.error is boom and late.subscription is not None
    assert isinstance(shared, SharePublisher) and shared.buffered == 0


def test_an_upstream_that_cannot_be_subscribed_fails_every_subscriber() -> None:
    """A source whose subscribe raises: each subscriber gets on_error (§1.9)."""

    class Broken:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            raise RuntimeError("no")

    shared = share(Broken(), min_subscribers=2)
    a: RecordingSubscriber[int] = RecordingSubscriber()
    b: RecordingSubscriber[int] = RecordingSubscriber()
    shared.subscribe(a)
    shared.subscribe(b)
    assert isinstance(a.error, RuntimeError) and b.error is a.error


def test_an_upstream_that_sends_more_than_asked_fails_everyone_and_is_cancelled() -> None:
    """§1.1: one on_next beyond the request ends every subscriber with OverflowViolation."""
    flood = _Flooding(20)
    shared = share(flood, buffer_size=8)
    a: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(a)
    assert isinstance(a.error, OverflowViolation) and "§1.1" in str(a.error)
    assert a.elements == list(range(len(a.elements))) and len(a.elements) <= 8  # (at once)
    assert flood.cancelled.is_set()


# -- rules per subscriber --------------------------------------------------------------------------


def test_a_subscriber_that_raises_is_reported_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.13: it counts as cancelled (no further signal, it paces no one), the error is
    logged, and the other subscriber gets every element."""
    shared, meter = shared_range(50, buffer_size=8, min_subscribers=2)
    bad: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    good: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)

    def explode(element: int) -> None:
        if element == 2:
            raise ValueError("subscriber bug")

    bad.on_next_hook = explode
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        shared.subscribe(bad)
        shared.subscribe(good)
    assert bad.elements == [0, 1, 2] and not bad.is_terminated
    assert good.elements == list(range(50)) and good.completed
    assert any("§2.13" in r.getMessage() for r in caplog.records)
    assert meter.cancels == 0


def test_a_bad_request_fails_that_subscriber_only() -> None:
    """§3.9: request(0) ends that subscriber with IllegalRequestError; it paces no one since."""
    shared, _ = shared_range(50, buffer_size=8)
    bad: RecordingSubscriber[int] = RecordingSubscriber()
    good: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    shared.subscribe(bad)
    shared.subscribe(good)
    assert len(good.elements) == 8
    bad.request(0)
    assert isinstance(bad.error, IllegalRequestError) and "§3.9" in str(bad.error)
    assert good.elements == list(range(50)) and good.completed


def test_subscribe_none_raises_type_error() -> None:
    """§1.9: subscribe(None) raises TypeError, and nothing is subscribed upstream."""
    shared, meter = shared_range(3)
    with pytest.raises(TypeError, match="§1.9"):
        shared.subscribe(None)  # type: ignore[arg-type]
    assert meter.subscriptions == 0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"buffer_size": 0}, "buffer_size"),
        ({"buffer_size": True}, "buffer_size"),
        ({"buffer_size": 2.0}, "buffer_size"),
        ({"min_subscribers": 0}, "min_subscribers"),
        ({"min_subscribers": "2"}, "min_subscribers"),
    ],
)
def test_bad_arguments_are_refused_naming_the_parameter(kwargs: dict[str, Any], name: str) -> None:
    """buffer_size and min_subscribers are ints >= 1; the error names the parameter."""
    with pytest.raises(ValueError, match=name):
        share(from_iterable(range(3)), **kwargs)


def test_a_publisher_is_required() -> None:
    """share(None) is a TypeError naming share()."""
    with pytest.raises(TypeError, match=r"share\(\)"):
        share(None)  # type: ignore[arg-type]


def test_references_are_dropped_after_cancel_and_after_completion() -> None:
    """§3.13: neither a cancelled nor a completed subscriber is kept by the share."""
    shared, _ = shared_range(30, buffer_size=8)
    stays: RecordingSubscriber[int] = RecordingSubscriber(1)
    leaves: RecordingSubscriber[int] = RecordingSubscriber(3)
    shared.subscribe(stays)
    shared.subscribe(leaves)
    leaves.cancel()
    gone = weakref.ref(leaves)
    del leaves
    gc.collect()
    assert gone() is None
    stays.request(UNBOUNDED)
    assert stays.completed
    done = weakref.ref(stays)
    del stays
    gc.collect()
    assert done() is None


# -- adversarial ----------------------------------------------------------------------------------


def test_a_reentrant_request_from_on_next_does_not_recurse() -> None:
    """Two subscribers asking 1 from each on_next over 3000 elements: the stack stays flat
    (§3.3), however the elements are handed between the two drains and upstream."""
    shared, _ = shared_range(3000, buffer_size=4, min_subscribers=2)
    depths: list[int] = []
    subs = [RecordingSubscriber[int](1, request_on_next=1) for _ in range(2)]
    for sub in subs:
        sub.on_next_hook = lambda element: depths.append(stack_depth())
    shared.subscribe(subs[0])
    shared.subscribe(subs[1])
    for sub in subs:
        assert sub.elements == list(range(3000)) and sub.completed
        sub.assert_no_violations()
    assert max(depths) - min(depths) < 40


def test_requests_from_several_threads(switching: float | None) -> None:
    """Each subscriber is asked 1 at a time from four threads at once, with the upstream on an
    executor: both get every element in order, no signal overlaps (§1.3), none beyond (§1.1)."""
    n = 400
    with ThreadPoolExecutor(2) as pool:
        meter: Meter[int] = Meter(from_iterable(range(n), executor=pool))
        shared = share(meter, buffer_size=8, min_subscribers=2)
        assert isinstance(shared, SharePublisher)
        subs = [RecordingSubscriber[int]() for _ in range(2)]
        for sub in subs:
            sub.on_next_hook = lambda element: bound_held(meter, shared, 8)
            shared.subscribe(sub)

        def asking(sub: RecordingSubscriber[int]) -> Callable[[], None]:
            def ask() -> None:
                for _ in range(n // 4 + 1):
                    sub.request(1)

            return ask

        race(*[asking(sub) for sub in subs for _ in range(4)])
        for sub in subs:
            sub.await_terminal(10)
            assert sub.elements == list(range(n)) and sub.completed
            sub.assert_no_violations()


def test_cancel_from_many_threads(switching: float | None) -> None:
    """Four threads each cancel two subscribers at once while a third one is fed from a
    fifth: that one gets everything and upstream is not cancelled; then with no third one,
    upstream is cancelled exactly once (§3.7), after the last."""
    for _ in range(20):
        shared, meter = shared_range(200, buffer_size=4, min_subscribers=3)
        stays: RecordingSubscriber[int] = RecordingSubscriber()
        a: RecordingSubscriber[int] = RecordingSubscriber(2)
        b: RecordingSubscriber[int] = RecordingSubscriber(2)
        for sub in (a, b, stays):
            shared.subscribe(sub)

        def flow(stays: RecordingSubscriber[int] = stays) -> None:
            for _ in range(201):
                stays.request(1)

        race(flow, *[sub.cancel for sub in (a, b) for _ in range(4)])
        assert stays.elements == list(range(200)) and stays.completed
        assert meter.cancels == 0

        shared, meter = shared_range(200, buffer_size=4, min_subscribers=2)
        c: RecordingSubscriber[int] = RecordingSubscriber(3)
        d: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
        shared.subscribe(c)
        shared.subscribe(d)
        race(*[sub.cancel for sub in (c, d) for _ in range(4)])
        assert meter.cancels == 1 and shared.buffered == 0
        for sub in (c, d):
            sub.assert_no_violations()


@pytest.mark.parametrize("seed", range(8))
def test_seeded_random_schedules_keep_order_bound_and_no_loss(
    seed: int, switching: float | None
) -> None:
    """Random subscribers (some late, some leaving, some asking from on_next), an upstream
    inline or on an executor, random request sizes from each subscriber's own thread: each
    sees a run of consecutive elements; those that stayed get the rest and complete; the
    ones there at the connection start at 0; the buffer bound holds at every element."""
    rng = random.Random(seed)
    n = rng.choice([50, 300])
    size = rng.choice([1, 3, 8, 16])
    k = rng.randint(2, 4)
    first = rng.randint(1, k - 1)  # min_subscribers: they subscribe first, the rest late
    leaving = [i > 0 and rng.random() < 0.5 for i in range(k)]  # subscriber 0 always stays
    reentrant = [i > 0 and rng.random() < 0.3 for i in range(k)]  # asks 1 from each on_next
    sizes = [[rng.choice([1, 2, 5, 50]) for _ in range(40)] for _ in range(k)]
    after = [rng.randint(0, n // 2) for _ in range(k)]  # a late one joins once 0 had these
    leave_at = [rng.randint(0, n // 2) for _ in range(k)]  # a leaver cancels once it had these
    with ThreadPoolExecutor(2) as pool:
        source = from_iterable(range(n), executor=pool if rng.random() < 0.5 else None)
        meter: Meter[int] = Meter(source)
        shared = share(meter, buffer_size=size, min_subscribers=first)
        assert isinstance(shared, SharePublisher)
        subs = [RecordingSubscriber[int]() for _ in range(k)]
        joined = [threading.Event() for _ in range(k)]
        failures: list[BaseException] = []

        def hook(sub: RecordingSubscriber[int], again: bool) -> Callable[[int], None]:
            def on_next(element: int) -> None:
                try:
                    bound_held(meter, shared, size)
                except AssertionError as exc:
                    failures.append(exc)
                if again:
                    sub.request(1)  # §3.3: from inside on_next

            return on_next

        for i, sub in enumerate(subs):
            sub.on_next_hook = hook(sub, reentrant[i])

        def run(i: int) -> Callable[[], None]:
            sub = subs[i]
            slack = 1 if reentrant[i] else 0  # one asked from on_next is always outstanding

            def act() -> None:
                if i >= first:  # late: once subscriber 0 had after[i] (it then waits for us)
                    subs[0].await_condition(
                        lambda: len(subs[0].elements) >= after[i] or subs[0].is_terminated, 30
                    )
                    shared.subscribe(sub)
                joined[i].set()
                for ask in sizes[i]:
                    if sub.is_terminated:
                        return
                    if leaving[i]:
                        if len(sub.elements) >= leave_at[i]:
                            sub.cancel()  # from its own thread, maybe while being fed
                            return
                        ask = min(ask, leave_at[i] - len(sub.elements))
                    pending = [after[j] for j in range(first, k) if not joined[j].is_set()]
                    if i == 0 and pending:  # stop where the next late one joins
                        ask = max(1, min(ask, min(pending) - len(sub.elements)))
                    sub.request(ask)
                    sub.await_condition(
                        lambda: sub.requested - len(sub.elements) <= slack or sub.is_terminated,
                        30,
                    )
                    if i == 0:  # hold on until the late ones due by now have joined
                        for j in range(first, k):
                            if after[j] <= len(sub.elements):
                                assert joined[j].wait(30)
                sub.request(UNBOUNDED)

            return act

        for i in range(first):  # the connection is made once these are all here
            shared.subscribe(subs[i])
        assert meter.subscriptions == 1
        race(*[run(i) for i in range(k)], timeout=60)
        for i, sub in enumerate(subs):
            if not leaving[i]:
                sub.await_terminal(30)
                assert sub.completed, (i, sub.error)
            got = sub.elements
            if got:
                assert got == list(range(got[0], got[0] + len(got))), (i, got)  # order, no gap
                if not leaving[i]:
                    assert got[-1] == n - 1, (i, len(got))  # no loss to the end
                if i < first:
                    assert got[0] == 0
            elif i < first:
                assert leaving[i]
            sub.assert_no_violations()
        assert not failures, failures[0]
        assert meter.subscriptions == 1 and meter.cancels == 0
