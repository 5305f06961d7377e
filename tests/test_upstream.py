"""reactive_streams._upstream.Upstream: one subscription accepted (§2.5), requests serial (§2.7)."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from reactive_streams._subscription import CANCELLED
from reactive_streams._upstream import Upstream
from reactive_streams.testing import race

# -- instruments ----------------------------------------------------------------------------------


class Strict:
    """A Subscription that trusts §2.7: it records every request and cancel, and counts a
    request that starts while another thread's is in progress (nesting on one thread, a
    request from inside a request, is serial and not counted). ``inside`` runs in each
    request, after it was recorded, with the nesting depth."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the recorder's own: the helper is what is tested
        self.requests: list[Any] = []
        self.cancels = 0
        self.overlaps = 0
        self.depth = 0
        self.owner = 0
        self.inside: Callable[[int], None] = lambda depth: None

    def request(self, n: int) -> None:
        me = threading.get_ident()
        with self._lock:
            if self.depth and self.owner != me:
                self.overlaps += 1
            self.owner = me
            self.depth += 1
            depth = self.depth
            self.requests.append(n)
        try:
            self.inside(depth)
            if depth == 1:
                time.sleep(0)  # a chance for another thread to request meanwhile
        finally:
            with self._lock:
                self.depth -= 1

    def cancel(self) -> None:
        with self._lock:
            self.cancels += 1

    @property
    def demand(self) -> int:
        return sum(n for n in self.requests if isinstance(n, int) and not isinstance(n, bool))


class RaisingCancel(Strict):
    def cancel(self) -> None:
        super().cancel()
        raise RuntimeError("cancel failed")


class GatedLock:
    """The helper's lock, with a gate: once ``armed`` for a thread, that thread's next
    acquisition first calls ``at_gate()`` (an interrupt landing right before the lock)."""

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


def on_thread(action: Callable[[], object]) -> None:
    """Run ``action`` on another thread and wait for it: it must not need a turn held here."""
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the other thread waited for this one"




# -- accepting one subscription (§2.5) ------------------------------------------------------------


def test_spec205_the_first_subscription_is_kept_and_a_second_cancelled() -> None:
    """set_once keeps the first subscription; a second is cancelled and never requested."""
    upstream = Upstream()
    first, second = Strict(), Strict()
    assert upstream.set_once(first) is True
    assert upstream.set_once(second) is False
    upstream.request(3)
    assert upstream.subscription is first
    assert (first.requests, first.cancels) == ([3], 0)
    assert (second.requests, second.cancels) == ([], 1)


def test_spec205_a_subscription_after_cancel_is_cancelled() -> None:
    """A subscriber that cancelled before it was subscribed cancels what it then gets."""
    upstream = Upstream()
    upstream.request(2)
    upstream.cancel()
    late = Strict()
    assert upstream.set_once(late) is False
    assert (late.requests, late.cancels) == ([], 1)


def test_spec315_a_duplicate_whose_cancel_raises_is_reported_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.5, §3.15: the duplicate's cancel raising is logged; set_once returns normally."""
    upstream = Upstream()
    upstream.set_once(Strict())
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        assert upstream.set_once(RaisingCancel()) is False
    assert [r.getMessage()[:6] for r in caplog.records] == ["§3.15:"]


def test_take_returns_what_was_there_once() -> None:
    """take(): None before any subscription, then the subscription, then CANCELLED."""
    assert Upstream().take() is None
    upstream = Upstream()
    subscription = Strict()
    upstream.set_once(subscription)
    assert upstream.take() is subscription
    assert upstream.take() is CANCELLED
    assert upstream.subscription is CANCELLED
    upstream.request(1)
    assert subscription.requests == [] and subscription.cancels == 0


