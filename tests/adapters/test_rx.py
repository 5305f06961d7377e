"""adapters.rx: from_observable strategies, to_observable, rx_processor (reactivex 4.x to 6.x)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import runpy
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import Observable
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.scheduler import CurrentThreadScheduler, NewThreadScheduler
from reactivex.subject import Subject
from reactivex.testing import TestScheduler

from reactive_streams import (
    UNBOUNDED,
    IllegalRequestError,
    OverflowViolation,
    Publisher,
    Subscriber,
    Subscription,
    checked,
    publish_on,
)
from reactive_streams._drain import DrainSubscription
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.adapters.rx import Overflow, from_observable, rx_processor, to_observable
from reactive_streams.testing import (
    CountedIterable,
    HoldFirst,
    Incomparable,
    PausedAt,
    RecordingSubscriber,
    RecordingSubscription,
    cancelled_while_delivering,
    race,
)

STRATEGIES = ["block", "buffer", "drop", "latest", "error"]
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rx_pipeline.py"


def _owned_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "rs-from-observable"}


class _CountingPublisher:
    """Wraps a Publisher and counts what its subscriber requests (and each request's size)
    and receives."""

    def __init__(self, inner: Publisher[Any]) -> None:
        self.inner = inner
        self.requested = 0
        self.requests: list[int] = []
        self.sent = 0
        self.cancelled = threading.Event()
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        outer = self

        class _Sub:
            def on_subscribe(self, s: Subscription) -> None:
                class _S:
                    def request(self, n: int) -> None:
                        with outer._lock:
                            outer.requested += n
                            outer.requests.append(n)
                            outer.max_in_flight = max(
                                outer.max_in_flight, outer.requested - outer.sent
                            )
                        s.request(n)

                    def cancel(self) -> None:
                        outer.cancelled.set()
                        s.cancel()

                subscriber.on_subscribe(_S())

            def on_next(self, x: Any) -> None:
                with outer._lock:
                    outer.sent += 1
                subscriber.on_next(x)

            def on_error(self, e: Exception) -> None:
                subscriber.on_error(e)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self.inner.subscribe(_Sub())


# -- from_observable: block ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "chain",
    [lambda o: o, lambda o: o.pipe(ops.map(lambda x: x + 1), ops.filter(lambda x: x >= 0))],
    ids=["from_iterable", "operator chain"],
)
def test_block_paces_a_cold_source_by_demand(chain: Callable[[Any], Any]) -> None:
    """block: a cold source's generator is pulled at most demand + buffer_size (+1 waiting)."""
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    from_observable(chain(reactivex.from_iterable(gen)), buffer_size=16).subscribe(sub)
    sub.await_count(10)
    sub.await_condition(lambda: gen.pulled >= 10 + 16, what="the buffer to fill")
    sub.expect_no_signals(0.05)
    assert gen.pulled <= 10 + 16 + 1
    sub.request(5)
    sub.await_count(15)
    sub.await_condition(lambda: gen.pulled >= 15 + 16, what="the buffer to refill")
    assert gen.pulled <= 15 + 16 + 1
    sub.cancel()
    assert gen.closed.wait(5)
    sub.assert_no_violations()


def test_block_is_lossless_and_ordered() -> None:
    """block: every element of a cold source arrives, in order, then on_complete."""
    out = list(to_iterator(from_observable(reactivex.from_iterable(range(5000))), prefetch=64))
    assert out == list(range(5000))


def test_block_with_a_hot_subject_makes_the_emitter_wait_for_room() -> None:
    """block + Subject: the emitting thread waits while buffer_size wait; nothing is lost."""
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, buffer_size=2)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    publisher.subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    returned = 0

    def emit() -> None:
        nonlocal returned
        for i in range(10):
            subject.on_next(i)
            returned += 1

    emitter = threading.Thread(target=emit)
    emitter.start()
    sub.await_condition(lambda: returned == 2, what="the buffer to fill")
    emitter.join(0.05)
    assert emitter.is_alive() and returned == 2  # the third on_next waits for room
    sub.request(10)
    emitter.join(5)
    assert not emitter.is_alive()
    assert sub.elements == list(range(10)) and publisher.dropped == 0
    sub.assert_no_violations()


def test_cancel_ends_the_owned_thread_and_closes_the_source() -> None:
    """Cancelling releases the waiting emitter; the owned thread ends; the generator closes."""
    before = _owned_threads()
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    from_observable(reactivex.from_iterable(gen), buffer_size=4).subscribe(sub)
    sub.await_count(1)
    sub.await_condition(lambda: gen.pulled >= 5, what="the emitter to wait")
    owned = _owned_threads() - before
    assert len(owned) == 1
    sub.cancel()
    for thread in owned:
        thread.join(5)
        assert not thread.is_alive()
    assert gen.closed.wait(5)


def test_cancel_from_on_next_stops_a_synchronous_producer_that_ignores_dispose() -> None:
    """block on a cold source whose subscribe function loops for ever, never looking at its
    disposal: a cancel from on_next still ends it at once, by unwinding the owned thread's
    stack at the next element it emits (§3.12)."""
    emitted: list[int] = []
    finished = threading.Event()

    def endless(observer: Any, scheduler: Any = None) -> Any:
        try:
            for i in itertools.count():
                emitted.append(i)
                observer.on_next(i)
        finally:
            finished.set()

    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    sub.on_next_hook = lambda x: sub.cancel() if x == 3 else None
    from_observable(reactivex.create(endless), overflow="block").subscribe(sub)
    assert finished.wait(5)
    assert sub.elements == [0, 1, 2, 3] and len(emitted) <= 5


def test_owned_thread_ends_once_a_hot_subject_is_subscribed() -> None:
    """block + Subject: the owned thread only subscribes, then ends; emitters are the user's."""
    before = _owned_threads()
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(5)
    from_observable(subject).subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    for thread in _owned_threads() - before:
        thread.join(5)
        assert not thread.is_alive()
    subject.on_next(1)
    assert sub.elements == [1] and sub.signal_threads == {threading.get_ident()}


def test_cancel_releases_a_blocked_user_thread_without_raising_into_it() -> None:
    """block + Subject: cancel wakes the user's emitting thread, which returns normally."""
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_observable(subject, buffer_size=1).subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    raised: list[BaseException] = []
    returned = 0

    def emit() -> None:
        nonlocal returned
        try:
            for i in range(3):
                subject.on_next(i)
                returned += 1
        except BaseException as exc:  # the test fails if anything reaches the emitter
            raised.append(exc)

    emitter = threading.Thread(target=emit)
    emitter.start()
    sub.await_condition(lambda: returned == 1, what="the emitter to wait")
    sub.cancel()
    emitter.join(5)
    assert not emitter.is_alive() and raised == [] and returned == 3
    assert subject.observers == [] and sub.elements == []


def test_cancelled_before_subscribing_never_subscribes_to_the_observable() -> None:
    """A subscriber that cancels in on_subscribe: the Observable is never subscribed."""
    subscribed = threading.Event()

    def factory(_: Any) -> reactivex.Observable[int]:
        subscribed.set()
        return reactivex.from_iterable(range(3))

    class Canceller(RecordingSubscriber[int]):
        def on_subscribe(self, subscription: Subscription) -> None:
            super().on_subscribe(subscription)
            subscription.cancel()

    before = _owned_threads()
    sub = Canceller()
    from_observable(reactivex.defer(factory)).subscribe(sub)
    for thread in _owned_threads() - before:
        thread.join(5)
    assert not subscribed.is_set() and sub.elements == []


# -- from_observable: block, a cold source delivered under the emitter lease --------------------


