"""from_observable: the overflow strategies, the owned thread and its lease, cancel, the end
(reactivex 4.x to 6.x)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
import reactivex
from reactivex import Observable
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.scheduler import CurrentThreadScheduler, NewThreadScheduler
from reactivex.subject import Subject
from rx_helpers import switching

from reactive_streams import (
    UNBOUNDED,
    IllegalRequestError,
    OverflowViolation,
    Subscription,
    checked,
    publish_on,
)
from reactive_streams._drain import DrainSubscription
from reactive_streams._lease import EmitterLease
from reactive_streams.adapters.iterables import to_iterator
from reactive_streams.adapters.rx import Overflow, from_observable, rx_processor, to_observable
from reactive_streams.testing import (
    CountedIterable,
    HoldFirst,
    Incomparable,
    PausedAt,
    RecordingSubscriber,
    cancelled_while_delivering,
    race,
)

# Every lease's emit is a closure with the same code: a fresh lease's stands for all in PausedAt.
EMIT = EmitterLease(cast(Any, None), None).emit

STRATEGIES = ["block", "buffer", "drop", "latest", "error"]


def _owned_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "rs-from-observable"}


def _owned_thread_ends(before: set[threading.Thread]) -> None:
    for thread in _owned_threads() - before:
        thread.join(5)
        assert not thread.is_alive()


# -- block: a cold source is produced on the owned thread, as demand allows --------------------


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


def test_elements_that_refuse_comparison_pass_a_cold_block_source() -> None:
    """block over a cold source (the owned thread, its lease and its buffer) into
    to_iterator: every element whole, in order."""
    items = [Incomparable(i) for i in range(300)]
    received = list(to_iterator(from_observable(reactivex.from_iterable(items)), prefetch=16))
    assert [element.value for element in received] == list(range(300))


# -- block: a hot source makes the emitting thread wait for room -------------------------------


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


def test_block_two_threads_waiting_for_room_are_both_released() -> None:
    """block, a Subject fed from two threads at once, a buffer of 2 and one request at a
    time: both emitters end up waiting for room; every pop that makes room wakes all of
    them (it woke one, and the other could wait for ever with room and demand)."""
    with switching():  # thread switches at every chance: the race shows at once
        _two_emitters_waiting_for_room()


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


# -- a hot source: what it emits once subscribe() has returned is kept, every strategy ---------


def _push_right_after_subscribe_once(strategy: str) -> None:
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    from_observable(subject, overflow=strategy, buffer_size=4).subscribe(sub)
    subject.on_next(1)  # no wait for the Rx subscription: subscribe() returned, that is all
    subject.on_next(2)
    subject.on_completed()
    sub.await_terminal()
    assert sub.elements == [1, 2] and sub.completed, strategy
    sub.assert_no_violations()


@pytest.mark.stress
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_hot_source_keeps_what_it_emits_right_after_subscribe_returns(strategy: str) -> None:
    """A Subject pushed and completed right after subscribe() returns (300 rounds, half with
    thread switches at every chance): every element arrives, then on_complete, never an
    empty on_complete. block included: its owned thread has subscribed before subscribe()
    returns."""
    for round_ in range(300):
        with switching(often=round_ % 2 == 1):
            _push_right_after_subscribe_once(strategy)


# -- block: a cold source delivered under the emitter lease ------------------------------------


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
        a_paused = PausedAt(EMIT, "settle")

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
    for round_ in range(100):
        with switching(often=round_ % 2 == 1):
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
    for round_ in range(50):
        with switching(often=round_ % 2 == 1):
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
    for round_ in range(50):
        with switching(often=round_ % 2 == 1):
            _race_thread_switch_once()


# -- block never waits on an event loop --------------------------------------------------------


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


# -- drop, latest, buffer, error: the bound, and what gives way --------------------------------


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


# -- the end: Rx's on_completed and on_error, None, a failing subscribe ------------------------


def _capture(observers: list[Any], disposed: threading.Event) -> Observable[int]:
    """A hot source the test drives by hand: it keeps the observer it is given."""

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        observers.append(observer)
        return Disposable(disposed.set)

    return reactivex.create(subscribe)


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


def test_subscribe_failure_becomes_on_error() -> None:
    """An Observable whose subscribe raises gives on_subscribe then on_error."""

    def broken(_: Any, __: Any = None) -> Any:
        raise RuntimeError("cannot subscribe")

    for strategy in STRATEGIES:
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_observable(reactivex.create(broken), overflow=strategy).subscribe(sub)
        sub.await_terminal()
        assert isinstance(sub.error, RuntimeError) and sub.subscription is not None


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


# -- cancel disposes the Rx subscription and ends the owned thread -----------------------------


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


def test_cancel_from_on_next_stops_a_cold_synchronous_source() -> None:
    """drop on a cold source: cancel from on_next disposes it (it runs no further)."""
    gen = CountedIterable()
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    sub.on_next_hook = lambda x: sub.cancel() if x == 4 else None
    from_observable(reactivex.from_iterable(gen), overflow="drop").subscribe(sub)
    assert sub.elements == [0, 1, 2, 3, 4] and gen.pulled <= 6 and gen.closed.is_set()


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


def test_a_deferring_cancel_while_the_observable_subscribes_disposes_its_subscription() -> None:
    """A cancel (publish_on's deferring one, from another thread) that lands while the owned
    thread is still inside the Observable's subscribe, with nothing to dispose yet (so
    subscribe() still waits): the disposable that subscribe returns is disposed at once,
    not kept until the owed cancel; then subscribe() returns."""
    inside, go, disposed = threading.Event(), threading.Event(), threading.Event()

    def producer(observer: Any, scheduler: Any) -> Disposable:
        inside.set()
        go.wait(5)  # connecting, say
        return Disposable(disposed.set)

    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    publisher = from_observable(reactivex.create(producer))  # block: the owned thread
    subscribing = threading.Thread(target=publisher.subscribe, args=(sub,), daemon=True)
    subscribing.start()
    assert inside.wait(5)
    assert subscribing.is_alive()  # subscribe() waits for the Observable's subscribe call
    subscription = sub.subscription
    assert isinstance(subscription, DrainSubscription)
    subscription.cancel_deferring_cleanup()
    go.set()
    assert disposed.wait(5)
    subscribing.join(5)
    assert not subscribing.is_alive()
    subscription.cancel()  # the owed cancel


def test_block_subscribe_returns_at_the_first_element_of_a_producer_inside_subscribe() -> None:
    """block waits for the owned thread to subscribe, but not for a producer that emits
    inside its subscribe function (a cold source): subscribe() returns at its first element,
    while it waits for room (no demand, buffer_size=2); requests then take everything."""

    def produce(observer: Any, scheduler: Any = None) -> Any:
        for i in range(10):
            observer.on_next(i)
        observer.on_completed()
        return None

    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    publisher = from_observable(reactivex.create(produce), buffer_size=2)
    subscribing = threading.Thread(target=publisher.subscribe, args=(sub,), daemon=True)
    subscribing.start()
    subscribing.join(5)
    assert not subscribing.is_alive(), "subscribe() waited for the producer's end"
    assert sub.elements == []
    sub.request(10)
    sub.await_terminal()
    assert sub.elements == list(range(10)) and sub.completed
    sub.assert_no_violations()


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


# -- subscribing: through Rx's own subscribe, on a thread that can emit ------------------------


def test_the_observer_an_observable_is_given_is_an_rx_observer() -> None:
    """Code that checks what it subscribes (isinstance ObserverBase) accepts ours."""
    observers: list[Any] = []
    for count, strategy in enumerate(STRATEGIES, 1):
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_observable(_capture(observers, threading.Event()), overflow=strategy).subscribe(sub)
        sub.await_condition(lambda n=count: len(observers) == n, what="the Rx subscription")
    assert all(isinstance(o, reactivex.abc.ObserverBase) for o in observers)


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


# -- pushes, requests and cancels from several threads at once ---------------------------------


def _race_hot_pushes_once(overflow: str) -> None:
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_observable(subject, overflow=overflow, buffer_size=4).subscribe(sub)
    sub.await_condition(lambda: len(subject.observers) == 1, what="the Rx subscription")
    n = 2000
    race(
        lambda: [subject.on_next(i) for i in range(n)],
        lambda: [sub.request(1) for _ in range(n)],
    )
    sub.await_condition(
        lambda: bool(sub.elements) and sub.elements[-1] == n - 1,
        what="the last pushed element",
    )
    assert sub.elements == sorted(set(sub.elements))
    if overflow == "block":
        assert sub.elements == list(range(n))
    sub.assert_no_violations()


@pytest.mark.stress
@pytest.mark.parametrize("overflow", ["block", "latest"])
def test_hot_pushes_racing_requests_never_stall(overflow: str) -> None:
    """A push that finds the buffer non-empty wakes no drain pass; racing request(1)s from
    another thread (20 rounds) still never leave an element behind: block delivers every
    one in order, latest delivers the newest (demand covers all the pushes)."""
    for round_ in range(20):
        with switching(often=round_ % 2 == 1):
            _race_hot_pushes_once(overflow)


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
    for round_ in range(100):
        with switching(often=round_ % 2 == 1):
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
    assert gen.pulled == 0 or gen.closed.wait(5)  # the thread ended: pulled is final
    sub.assert_no_violations()


@pytest.mark.stress
def test_cancel_racing_a_cold_block_source() -> None:
    """block on a cold source: cancel racing requests always ends the owned thread."""
    for round_ in range(100):
        with switching(often=round_ % 2 == 1):
            _race_cold_block_once()


# -- arguments ---------------------------------------------------------------------------------


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