def test_spec307_cancel_cancels_once(caplog: pytest.LogCaptureFixture) -> None:
    """§3.7, §3.15: cancel reaches the subscription once, and a raising cancel is reported."""
    upstream = Upstream()
    subscription = RaisingCancel()
    upstream.set_once(subscription)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        upstream.cancel()
        upstream.cancel()
    assert subscription.cancels == 1
    assert [r.getMessage()[:6] for r in caplog.records] == ["§3.15:"]


@pytest.mark.stress
def test_spec205_subscriptions_racing_in_from_many_threads_keep_exactly_one(
    switching: None,
) -> None:
    """Eight threads call set_once at once (200 rounds): exactly one subscription is kept,
    never cancelled; every other one is cancelled exactly once."""
    for _ in range(200):
        _set_once_from_eight_threads()


def _set_once_from_eight_threads() -> None:
    upstream = Upstream()
    subscriptions = [Strict() for _ in range(8)]
    accepted: list[Strict] = []

    def offer(subscription: Strict) -> None:
        if upstream.set_once(subscription):
            accepted.append(subscription)

    race(*(lambda s=s: offer(s) for s in subscriptions))
    assert len(accepted) == 1 and upstream.subscription is accepted[0]
    assert [s.cancels for s in subscriptions if s is not accepted[0]] == [1] * 7
    assert accepted[0].cancels == 0


@pytest.mark.stress
def test_spec305_cancels_racing_a_set_once_cancel_every_subscription_once(
    switching: None,
) -> None:
    """§3.5, §2.5: four cancels race one set_once (200 rounds): the subscription is cancelled
    exactly once, whichever comes first, and never requested."""
    for _ in range(200):
        _set_once_racing_four_cancels()


def _set_once_racing_four_cancels() -> None:
    upstream = Upstream()
    subscription = Strict()
    race(lambda: upstream.set_once(subscription), *(upstream.cancel for _ in range(4)))
    assert subscription.cancels == 1 and subscription.requests == []


# -- requests passed on one at a time (§2.7) -----------------------------------------------------


def test_spec207_demand_asked_before_set_once_is_passed_on_by_it() -> None:
    """Requests made before the subscription came are added up and passed on by set_once;
    the first invalid one follows as it came, for the publisher's on_error (§3.9)."""
    upstream = Upstream()
    upstream.request(2)
    upstream.request(3)
    upstream.request(0)
    upstream.request(-1)
    subscription = Strict()
    upstream.set_once(subscription)
    assert subscription.requests == [5, 0]


@pytest.mark.parametrize("bad", [0, -1, True, None, "3", 1.5])
def test_spec309_an_invalid_request_is_passed_on_as_it_came(bad: Any) -> None:
    """§3.9: request(True), request(None)... reach the subscription themselves, at once or
    after a wait: not a demand of 1 (True == 1), nor 0 + 1.5."""
    at_once, waited = Strict(), Strict()
    upstream = Upstream()
    upstream.set_once(at_once)
    upstream.request(bad)
    later = Upstream()
    later.request(bad)
    later.set_once(waited)
    assert len(at_once.requests) == 1 and at_once.requests[0] is bad
    assert len(waited.requests) == 1 and waited.requests[0] is bad


def test_spec207_a_held_turn_makes_other_threads_wait_and_its_own_requests_go_through() -> None:
    """set_once(hold=True): another thread's request waits for release(); the holder's own
    (a hook asking from on_subscribe) goes straight through, so it comes first."""
    upstream = Upstream()
    subscription = Strict()
    upstream.set_once(subscription, hold=True)
    on_thread(lambda: upstream.request(7))
    upstream.request(2)
    assert subscription.requests == [2]
    upstream.release()
    assert subscription.requests == [2, 7]
    upstream.request(1)
    assert subscription.requests == [2, 7, 1]