@pytest.fixture
def leases(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread ids of every emitter lease the drain grants during the test."""
    taken: list[int] = []
    original = DrainSubscription.lease

    def spy(self: DrainSubscription[Any]) -> bool:
        granted = original(self)
        if granted:
            taken.append(threading.get_ident())
        return granted

    monkeypatch.setattr(DrainSubscription, "lease", spy)
    return taken


def _owned_thread_ends(before: set[threading.Thread]) -> None:
    for thread in _owned_threads() - before:
        thread.join(5)
        assert not thread.is_alive()


class TestBlockLease:
    """block + a cold source: the owned thread delivers straight to the subscriber under a
    lease of demand (one lock per lease), and every rule still holds."""

    def test_delivers_on_the_owned_thread_under_one_lease(self, leases: list[int]) -> None:
        """20_000 elements requested 256 at a time from on_next (§3.3): all of them, in
        order, on the owned thread, under one lease renewed in place; no violation (checked)."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(256)
        sub.on_next_hook = lambda x: sub.request(256) if x % 256 == 255 else None
        checked(from_observable(reactivex.from_iterable(range(20_000)))).subscribe(sub)
        sub.await_terminal()
        assert sub.completed and sub.elements == list(range(20_000))
        assert len(leases) == 1 and sub.signal_threads == {threading.get_ident(), leases[0]}
        sub.assert_no_violations()

    def test_spec303_reentrant_request_of_one_during_a_lease(self, leases: list[int]) -> None:
        """§3.2/§3.3/§1.1: request(1) from each on_next under a lease: exactly one element per
        request, no recursion, no violation (checked raises ProtocolViolation if so)."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
        checked(from_observable(reactivex.from_iterable(range(5000)))).subscribe(sub)
        sub.await_terminal()
        assert sub.completed and sub.elements == list(range(5000)) and sub.error is None
        assert len(leases) == 1
        sub.assert_no_violations()

    def test_cancel_from_another_thread_stops_a_fast_cold_emission(self, leases: list[int]) -> None:
        """§3.12/§3.13: cancel from another thread while an infinite cold source is delivered
        under a lease: it stops (at most one more element arrives after cancel returned),
        the generator is closed, the owned thread ends, the subscriber is let go."""
        sub = _cancel_a_cold_lease_after(2000)
        assert leases
        ref = weakref.ref(sub)
        del sub
        gc.collect()
        assert ref() is None  # §3.13

    def test_cancel_disposes_at_once_a_source_waiting_between_two_elements(
        self, leases: list[int]
    ) -> None:
        """§3.12: the owned thread holds the lease while the source waits (a 10 s timer on its
        trampoline) for its next element: cancel from another thread disposes the Rx
        subscription at once, without waiting for an element that may never come."""
        from reactivex.scheduler import CurrentThreadScheduler

        disposed = threading.Event()
        slow = reactivex.timer(10.0, scheduler=CurrentThreadScheduler.singleton()).pipe(
            ops.start_with(-1), ops.finally_action(disposed.set)
        )
        sub: RecordingSubscriber[int] = RecordingSubscriber(5)
        from_observable(slow).subscribe(sub)
        assert sub.await_count(1) == [-1] and len(leases) == 1  # then the timer waits
        sub.cancel()
        assert disposed.wait(5)  # not 10 s later, at the timer's next element
        assert sub.elements == [-1] and not sub.is_terminated

    def test_request_from_another_thread_while_the_emitter_waits(self, leases: list[int]) -> None:
        """block: with no demand the owned thread fills the buffer and waits (no lease);
        requests from this thread release it; once the buffer is empty and demand remains,
        the rest is delivered under a lease, in order, on the owned thread."""
        gen = CountedIterable(100)
        sub: RecordingSubscriber[int] = RecordingSubscriber(0)
        from_observable(reactivex.from_iterable(gen), buffer_size=4).subscribe(sub)
        sub.await_condition(lambda: gen.pulled == 5, what="the emitter to wait for room")
        assert sub.elements == [] and leases == []
        sub.request(2)
        assert sub.elements == [0, 1]
        sub.await_condition(lambda: gen.pulled == 7, what="the emitter to refill the buffer")
        sub.request(UNBOUNDED)
        sub.await_terminal()
        assert sub.completed and sub.elements == list(range(100))
        assert len(leases) == 1 and leases[0] in sub.signal_threads
        sub.assert_no_violations()

    def test_spec309_request_zero_during_a_lease_signals_on_error(self, leases: list[int]) -> None:
        """§3.9: request(0) from on_next under a lease: on_error(IllegalRequestError) right
        after that element; the generator is closed and the owned thread ends."""
        before = _owned_threads()
        gen = CountedIterable()
        sub: RecordingSubscriber[int] = RecordingSubscriber(100)
        sub.on_next_hook = lambda x: sub.request(0) if x == 5 else None
        from_observable(reactivex.from_iterable(gen)).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == list(range(6))
        assert isinstance(sub.error, IllegalRequestError) and "§3.9" in str(sub.error)
        assert gen.closed.wait(5) and leases
        _owned_thread_ends(before)
        sub.assert_no_violations()

    def test_spec213_raising_subscriber_during_a_lease_is_cancelled_and_reported(
        self, leases: list[int], caplog: pytest.LogCaptureFixture
    ) -> None:
        """§2.13: on_next raising under a lease: the subscription counts as cancelled (the Rx
        subscription disposed at once: the generator is not pulled again; the owned thread
        ends), the error is logged naming §2.13, and the subscriber is signalled nothing more.
        (The logged traceback keeps the generator's frame alive, so it is not closed here.)"""
        before = _owned_threads()
        gen = CountedIterable()
        boom = RuntimeError("subscriber bug")

        def explode(x: int) -> None:
            if x == 3:
                raise boom

        sub: RecordingSubscriber[int] = RecordingSubscriber(100)
        sub.on_next_hook = explode
        with caplog.at_level(logging.ERROR, logger="reactive_streams"):
            from_observable(reactivex.from_iterable(gen)).subscribe(sub)
            sub.await_condition(lambda: len(caplog.records) > 0, what="the report")
            _owned_thread_ends(before)
        assert sub.elements == [0, 1, 2, 3] and gen.pulled == 4
        assert not sub.is_terminated and leases
        dropped = [r for r in caplog.records if r.exc_info and r.exc_info[1] is boom]
        assert len(dropped) == 1 and dropped[0].getMessage().startswith("§2.13: ")

    def test_none_during_a_lease_fails_the_stream(self, leases: list[int]) -> None:
        """§2.13: None from a cold source under a lease is never delivered: on_error(TypeError)
        after the elements before it."""
        sub: RecordingSubscriber[Any] = RecordingSubscriber(10)
        from_observable(reactivex.from_iterable([0, 1, None, 3])).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [0, 1] and isinstance(sub.error, TypeError) and leases

    def test_spec104_rx_error_follows_the_leased_elements(self, leases: list[int]) -> None:
        """§1.4: an Rx error after elements delivered under a lease arrives after them."""
        boom = RuntimeError("rx failed")
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        source = reactivex.concat(reactivex.from_iterable(range(3)), reactivex.throw(boom))
        from_observable(source).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [0, 1, 2] and sub.error is boom and leases

    def test_emission_moving_to_another_thread_stays_serial_and_ordered(
        self, leases: list[int]
    ) -> None:
        """A cold source whose emission continues on a thread of Rx's own after a first part on
        the owned thread: that thread delivers under the lease until the owned thread, leaving,
        revokes it, and through the buffer after; leases are granted to the owned thread only;
        all elements arrive in order, serially (checked), then on_complete."""
        source = reactivex.concat(
            reactivex.from_iterable(range(100)),
            reactivex.from_iterable(range(100, 200)).pipe(ops.subscribe_on(NewThreadScheduler())),
        )
        sub: RecordingSubscriber[int] = RecordingSubscriber(1000)
        checked(from_observable(source, buffer_size=8)).subscribe(sub)
        sub.await_terminal()
        assert sub.completed and sub.elements == list(range(200))
        assert len(set(leases)) == 1  # only ever granted to the owned thread
        sub.assert_no_violations()

    def test_owned_thread_blocking_on_other_emitters_does_not_deadlock(
        self, leases: list[int]
    ) -> None:
        """A cold source that emits once on the owned thread (under a lease, credit left) and
        then waits there for a worker thread to emit 50 more: the worker goes on under the
        lease while its credit lasts (the calls are serial), then through the buffer, which
        drains, so the buffer (4) never blocks it for good."""

        def subscribe(observer: Any, scheduler: Any = None) -> Any:
            observer.on_next(-1)

            def work() -> None:
                for i in range(50):
                    observer.on_next(i)

            worker = threading.Thread(target=work, daemon=True)
            worker.start()
            worker.join(5)
            if not worker.is_alive():
                observer.on_completed()
            return None

        sub: RecordingSubscriber[int] = RecordingSubscriber(2, request_on_next=1)
        from_observable(reactivex.create(subscribe), buffer_size=4).subscribe(sub)
        sub.await_terminal()
        assert sub.completed and sub.elements == [-1, *range(50)] and leases
        sub.assert_no_violations()

    def test_two_threads_emitting_at_once_under_the_lease_lose_nothing(
        self, leases: list[int]
    ) -> None:
        """An Observable that breaks Rx's contract while the owned thread still subscribes:
        worker A delivers under the lease, B's push meanwhile is buffered, and A stops (traced)
        after putting its credit back; the owned thread then claims that credit and delivers.
        A's settling finds the credit claimed and leaves it to that delivery: every element
        arrives once, never two at a time (checked), and the stream completes; only the
        order of elements emitted at once is not kept."""
        a_inside, a_leave = threading.Event(), threading.Event()
        a_paused = PausedAt(DrainSubscription._offer, "self._settle(credit)")

        def hook(element: int) -> None:
            if element == 0:
                a_inside.set()
                assert a_leave.wait(5)
            if element == 2:
                a_paused.resume()  # A settles while this delivery is under way

        def subscribe(observer: Any, scheduler: Any = None) -> Any:
            observer.on_next(-1)  # the owned thread takes the lease

            def worker_b() -> None:
                assert a_inside.wait(5)
                observer.on_next(1)  # A is inside on_next(0): the credit is claimed
                a_leave.set()

            b = threading.Thread(target=worker_b, daemon=True)
            b.start()
            a_paused.start(lambda: observer.on_next(0))  # worker A, stopped after on_next(0)
            b.join(5)
            observer.on_next(2)
            observer.on_completed()
            return None

        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        sub.on_next_hook = hook
        checked(from_observable(reactivex.create(subscribe))).subscribe(sub)
        sub.await_terminal()
        assert sub.completed and sorted(sub.elements) == [-1, 0, 1, 2]
        assert len(set(leases)) == 1
        sub.assert_no_violations()


def _cancel_a_cold_lease_after(count: int) -> RecordingSubscriber[int]:
    """Cancel, from this thread, an infinite cold source delivered under a lease once
    ``count`` elements arrived: it stops (at most one element after cancel returned), the
    generator is closed and the owned thread ends."""
    before = _owned_threads()
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    from_observable(reactivex.from_iterable(gen)).subscribe(sub)
    sub.await_count(count)
    sub.cancel()
    at_return = len(sub.elements)
    assert gen.closed.wait(5)
    _owned_thread_ends(before)
    assert len(sub.elements) - at_return <= 1
    assert sub.elements == list(range(len(sub.elements)))
    return sub


def _race_cancel_cold_lease_once() -> None:
    _cancel_a_cold_lease_after(1).assert_no_violations()


@pytest.mark.stress
def test_cancel_racing_a_cold_lease() -> None:
    """block, cold, under a lease: cancel from this thread racing the owned thread's emission
    (100 rounds) always stops it, closes the generator and ends the thread; at most one
    element arrives after cancel returned."""
    for _ in range(100):
        _race_cancel_cold_lease_once()


def _race_requests_cold_lease_once() -> None:
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    checked(from_observable(reactivex.from_iterable(range(2000)), buffer_size=8)).subscribe(sub)
    race(lambda: [sub.request(10) for _ in range(200)])
    sub.await_terminal()
    assert sub.error is None and sub.completed and sub.elements == list(range(2000))
    sub.assert_no_violations()


@pytest.mark.stress
def test_spec101_requests_from_another_thread_racing_a_cold_lease() -> None:
    """§1.1/§1.3: requests of 10 from another thread racing the owned thread's emission, which
    waits, leases, renews and returns leases (50 rounds): checked() never sees more on_next
    than requested nor overlapping signals, and everything arrives in order."""
    for _ in range(50):
        _race_requests_cold_lease_once()


def _race_thread_switch_once() -> None:
    source = reactivex.concat(
        reactivex.from_iterable(range(50)),
        reactivex.from_iterable(range(50, 100)).pipe(ops.subscribe_on(NewThreadScheduler())),
        reactivex.from_iterable(range(100, 150)),
    )
    sub: RecordingSubscriber[int] = RecordingSubscriber(3, request_on_next=1)
    checked(from_observable(source, buffer_size=4)).subscribe(sub)
    sub.await_terminal()
    assert sub.error is None and sub.completed and sub.elements == list(range(150))
    sub.assert_no_violations()


@pytest.mark.stress
def test_emission_switching_threads_racing_the_owned_thread_leaving() -> None:
    """block: a cold source that moves from the owned thread to Rx's own thread while the owned
    thread returns (50 rounds): serial (checked), ordered, complete."""
    for _ in range(50):
        _race_thread_switch_once()


# -- from_observable: event loops ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_block_on_an_event_loop_thread_errors_instead_of_deadlocking() -> None:
    """block: an emission on a running loop's thread fails the stream with a clear error."""
    asyncio.get_running_loop().set_debug(True)
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_observable(subject, buffer_size=1).subscribe(sub)
    await asyncio.to_thread(
        sub.await_condition, lambda: len(subject.observers) == 1, 5.0, "the Rx subscription"
    )
    for i in range(3):  # would block the loop at the second element: must return at once
        subject.on_next(i)
    sub.request(5)
    await asyncio.to_thread(sub.await_terminal)
    assert isinstance(sub.error, RuntimeError)
    assert "event loop" in str(sub.error) and "overflow='latest'" in str(sub.error)
    assert subject.observers == []


def test_block_on_a_loop_thread_under_a_carried_lease_fails_once_its_credit_is_spent() -> None:
    """The documented exception to the loop check: a producer that emits on the owned thread
    (taking a lease of 3) and then moves onto a loop thread while the owned thread still
    subscribes goes on under that lease; the element past its credit fails the stream with
    the loop error instead of waiting, and the loop never waits."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        observer.on_next(0)

        async def on_the_loop() -> None:
            for i in range(1, 6):
                observer.on_next(i)

        asyncio.run_coroutine_threadsafe(on_the_loop(), loop).result(5)
        observer.on_completed()
        return None

    try:
        sub: RecordingSubscriber[int] = RecordingSubscriber(3)
        from_observable(reactivex.create(subscribe)).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [0, 1, 2]
        assert isinstance(sub.error, RuntimeError) and "event loop" in str(sub.error)
        sub.assert_no_violations()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


@pytest.mark.asyncio
async def test_block_fails_on_the_loop_even_with_demand_and_room() -> None:
    """block: the loop check does not depend on load, so the mistake shows in any test."""
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    from_observable(subject).subscribe(sub)
    await asyncio.to_thread(
        sub.await_condition, lambda: len(subject.observers) == 1, 5.0, "the Rx subscription"
    )
    subject.on_next(1)
    assert sub.elements == [] and isinstance(sub.error, RuntimeError)


@pytest.mark.asyncio
@pytest.mark.timeout(30)  # a strategy that waited here would hang the loop: fail, not hang
async def test_latest_on_an_event_loop_thread_never_blocks() -> None:
    """latest on the loop: the loop keeps running, the slow consumer sees the newest."""
    asyncio.get_running_loop().set_debug(True)  # asyncio logs a callback that blocks it
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, overflow="latest", buffer_size=1)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    publisher.subscribe(sub)
    for i in range(100):
        subject.on_next(i)
        await asyncio.sleep(0)
    sub.request(1)
    assert sub.elements == [99] and publisher.dropped == 99


# -- from_observable: the other strategies with a hot Subject ---------------------------------


def _hot(
    strategy: str, size: int, n: int, initial: int, **kw: Any
) -> tuple[Any, RecordingSubscriber[int], Subject[int]]:
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, overflow=strategy, buffer_size=size, **kw)
    sub: RecordingSubscriber[int] = RecordingSubscriber(initial)
    publisher.subscribe(sub)
    for i in range(n):
        subject.on_next(i)
    return publisher, sub, subject


def test_drop_keeps_the_oldest_counts_and_reports_drops() -> None:
    """drop: beyond buffer_size the newest are dropped, counted and passed to on_drop."""
    seen: list[int] = []
    publisher, sub, _ = _hot("drop", 3, 10, 1, on_drop=seen.append)
    sub.request(10)
    assert sub.elements == [0, 1, 2, 3] and publisher.dropped == 6
    assert seen == [4, 5, 6, 7, 8, 9]


def test_latest_keeps_the_newest_and_reports_the_oldest() -> None:
    """latest: the oldest buffered elements give way to the newest; on_drop gets the old."""
    seen: list[int] = []
    publisher, sub, _ = _hot("latest", 2, 10, 0, on_drop=seen.append)
    sub.request(5)
    assert sub.elements == [8, 9] and publisher.dropped == 8 and seen == list(range(8))


@pytest.mark.parametrize("strategy", ["block", "buffer", "drop", "latest", "error"])
def test_elements_that_refuse_comparison_pass_every_strategy(strategy: str) -> None:
    """Elements whose == raises (numpy arrays, DataFrames) pass each strategy whole and in
    order: hot pushes into the buffer, then the drain's pops and the end."""
    subject: Subject[Incomparable] = Subject()
    # error refuses an element without demand; the others buffer 3 of the 6 for later
    sub: RecordingSubscriber[Incomparable] = RecordingSubscriber(6 if strategy == "error" else 3)
    from_observable(subject, overflow=strategy, buffer_size=8).subscribe(sub)
    for i in range(6):
        subject.on_next(Incomparable(i))
    subject.on_completed()
    sub.request(10)
    sub.await_terminal()
    assert [element.value for element in sub.elements] == list(range(6)) and sub.completed


def test_elements_that_refuse_comparison_pass_a_cold_block_source() -> None:
    """block over a cold source (the owned thread, its lease and its buffer) into
    to_iterator: every element whole, in order."""
    items = [Incomparable(i) for i in range(300)]
    received = list(to_iterator(from_observable(reactivex.from_iterable(items)), prefetch=16))
    assert [element.value for element in received] == list(range(300))


def test_cancel_ends_an_endless_source_that_emits_on_its_own_scheduler_thread() -> None:
    """The way around RxPY's subscribe_on limit that docs/adapters.md gives: an endless
    from_iterable given a NewThreadScheduler is disposed by cancel, and its thread ends
    (with subscribe_on it would spin on)."""
    threads: set[int] = set()

    def mark(x: int) -> int:
        threads.add(threading.get_ident())
        return x

    source = reactivex.from_iterable(itertools.count(), scheduler=NewThreadScheduler())
    sub: RecordingSubscriber[int] = RecordingSubscriber(5)
    from_observable(source.pipe(ops.map(mark)), buffer_size=4).subscribe(sub)
    assert sub.await_count(5) == [0, 1, 2, 3, 4]
    sub.cancel()
    (emitter,) = threads
    for thread in threading.enumerate():
        if thread.ident == emitter:
            thread.join(10)
            assert not thread.is_alive(), "the Rx thread still runs after cancel"


def test_a_raising_on_drop_callback_is_reported_not_raised() -> None:
    """drop: an on_drop that raises is reported; the stream and the emitter carry on."""

    def bad(_: int) -> None:
        raise ValueError("callback bug")

    publisher, sub, subject = _hot("drop", 1, 3, 0, on_drop=bad)
    subject.on_completed()
    sub.request(5)
    assert sub.elements == [0] and sub.completed and publisher.dropped == 2


def test_buffer_overflow_error_names_the_bound_after_buffered_elements() -> None:
    """buffer: overflow is on_error naming buffer_size, after the buffered elements; the Rx
    subscription is disposed."""
    _, sub, subject = _hot("buffer", 2, 5, 0)
    assert subject.observers == []
    sub.request(5)
    assert sub.elements == [0, 1]
    assert isinstance(sub.error, OverflowViolation) and "buffer_size=2" in str(sub.error)


def test_buffer_overflow_stops_a_cold_synchronous_source() -> None:
    """buffer: overflow disposes a cold source on the caller's thread; it is not drained."""
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_observable(reactivex.from_iterable(gen), overflow="buffer", buffer_size=8).subscribe(sub)
    assert gen.pulled == 9 and gen.closed.is_set() and not sub.is_terminated
    sub.request(8)
    assert sub.elements == list(range(8)) and isinstance(sub.error, OverflowViolation)


def test_error_strategy_fails_on_an_element_without_demand() -> None:
    """error: elements within demand pass; the first beyond it fails the stream (§1.1)."""
    _, sub, subject = _hot("error", 16, 4, 3)
    assert sub.elements == [0, 1, 2] and isinstance(sub.error, OverflowViolation)
    assert "without demand" in str(sub.error) and subject.observers == []


def test_rx_completion_and_error_follow_the_buffered_elements() -> None:
    """Rx on_completed / on_error reach the subscriber after every buffered element."""
    for strategy in STRATEGIES:
        if strategy == "error":
            continue
        _, sub, subject = _hot(strategy, 8, 3, 0)
        subject.on_completed()
        assert not sub.is_terminated
        sub.request(3)
        assert sub.elements == [0, 1, 2] and sub.completed, strategy
        failure = RuntimeError("rx failed")
        _, sub, subject = _hot(strategy, 8, 2, 0)
        subject.on_error(failure)
        assert not sub.is_terminated
        sub.request(1)
        assert not sub.is_terminated
        sub.request(1)
        assert sub.elements == [0, 1] and sub.error is failure, strategy


@pytest.mark.stress
@pytest.mark.parametrize("overflow", ["block", "latest"])
def test_hot_pushes_racing_requests_never_stall(overflow: str) -> None:
    """A push that finds the buffer non-empty wakes no drain pass; racing request(1)s from
    another thread (20 rounds) still never leave an element behind: block delivers every
    one in order, latest delivers the newest (demand covers all the pushes)."""
    for _ in range(20):
        subject: Subject[int] = Subject()
        sub: RecordingSubscriber[int] = RecordingSubscriber(0)
        from_observable(subject, overflow=overflow, buffer_size=4).subscribe(sub)
        n = 2000
        race(
            lambda: [subject.on_next(i) for i in range(n)],  # noqa: B023
            lambda: [sub.request(1) for _ in range(n)],  # noqa: B023
        )
        sub.await_condition(
            lambda: bool(sub.elements) and sub.elements[-1] == n - 1,  # noqa: B023
            what="the last pushed element",
        )
        assert sub.elements == sorted(set(sub.elements))
        if overflow == "block":
            assert sub.elements == list(range(n))
        sub.assert_no_violations()


@pytest.mark.parametrize("overflow", ["buffer", "block", "latest"])
def test_two_threads_feeding_one_subject_never_strand_an_element(
    overflow: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads calling a Subject's on_next at once (against Rx's contract, but a common
    mistake): pinned to the worst interleaving, both append before either asks whether the
    buffer was empty. One of them must still wake the drain, or both elements wait forever."""
    from reactive_streams.adapters import _rx_buffer

    barrier = threading.Barrier(2, timeout=0.5)  # pins the race; times out when excluded

    class Racing(deque[Any]):
        def append(self, element: Any) -> None:
            super().append(element)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass

    monkeypatch.setattr(_rx_buffer, "deque", Racing)
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    from_observable(subject, overflow=overflow, buffer_size=4).subscribe(sub)
    race(lambda: subject.on_next(1), lambda: subject.on_next(2))
    sub.await_count(2)
    assert sorted(sub.elements) == [1, 2]
    sub.assert_no_violations()


def test_block_two_threads_waiting_for_room_are_both_released() -> None:
    """block, a Subject fed from two threads at once, a buffer of 2 and one request at a
    time: both emitters end up waiting for room; every pop that makes room wakes all of
    them (it woke one, and the other could wait for ever with room and demand)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # thread switches at every chance: the race shows at once
    try:
        _two_emitters_waiting_for_room()
    finally:
        sys.setswitchinterval(interval)


def _two_emitters_waiting_for_room() -> None:
    for _ in range(10):
        subject: Subject[int] = Subject()
        sub: RecordingSubscriber[int] = RecordingSubscriber(0)
        from_observable(subject, overflow="block", buffer_size=2).subscribe(sub)
        sub.await_condition(lambda: len(subject.observers) == 1)  # noqa: B023

        def emit(first: int) -> None:
            for i in range(first, first + 50):
                subject.on_next(i)  # noqa: B023

        emitters = [threading.Thread(target=emit, args=(k * 100,), daemon=True) for k in range(2)]
        for emitter in emitters:
            emitter.start()
        for n in range(1, 101):
            sub.request(1)
            sub.await_count(n)
        for emitter in emitters:
            emitter.join(5)
            assert not emitter.is_alive()
        assert sorted(sub.elements) == sorted(k * 100 + i for k in range(2) for i in range(50))


def test_error_strategy_counts_the_element_being_delivered() -> None:
    """overflow='error' fails on the first element without demand, even when it arrives
    while the one element requested is still inside on_next (a push from on_next): the
    drain settles its demand once per pass, so the check counts what was requested."""
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    sub.on_next_hook = lambda x: subject.on_next(2) if x == 1 else None
    from_observable(subject, overflow="error", buffer_size=8).subscribe(sub)
    subject.on_next(1)
    assert sub.elements == [1]
    assert isinstance(sub.error, OverflowViolation) and "without demand" in str(sub.error)


def test_latest_evicts_only_when_the_buffer_is_still_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """latest, buffer [0, 1] full, no demand: the producer decides to evict the oldest while
    a request on another thread makes room. The two are ordered: either the drain takes 0
    first and nothing needs evicting, or 0 is evicted and the drain takes 1; never is 0
    delivered and 1 evicted while there was room."""
    from reactive_streams.adapters import _rx_buffer

    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    requester: list[threading.Thread] = []

    class Pinned(deque[Any]):
        armed = False

        def popleft(self) -> Any:  # the producer's eviction (the drain pops through poll)
            if Pinned.armed:
                Pinned.armed = False
                thread = threading.Thread(target=lambda: sub.request(1))
                requester.append(thread)
                thread.start()
                thread.join(0.5)  # runs now unless the eviction holds the drain off
            return super().popleft()

    monkeypatch.setattr(_rx_buffer, "deque", Pinned)
    dropped: list[int] = []
    subject: Subject[int] = Subject()
    from_observable(subject, overflow="latest", buffer_size=2, on_drop=dropped.append).subscribe(
        sub
    )
    subject.on_next(0)
    subject.on_next(1)
    Pinned.armed = True
    subject.on_next(2)
    requester[0].join(5)
    assert (sub.elements, dropped) == ([1], [0])
    sub.assert_no_violations()


def test_an_element_racing_the_rx_error_is_delivered_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Subject fed from two threads, on_next on one and on_error on the other at once:
    the element either lands before the end is recorded (delivered, then on_error) or is
    dropped; the error is never turned into on_complete."""
    from reactive_streams.adapters import _rx_buffer, _rx_from

    at_append, go_append, appended = threading.Event(), threading.Event(), threading.Event()

    class Pinned(deque[Any]):
        def append(self, element: Any) -> None:
            if element == "late":
                at_append.set()
                go_append.wait(0.5)  # held here unless the error's drain lets it through
            super().append(element)
            if element == "late":
                appended.set()

    monkeypatch.setattr(_rx_buffer, "deque", Pinned)
    original_at_end = _rx_buffer._BufferSource.at_end

    def at_end(self: Any) -> bool:
        over = original_at_end(self)
        if over and threading.current_thread().name == "erring":
            go_append.set()  # the element lands after at_end said "over"
            appended.wait(0.5)
        return over

    monkeypatch.setattr(_rx_from._ObservableSource, "at_end", at_end)
    subject: Subject[str] = Subject()
    sub: RecordingSubscriber[str] = RecordingSubscriber(10)
    from_observable(subject, overflow="drop", buffer_size=8).subscribe(sub)
    failure = RuntimeError("rx failed")
    pushing = threading.Thread(target=subject.on_next, args=("late",))
    pushing.start()
    assert at_append.wait(5)
    erring = threading.Thread(target=subject.on_error, args=(failure,), name="erring")
    erring.start()
    pushing.join(5)
    erring.join(5)
    sub.await_terminal()
    assert sub.error is failure and not sub.completed
    assert sub.elements in (["late"], [])
    sub.assert_no_violations()


def test_block_feedback_from_on_next_fails_instead_of_deadlocking() -> None:
    """block: a subscriber that pushes back into its hot Subject from on_next, beyond
    buffer_size, would wait for room on its own stack: the stream fails with a clear error
    instead (after the buffered elements), and the emitting call returns."""
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    sub.on_next_hook = lambda x: [subject.on_next(i) for i in range(1, 6)] if x == 0 else None
    from_observable(subject, buffer_size=2).subscribe(sub)
    emitter = threading.Thread(target=subject.on_next, args=(0,), daemon=True)
    emitter.start()
    emitter.join(5)
    assert not emitter.is_alive()  # no deadlock
    sub.request(10)
    sub.await_terminal()
    assert sub.elements == [0, 1, 2]
    assert isinstance(sub.error, RuntimeError) and "feedback loop" in str(sub.error)
    assert "buffer_size=2" in str(sub.error)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cancel_disposes_the_rx_subscription(strategy: str) -> None:
    """Every strategy: cancel removes the adapter's observer from a hot Subject."""
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    from_observable(subject, overflow=strategy).subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    subject.on_next(1)
    sub.cancel()
    assert subject.observers == []
    subject.on_next(2)
    assert sub.elements == [1]


def test_cancel_from_on_next_stops_a_cold_synchronous_source() -> None:
    """drop on a cold source: cancel from on_next disposes it (it runs no further)."""
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    sub.on_next_hook = lambda x: sub.cancel() if x == 4 else None
    from_observable(reactivex.from_iterable(gen), overflow="drop").subscribe(sub)
    assert sub.elements == [0, 1, 2, 3, 4] and gen.pulled <= 6 and gen.closed.is_set()


def test_spec313_cancel_during_the_rx_subscribe_call_disposes_what_it_returns() -> None:
    """§3.12/§3.13: a cancel that arrives while observable.subscribe() is still running (the
    subscriber cancels from the on_next the source emits synchronously) disposes the
    disposable that subscribe() then returns."""
    disposed = threading.Event()

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        observer.on_next(1)
        return Disposable(disposed.set)

    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    sub.on_next_hook = lambda x: sub.cancel()
    from_observable(reactivex.create(subscribe), overflow="drop").subscribe(sub)
    assert sub.elements == [1]
    assert disposed.wait(5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_none_from_rx_fails_the_stream_without_raising_into_rx(strategy: str) -> None:
    """None is a legal Rx value but never an element: on_error(TypeError), Rx unharmed."""
    subject: Subject[Any] = Subject()
    sub: RecordingSubscriber[Any] = RecordingSubscriber(5)
    from_observable(subject, overflow=strategy).subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    subject.on_next(None)
    sub.await_terminal()
    assert isinstance(sub.error, TypeError) and "None" in str(sub.error)
    assert subject.observers == []


def test_arguments_are_checked() -> None:
    """Unknown strategies, bad buffer sizes and non-Observables are rejected at once."""
    with pytest.raises(ValueError, match="overflow must be one of"):
        from_observable(reactivex.empty(), overflow="spill")
    with pytest.raises(ValueError, match="buffer_size"):
        from_observable(reactivex.empty(), buffer_size=0)
    with pytest.raises(TypeError):
        from_observable([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_drop must be a callable"):
        from_observable(reactivex.empty(), overflow="drop", on_drop=5)  # type: ignore[arg-type]
    assert from_observable(reactivex.empty(), overflow=Overflow.LATEST).overflow is Overflow.LATEST
    with pytest.raises(TypeError, match="got an Observable"):
        to_observable(reactivex.of(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="operator 1 must be an Rx operator"):
        rx_processor(ops.map(str), 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ops.map\(f\), not ops.map"):
        rx_processor(ops.map)
    with pytest.raises(TypeError, match="operator 0 .* raised TypeError.* not a function of the"):
        rx_processor(lambda x: x * 2)  # a function of the elements, not an operator
    with pytest.raises(TypeError, match="operator 1 .* made str, not an Observable"):
        rx_processor(ops.map(str), lambda x: str(x))
    with pytest.raises(TypeError, match="operator 0 .* made function, not an Observable"):
        rx_processor(ops.map, ops.map(str))  # a bare operator first: the next one got a function
    for strategy in ("block", "buffer", "error"):  # they never drop: on_drop would never run
        with pytest.raises(ValueError, match=f"on_drop is called only by .*{strategy!r} never"):
            from_observable(reactivex.empty(), overflow=strategy, on_drop=print)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_consumed_from_inside_an_rx_callback_a_cold_source_still_emits(strategy: str) -> None:
    """Inside an Rx callback this thread's trampoline is busy: a cold source subscribed here
    would queue its emission behind the callback, and a blocking consumer in the callback
    would wait for ever. Every strategy delivers it (the emission gets its own thread, as
    reactivex.run() does); a hot Subject subscribed there still gets what follows at once."""
    results: list[Any] = []

    def inside(_: int) -> None:
        results.append(list(to_iterator(from_observable(reactivex.range(3), overflow=strategy))))
        subject: Subject[int] = Subject()
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_observable(subject, overflow=strategy).subscribe(sub)
        subject.on_next(7)
        subject.on_completed()
        sub.await_terminal()
        results.append(sub.elements)

    thread = threading.Thread(target=lambda: reactivex.of(1).subscribe(inside), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "deadlocked inside the Rx callback"
    assert results == [[0, 1, 2], [7]]


def test_subscribe_failure_becomes_on_error() -> None:
    """An Observable whose subscribe raises gives on_subscribe then on_error."""

    def broken(_: Any, __: Any = None) -> Any:
        raise RuntimeError("cannot subscribe")

    for strategy in STRATEGIES:
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_observable(reactivex.create(broken), overflow=strategy).subscribe(sub)
        sub.await_terminal()
        assert isinstance(sub.error, RuntimeError) and sub.subscription is not None


# -- the observer Rx calls: Rx's own less its frame per element ---------------------------------


def _capture(observers: list[Any], disposed: threading.Event) -> Observable[int]:
    """A hot source the test drives by hand: it keeps the observer it is given."""

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        observers.append(observer)
        return Disposable(disposed.set)

    return reactivex.create(subscribe)


@pytest.mark.parametrize("strategy", ["block", "buffer", "drop", "latest"])
@pytest.mark.parametrize("end", ["completed", "error"])
def test_rx_ending_disposes_its_subscription_while_elements_wait_for_demand(
    strategy: str, end: str
) -> None:
    """As Rx's own observer does: the Observable's end disposes its subscription at once
    (an operator chain lets go of its resources), not once the slow subscriber has taken
    the buffered elements and the end."""
    observers: list[Any] = []
    disposed = threading.Event()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    from_observable(_capture(observers, disposed), overflow=strategy).subscribe(sub)
    sub.await_condition(lambda: bool(observers), what="the Rx subscription")
    for i in range(3):
        observers[0].on_next(i)
    if end == "completed":
        observers[0].on_completed()
    else:
        observers[0].on_error(ValueError("the end"))
    assert disposed.wait(5), "the Rx subscription outlived the Observable's end"
    assert sub.elements == [0] and not sub.completed and sub.error is None


@pytest.mark.parametrize("after", ["cancel", "completion"])
def test_rx_signals_after_a_cancel_or_the_end_are_ignored_quietly(
    after: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As with Rx's own observer, an Observable that signals once it was disposed (racing a
    cancel) or after its own end reaches nobody, and nothing is reported."""
    observers: list[Any] = []
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    with caplog.at_level(logging.DEBUG, logger="reactive_streams"):
        from_observable(_capture(observers, threading.Event())).subscribe(sub)
        sub.await_condition(lambda: bool(observers), what="the Rx subscription")
        observers[0].on_next(1)
        if after == "cancel":
            sub.cancel()
        else:
            observers[0].on_completed()
        observers[0].on_next(2)
        observers[0].on_error(ValueError("late"))
        observers[0].on_completed()
        if after == "completion":
            sub.await_terminal()
    assert sub.elements == [1] and sub.error is None and sub.completed is (after != "cancel")
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_observer_an_observable_is_given_is_an_rx_observer() -> None:
    """Code that checks what it subscribes (isinstance ObserverBase) accepts ours."""
    observers: list[Any] = []
    for count, strategy in enumerate(STRATEGIES, 1):
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_observable(_capture(observers, threading.Event()), overflow=strategy).subscribe(sub)
        sub.await_condition(lambda n=count: len(observers) == n, what="the Rx subscription")
    assert all(isinstance(o, reactivex.abc.ObserverBase) for o in observers)


def test_an_observable_with_a_subscribe_of_its_own_is_subscribed_through_it() -> None:
    """An Observable whose subscribe is overridden (to trace, to count), in a subclass or on
    the instance, keeps it."""
    calls: list[Any] = []

    class Traced(Observable[int]):
        def subscribe(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return super().subscribe(*args, **kwargs)

    inner = reactivex.range(3)
    traced = Traced(lambda observer, scheduler=None: inner.subscribe(observer))
    patched = reactivex.range(3)  # or on the instance
    rx_subscribe = patched.subscribe
    patched.subscribe = lambda *a, **k: (calls.append(a), rx_subscribe(*a, **k))[1]
    for observable in (traced, patched):
        for strategy in STRATEGIES:
            sub: RecordingSubscriber[int] = RecordingSubscriber(10)
            from_observable(observable, overflow=strategy).subscribe(sub)
            sub.await_terminal()
            assert sub.elements == [0, 1, 2] and sub.completed
    assert len(calls) == 2 * len(STRATEGIES)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("where", ["subscribe function", "scheduled action", "saved on_next"])
def test_an_element_after_the_observables_own_end_is_dropped_and_its_producer_returns(
    strategy: str, where: str
) -> None:
    """A producer that emits after its own on_completed (Rx drops such an element quietly),
    in the subscribe function or in an action it scheduled (the disposable handed over by
    then), looking up ``observer.on_next`` at each element or once: the element reaches
    nobody, the producer runs to its end, and the disposable is disposed, the stream having
    ended."""
    log: list[str] = []
    disposed = threading.Event()

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        def produce(*_: Any) -> None:
            observer.on_next(1)
            observer.on_completed()
            observer.on_next(2)
            log.append("returned")

        def produce_saved() -> None:
            emit = observer.on_next  # looked up once, not at each element
            emit(1)
            observer.on_completed()
            emit(2)
            log.append("returned")

        if where == "subscribe function":
            produce()
        elif where == "saved on_next":
            produce_saved()
        else:
            (scheduler or CurrentThreadScheduler.singleton()).schedule(produce)
        return Disposable(disposed.set)

    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    from_observable(reactivex.create(subscribe), overflow=strategy).subscribe(sub)
    sub.await_terminal()
    assert disposed.wait(5)
    assert sub.elements == [1] and sub.completed and log == ["returned"]


@pytest.mark.parametrize("end", ["cancel", "completion"])
def test_a_subscribe_function_may_read_is_stopped_as_on_rxs_own_observer(end: str) -> None:
    """Rx's observer says whether it still listens (``is_stopped``); a producer loop that
    reads it stops once the subscriber cancels or the stream ends."""
    observers: list[Any] = []
    for strategy in STRATEGIES:
        observers.clear()
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_observable(_capture(observers, threading.Event()), overflow=strategy).subscribe(sub)
        sub.await_condition(lambda: bool(observers), what="the Rx subscription")
        assert observers[0].is_stopped is False, strategy
        if end == "cancel":
            sub.cancel()
        else:
            observers[0].on_completed()
            sub.await_terminal()
        assert observers[0].is_stopped is True, strategy


def test_block_a_producer_ignoring_disposal_delivers_nothing_once_cancel_returned() -> None:
    """block, a cold producer on the owned thread's trampoline (the subscription disposable
    already handed over) that ignores disposal: once cancel() has returned, none of its
    elements reaches the subscriber, nor its end; the producer is never raised into (it runs
    to its end, as under Rx's own subscribe), and the owned thread then ends."""
    cancelled = threading.Event()
    reached: list[int] = []
    returned = threading.Event()

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        def produce(*_: Any) -> None:
            for i in range(10):
                if i == 2:
                    assert cancelled.wait(5)
                reached.append(i)
                observer.on_next(i)
            observer.on_completed()
            returned.set()

        (scheduler or CurrentThreadScheduler.singleton()).schedule(produce)
        return Disposable()

    before = _owned_threads()
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    from_observable(reactivex.create(subscribe)).subscribe(sub)
    sub.await_condition(lambda: sub.elements == [0, 1], what="two elements")
    canceller = threading.Thread(target=sub.cancel)
    canceller.start()
    canceller.join(5)
    cancelled.set()
    _owned_thread_ends(before)
    assert returned.is_set() and reached == list(range(10))
    assert sub.elements == [0, 1] and not sub.is_terminated
    sub.assert_no_violations()


def test_rx_subscribe_patched_before_the_adapter_is_imported_is_used() -> None:
    """Tracing that replaces Rx's Observable.subscribe before adapters.rx is imported: the
    adapter subscribes every Observable through it, as it does a later patch."""
    script = (
        "import reactivex\n"
        "from reactivex import Observable\n"
        "calls = []\n"
        "rx_subscribe = Observable.subscribe\n"
        "def traced(self, *args, **kwargs):\n"
        "    calls.append(1)\n"
        "    return rx_subscribe(self, *args, **kwargs)\n"
        "Observable.subscribe = traced\n"
        "from reactive_streams.adapters.iterables import to_iterator\n"
        "from reactive_streams.adapters.rx import from_observable\n"
        "print(list(to_iterator(from_observable(reactivex.range(3)))), len(calls))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[0,", "1,", "2]", "1"]


@pytest.mark.parametrize("returns", ["a function", "None"])
def test_a_subscribe_function_may_return_a_function_or_none_as_rx_allows(returns: str) -> None:
    """Rx takes a plain function (or nothing) for the disposable a subscribe function
    returns: cancel calls the function, and returning nothing is no error."""
    disposed = threading.Event()
    emitted = threading.Event()

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        observer.on_next(1)
        emitted.set()
        return disposed.set if returns == "a function" else None

    for strategy in STRATEGIES:
        disposed.clear()
        emitted.clear()
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_observable(reactivex.create(subscribe), overflow=strategy).subscribe(sub)
        assert emitted.wait(5)
        sub.await_condition(lambda s=sub: s.elements == [1], what="the element")
        sub.cancel()
        if returns == "a function":
            assert disposed.wait(5), strategy
        assert sub.error is None and not sub.completed, strategy


def test_a_subscribe_function_raising_after_its_elements_fails_the_stream_after_them() -> None:
    """§1.4: elements emitted while subscribing (under block's lease, on the owned thread),
    then the subscribe function raises: the elements, then on_error with that error."""
    boom = RuntimeError("cannot go on")

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        observer.on_next(1)
        observer.on_next(2)
        raise boom

    for strategy in STRATEGIES:
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_observable(reactivex.create(subscribe), overflow=strategy).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [1, 2] and sub.error is boom, strategy


def test_a_subscribe_function_raising_after_its_end_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The stream has completed when the subscribe function raises: the error can reach
    no subscriber, so it is reported (§1.7), never lost."""
    boom = RuntimeError("after the end")

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        observer.on_completed()
        raise boom

    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_observable(reactivex.create(subscribe)).subscribe(sub)
        sub.await_terminal()
        sub.await_condition(
            lambda: any(r.exc_info and r.exc_info[1] is boom for r in caplog.records),
            what="the report",
        )
    assert sub.completed and sub.error is None
    assert any("§1.7" in r.getMessage() for r in caplog.records)


# -- to_observable ------------------------------------------------------------------------------


def test_to_observable_delivers_then_completes() -> None:
    """to_observable emits every element in order, then on_completed."""
    out: list[Any] = []
    to_observable(from_iterable(range(5))).subscribe(
        on_next=out.append, on_completed=lambda: out.append("done")
    )
    assert out == [0, 1, 2, 3, 4, "done"]


def test_to_observable_errors_reach_rx_on_error() -> None:
    """A failing publisher becomes Rx on_error, after the elements before it."""

    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("source broke")

    out: list[Any] = []
    errors: list[Exception] = []
    to_observable(from_iterable(failing())).subscribe(on_next=out.append, on_error=errors.append)
    assert out == [1] and isinstance(errors[0], ValueError)


def test_to_observable_subscribe_failure_reaches_rx_on_error() -> None:
    """A publisher whose subscribe raises gives Rx on_error; if it raised after handing
    over a subscription, that subscription is cancelled (§3.13)."""

    class Broken:
        def subscribe(self, subscriber: Any) -> None:
            raise RuntimeError("no")

    errors: list[Exception] = []
    to_observable(Broken()).subscribe(on_error=errors.append)
    assert isinstance(errors[0], RuntimeError)

    handed_over = RecordingSubscription()

    class RaisesAfterOnSubscribe:
        def subscribe(self, subscriber: Any) -> None:
            subscriber.on_subscribe(handed_over)
            raise RuntimeError("half way")

    errors.clear()
    to_observable(RaisesAfterOnSubscribe()).subscribe(on_error=errors.append)
    assert isinstance(errors[0], RuntimeError) and "half way" in str(errors[0])
    assert handed_over.cancelled.is_set()


def test_to_observable_an_observer_raising_ends_with_on_error() -> None:
    """An observer whose on_next raises gets on_error with that error, as from Rx's own
    from_iterable, and the publisher is cancelled: nothing else reaches the observer."""
    gen = CountedIterable()
    seen: list[Any] = []
    errors: list[Exception] = []

    def on_next(x: int) -> None:
        seen.append(x)
        if x == 2:
            raise ValueError("observer failed")

    to_observable(from_iterable(gen), prefetch=4).subscribe(
        on_next=on_next, on_error=errors.append, on_completed=lambda: seen.append("done")
    )
    assert seen == [0, 1, 2]
    assert len(errors) == 1 and str(errors[0]) == "observer failed"
    assert gen.closed.is_set()


def test_to_observable_dispose_cancels() -> None:
    """dispose() cancels the publisher: a generator behind it is closed."""
    gen = CountedIterable()
    seen = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        source = to_observable(from_iterable(gen, executor=pool), prefetch=4)
        disposable = source.subscribe(lambda x: seen.set())
        assert seen.wait(5)
        disposable.dispose()
        assert gen.closed.wait(5)


def test_to_observable_disposed_before_it_connects_never_subscribes() -> None:
    """Disposed before the scheduler ran the connection: the publisher is never subscribed."""
    subscribed: list[Subscriber[Any]] = []

    class Recording:
        def subscribe(self, subscriber: Subscriber[Any]) -> None:
            subscribed.append(subscriber)

    scheduler = TestScheduler()
    disposable = to_observable(Recording()).subscribe(lambda x: None, scheduler=scheduler)
    disposable.dispose()
    scheduler.start()  # runs what was scheduled: the connection, which finds it disposed
    assert subscribed == []


def test_to_observable_take_stops_an_infinite_synchronous_publisher() -> None:
    """ops.take(n) over an infinite synchronous publisher returns and closes it."""
    gen = CountedIterable()
    out: list[int] = []
    to_observable(from_iterable(gen), prefetch=8).pipe(ops.take(5)).subscribe(out.append)
    assert out == [0, 1, 2, 3, 4] and gen.closed.is_set() and gen.pulled <= 8


def test_to_observable_keeps_at_most_prefetch_requested_ahead() -> None:
    """The window: requested - taken never exceeds prefetch; replenished in 75% steps."""
    upstream = _CountingPublisher(from_iterable(range(1000)))
    worst = 0
    taken = 0

    def on_next(_: int) -> None:
        nonlocal worst, taken
        taken += 1
        worst = max(worst, upstream.requested - taken)

    to_observable(upstream, prefetch=16).subscribe(on_next)
    assert taken == 1000 and worst <= 16 and upstream.max_in_flight <= 16


def test_to_observable_resubscribes_for_each_observer() -> None:
    """Each Rx subscription subscribes to the publisher afresh."""
    source = to_observable(from_observable(reactivex.from_iterable(range(3))))
    first: list[int] = []
    second: list[int] = []
    done = threading.Barrier(3)
    source.subscribe(first.append, on_completed=lambda: done.wait(5))
    source.subscribe(second.append, on_completed=lambda: done.wait(5))
    done.wait(5)
    assert first == second == [0, 1, 2]


# -- rx_processor ---------------------------------------------------------------------------


def _reference(operators: list[Any], items: list[int]) -> list[Any]:
    out: list[Any] = []
    reactivex.from_iterable(items).pipe(*operators).subscribe(out.append)
    return out


CHAINS: dict[str, Callable[[], list[Any]]] = {
    "map": lambda: [ops.map(lambda x: x * 2)],
    "filter": lambda: [ops.filter(lambda x: x % 3 == 0)],
    "flat_map x5": lambda: [ops.flat_map(lambda x: reactivex.from_iterable([x] * 5))],
    "buffer_with_count": lambda: [ops.buffer_with_count(4)],
    "map+filter+flat_map+batch": lambda: [
        ops.map(lambda x: x + 1),
        ops.filter(lambda x: x % 2 == 0),
        ops.flat_map(lambda x: reactivex.of(x, -x)),
        ops.buffer_with_count(3),
    ],
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_rx_processor_keeps_the_bound_and_honest_demand(name: str) -> None:
    """Held outputs stay <= buffer_size and upstream in flight <= buffer_size, whatever the
    chain; everything arrives as plain Rx would produce it."""
    size = 16
    produced = 0

    def count(_: Any) -> None:
        nonlocal produced
        produced += 1

    upstream = _CountingPublisher(from_iterable(range(500)))
    stage = rx_processor(*CHAINS[name](), ops.do_action(on_next=count), buffer_size=size)
    upstream.subscribe(stage)
    sub: RecordingSubscriber[Any] = RecordingSubscriber(0)
    stage.subscribe(sub)
    held_max = produced
    for _ in range(400):
        if sub.is_terminated:
            break
        sub.request(3)
        held_max = max(held_max, produced - len(sub.elements))
        assert upstream.requested - upstream.sent <= size
    sub.request(10**6)
    sub.await_terminal()
    assert held_max <= size, f"held {held_max} outputs for buffer_size={size}"
    assert upstream.max_in_flight <= size
    assert sub.elements == _reference(CHAINS[name](), list(range(500)))
    sub.assert_no_violations()


def test_rx_processor_requests_upstream_in_batches_of_at_least_75_percent() -> None:
    """The documented demand policy: after the one input that measures the expansion E,
    upstream is asked in batches of at least 75% of buffer_size // E (E = 1 for map), not
    one input at a time, even when downstream takes one element at a time."""
    upstream = _CountingPublisher(from_iterable(range(200)))
    stage = rx_processor(ops.map(lambda x: x), buffer_size=8)
    upstream.subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(sub)
    for _ in range(200):
        if sub.is_terminated:
            break
        sub.request(1)
    sub.request(1000)
    sub.await_terminal()
    assert sub.elements == list(range(200))
    sizes = upstream.requests
    assert sizes[0] == 1 and min(sizes[1:]) >= 6, sizes


def test_rx_processor_bounds_expansion_when_nothing_is_requested() -> None:
    """flat_map x10 with no downstream demand: the buffer stops at buffer_size."""
    upstream = _CountingPublisher(from_iterable(range(10_000)))
    produced = 0

    def count(_: Any) -> None:
        nonlocal produced
        produced += 1

    stage = rx_processor(
        ops.flat_map(lambda x: reactivex.from_iterable(range(10))),
        ops.do_action(on_next=count),
        buffer_size=16,
    )
    upstream.subscribe(stage)
    assert produced <= 16 and upstream.sent == 1  # 10 held; 2 more inputs would not fit


def test_rx_processor_progresses_when_one_input_expands_beyond_the_buffer() -> None:
    """An input that expands into more than buffer_size is requested alone and delivered."""
    stage = rx_processor(ops.flat_map(lambda x: reactivex.from_iterable(range(50))), buffer_size=8)
    upstream = _CountingPublisher(from_iterable(range(3)))
    upstream.subscribe(stage)
    assert upstream.sent == 1
    assert list(to_iterator(stage, prefetch=4)) == list(range(50)) * 3
    assert upstream.max_in_flight == 1


def test_rx_processor_take_cancels_upstream_at_once() -> None:
    """A chain that ends by itself (take) cancels upstream, even before any subscriber."""
    gen = CountedIterable()
    stage = rx_processor(ops.take(3), buffer_size=8)
    from_iterable(gen).subscribe(stage)
    assert gen.closed.is_set()
    assert list(to_iterator(stage)) == [0, 1, 2]


def test_rx_processor_operator_error_follows_the_outputs_and_cancels_upstream() -> None:
    """A raising operator: buffered outputs first, then on_error; upstream cancelled."""

    def fragile(x: int) -> int:
        if x == 3:
            raise ValueError("bad element")
        return x

    gen = CountedIterable()
    stage = rx_processor(ops.map(fragile), buffer_size=8)
    from_iterable(gen).subscribe(stage)
    assert gen.closed.is_set()
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2] and isinstance(sub.error, ValueError)


def test_rx_processor_passes_upstream_errors_after_the_outputs() -> None:
    """An upstream on_error reaches the subscriber after the outputs already produced."""

    def failing() -> Iterator[int]:
        yield from range(3)
        raise KeyError("upstream")

    stage = rx_processor(ops.map(lambda x: x * 10))
    from_iterable(failing()).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    assert sub.elements == [0] and not sub.is_terminated
    sub.request(5)
    assert sub.elements == [0, 10, 20] and isinstance(sub.error, KeyError)


def test_rx_processor_cancel_cancels_upstream() -> None:
    """Downstream cancel cancels upstream (its generator closes)."""
    gen = CountedIterable()
    stage = rx_processor(ops.map(lambda x: x), buffer_size=4)
    from_iterable(gen).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    stage.subscribe(sub)
    sub.cancel()
    assert gen.closed.is_set() and gen.pulled <= 2 + 4 + 1


def test_rx_processor_none_output_fails_the_stream() -> None:
    """A chain that produces None fails the stream with TypeError (§2.13)."""
    stage = rx_processor(ops.map(lambda x: None))
    from_iterable(range(3)).subscribe(stage)
    sub: RecordingSubscriber[Any] = RecordingSubscriber(5)
    stage.subscribe(sub)
    assert sub.elements == [] and isinstance(sub.error, TypeError)


@pytest.mark.parametrize(
    ("operator", "source"),
    [
        (lambda: ops.repeat(), lambda: iter([1, 2])),
        (lambda: ops.repeat(2), lambda: iter([1, 2])),
        (lambda: ops.retry(), lambda: itertools.chain([1, 2], [None])),
    ],
    ids=["repeat()", "repeat(2)", "retry()"],
)
def test_rx_processor_an_operator_resubscribing_its_input_fails_the_stream(
    operator: Callable[[], Any], source: Callable[[], Iterator[Any]]
) -> None:
    """repeat / retry subscribe to the chain's input again; the upstream Publisher feeds it
    once, so the stream fails with an error that says so, after the outputs before it,
    instead of spinning inside upstream's on_complete / on_error for ever (or repeating
    nothing). The upstream's subscribe returns."""
    stage = rx_processor(operator(), buffer_size=8)
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    stage.subscribe(sub)
    from_iterable(source()).subscribe(stage)  # returns: the test would hang otherwise
    assert sub.elements == [1, 2]
    assert isinstance(sub.error, RuntimeError) and "a second time" in str(sub.error)
    sub.assert_no_violations()


def test_rx_processor_outputs_after_the_input_ended_are_bounded_too() -> None:
    """Operators that emit when their input ends (take_last, concat) emit what no request
    paces: the buffer takes buffer_size of them beyond the subscriber's demand; past that
    the stream fails with §1.1 (OverflowViolation), after the outputs held. An endless
    fallback is stopped, not left growing the buffer inside upstream's on_complete."""
    small = rx_processor(ops.take_last(10), buffer_size=16)
    from_iterable(range(100)).subscribe(small)
    assert list(to_iterator(small)) == list(range(90, 100))  # within the allowance

    held = rx_processor(ops.take_last(1000), buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    held.subscribe(sub)
    from_iterable(range(1000)).subscribe(held)
    sub.request(100)
    assert sub.elements == list(range(16))  # the first buffer_size of the last 1000
    assert isinstance(sub.error, OverflowViolation) and "after its input ended" in str(sub.error)

    endless = rx_processor(ops.concat(reactivex.repeat_value(0)), buffer_size=16)
    out: RecordingSubscriber[int] = RecordingSubscriber(0)
    endless.subscribe(out)
    from_iterable(range(3)).subscribe(endless)  # returns
    out.request(100)
    assert out.elements == [0, 1, 2] + [0] * 13  # the buffer held 16 in all
    assert isinstance(out.error, OverflowViolation)


def test_rx_processor_outputs_after_the_end_within_demand_all_arrive() -> None:
    """Outputs after the input ended that the subscriber's demand takes never count as
    overflow: sorting a whole stream (to_list, then flat_map) delivers all of it, whether
    the demand came first or the outputs are emitted inside the subscriber's own request
    (the drain is then up the stack, and they wait in the buffer for it)."""
    for demand in (UNBOUNDED, 1000):
        stage = rx_processor(
            ops.to_list(), ops.flat_map(lambda xs: sorted(xs, reverse=True)), buffer_size=16
        )
        sub: RecordingSubscriber[int] = RecordingSubscriber(demand)
        stage.subscribe(sub)
        from_iterable(range(1000)).subscribe(stage)
        sub.await_terminal()
        assert sub.elements == list(range(999, -1, -1)) and sub.error is None

    stage = rx_processor(ops.concat(reactivex.range(100, 200)), buffer_size=16)
    late: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(late)
    from_iterable(range(100)).subscribe(stage)  # 16 in, then paced by the buffer
    assert late.elements == [] and not late.completed
    late.request(200)  # the input ends, and concat emits 100, inside this call
    assert late.elements == list(range(200)) and late.completed


@pytest.mark.parametrize("shift", ["delay", "observe_on", "inner timer", "sample"])
@pytest.mark.parametrize("n", [3, 100_000])
def test_rx_processor_refuses_an_operator_that_shifts_elements_in_time(shift: str, n: int) -> None:
    """An output that comes outside the input's signals (on a timer or scheduler thread)
    cannot be paced by any request: the stream fails with an error saying so and naming
    the way out, upstream is cancelled, and the chain is disposed. A short stream (over
    before the first output) fails the same way, so a test with little data shows it."""
    operator = {
        "delay": ops.delay(0.01),
        "observe_on": ops.observe_on(NewThreadScheduler()),
        "inner timer": ops.flat_map(lambda x: reactivex.timer(0.01).pipe(ops.map(lambda _: x))),
        "sample": ops.sample(0.01),  # a periodic timer (interval) under the chain's scheduler
    }[shift]
    gen = CountedIterable(n)
    stage = rx_processor(operator, buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(4)
    stage.subscribe(sub)
    with ThreadPoolExecutor(1) as pool:
        from_iterable(gen, executor=pool).subscribe(stage)
        sub.await_terminal()
        assert isinstance(sub.error, RuntimeError)
        assert "emitted outside its input's signals" in str(sub.error)
        assert "from_observable(to_observable(publisher)" in str(sub.error)
        assert sub.elements == []
        if n > 3:
            assert gen.closed.wait(5)  # upstream cancelled


def test_rx_processor_windows_flattened_in_the_chain_keep_every_element() -> None:
    """A hot inner Observable (a window) must be flattened inside the chain, as documented:
    then every element arrives, in its window."""
    stage = rx_processor(
        ops.window_with_count(3), ops.flat_map(lambda w: w.pipe(ops.to_list())), buffer_size=4
    )
    from_iterable(range(8)).subscribe(stage)
    assert list(to_iterator(stage)) == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_rx_processor_is_unicast() -> None:
    """A second subscriber is rejected with on_subscribe then on_error (§1.11 allows it)."""
    stage = rx_processor()
    stage.subscribe(RecordingSubscriber(0))
    second: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(second)
    assert second.subscription is not None and isinstance(second.error, RuntimeError)


def test_spec213_rx_processor_on_next_none_cancels_upstream_and_fails_downstream() -> None:
    """§2.13: upstream's on_next(None) raises TypeError to upstream, and, as every other sink
    does, the processor cancels upstream and fails its subscriber with that rule's error
    after the outputs already buffered, so a consumer never waits for ever."""
    upstream = RecordingSubscription()
    stage = rx_processor(ops.map(lambda x: x * 10))
    stage.on_subscribe(upstream)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(sub)
    stage.on_next(1)
    with pytest.raises(TypeError, match="§2.13"):
        stage.on_next(None)  # type: ignore[arg-type]
    assert upstream.cancelled.is_set()
    sub.request(5)
    sub.await_terminal()
    assert sub.elements == [10] and isinstance(sub.error, TypeError)
    assert "§2.13" in str(sub.error)
    sub.assert_no_violations()


def test_spec205_rx_processor_a_second_subscription_whose_cancel_raises_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.5, §3.15: a second on_subscribe is cancelled, and a cancel that raises is reported
    (§3.15 says it must return normally), not raised into the caller; the first stays."""

    class Raising(RecordingSubscription):
        def cancel(self) -> None:
            super().cancel()
            raise RuntimeError("cancel bug")

    first, second = RecordingSubscription(), Raising()
    stage = rx_processor()
    stage.on_subscribe(first)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        stage.on_subscribe(second)  # returns normally
    assert second.cancelled.is_set() and not first.cancelled.is_set()
    assert any("3.15" in r.getMessage() for r in caplog.records)
    sub: RecordingSubscriber[int] = RecordingSubscriber(3)
    stage.subscribe(sub)
    assert first.total > 0


def test_mixed_pipeline_generator_rx_processor_to_observable() -> None:
    """generator -> rx_processor -> to_observable -> from_observable(block) -> to_iterator."""
    stage = rx_processor(ops.map(lambda x: x * 3), ops.filter(lambda x: x % 2 == 1))
    from_iterable(range(200)).subscribe(stage)
    back = from_observable(to_observable(stage, prefetch=8), buffer_size=8)
    assert list(to_iterator(back, prefetch=8)) == [x * 3 for x in range(200) if x % 2 == 1]


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/examples/rx_pipeline.py runs; latest ends on the newest price, nothing unaccounted."""
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "the last one 99999; " in out and "seen + dropped == sent: True" in out
    assert "sum of squares divisible by 3 below 10000: 111127776111" in out
    assert "take(3): [0, 1, 4]; the infinite generator was closed: True" in out


# -- adversarial -----------------------------------------------------------------------------


def _race_hot_emission_once(strategy: str) -> None:
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0, request_on_next=1)
    from_observable(subject, overflow=strategy, buffer_size=4).subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    sub.request(2)
    barrier = threading.Barrier(3)
    raised: list[BaseException] = []

    def emit() -> None:
        barrier.wait(5)
        try:
            for i in range(200):
                subject.on_next(i)
        except BaseException as exc:
            raised.append(exc)

    def requests() -> None:
        barrier.wait(5)
        for _ in range(20):
            sub.request(1)

    threads = [threading.Thread(target=emit), threading.Thread(target=requests)]
    for t in threads:
        t.start()
    barrier.wait(5)
    sub.cancel()
    for t in threads:
        t.join(5)
        assert not t.is_alive()
    assert raised == [] and subject.observers == []
    elements = list(sub.elements)
    assert elements == sorted(set(elements))  # in order, no duplicates
    sub.assert_no_violations()


@pytest.mark.stress
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cancel_racing_hot_emission(strategy: str) -> None:
    """Cancel from one thread while another emits and a third requests: no violation,
    nothing raised into the emitter, the Rx subscription disposed, the emitter never stuck."""
    for _ in range(100):
        _race_hot_emission_once(strategy)


def _race_cold_block_once() -> None:
    before = _owned_threads()
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_observable(reactivex.from_iterable(gen), buffer_size=2).subscribe(sub)
    race(lambda: [sub.request(1) for _ in range(50)], sub.cancel)
    for thread in _owned_threads() - before:
        thread.join(5)
        assert not thread.is_alive()
    assert gen.closed.wait(5) or gen.pulled == 0
    sub.assert_no_violations()


@pytest.mark.stress
def test_cancel_racing_a_cold_block_source() -> None:
    """block on a cold source: cancel racing requests always ends the owned thread."""
    for _ in range(100):
        _race_cold_block_once()


def _race_dispose_once(pool: ThreadPoolExecutor) -> None:
    gen = CountedIterable()
    seen = threading.Event()
    source = to_observable(from_iterable(gen, executor=pool), prefetch=4)
    disposable = source.subscribe(lambda _: seen.set())
    assert seen.wait(5)
    disposable.dispose()
    assert gen.closed.wait(5)


@pytest.mark.stress
def test_dispose_racing_emission_from_an_executor() -> None:
    """to_observable: dispose() racing emission on an executor thread closes the source."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(100):
            _race_dispose_once(pool)


def _race_processor_cancel_once(pool: ThreadPoolExecutor) -> None:
    gen = CountedIterable()
    stage = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    from_iterable(gen, executor=pool).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0, request_on_next=1)
    stage.subscribe(sub)
    sub.request(4)
    sub.await_count(4)
    sub.cancel()
    assert gen.closed.wait(5)
    elements = list(sub.elements)
    assert elements == sorted(elements)
    sub.assert_no_violations()


@pytest.mark.stress
def test_rx_processor_cancel_racing_upstream_from_another_thread() -> None:
    """rx_processor: downstream cancel racing upstream on_next on an executor thread."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(100):
            _race_processor_cancel_once(pool)


# -- found by a mutation audit ------------------------------------------------------------------


def test_rx_processor_outputs_when_the_chain_is_subscribed_come_first() -> None:
    """An operator that emits as the chain is subscribed (start_with) emits while the
    processor is built, not outside an input's signals: its outputs are delivered, first."""
    stage = rx_processor(ops.start_with(-2, -1), buffer_size=4)
    from_iterable(range(3)).subscribe(stage)
    assert list(to_iterator(stage)) == [-2, -1, 0, 1, 2]


def test_rx_processor_a_fallback_for_an_upstream_error_is_delivered() -> None:
    """catch emits its fallback inside upstream's on_error: within an input's signals, so
    the fallback's outputs arrive after the ones before the error, then on_complete."""

    def failing() -> Iterator[int]:
        yield from range(3)
        raise KeyError("upstream")

    stage = rx_processor(ops.catch(reactivex.of(7, 8)), buffer_size=8)
    from_iterable(failing()).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2, 7, 8]
    assert sub.completed and sub.error is None
    sub.assert_no_violations()


@pytest.mark.parametrize("after", ["on_next", "on_complete"])
def test_rx_processor_an_output_after_the_input_signal_returned_fails_the_stream(
    after: str,
) -> None:
    """An inner Observable that emits after the input's on_next (or on_complete) returned,
    on the very thread that signalled it, is outside the input's signals all the same: the
    stream fails with the error naming the way out (upstream cancelled if it had not ended)."""

    inner: Subject[int] = Subject()
    stage = rx_processor(ops.flat_map(lambda _: inner), buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(4)
    stage.subscribe(sub)
    upstream = RecordingSubscription()
    stage.on_subscribe(upstream)
    assert upstream.total == 1
    stage.on_next(1)  # flat_map subscribes to inner: nothing is emitted yet
    if after == "on_complete":
        stage.on_complete()  # flat_map waits for inner to end
    inner.on_next(10)  # later, on this thread, outside the input's signals
    assert sub.elements == []
    assert isinstance(sub.error, RuntimeError)
    assert "emitted outside its input's signals" in str(sub.error)
    assert upstream.cancelled.is_set() is (after == "on_next")


def test_rx_processor_outputs_after_the_end_may_exceed_the_demand_by_buffer_size_only() -> None:
    """Outputs emitted after the input ended inside the subscriber's own request (the drain
    is up the stack: they wait in the buffer) may go beyond the demand there was by
    buffer_size, no further: 30 were requested in all when concat's 100 came, so at most
    16 + 30 of them are taken, then OverflowViolation."""
    stage = rx_processor(ops.concat(reactivex.range(100, 200)), buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(sub)
    from_iterable(range(20)).subscribe(stage)
    sub.request(30)  # the input ends, and concat emits 100, inside this call
    assert sub.elements == list(range(20)) + list(range(100, 110))
    sub.request(1000)
    assert isinstance(sub.error, OverflowViolation)
    after_end = len(sub.elements) - 20
    assert sub.elements == list(range(20)) + list(range(100, 100 + after_end))
    assert after_end <= 16 + 30


def test_to_observable_refuses_a_bad_prefetch_at_the_call() -> None:
    """A prefetch that is not a positive int is a ValueError when to_observable is called,
    not an error at subscribe time."""
    for bad in (0, -1):
        with pytest.raises(ValueError):
            to_observable(from_iterable([1]), prefetch=bad)


# -- rx_processor: found by a review --------------------------------------------------------------


def test_rx_processor_inner_sources_emit_inside_the_input_under_another_trampoline() -> None:
    """flat_map(x -> reactivex.of(...)) and concat(of(...)) emit at once, inside the input's
    on_next, even when the input arrives inside another Rx trampoline on this thread (an Rx
    source upstream, or another processor): they used to be queued on that trampoline until
    after on_next returned, and the stream failed as if they shifted elements in time."""
    doubled = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    from_observable(reactivex.range(5)).subscribe(doubled)
    assert list(to_iterator(doubled)) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]

    first = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    second = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    from_iterable(range(3)).subscribe(first)
    first.subscribe(second)
    assert list(to_iterator(second)) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]

    tail = rx_processor(ops.concat(reactivex.of(98, 99)), buffer_size=8)
    from_observable(reactivex.range(3), overflow="buffer").subscribe(tail)
    assert list(to_iterator(tail)) == [0, 1, 2, 98, 99]


@pytest.mark.parametrize(
    "late",
    [ops.subscribe_on(NewThreadScheduler()), ops.delay_subscription(0.05)],
    ids=["subscribe_on", "delay_subscription"],
)
def test_rx_processor_an_operator_that_subscribes_late_loses_nothing(late: Any) -> None:
    """subscribe_on / delay_subscription subscribe to the chain's input later, on another
    thread: upstream is asked for nothing until then (the input is hot), so every element
    arrives; they all used to be dropped, and the stream completed empty."""
    counted = _CountingPublisher(from_iterable(range(100)))
    stage = rx_processor(late, buffer_size=16)
    counted.subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    stage.subscribe(sub)
    sub.await_terminal()
    assert sub.elements == list(range(100)) and sub.completed
    assert counted.max_in_flight <= 16


@pytest.mark.parametrize("where", ["operator", "upstream"])
def test_rx_processor_drops_the_subscriber_after_an_error(where: str) -> None:
    """§3.13 after on_error: the processor (still held by the user) no longer keeps the
    subscriber alive. The error it delivered was raised inside the drain, so its traceback
    holds the frames that delivered it; the processor's buffer and the chain's input Subject
    both kept that error."""

    def failing() -> Iterator[int]:
        yield 1
        raise KeyError("upstream")

    if where == "operator":
        stage = rx_processor(ops.map(lambda x: 1 // (x - 3)))
        source: Publisher[int] = from_iterable(range(5))
    else:
        stage = rx_processor(ops.map(lambda x: x))
        source = from_iterable(failing())
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    stage.subscribe(sub)
    source.subscribe(stage)
    assert sub.error is not None
    sub.error = None  # the subscriber lets go of the error itself
    gone = weakref.ref(sub)
    del sub
    gc.collect()
    assert gone() is None


def test_rx_processor_outputs_while_the_chain_is_subscribed_are_bounded() -> None:
    """start_with / merge with a cold Observable emit while the processor is built, which
    no request paces: buffer_size of them are held, then the stream fails with §1.1
    (OverflowViolation) after them. An endless one (repeat_value) is stopped: the
    constructor returns. It used to hold every output, or never return."""
    big = rx_processor(ops.start_with(*range(1000)), buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    big.subscribe(sub)
    assert sub.elements == list(range(16))
    assert isinstance(sub.error, OverflowViolation) and "being subscribed" in str(sub.error)

    built: list[Any] = []
    maker = threading.Thread(
        target=lambda: built.append(
            rx_processor(ops.merge(reactivex.repeat_value(0)), buffer_size=16)
        ),
        daemon=True,
    )
    maker.start()
    maker.join(10)
    assert built, "rx_processor(ops.merge(reactivex.repeat_value(0))) did not return"
    upstream = RecordingSubscription()
    built[0].on_subscribe(upstream)
    assert upstream.cancelled.is_set()  # the stream is over: upstream is never asked
    endless: RecordingSubscriber[int] = RecordingSubscriber(100)
    built[0].subscribe(endless)
    assert endless.elements == [0] * 16 and isinstance(endless.error, OverflowViolation)


class _FeedingUpstream:
    """An upstream Subscription that, for its first ``rounds`` requests, delivers the inputs
    asked for from another thread while the request is still in progress (a publisher
    emitting on its own thread at once), and counts overlapping request calls (§2.7)."""

    def __init__(self, stage: Subscriber[int], rounds: int) -> None:
        self.stage = stage
        self.rounds = rounds
        self.requests: list[int] = []
        self.active = 0
        self.overlaps = 0
        self.sent = 0
        self.lock = threading.Lock()

    def request(self, n: int) -> None:
        with self.lock:
            self.active += 1
            self.overlaps += self.active > 1
            self.requests.append(n)
            feed = len(self.requests) <= self.rounds
        try:
            if feed:  # the inputs arrive on another thread, whose on_next wants more
                emitter = threading.Thread(target=self._send, args=(n,))
                emitter.start()
                emitter.join(10)
        finally:
            with self.lock:
                self.active -= 1

    def _send(self, n: int) -> None:
        for _ in range(n):
            self.sent += 1
            self.stage.on_next(self.sent)

    def cancel(self) -> None:
        pass


def test_rx_processor_requests_upstream_serially() -> None:
    """§2.7: an input's on_next on upstream's thread, arriving while the processor's own
    request is in progress on another, does not call request at once: the request in
    progress looks again when it returns and asks for what the inputs freed. Before, the
    two calls overlapped; nothing is lost either way, and never more is outstanding than
    the buffer allows."""
    stage = rx_processor(ops.filter(lambda x: False), buffer_size=4)  # every input: room
    upstream = _FeedingUpstream(stage, rounds=5)
    stage.on_subscribe(upstream)
    assert upstream.overlaps == 0
    assert upstream.requests[0] == 1 and len(upstream.requests) == 6  # 5 fed, then waits
    assert sum(upstream.requests) - upstream.sent == 4  # what the buffer allows, outstanding


# -- rx_processor: found by a mutation audit -------------------------------------------------------


def test_rx_processor_stops_an_endless_producer_that_ignores_rx_conventions() -> None:
    """A chain whose Observable emits for ever inside its own subscribe, with none of Rx's
    wrapping to catch what on_next raises: the processor's unwinding reaches the
    constructor, which returns; buffer_size outputs, then OverflowViolation."""

    class Raw(Observable[int]):
        def subscribe(self, *args: Any, on_next: Any = None, **kwargs: Any) -> Any:
            for i in itertools.count():
                on_next(i)

    stage = rx_processor(lambda _: Raw(), buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2, 3] and isinstance(sub.error, OverflowViolation)


def test_rx_processor_a_chain_that_ended_while_subscribed_is_disposed() -> None:
    """The chain fails while the processor is built (start_with(None)): what it subscribed
    to meanwhile (a periodic timer) is disposed, not left ticking for ever."""
    ticks: list[int] = []
    stage = rx_processor(
        ops.merge(reactivex.interval(0.05).pipe(ops.do_action(ticks.append))),
        ops.start_with(None),
        buffer_size=4,
    )
    time.sleep(0.3)
    assert ticks == []
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    assert isinstance(sub.error, TypeError)


@pytest.mark.parametrize("late", ["on_next", "on_complete", "on_error"])
def test_rx_processor_a_signal_from_inside_upstreams_cancel_reaches_nothing(
    late: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream whose cancel() delivers one more signal at once (in flight): after the
    subscriber's cancel nothing reaches the chain; a late on_error is reported (§1.8),
    never lost silently, and a late on_complete is dropped."""
    seen: list[int] = []
    completed: list[bool] = []
    stage = rx_processor(
        ops.map(lambda x: seen.append(x) or x),
        ops.do_action(on_completed=lambda: completed.append(True)),
        buffer_size=4,
    )

    class Upstream:
        def request(self, n: int) -> None:
            pass

        def cancel(self) -> None:
            if late == "on_next":
                stage.on_next(99)
            elif late == "on_complete":
                stage.on_complete()
            else:
                stage.on_error(KeyError("late"))

    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    stage.on_subscribe(Upstream())
    stage.on_next(1)
    with caplog.at_level(logging.ERROR):
        sub.cancel()
    assert seen == [1] and completed == [] and sub.elements == [1]
    reported = [r.getMessage() for r in caplog.records]
    if late == "on_error":
        assert len(reported) == 1 and "§1.8" in reported[0] and "after the end" in reported[0]
    else:
        assert reported == []


def _emit_then_raise(source: Observable[int]) -> Observable[int]:
    """An operator that emits, then raises outside Rx's error handling, for each input and
    at the end."""

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        def on_next(x: int) -> None:
            observer.on_next(x)
            raise ZeroDivisionError("after the output")

        def on_completed() -> None:
            observer.on_next(100)
            raise KeyError("after the last output")

        return source.subscribe(on_next, observer.on_error, on_completed, scheduler=scheduler)

    return Observable(subscribe)


def test_rx_processor_an_operator_raising_at_the_end_fails_the_stream() -> None:
    """An operator whose on_completed raises outside Rx's handling: the subscriber gets that
    error after the outputs (as for on_next), and nothing is raised into upstream (§2.13)."""
    stage = rx_processor(_emit_then_raise, buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    stage.on_subscribe(RecordingSubscription())
    stage.on_complete()  # returns
    assert sub.elements == [100] and isinstance(sub.error, KeyError)


@pytest.mark.parametrize("signal", ["on_next", "on_complete"])
def test_rx_processor_an_operator_raising_after_a_cancel_is_quiet(
    signal: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The subscriber cancels inside its first on_next, while the operator that emitted it
    goes on to raise: the stream is over, so nothing is reported and nothing is raised
    into upstream."""

    class CancelAtFirst(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            super().on_next(element)
            self.cancel()

    stage = rx_processor(_emit_then_raise, buffer_size=4)
    sub = CancelAtFirst(10)
    stage.subscribe(sub)
    stage.on_subscribe(RecordingSubscription())
    with caplog.at_level(logging.ERROR):
        stage.on_next(1) if signal == "on_next" else stage.on_complete()  # returns
    assert len(sub.elements) == 1 and sub.error is None
    assert [r.getMessage() for r in caplog.records] == []


def test_rx_processor_its_own_unwinding_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    """The processor stops a subscribe-time producer by raising into it; Rx routes that to
    on_error, which must not be reported as a dropped error: only the overflow is told."""
    with caplog.at_level(logging.ERROR):
        stage = rx_processor(ops.start_with(*range(100)), buffer_size=4)
    assert [r.getMessage() for r in caplog.records] == []
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2, 3] and isinstance(sub.error, OverflowViolation)


def test_spec316_rx_processor_fails_the_stream_when_its_first_request_raises() -> None:
    """An upstream request that raises breaks §3.16: the upstream has failed. It is
    cancelled and the subscriber gets on_error naming the rule, caused by its error, instead
    of the error escaping into upstream's on_subscribe."""

    class Flaky:
        def __init__(self) -> None:
            self.calls: list[int] = []
            self.cancelled = False

        def request(self, n: int) -> None:
            self.calls.append(n)
            raise RuntimeError("flaky")

        def cancel(self) -> None:
            self.cancelled = True

    stage = rx_processor(ops.map(lambda x: x), buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    upstream = Flaky()
    stage.on_subscribe(upstream)  # its first request(1) raised: returns normally
    sub.await_terminal(5)
    assert isinstance(sub.error, RuntimeError) and "§3.16" in str(sub.error)
    assert str(sub.error.__cause__) == "flaky"
    assert upstream.calls == [1] and upstream.cancelled


@pytest.mark.parametrize(
    "operators",
    [
        (ops.merge(reactivex.repeat_value(0)), ops.start_with(None)),
        (ops.merge(reactivex.repeat_value(None)),),
    ],
    ids=["ended by a None first", "endless None"],
)
def test_rx_processor_an_endless_producer_is_stopped_whatever_ended_the_chain(
    operators: tuple[Any, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """The chain ends while the processor is built for another reason than overflow (a None
    output): an endless subscribe-time producer is unwound all the same, and the constructor
    returns; it used to loop for ever, reporting every further None."""
    built: list[Any] = []
    with caplog.at_level(logging.ERROR):
        maker = threading.Thread(
            target=lambda: built.append(rx_processor(*operators, buffer_size=4)), daemon=True
        )
        maker.start()
        maker.join(10)
    assert built, "rx_processor(...) did not return"
    assert len(caplog.records) <= 1
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    built[0].subscribe(sub)
    assert isinstance(sub.error, TypeError) and "None" in str(sub.error)


def test_rx_processor_never_unwinds_a_thread_that_is_not_the_constructors() -> None:
    """While the constructor subscribes the chain (a slow subscribe-time source), outputs
    from another thread end the stream (they come outside any input's signals) and are then
    dropped there: the processor's unwinding is for the constructor's own stack only, never
    raised into a user's or a scheduler's thread."""
    caught: list[str] = []
    producers: list[threading.Thread] = []

    def slow(observer: Any, scheduler: Any = None) -> None:
        time.sleep(0.2)  # the constructor's thread is busy here
        observer.on_next(1)

    def foreign(observer: Any, scheduler: Any = None) -> None:
        def run() -> None:
            try:
                for i in range(5):
                    time.sleep(0.02)
                    observer.on_next(i)
            except BaseException as exc:  # noqa: BLE001 - what reached the user's thread
                caught.append(type(exc).__name__)

        producers.append(threading.Thread(target=run, name="user-producer"))
        producers[-1].start()

    stage = rx_processor(
        ops.merge(reactivex.create(foreign), reactivex.create(slow)), buffer_size=8
    )
    producers[0].join(5)  # it has sent all five
    assert not producers[0].is_alive() and caught == []
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert isinstance(sub.error, RuntimeError) and "outside its input's signals" in str(sub.error)


def test_spec316_an_upstream_request_raising_fails_the_rx_processor_stream() -> None:
    """§3.16 broken upstream: its request raises when the processor replenishes, from the
    subscriber's request. That request returns normally, and the stream ends with on_error
    carrying the upstream's error (it escaped the drain loop: raised into the subscriber's
    request)."""
    armed = False
    sent = 0

    class Upstream:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            class _Subscription:
                def request(self, n: int) -> None:
                    nonlocal sent
                    if armed:
                        raise RuntimeError("request raised")
                    for _ in range(n):
                        subscriber.on_next(sent)
                        sent += 1

                def cancel(self) -> None:
                    pass

            subscriber.on_subscribe(_Subscription())

    stage = rx_processor(ops.map(lambda x: x), buffer_size=4)
    Upstream().subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    stage.subscribe(sub)
    armed = True
    sub.request(100)  # returns normally
    sub.await_terminal(5)
    assert isinstance(sub.error, RuntimeError) and "request raised" in repr(sub.error)
    assert sub.elements == list(range(sent))  # what upstream sent, then the error


def test_publish_on_cancel_while_delivering_releases_a_blocked_feeder_at_once() -> None:
    """§3.12: publish_on over from_observable(block) and a Subject fed from a user thread:
    a cancel while on_next is slow disposes the Rx subscription and releases the feeder
    waiting for room at once, not once on_next returns (the drain of an inline push
    source is idle between pushes, and its cancel is left for later only in its clean-up)."""
    subject: Subject[int] = Subject()

    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    sub.on_next_hook = gate = HoldFirst()
    with ThreadPoolExecutor(1) as pool:
        publish_on(from_observable(subject, buffer_size=2), pool, prefetch=2).subscribe(sub)
        sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
        feeder = threading.Thread(target=lambda: [subject.on_next(i) for i in range(100)])
        feeder.start()
        assert gate.delivering.wait(5)
        sub.cancel()
        feeder.join(5)
        alive = feeder.is_alive()
        gate.release.set()
    assert not alive, "the feeder stayed blocked until on_next returned"
    assert subject.observers == []


def test_a_deferring_cancel_while_the_observable_subscribes_disposes_its_subscription() -> None:
    """A cancel (publish_on's deferring one) that lands while the owned thread is still
    inside the Observable's subscribe, with nothing to dispose yet: the disposable that
    subscribe returns is disposed at once, not kept until the owed cancel."""
    inside, go, disposed = threading.Event(), threading.Event(), threading.Event()

    def producer(observer: Any, scheduler: Any) -> Disposable:
        inside.set()
        go.wait(5)  # connecting, say
        return Disposable(disposed.set)

    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    from_observable(reactivex.create(producer)).subscribe(sub)  # block: the owned thread
    assert inside.wait(5)
    subscription = sub.subscription
    assert isinstance(subscription, DrainSubscription)
    subscription.cancel_deferring_cleanup()
    go.set()
    assert disposed.wait(5)
    subscription.cancel()  # the owed cancel


def test_publish_on_cancel_while_delivering_stops_a_cold_sources_owned_thread() -> None:
    """§3.12, §3.13: publish_on over from_observable(block) and a cold Observable: a cancel
    while on_next is slow releases the owned thread from its wait for room, and it stops
    producing (it is unwound), instead of pushing the rest past buffer_size."""
    source = CountedIterable(10_000)
    before = _owned_threads()
    with ThreadPoolExecutor(1) as pool:
        observable = reactivex.from_iterable(source)
        publisher = publish_on(from_observable(observable, buffer_size=2), pool, prefetch=2)
        with cancelled_while_delivering(publisher):
            for thread in _owned_threads() - before:
                thread.join(5)
                assert not thread.is_alive(), "the owned thread went on producing"
    assert source.pulled < 100
