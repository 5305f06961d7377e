"""reactive_streams.BaseSubscriber: the hooks are called only in a protocol-correct order."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from reactive_streams import UNBOUNDED, BaseSubscriber, Subscription
from reactive_streams._subscription import EMPTY_SUBSCRIPTION
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import race


class Upstream:
    """A Subscription that records requests and cancels (thread-safe counts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[Any] = []
        self.cancels = 0

    def request(self, n: int) -> None:
        with self._lock:
            self.requests.append(n)

    def cancel(self) -> None:
        with self._lock:
            self.cancels += 1


class Hooks(BaseSubscriber[Any]):
    """Records every hook call; optional behaviour injected per test."""

    def __init__(self, initial: int = 0) -> None:
        super().__init__()
        self.initial = initial
        self.calls: list[tuple[str, Any]] = []
        self.raise_on_next: Exception | None = None
        self.raise_on_subscribe: Exception | None = None
        self.raise_on_error: Exception | None = None
        self.touch_subscription_when_done = False

    def hook_on_subscribe(self, subscription: Subscription) -> None:
        self.calls.append(("subscribe", subscription))
        if self.raise_on_subscribe is not None:
            raise self.raise_on_subscribe
        if self.initial:
            subscription.request(self.initial)

    def hook_on_next(self, element: Any) -> None:
        self.calls.append(("next", element))
        if self.raise_on_next is not None:
            raise self.raise_on_next

    def hook_on_error(self, error: Exception) -> None:
        self.calls.append(("error", error))
        if self.touch_subscription_when_done:
            self.request(1)
            self.cancel()
        if self.raise_on_error is not None:
            raise self.raise_on_error

    def hook_on_complete(self) -> None:
        self.calls.append(("complete", None))
        if self.touch_subscription_when_done:
            self.request(1)
            self.cancel()


def names(sub: Hooks) -> list[str]:
    """The hook names called, in order."""
    return [name for name, _ in sub.calls]


def test_default_hook_requests_unbounded() -> None:
    """By default hook_on_subscribe requests UNBOUNDED (as Reactor's BaseSubscriber does)."""
    upstream = Upstream()
    BaseSubscriber[int]().on_subscribe(upstream)
    assert upstream.requests == [UNBOUNDED]


def test_spec205_second_on_subscribe_is_cancelled() -> None:
    """§2.5: a second on_subscribe cancels that subscription; the first is kept untouched."""
    sub = Hooks(initial=1)
    first, second = Upstream(), Upstream()
    sub.on_subscribe(first)
    sub.on_subscribe(second)
    assert second.cancels == 1
    assert second.requests == []
    assert first.cancels == 0
    assert names(sub) == ["subscribe"]
    sub.request(2)
    assert first.requests == [1, 2]


def test_spec205_on_subscribe_after_cancel_is_cancelled() -> None:
    """A subscriber cancelled before it was subscribed cancels the subscription it then gets."""
    sub = Hooks(initial=1)
    sub.cancel()
    upstream = Upstream()
    sub.on_subscribe(upstream)
    assert upstream.cancels == 1
    assert upstream.requests == []
    assert names(sub) == []


def test_spec205_rejected_second_subscribe_cancels_the_first() -> None:
    """§2.5/§3.13: subscribed twice, to a one-shot publisher that rejects the second subscribe
    (on_subscribe(EMPTY_SUBSCRIPTION), then on_error): that error terminates the subscriber,
    and the first, still active upstream is cancelled (its generator closed), not dropped."""
    closed = threading.Event()

    def numbers() -> Any:
        try:
            yield from range(10)
        finally:
            closed.set()

    sub = Hooks(initial=2)
    publisher = from_iterable(numbers())
    publisher.subscribe(sub)
    assert [element for name, element in sub.calls if name == "next"] == [0, 1]
    publisher.subscribe(sub)  # §2.5 misuse: rejected, since a generator serves one (§1.9)
    assert names(sub) == ["subscribe", "next", "next", "error"]
    assert sub.is_disposed
    assert closed.is_set()


@pytest.mark.parametrize("terminal", ["complete", "error"])
def test_spec203_terminal_hooks_cannot_reach_the_subscription(terminal: str) -> None:
    """§2.3/§2.4: request() and cancel() from hook_on_complete / hook_on_error do nothing: the
    subscription was dropped before the hook ran."""
    sub = Hooks(initial=1)
    sub.touch_subscription_when_done = True
    upstream = Upstream()
    sub.on_subscribe(upstream)
    if terminal == "complete":
        sub.on_complete()
    else:
        sub.on_error(RuntimeError("boom"))
    assert upstream.requests == [1]
    assert upstream.cancels == 0
    assert sub.is_disposed


def test_spec204_subscription_counts_as_cancelled_after_terminal() -> None:
    """§2.4: after on_complete, request and cancel from outside never reach upstream, and later
    signals are ignored."""
    sub = Hooks(initial=1)
    upstream = Upstream()
    sub.on_subscribe(upstream)
    sub.on_complete()
    sub.request(5)
    sub.cancel()
    sub.on_next("late")
    sub.on_complete()
    assert upstream.requests == [1]
    assert upstream.cancels == 0
    assert names(sub) == ["subscribe", "complete"]


def test_spec208_on_next_after_cancel_is_ignored() -> None:
    """§2.8: elements in flight after cancel() are accepted and dropped, not passed to hooks."""
    sub = Hooks(initial=5)
    upstream = Upstream()
    sub.on_subscribe(upstream)
    sub.on_next(1)
    sub.cancel()
    sub.on_next(2)
    sub.on_next(3)
    assert names(sub) == ["subscribe", "next"]
    assert upstream.cancels == 1


def test_spec213_none_arguments_raise_type_error() -> None:
    """§2.13: on_subscribe(None), on_next(None), on_error(None) raise TypeError."""
    sub = Hooks()
    with pytest.raises(TypeError, match="§2.13"):
        sub.on_subscribe(None)  # type: ignore[arg-type]
    sub.on_subscribe(Upstream())
    with pytest.raises(TypeError, match="§2.13"):
        sub.on_next(None)
    with pytest.raises(TypeError, match="§2.13"):
        sub.on_error(None)  # type: ignore[arg-type]


def test_spec213_raising_hook_on_next_cancels_and_routes_to_hook_on_error() -> None:
    """§2.13: a raising hook_on_next cancels upstream, goes to hook_on_error once, and on_next
    itself returns normally; nothing reaches the hooks afterwards."""
    boom = ValueError("hook bug")
    sub = Hooks(initial=3)
    sub.raise_on_next = boom
    upstream = Upstream()
    sub.on_subscribe(upstream)
    sub.on_next(1)  # returns normally
    assert upstream.cancels == 1
    assert sub.calls[-1] == ("error", boom)
    sub.on_next(2)
    sub.on_complete()
    sub.on_error(RuntimeError("late"))
    assert names(sub) == ["subscribe", "next", "error"]


def test_spec213_raising_hook_on_subscribe_cancels_and_routes_to_hook_on_error() -> None:
    """§2.13: a raising hook_on_subscribe cancels upstream and goes to hook_on_error."""
    boom = RuntimeError("setup failed")
    sub = Hooks()
    sub.raise_on_subscribe = boom
    upstream = Upstream()
    sub.on_subscribe(upstream)  # returns normally
    assert upstream.cancels == 1
    assert sub.calls[-1] == ("error", boom)
    assert sub.is_disposed


def test_spec213_raising_hook_on_error_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """§2.13: a raising hook_on_error is reported to the "reactive_streams" logger, not raised."""
    oops = RuntimeError("hook_on_error bug")
    sub = Hooks()
    sub.raise_on_error = oops
    sub.on_subscribe(Upstream())
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.on_error(ValueError("upstream failed"))  # returns normally
    records = [r for r in caplog.records if r.name == "reactive_streams"]
    assert len(records) == 1
    assert records[0].getMessage().startswith("§2.13: ")
    assert records[0].exc_info is not None and records[0].exc_info[1] is oops


@pytest.mark.parametrize(("end", "rule"), [("complete", "1.7"), ("cancel", "1.8")])
def test_a_late_on_error_is_reported_naming_its_rule_never_delivered(
    caplog: pytest.LogCaptureFixture, end: str, rule: str
) -> None:
    """An on_error after a terminal signal breaks §1.7; after cancel it is legal (it raced
    the cancel, §1.8). Either way it is kept from the hooks and logged, naming that rule."""
    sub = Hooks()
    sub.on_subscribe(Upstream())
    if end == "complete":
        sub.on_complete()
    else:
        sub.cancel()
    late = RuntimeError("late")
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.on_error(late)
    assert names(sub) == ["subscribe", "complete"][: 2 if end == "complete" else 1]
    reported = [r for r in caplog.records if r.exc_info is not None and r.exc_info[1] is late]
    assert len(reported) == 1 and reported[0].getMessage().startswith(f"§{rule}: ")


def test_default_hook_on_error_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The default hook_on_error reports the error to the "reactive_streams" logger."""
    sub: BaseSubscriber[int] = BaseSubscriber()
    sub.on_subscribe(Upstream())
    boom = RuntimeError("unhandled")
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.on_error(boom)
    assert any(r.exc_info is not None and r.exc_info[1] is boom for r in caplog.records)


@pytest.mark.stress
def test_spec305_cancel_from_many_threads_cancels_upstream_once() -> None:
    """§3.5/§3.7/§2.6: eight threads released together call cancel (200 rounds): each call
    returns without raising, upstream is cancelled exactly once, and the subscriber is
    disposed. What this can catch on a GIL build is a cancel that is not idempotent under
    concurrent calls (one that does not swap the upstream out, say); it cannot catch the
    removal of cancel's lock, because there the two-field swap happens to run without a
    thread switch in between. Only on a free-threaded build (PEP 703) can it catch that."""
    for _ in range(200):
        sub = Hooks(initial=1)
        upstream = Upstream()
        sub.on_subscribe(upstream)
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def racer(
            gate: threading.Barrier = barrier,
            target: Hooks = sub,
            failed: list[BaseException] = errors,
        ) -> None:
            try:
                gate.wait(5)
                target.cancel()
            except BaseException as exc:  # asserted on the test thread
                failed.append(exc)

        threads = [threading.Thread(target=racer) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
        assert not any(thread.is_alive() for thread in threads)
        assert errors == []
        assert upstream.cancels == 1
        assert sub.is_disposed


def test_request_one_at_a_time_from_hook_on_next_end_to_end() -> None:
    """A subclass requesting one at a time from hook_on_next receives a whole publisher."""

    class OneByOne(BaseSubscriber[int]):
        def __init__(self) -> None:
            super().__init__()
            self.items: list[int] = []
            self.done = False

        def hook_on_subscribe(self, subscription: Subscription) -> None:
            subscription.request(1)

        def hook_on_next(self, element: int) -> None:
            self.items.append(element)
            self.request(1)

        def hook_on_complete(self) -> None:
            self.done = True

    sub = OneByOne()
    from_iterable(range(10_000)).subscribe(sub)
    assert sub.items == list(range(10_000))
    assert sub.done


class _SerialOnly:
    """A Subscription that trusts §2.7: ``request`` is an unlocked read-modify-write, slow
    enough for a second caller to overlap it; overlaps and the demand are recorded."""

    def __init__(self) -> None:
        self.demand = 0
        self.inside = 0
        self.overlaps = 0
        self.cancels = 0

    def request(self, n: int) -> None:
        self.inside += 1
        if self.inside > 1:
            self.overlaps += 1
        demand = self.demand
        threading.Event().wait(0.002)  # another request() may start now
        self.demand = demand + n
        self.inside -= 1

    def cancel(self) -> None:
        self.cancels += 1


def test_spec207_requests_from_many_threads_reach_the_subscription_one_at_a_time() -> None:
    """§2.7: BaseSubscriber lets users call request() from anywhere, so it serialises the
    calls: none overlaps, and no demand is lost."""
    sub = Hooks()
    upstream = _SerialOnly()
    sub.on_subscribe(upstream)

    def ask() -> None:
        for _ in range(5):
            sub.request(1)

    race(ask, ask, ask, ask)
    assert upstream.overlaps == 0
    assert upstream.demand == 20


def test_spec303_a_request_from_inside_a_request_goes_straight_to_the_subscription() -> None:
    """A synchronous publisher delivers inside request(); the subscriber asks again from
    hook_on_next, on the same thread: that is serial (§2.7), so it is passed on at once, not
    held for another thread's turn (the publisher bounds the recursion, §3.3)."""
    depths: list[int] = []
    inside = 0

    class Sync:
        def request(self, n: int) -> None:
            nonlocal inside
            inside += 1
            depths.append(inside)
            if len(depths) < 5:
                sub.on_next(len(depths))
            inside -= 1

        def cancel(self) -> None:
            pass

    class Again(Hooks):
        def hook_on_next(self, element: Any) -> None:
            super().hook_on_next(element)
            self.request(1)

    sub = Again(initial=1)
    sub.on_subscribe(Sync())
    assert depths == [1, 2, 3, 4, 5]
    assert [c[1] for c in sub.calls if c[0] == "next"] == [1, 2, 3, 4]


def test_demand_requested_before_on_subscribe_is_passed_on_after_the_hook() -> None:
    sub = Hooks(initial=2)
    sub.request(3)
    sub.request(0)  # passed on as it is: the publisher answers it with on_error (§3.9)
    upstream = Upstream()
    sub.on_subscribe(upstream)
    assert upstream.requests == [2, 3, 0]


@pytest.mark.parametrize("bad", [True, None, "3", 1.5])
def test_spec309_an_invalid_request_before_on_subscribe_is_passed_on_as_it_is(bad: Any) -> None:
    """§3.9: request(True), request(None)... made before on_subscribe (or while another
    thread's request is passed on) are kept as invalid and passed on as they came, for the
    publisher's on_error: True was counted as a demand of 1, None raised TypeError."""
    sub = Hooks(initial=2)
    sub.request(bad)  # returns: deferred
    upstream = Upstream()
    sub.on_subscribe(upstream)
    assert len(upstream.requests) == 2 and upstream.requests[0] == 2
    assert upstream.requests[1] is bad  # itself: not a demand of 1 (True == 1), nor 0 + 1.5


def test_spec207_no_request_reaches_the_subscription_between_on_subscribe_and_its_hook() -> None:
    """§2.7: another thread's request() arriving as on_subscribe has just stored the upstream
    waits for hook_on_subscribe's requests, instead of reaching the upstream first (and then
    overlapping the hook's): the requester is claimed with the upstream, in one step."""

    class GapLock:
        """The subscriber's lock; once on_subscribe's lock section that stored the upstream
        is over, another thread's request() runs to its end before on_subscribe goes on."""

        def __init__(self, sub: Hooks) -> None:
            self.lock = threading.Lock()
            self.sub = sub
            self.other: threading.Thread | None = None

        def __enter__(self) -> None:
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()
            if self.other is None and self.sub._upstream.subscription is not None:
                self.other = threading.Thread(target=self.sub.request, args=(7,))
                self.other.start()
                self.other.join(5)

    seen_at_hook: list[Any] = []

    class Recording(Hooks):
        def hook_on_subscribe(self, subscription: Subscription) -> None:
            seen_at_hook.extend(upstream.requests)
            super().hook_on_subscribe(subscription)

    sub = Recording(initial=2)
    sub._upstream._lock = GapLock(sub)  # type: ignore[assignment]
    upstream = Upstream()
    sub.on_subscribe(upstream)
    assert seen_at_hook == []  # nothing reached the upstream before the hook ran
    assert upstream.requests == [2, 7]  # the hook's first, then the other thread's


def test_spec312_cancel_reaches_the_subscription_while_a_request_is_in_progress() -> None:
    """cancel() is not queued behind a request() that emits synchronously for ever."""
    entered = threading.Event()
    cancelled = threading.Event()

    class Endless:
        def request(self, n: int) -> None:
            entered.set()
            assert cancelled.wait(10), "cancel() waited for request() to return"

        def cancel(self) -> None:
            cancelled.set()

    sub = Hooks()
    sub.on_subscribe(Endless())
    requester = threading.Thread(target=sub.request, args=(1,))
    requester.start()
    assert entered.wait(10)
    sub.cancel()
    assert cancelled.is_set()
    requester.join(10)
    assert not requester.is_alive()


def test_spec203_first_upstream_completing_after_a_rejection_is_not_cancelled() -> None:
    """A second publisher rejects us (EMPTY_SUBSCRIPTION, then on_error), but the first
    upstream's on_complete comes first: cancelling it from inside its own on_complete would
    break §2.3; its subscription is simply dropped."""
    sub = Hooks()
    first = Upstream()
    sub.on_subscribe(first)
    sub.on_subscribe(EMPTY_SUBSCRIPTION)  # the rejection's on_error is on its way
    sub.on_complete()  # ... but the first upstream completes first
    assert first.cancels == 0
    assert sub.calls[-1] == ("complete", None)


def test_spec315_a_raising_cancel_is_reported_and_the_hook_error_still_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A subscription whose cancel() raises breaks §3.15; the subscriber reports it, still
    routes its own hook's error to hook_on_error, and on_next returns normally (§2.13)."""

    class Raising(Upstream):
        def cancel(self) -> None:
            super().cancel()
            raise RuntimeError("cancel broke")

    sub = Hooks(initial=1)
    bug = ValueError("user bug")
    sub.raise_on_next = bug
    sub.on_subscribe(Raising())
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.on_next(1)  # returns normally
        sub.on_subscribe(Raising())  # a duplicate: cancelled, and that raises too
    assert ("error", bug) in sub.calls
    reports = [r.getMessage() for r in caplog.records if r.name == "reactive_streams"]
    assert len(reports) == 2 and all(m.startswith("§3.15: cancel() raised") for m in reports)


class _RaisingCancel(Upstream):
    def cancel(self) -> None:
        super().cancel()
        raise RuntimeError("cancel broke")


def _reports(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "reactive_streams"]


def test_spec315_a_raising_cancel_from_cancel_is_reported_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """cancel() may be called from a publisher's signal: a broken cancel is reported."""
    sub = Hooks(initial=1)
    upstream = _RaisingCancel()
    sub.on_subscribe(upstream)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.cancel()  # returns normally
    assert upstream.cancels == 1 and sub.is_disposed
    reports = _reports(caplog)
    assert len(reports) == 1 and reports[0].startswith("§3.15: cancel() raised")


def test_spec315_a_raising_cancel_of_the_first_upstream_after_a_rejection_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The rejecting publisher's on_error cancels the first upstream: if that raises, it is
    reported, and the error still reaches hook_on_error."""
    sub = Hooks(initial=1)
    first = _RaisingCancel()
    sub.on_subscribe(first)
    sub.on_subscribe(EMPTY_SUBSCRIPTION)
    rejected = RuntimeError("rejected")
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.on_error(rejected)  # returns normally
    assert first.cancels == 1
    assert sub.calls[-1] == ("error", rejected)
    reports = _reports(caplog)
    assert len(reports) == 1 and reports[0].startswith("§3.15: cancel() raised")


def test_spec316_after_a_raising_request_later_requests_still_reach_the_subscription() -> None:
    """A request() that raises (breaking §3.16) is heard by its caller; it does not leave
    the subscriber believing a request is still in progress (which would swallow all later
    demand)."""

    class FailsOnce(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            if len(self.requests) == 1:
                raise RuntimeError("request broke")

    sub = Hooks()
    upstream = FailsOnce()
    sub.on_subscribe(upstream)
    with pytest.raises(RuntimeError, match="request broke"):
        sub.request(1)
    sub.request(2)
    assert upstream.requests == [1, 2]