def test_spec303_a_request_from_inside_a_request_goes_straight_through() -> None:
    """A synchronous publisher emits inside request; on_next asks again on the same thread:
    serial (§2.7), so it is passed on at once, nested (the publisher bounds that, §3.3)."""
    upstream = Upstream()
    subscription = Strict()
    depths: list[int] = []

    def on_next(depth: int) -> None:
        depths.append(depth)
        if depth < 4:
            upstream.request(1)

    subscription.inside = on_next
    upstream.set_once(subscription)
    upstream.request(1)
    assert depths == [1, 2, 3, 4] and subscription.requests == [1, 1, 1, 1]


def test_spec303_with_defer_nested_a_request_from_inside_a_request_waits_for_its_return() -> None:
    """defer_nested: on_next asking for more from inside request is passed on when that
    call returns, by the same thread, added up: no request ever runs inside another."""
    upstream = Upstream(defer_nested=True)
    subscription = Strict()
    depths: list[int] = []

    def on_next(depth: int) -> None:
        depths.append(depth)
        if len(depths) < 4:
            upstream.request(1)
            upstream.request(2)

    subscription.inside = on_next
    upstream.set_once(subscription)
    upstream.request(1)
    assert depths == [1, 1, 1, 1] and subscription.requests == [1, 3, 3, 3]


def test_spec207_a_request_during_another_threads_is_made_by_that_thread() -> None:
    """A request made while another thread's call is in progress returns at once; the
    thread in the call passes it on when its call returns, added up with any other."""
    upstream = Upstream()
    subscription = Strict()
    threads: list[int] = []

    def inside(depth: int) -> None:
        threads.append(threading.get_ident())
        if len(subscription.requests) == 1:
            on_thread(lambda: upstream.request(3))
            on_thread(lambda: upstream.request(4))
            assert subscription.requests == [10]

    subscription.inside = inside
    upstream.set_once(subscription)
    upstream.request(10)
    assert subscription.requests == [10, 7]
    assert threads == [threading.get_ident()] * 2


def test_spec312_cancel_is_not_held_behind_a_request_in_progress() -> None:
    """cancel() reaches the subscription while a request that emits for ever is in
    progress on another thread (§3.5); the request loop then stops."""
    upstream = Upstream()
    entered, cancelled = threading.Event(), threading.Event()

    class Endless(Strict):
        def request(self, n: int) -> None:
            super().request(n)
            entered.set()
            assert cancelled.wait(10), "cancel() waited for request() to return"

        def cancel(self) -> None:
            super().cancel()
            cancelled.set()

    subscription = Endless()
    upstream.set_once(subscription)
    requester = threading.Thread(target=upstream.request, args=(1,), daemon=True)
    requester.start()
    assert entered.wait(10)
    upstream.request(5)  # left for the requester's turn, which ends at the cancel
    upstream.cancel()
    requester.join(10)
    assert not requester.is_alive()
    assert subscription.requests == [1] and subscription.cancels == 1


def test_spec204_no_request_once_stopped_and_the_subscription_kept_for_cancel() -> None:
    """stop_requests() (a terminal signal, §2.4): later requests, and any left for the turn
    in progress, are not made; the subscription stays, for a later cancel."""
    upstream = Upstream()
    subscription = Strict()

    def inside(depth: int) -> None:
        if len(subscription.requests) == 1:
            on_thread(lambda: upstream.request(3))  # left for this turn
            upstream.stop_requests()

    subscription.inside = inside
    upstream.set_once(subscription)
    upstream.request(1)
    upstream.request(2)
    assert subscription.requests == [1]
    assert upstream.subscription is subscription
    upstream.cancel()
    assert subscription.cancels == 1


def test_pass_request_makes_every_call() -> None:
    """The owner's pass_request makes each call, with the subscription, one at a time."""
    calls: list[tuple[Any, int]] = []
    subscription = Strict()

    def counted(target: Any, n: int) -> None:
        calls.append((target, n))
        target.request(n)

    upstream = Upstream(counted)
    upstream.request(1)
    upstream.set_once(subscription)
    upstream.request(2)
    assert calls == [(subscription, 1), (subscription, 2)]
    assert subscription.requests == [1, 2]


