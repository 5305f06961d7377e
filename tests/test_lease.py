"""reactive_streams._lease: the emitter lease, a single producer delivering on its own thread
under a credit of demand, while every rule the drain keeps still holds."""

from __future__ import annotations

import gc
import itertools
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

import pytest

from reactive_streams import UNBOUNDED, IllegalRequestError
from reactive_streams._drain import EMPTY, END, INLINE, DrainPolicy, DrainSubscription, OnExecutor
from reactive_streams._drain import Source as DrainSource
from reactive_streams._lease import EmitterLease
from reactive_streams.testing import PausedAt, RecordingSubscriber, race, stack_depth

T = TypeVar("T")

# Every lease's emit is a closure with the same code: a fresh lease's stands for all in PausedAt.
EMIT = EmitterLease(cast(Any, None), None).emit


# -- a source that leases ------------------------------------------------------------------------


class LeaseSource(DrainSource[T]):
    """A single-producer push source that delivers under the drain's emitter lease when it can
    (the shape of ``from_observable(block)`` on its own thread); counts what took which path.
    Its buffer is exposed as ``queue``, as the lease requires (the drain then pops it fused)."""

    def __init__(self) -> None:
        self.queue: deque[T] = deque()
        self.done = False
        self.error: Exception | None = None
        self.closes = 0
        self.wake: Callable[[], None] = lambda: None
        self.leases = 0
        self.fallbacks = 0
        self.most_buffered = 0
        self.interrupts: list[int] = []
        self.drain: DrainSubscription[T] | None = None
        self.emit: Callable[[T], None] = self._fallback

    def attach(self, drain: DrainSubscription[T]) -> None:
        self.drain = drain
        self.emit = drain.emitter(self._fallback)

    def bind(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def push(self, *elements: T) -> None:
        """The producer's call: what Rx's ``on_next`` is in the adapter."""
        for element in elements:
            self.emit(element)

    def _fallback(self, element: T) -> None:
        self.fallbacks += 1
        drain = self.drain
        assert drain is not None
        drain.release_lease()  # the regular path never runs under a lease
        if self.done:
            return
        if not self.queue and drain.lease():
            self.leases += 1
            self.emit(element)
            return
        self.queue.append(element)
        self.most_buffered = max(self.most_buffered, len(self.queue))
        self.wake()

    def finish(self, error: Exception | None = None) -> None:
        self.error = error
        self.done = True
        self.wake()
        assert self.drain is not None
        self.drain.release_lease()

    def poll(self) -> Any:
        done = self.done
        if self.queue:
            return self.queue.popleft()
        if done:
            if self.error is not None:
                raise self.error
            return END
        return EMPTY

    def at_end(self) -> bool:
        return self.done and not self.queue

    def close(self) -> None:
        self.closes += 1
        self.done = True

    def interrupt(self) -> None:
        self.interrupts.append(threading.get_ident())


def leased(
    subscriber: RecordingSubscriber[T] | None = None, policy: DrainPolicy = INLINE
) -> tuple[LeaseSource[T], DrainSubscription[T], RecordingSubscriber[T]]:
    """A LeaseSource behind a started DrainSubscription."""
    source: LeaseSource[T] = LeaseSource()
    sub: RecordingSubscriber[T] = subscriber if subscriber is not None else RecordingSubscriber()
    drain = DrainSubscription(sub, source, policy)
    source.attach(drain)
    drain.start()
    return source, drain, sub


class TestEmitterLease:
    """DrainSubscription.lease / emitter / release_lease: a single producer delivering on its
    own thread, lock-free per element, while every rule the drain keeps still holds."""

    @pytest.fixture(autouse=True)
    def _drain_loop_holds_the_wip(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        """Every test here also checks that the drain loop is only ever entered with the WIP
        held (§1.3: what keeps two loops from signalling at once), whoever ends a lease."""
        entered_without: list[int] = []
        drain_loop = DrainSubscription._drain

        def checked_drain(self: DrainSubscription[Any]) -> None:
            if self._wip < 1:
                entered_without.append(self._wip)
            drain_loop(self)

        monkeypatch.setattr(DrainSubscription, "_drain", checked_drain)
        yield
        assert not entered_without, "the drain loop ran without the WIP"

    def test_delivers_straight_from_the_producer_with_one_lease(self) -> None:
        """With demand, every element goes from the producer to on_next: one lease, nothing
        buffered, on the producer's thread."""
        source, drain, sub = leased(RecordingSubscriber(100))
        for i in range(100):
            source.push(i)
        assert sub.elements == list(range(100))
        assert source.leases == 1 and source.fallbacks == 1 and source.most_buffered == 0
        assert drain.demand == 0
        assert sub.signal_threads == {threading.get_ident()}
        sub.assert_no_violations()

    def test_spec312_cancel_under_a_lease_interrupts_the_source_at_once(self) -> None:
        """§3.12: cancel from another thread while the producer holds the lease between two
        elements: Source.interrupt() runs at once, on the cancelling thread, exactly once;
        close() follows when the producer lets the drain run. Without a lease, no interrupt."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)  # the producer now holds the lease, idle between two elements
        canceller = threading.Thread(target=lambda: (drain.cancel(), drain.cancel()))
        canceller.start()
        canceller.join(5)
        assert source.interrupts == [canceller.ident] and source.closes == 0
        source.finish()  # the producer returns the lease: the drain closes the source
        assert source.closes == 1 and sub.elements == [0] and not sub.is_terminated
        idle_source, idle_drain, _ = leased(RecordingSubscriber(10))
        idle_drain.cancel()  # no lease held: the drain closes at once, nothing to interrupt
        assert idle_source.interrupts == [] and idle_source.closes == 1

    def test_spec101_credit_never_exceeds_demand(self) -> None:
        """§1.1: the credit is the demand: beyond it elements are buffered, not delivered."""
        source, drain, sub = leased(RecordingSubscriber(5))
        for i in range(8):
            source.push(i)
        assert sub.elements == [0, 1, 2, 3, 4]
        assert list(source.queue) == [5, 6, 7]
        sub.request(2)
        assert sub.elements == list(range(7))
        sub.request(10)
        source.push(8)  # the buffer is empty and there is demand: a lease again
        assert sub.elements == list(range(9)) and source.leases == 2
        sub.assert_no_violations()

    def test_spec303_reentrant_request_renews_the_lease_without_recursion(self) -> None:
        """§3.2/§3.3: request(1) from each on_next under a lease renews it in place: no new
        lease, no recursion, demand never exceeded."""
        depths: list[int] = []
        n = 50_000

        def hook(element: int) -> None:
            if element in (1, n - 1):  # element 0 came through the fallback that leased
                depths.append(stack_depth())

        sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
        sub.on_next_hook = hook
        source, drain, _ = leased(sub)
        for i in range(n):
            source.push(i)
        assert len(sub.elements) == n and source.leases == 1
        assert depths[0] == depths[1]
        sub.assert_no_violations()

    def test_spec309_request_zero_during_a_lease_signals_on_error(self) -> None:
        """§3.9: request(0) from on_next under a lease: on_error(IllegalRequestError) right after
        that element, the source closed, nothing delivered after."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(100)
        sub.on_next_hook = lambda element: sub.request(0) if element == 2 else None
        source, drain, _ = leased(sub)
        for i in range(10):
            source.push(i)
        assert sub.elements == [0, 1, 2]
        assert isinstance(sub.error, IllegalRequestError) and sub.error.rule == "3.9"
        assert source.closes == 1
        sub.assert_no_violations()

    def test_spec309_request_zero_from_another_thread_is_answered_at_the_next_element(
        self,
    ) -> None:
        """§3.9/§1.3: request(0) from another thread while a lease is held returns at once; the
        producer delivers on_error, on its own thread, right after its next element."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)
        other = threading.Thread(target=sub.request, args=(0,))
        other.start()
        other.join(5)
        assert not other.is_alive() and sub.error is None  # the WIP is leased: not here
        source.push(1)
        assert sub.elements == [0, 1] and isinstance(sub.error, IllegalRequestError)
        source.push(2)
        assert sub.elements == [0, 1]
        assert sub.signal_threads == {threading.get_ident()}
        sub.assert_no_violations()

    def test_spec312_cancel_from_on_next_during_a_lease_stops_at_once(self) -> None:
        """§3.12: cancel() from on_next under a lease: the source is closed before the producer
        gets control back, and nothing more is delivered."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(100)
        sub.on_next_hook = lambda element: sub.cancel() if element == 2 else None
        source, drain, _ = leased(sub)
        source.push(0)
        source.push(1)
        source.push(2)
        assert source.closes == 1 and drain.is_cancelled
        for i in range(3, 10):
            source.push(i)
        assert sub.elements == [0, 1, 2]

    def test_spec313_cancel_from_another_thread_drops_references_at_the_next_element(
        self,
    ) -> None:
        """§3.12/§3.13: cancel from another thread while the producer is between elements returns
        at once; the producer's next element is the last one delivered: then the source is
        closed and the drain lets go of the subscriber."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)
        sub_ref = weakref.ref(sub)
        other = threading.Thread(target=drain.cancel)
        other.start()
        other.join(5)
        assert not other.is_alive() and source.closes == 0  # deferred to the producer
        source.push(1)
        assert sub.elements == [0, 1] and source.closes == 1
        source.push(2)
        assert sub.elements == [0, 1]
        del sub
        gc.collect()
        assert sub_ref() is None

    def test_request_from_another_thread_is_credited_at_the_next_element(self) -> None:
        """§3.4: request() from another thread during a lease returns at once and is taken
        into the lease's credit at the next element, without a new lease or any buffering."""
        source, drain, sub = leased(RecordingSubscriber(2))
        source.push(0)
        other = threading.Thread(target=sub.request, args=(5,))
        other.start()
        other.join(5)
        assert not other.is_alive()
        assert drain.demand == 6  # the remaining credit (1) plus the new demand
        for i in range(1, 7):
            source.push(i)
        assert sub.elements == list(range(7)) and source.leases == 1
        assert source.most_buffered == 0
        sub.assert_no_violations()

    def test_spec213_raising_on_next_during_a_lease_cancels_and_reports(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """§2.13: a subscriber raising in on_next under a lease counts as cancelled: the source
        is closed, the error logged naming §2.13, nothing more delivered."""
        boom = RuntimeError("subscriber bug")

        def explode(element: int) -> None:
            if element == 1:
                raise boom

        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        sub.on_next_hook = explode
        source, drain, _ = leased(sub)
        with caplog.at_level(logging.ERROR, logger="reactive_streams"):
            for i in range(5):
                source.push(i)
        assert sub.elements == [0, 1] and source.closes == 1 and drain.is_cancelled
        assert not sub.is_terminated
        records = [r for r in caplog.records if r.name == "reactive_streams"]
        assert len(records) == 1 and records[0].getMessage().startswith("§2.13: ")
        assert records[0].exc_info is not None and records[0].exc_info[1] is boom

    def test_spec103_reentrant_push_during_a_delivery_follows_it(self) -> None:
        """§1.3: an element pushed from inside on_next (a reentrant producer) is not delivered
        nested: it is buffered and delivered right after the element in progress."""
        depth = 0
        most = 0
        source: LeaseSource[int]

        def hook(element: int) -> None:
            nonlocal depth, most
            depth += 1
            most = max(most, depth)
            if element == 0:
                source.push(100)
            depth -= 1

        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        sub.on_next_hook = hook
        source, drain, _ = leased(sub)
        for i in range(3):
            source.push(i)
        assert sub.elements == [0, 100, 1, 2] and most == 1
        sub.assert_no_violations()

    def test_spec105_end_signalled_during_a_delivery_completes_after_it(self) -> None:
        """§1.5: the source ending from inside on_next is not lost to a lease renewal: the
        subscriber completes right after that element."""
        source: LeaseSource[int]
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        sub.on_next_hook = lambda element: source.finish() if element == 1 else None
        source, drain, _ = leased(sub)
        source.push(0)
        source.push(1)
        assert sub.elements == [0, 1] and sub.completed and source.closes == 1

    def test_spec104_error_after_leased_elements(self) -> None:
        """§1.4: the producer's error is signalled after the elements delivered under a lease."""
        source, drain, sub = leased(RecordingSubscriber(10))
        boom = RuntimeError("upstream")
        for i in range(3):
            source.push(i)
        source.finish(boom)
        assert sub.elements == [0, 1, 2] and sub.error is boom

    def test_release_returns_the_unused_credit_and_frees_the_drain(self) -> None:
        """release_lease(): the unused credit goes back into demand (§1.1) and the WIP is
        free, so a push from the regular path drains at once."""
        source, drain, sub = leased(RecordingSubscriber(10))
        for i in range(3):
            source.push(i)
        drain.release_lease()
        assert drain.demand == 7
        drain.release_lease()  # no lease: nothing happens
        source.queue.append(3)
        source.wake()
        assert sub.elements == [0, 1, 2, 3] and drain.demand == 6
        sub.assert_no_violations()

    def test_a_producer_moving_to_another_thread_keeps_the_lease(self) -> None:
        """The lease is the producer's, not a thread's: moving to another thread (serially),
        it goes on delivering under it; order and §1.3 kept, one lease in all."""
        source, drain, sub = leased(RecordingSubscriber(100))
        for i in range(3):
            source.push(i)

        def elsewhere() -> None:
            for i in range(3, 6):
                source.push(i)

        other = threading.Thread(target=elsewhere)
        other.start()
        other.join(5)
        for i in range(6, 8):
            source.push(i)
        assert sub.elements == list(range(8)) and drain.demand == 92
        assert source.leases == 1 and source.fallbacks == 1  # the first push took it
        assert sub.signal_threads == {threading.get_ident(), other.ident}
        sub.assert_no_violations()

    def test_delivering_here_inside_on_next_on_whichever_thread_the_producer_moved_to(
        self,
    ) -> None:
        """delivering_here(), asked by the producer from inside on_next under the lease, is
        True on the thread it started on and on the one it moved to (a block source's
        feedback check relies on it), and False between two elements."""
        answers: list[bool] = []
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        source, drain, sub = leased(sub)
        sub.on_next_hook = lambda element: answers.append(drain.delivering_here())
        source.push(0)
        between = drain.delivering_here()
        other = threading.Thread(target=source.push, args=(1, 2))
        other.start()
        other.join(5)
        assert answers == [True, True, True] and not between
        assert source.leases == 1 and sub.elements == [0, 1, 2]

    def test_a_base_exception_from_on_next_under_a_lease_ends_the_subscription(self) -> None:
        """A KeyboardInterrupt from on_next under the lease reaches the producer, and the
        subscription ends as it does in the drain loop: cancelled, released (§3.13), the
        source closed; no lease is left that would make delivering_here() true."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)

        def interrupt(element: int) -> None:
            if element == 1:
                raise KeyboardInterrupt

        sub.on_next_hook = interrupt
        source, drain, sub = leased(sub)
        source.push(0)
        with pytest.raises(KeyboardInterrupt):
            source.push(1)
        assert drain.is_cancelled and source.closes == 1 and not drain.delivering_here()
        source.push(2)  # the regular path, on a finished source
        sub.cancel()
        assert sub.elements == [0, 1] and source.leases == 1

    def test_revoke_between_elements_returns_the_credit_and_ends_leasing(self) -> None:
        """revoke_lease() from a thread that is not the producer, between two elements: the
        unused credit goes back (§1.1), the WIP is free, and no lease is granted again: the
        producer's next elements take the regular path."""
        source, drain, sub = leased(RecordingSubscriber(10))
        for i in range(3):
            source.push(i)
        other = threading.Thread(target=drain.revoke_lease)
        other.start()
        other.join(5)
        assert drain.demand == 7
        for i in range(3, 6):
            source.push(i)
        assert sub.elements == list(range(6)) and drain.demand == 4
        assert source.leases == 1 and source.fallbacks == 4 and source.most_buffered == 1
        assert not drain.lease()  # for good, though the drain is idle with demand
        sub.assert_no_violations()

    def test_revoke_during_a_delivery_leaves_the_credit_to_the_producer(self) -> None:
        """revoke_lease() while the producer, on another thread, is inside on_next under the
        lease: it returns at once, without the credit (the producer holds it); the producer
        settles right after that element, giving the credit back (§1.1) and the WIP up, so a
        cancel while it is idle takes effect at once (§3.12)."""
        inside, go = threading.Event(), threading.Event()
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)

        def hold(element: int) -> None:
            if element == 1:
                inside.set()
                assert go.wait(5)

        sub.on_next_hook = hold
        source, drain, sub = leased(sub)
        producer = threading.Thread(target=source.push, args=(0, 1))
        producer.start()
        assert inside.wait(5)
        drain.revoke_lease()
        assert drain.demand == 0  # still the producer's credit, mid-delivery
        go.set()
        producer.join(5)
        assert sub.elements == [0, 1] and drain.demand == 8
        sub.cancel()  # the producer is idle: the lease ended after its element, not at the next
        assert source.closes == 1 and sub.subscription is not None
        source.push(2)
        assert sub.elements == [0, 1] and source.leases == 1
        sub.assert_no_violations()

    def test_revoke_as_the_producer_claims_its_credit(self) -> None:
        """The producer saw its credit and is about to claim it when revoke_lease() takes it
        back: the producer's claim finds nothing instead of delivering under the lease, and
        its element takes the regular path; no credit survives the revocation (§1.1)."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)  # the lease: credit 9 left
        paused = PausedAt(EMIT, "claim")
        paused.start(lambda: source.push(1, 2))
        drain.revoke_lease()
        assert drain.demand == 9
        paused.resume()
        assert sub.elements == [0, 1, 2] and drain.demand == 7
        for i in range(3, 12):  # 7 more are delivered, the last two wait for demand
            source.push(i)
        assert sub.elements == list(range(10)) and list(source.queue) == [10, 11]
        assert source.leases == 1
        sub.assert_no_violations()

    def test_revoke_after_the_producer_claimed_its_credit(self) -> None:
        """The producer claimed its credit and is about to call on_next when revoke_lease()
        runs: the revoker returns at once and leaves the credit to it; the producer delivers
        that element under it, then gives the rest back (§1.1) and drains from the lease's
        WIP, and its next element takes the regular path."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)
        paused = PausedAt(EMIT, "deliver")
        paused.start(lambda: source.push(1, 2))
        drain.revoke_lease()
        assert drain.demand == 0  # left to the producer
        paused.resume()
        assert sub.elements == [0, 1, 2] and drain.demand == 7
        for i in range(3, 12):
            source.push(i)
        assert sub.elements == list(range(10)) and list(source.queue) == [10, 11]
        assert source.leases == 1
        sub.assert_no_violations()

    def test_revoke_after_the_producer_restored_its_credit(self) -> None:
        """The producer delivered, put its credit back (8 left) and is about to look at the
        WIP when revoke_lease() takes that credit: the producer's settling finds the lease gone
        and leaves the drain to the revoker; nothing is renewed (§1.1, §1.3)."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)
        paused = PausedAt(EMIT, "returned")
        paused.start(lambda: source.push(1))
        drain.revoke_lease()
        assert drain.demand == 8
        paused.resume()
        for i in range(2, 11):
            source.push(i)
        assert sub.elements == list(range(10)) and list(source.queue) == [10]
        assert source.leases == 1 and drain.demand == 0
        sub.assert_no_violations()

    def test_revoke_after_the_producer_used_its_last_credit(self) -> None:
        """The producer delivered the last element of its credit and is about to settle when
        revoke_lease() finds no credit: it leaves the settling to the producer, which ends
        the lease; more demand later goes through the regular path, never a new lease."""
        source, drain, sub = leased(RecordingSubscriber(2))
        source.push(0)
        paused = PausedAt(EMIT, "spent")
        paused.start(lambda: source.push(1))
        drain.revoke_lease()
        paused.resume()
        assert sub.elements == [0, 1] and drain.demand == 0
        sub.request(3)
        for i in range(2, 5):
            source.push(i)
        assert sub.elements == list(range(5)) and source.leases == 1
        sub.assert_no_violations()

    def test_lease_is_refused_unless_the_drain_is_idle_with_demand(self) -> None:
        """No lease without demand, with something buffered, after cancel, while another thread
        drains, or under a policy that drains elsewhere."""
        source, drain, sub = leased()
        assert not drain.lease()  # no demand
        sub.request(5)
        source.queue.append(1)
        assert not drain.lease()  # buffered: it goes first
        source.queue.clear()
        assert drain.lease()
        assert not drain.lease()  # held
        drain.release_lease()
        drain.cancel()
        assert not drain.lease()

        inside = threading.Event()
        release = threading.Event()
        busy: RecordingSubscriber[int] = RecordingSubscriber()
        busy.on_next_hook = lambda element: (inside.set(), release.wait(5))  # type: ignore[func-returns-value]
        source, drain, _ = leased(busy)
        source.queue.append(1)
        source.queue.append(2)
        drainer = threading.Thread(target=busy.request, args=(1,))
        drainer.start()
        assert inside.wait(5)
        busy.request(5)  # returns at once: the drainer holds the WIP
        assert not drain.lease()
        release.set()
        drainer.join(5)

        with ThreadPoolExecutor(1) as pool:
            source, drain, sub = leased(RecordingSubscriber(5), OnExecutor(pool))
            assert not drain.lease()


def _race_cancel_during_a_lease_once() -> None:
    source, drain, sub = leased(RecordingSubscriber(UNBOUNDED))
    seen_at_return = -1

    def produce() -> None:
        for i in itertools.count():
            if source.closes:
                return
            source.push(i)

    def cancel() -> None:
        nonlocal seen_at_return
        sub.await_count(50)
        drain.cancel()
        seen_at_return = len(sub.elements)

    race(produce, cancel)
    assert source.closes == 1 and drain.is_cancelled
    assert len(sub.elements) - seen_at_return <= 1  # at most one element (the next) after it
    assert sub.elements == list(range(len(sub.elements)))
    sub.assert_no_violations()


@pytest.mark.stress
def test_spec312_cancel_from_another_thread_during_a_fast_lease(switching: float | None) -> None:
    """§3.12/§3.5: cancel racing a producer delivering under a lease (200 rounds): it stops,
    the source is closed once, at most one element arrives after cancel returned."""
    for _ in range(200):
        _race_cancel_during_a_lease_once()


def _race_requests_during_a_lease_once() -> None:
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    source, drain, _ = leased(sub)
    n = 500

    def produce() -> None:
        for i in range(n):
            source.push(i)
        source.finish()

    def requests() -> None:
        for _ in range(n):
            sub.request(1)

    race(produce, requests)
    sub.await_terminal()
    assert sub.elements == list(range(n)) and sub.completed
    sub.assert_no_violations()  # §1.1 and §1.3, checked by the recorder


@pytest.mark.stress
def test_spec101_requests_from_another_thread_racing_a_lease(switching: float | None) -> None:
    """§1.1/§1.3: a producer taking, renewing and returning leases while another thread
    requests one at a time (100 rounds): never more than requested, serial, in order."""
    for _ in range(100):
        _race_requests_during_a_lease_once()


def _race_two_producers_once(demand: int, request_on_next: int) -> None:
    sub: RecordingSubscriber[int] = RecordingSubscriber(demand, request_on_next=request_on_next)
    source, drain, _ = leased(sub)
    n = 200

    def producer(base: int) -> Callable[[], None]:
        return lambda: source.push(*range(base, base + n))

    race(producer(0), producer(10_000))
    source.finish()
    sub.await_terminal()
    assert sorted(sub.elements) == [*range(n), *range(10_000, 10_000 + n)] and sub.completed
    sub.assert_no_violations()  # §1.1 and §1.3, checked by the recorder


@pytest.mark.stress
@pytest.mark.parametrize(("demand", "request_on_next"), [(UNBOUNDED, 0), (1, 1), (50, 1)], ids=str)
def test_spec103_two_threads_calling_the_emitter_at_once_overlap_nothing_and_lose_nothing(
    demand: int, request_on_next: int, switching: float | None
) -> None:
    """§1.3/§1.1: two threads calling the emitter at once (against Rx's contract): one holds
    the lease's credit at a time, the other takes the regular path, so no two on_next
    overlap, none beyond demand, every element arrives once (50 rounds)."""
    for _ in range(50):
        _race_two_producers_once(demand, request_on_next)


def _race_revoke_during_a_lease_once() -> None:
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    source, drain, _ = leased(sub)
    seen: list[int] = []

    def produce() -> None:
        source.push(*range(300))

    def revoke() -> None:
        sub.await_count(10)
        drain.revoke_lease()

    def look() -> None:
        while len(sub.elements) < 100:
            seen.append(drain.demand)

    race(produce, revoke, look)
    # The credit is neither lost nor doubled: exactly the demand was delivered (§1.1).
    assert sub.elements == list(range(100)) and list(source.queue) == list(range(100, 300))
    assert drain.demand == 0 and all(0 <= demand <= 100 for demand in seen)
    assert not drain.lease()  # revoked for good
    sub.request(200)
    assert sub.elements == list(range(300))
    sub.assert_no_violations()


@pytest.mark.stress
def test_revoke_and_demand_racing_a_producer_return_every_credit(switching: float | None) -> None:
    """revoke_lease() and reads of demand from other threads while the producer delivers under
    its lease (100 rounds): exactly the demand is delivered (§1.1), the rest waits buffered,
    in order, for the next request; demand never reads above what was requested."""
    for _ in range(100):
        _race_revoke_during_a_lease_once()