def test_take_drops_the_owners_hook_so_the_owner_is_freed_without_a_gc_pass() -> None:
    """An owner whose pass_request is its own method (a cycle through its Upstream) is
    freed by reference counting once the subscription was taken (closed, §3.13)."""

    class Owner:
        def __init__(self) -> None:
            self.upstream = Upstream(self.pass_request)

        def pass_request(self, subscription: Any, n: int) -> None:
            subscription.request(n)

    gc.disable()
    try:
        owner = Owner()
        owner.upstream.set_once(Strict())
        owner.upstream.cancel()
        gone = weakref.ref(owner)
        del owner
        assert gone() is None
    finally:
        gc.enable()


def test_no_lock_is_held_while_the_subscription_is_called() -> None:
    """The subscription's request and cancel may call the helper back, from this thread or
    another (a cancel answering with on_subscribe, a request with on_next asking more): no
    lock of the helper is held meanwhile, or this would deadlock."""
    upstream = Upstream()
    other = Strict()

    class CallsBack(Strict):
        def request(self, n: int) -> None:
            super().request(n)
            if len(self.requests) == 1:
                on_thread(lambda: upstream.request(2))  # parks: needs the lock
                on_thread(upstream.stop_requests)
                upstream.drop_missed()

        def cancel(self) -> None:
            super().cancel()
            on_thread(lambda: upstream.set_once(other))
            upstream.take()

    subscription = CallsBack()
    upstream.set_once(subscription)
    upstream.request(1)
    upstream.cancel()
    assert subscription.requests == [1] and subscription.cancels == 1
    assert other.cancels == 1


# -- replenish: the owner says how much, each time a call can be made ---------------------------


def test_replenish_asks_due_after_each_call_until_it_says_zero() -> None:
    """replenish(due) requests what due() says, then asks again, until it says 0; before
    set_once it does nothing, and due() is not even asked."""
    upstream = Upstream()
    answers = [0, 2, 3]  # popped from the end: 3, then 2, then 0
    upstream.replenish(answers.pop)
    assert answers == [0, 2, 3]
    subscription = Strict()
    upstream.set_once(subscription)
    upstream.replenish(answers.pop)
    assert subscription.requests == [3, 2] and answers == []


def test_replenish_from_another_thread_during_a_call_makes_that_turn_look_again() -> None:
    """A replenish while another thread's call is in progress returns at once without
    asking due(); the thread in the call asks due() once more when it returns."""
    upstream = Upstream()
    subscription = Strict()
    asked_on: list[int] = []
    answers = [0, 2, 5]

    def due() -> int:
        asked_on.append(threading.get_ident())
        return answers.pop()

    def inside(depth: int) -> None:
        if len(subscription.requests) == 1:
            on_thread(lambda: upstream.replenish(due))

    subscription.inside = inside
    upstream.set_once(subscription)
    upstream.replenish(due)
    assert subscription.requests == [5, 2]
    assert asked_on == [threading.get_ident()] * 3


@pytest.mark.parametrize("defer_nested", [False, True], ids=["nested", "deferred"])
def test_replenish_from_inside_a_call_on_its_own_thread(defer_nested: bool) -> None:
    """From inside the turn's own call (on_next freeing room): asked and passed on at once,
    nested; with defer_nested, asked when the call returns, never nested."""
    upstream = Upstream(defer_nested=defer_nested)
    subscription = Strict()
    answers = [0, 1, 1, 1, 4]
    depths: list[int] = []

    def inside(depth: int) -> None:
        depths.append(depth)
        if len(depths) < 4:
            upstream.replenish(answers.pop)

    subscription.inside = inside
    upstream.set_once(subscription)
    upstream.replenish(answers.pop)
    assert subscription.requests == [4, 1, 1, 1] and answers == []
    assert depths == ([1, 1, 1, 1] if defer_nested else [1, 2, 3, 4])


def test_replenish_called_right_after_due_said_zero_is_not_lost() -> None:
    """Another thread frees room just after due() said 0, while the turn is still held: its
    replenish returns at once, and the turn, before it ends, asks due() once more."""
    upstream = Upstream()
    subscription = Strict()
    room = [0, 2, 0, 3]  # what due() sees, from the end: 3, 0, then 2 (freed), then 0
    looks: list[int] = []

    def due() -> int:
        n = room.pop()
        looks.append(n)
        if n == 0 and room:  # room is freed now, on another thread, which replenishes too
            on_thread(lambda: upstream.replenish(lambda: 99))
        return n

    upstream.set_once(subscription)
    upstream.replenish(due)
    assert subscription.requests == [3, 2]
    assert looks == [3, 0, 2, 0]


def test_replenish_stops_looking_once_stopped() -> None:
    """stop_requests() during a call ends the turn when the call returns: due() is not
    asked again, though another thread asked for one more look."""
    upstream = Upstream()
    subscription = Strict()
    answers = [9, 4]

    def inside(depth: int) -> None:
        on_thread(lambda: upstream.replenish(answers.pop))
        upstream.stop_requests()

    subscription.inside = inside
    upstream.set_once(subscription)
    upstream.replenish(answers.pop)
    assert subscription.requests == [4] and answers == [9]


# -- a raising request ends the turn -------------------------------------------------------------


def test_spec316_a_raising_request_goes_to_its_caller_and_later_requests_still_pass() -> None:
    """A request that raises (breaking §3.16) reaches the caller and ends its turn; what
    another thread left for that turn waits for the next request, which passes it on."""
    upstream = Upstream()
    subscription = Strict()

    def inside(depth: int) -> None:
        if len(subscription.requests) == 1:
            on_thread(lambda: upstream.request(2))
            raise RuntimeError("request broke")

    subscription.inside = inside
    upstream.set_once(subscription)
    with pytest.raises(RuntimeError, match="request broke"):
        upstream.request(1)
    upstream.request(5)
    assert subscription.requests == [1, 5, 2]


def test_an_interrupt_between_two_requests_leaves_the_demand_to_drop_missed() -> None:
    """A KeyboardInterrupt lands right after a request returns, before the demand another
    thread left is passed on: it goes to the caller, the turn ends, and drop_missed()
    takes that demand back (once), so the owner can tell its consumer."""
    upstream = Upstream()
    lock = upstream._lock = GatedLock()  # type: ignore[assignment]
    subscription = Strict()

    def interrupt() -> None:
        raise KeyboardInterrupt

    def inside(depth: int) -> None:
        if len(subscription.requests) == 1:
            on_thread(lambda: upstream.request(3))
            lock.at_gate = interrupt
            lock.armed = threading.get_ident()  # lands once this request returns

    subscription.inside = inside
    upstream.set_once(subscription)
    with pytest.raises(KeyboardInterrupt):
        upstream.request(4)
    assert upstream.drop_missed() == 3
    assert upstream.drop_missed() == 0
    upstream.request(1)  # the turn is free again
    assert subscription.requests == [4, 1]


def test_drop_missed_leaves_the_demand_to_a_turn_in_progress() -> None:
    """drop_missed() takes nothing while a thread has the turn: that thread passes it on."""
    upstream = Upstream()
    subscription = Strict()
    dropped: list[int] = []

    def inside(depth: int) -> None:
        if len(subscription.requests) == 1:
            on_thread(lambda: upstream.request(3))
            on_thread(lambda: dropped.append(upstream.drop_missed()))

    subscription.inside = inside
    upstream.set_once(subscription)
    upstream.request(4)
    assert dropped == [0]
    assert subscription.requests == [4, 3]


# -- adversarial: many threads at once ------------------------------------------------------------


@pytest.mark.stress
def test_spec207_requests_from_many_threads_never_overlap_and_lose_nothing(
    switching: None,
) -> None:
    """Eight threads request 1 fifty times each, released together (20 rounds): no two
    requests overlap across threads, and the subscription is asked for exactly 400."""
    for _ in range(20):
        upstream = Upstream()
        subscription = Strict()
        upstream.set_once(subscription)
        race(*(_asking(upstream, 50) for _ in range(8)))
        assert subscription.overlaps == 0
        assert subscription.demand == 400


def _asking(upstream: Upstream, times: int) -> Callable[[], None]:
    """An action that requests 1, ``times`` times."""

    def ask() -> None:
        for _ in range(times):
            upstream.request(1)

    return ask


@pytest.mark.stress
@pytest.mark.parametrize("defer_nested", [False, True], ids=["nested", "deferred"])
def test_spec303_requests_from_on_next_and_from_other_threads_never_overlap(
    switching: None, defer_nested: bool
) -> None:
    """A synchronous publisher asks for more from inside each request (on_next requesting,
    nested up to 3 deep, or after each return with defer_nested) while four other threads
    request too (20 rounds): requests on different threads never overlap, and every unit
    asked for reaches the subscription."""
    for _ in range(20):
        _requests_nested_and_from_four_threads(defer_nested)


def _requests_nested_and_from_four_threads(defer_nested: bool) -> None:
    upstream = Upstream(defer_nested=defer_nested)
    subscription = Strict()
    nested = deepest = 0  # owned: only the thread whose turn it is runs on_next

    def on_next(depth: int) -> None:
        nonlocal nested, deepest
        deepest = max(deepest, depth)
        if depth < 3 and nested < 40:
            nested += 1
            upstream.request(1)

    subscription.inside = on_next
    upstream.set_once(subscription)
    race(*(_asking(upstream, 25) for _ in range(4)))
    assert subscription.overlaps == 0
    assert subscription.demand == 100 + nested
    assert deepest == (1 if defer_nested else 3)


@pytest.mark.stress
def test_spec305_requests_and_cancels_from_many_threads(switching: None) -> None:
    """Four threads request while two cancel, released together (50 rounds): no request
    overlaps another, the subscription is cancelled exactly once, no more is requested
    than was asked for, and nothing is requested once every call returned."""
    for _ in range(50):
        upstream = Upstream()
        subscription = Strict()
        upstream.set_once(subscription)
        race(*(_asking(upstream, 20) for _ in range(4)), upstream.cancel, upstream.cancel)
        assert subscription.overlaps == 0
        assert subscription.cancels == 1
        assert subscription.demand <= 80
        made = len(subscription.requests)
        upstream.request(1)
        assert len(subscription.requests) == made


@pytest.mark.stress
def test_replenish_from_many_consumers_refills_every_freed_slot(switching: None) -> None:
    """Four consumers each take 5 elements from a window of 2 and replenish after each,
    released together (300 rounds): requests never overlap, never more than the window is
    outstanding, and once every call returned the window is full again: no consumer's
    call for one more look was lost between the last due() and the end of a turn."""
    for _ in range(300):
        _four_consumers_replenishing(window=2, takes=5)


def _four_consumers_replenishing(window: int, takes: int) -> None:
    upstream = Upstream()
    subscription = Strict()
    lock = threading.Lock()  # the owner's
    outstanding = consumed = 0  # under lock
    overfull: list[int] = []

    def due() -> int:
        nonlocal outstanding
        with lock:
            n = window - outstanding
            outstanding += n
            if outstanding > window:
                overfull.append(outstanding)
        return n

    def consume() -> None:
        nonlocal outstanding, consumed
        for _ in range(takes):
            with lock:
                if outstanding:
                    outstanding -= 1
                    consumed += 1
            upstream.replenish(due)

    upstream.set_once(subscription)
    upstream.replenish(due)
    race(*(consume for _ in range(4)))
    assert subscription.overlaps == 0 and overfull == []
    assert subscription.demand == consumed + outstanding
    assert outstanding == window
