"""The checker behind checked(): each kind of violation is reported, by rule, in both modes
(raised and torn down, or logged and passed on), and legal interleavings are not."""

from __future__ import annotations

import gc
import logging
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from checked_helpers import MODES, Gated, HandPublisher, Upstream, assert_torn_down, offend, wire

from reactive_streams import (
    UNBOUNDED,
    IllegalRequestError,
    OverflowViolation,
    ProtocolViolation,
    Subscription,
    checked,
)
from reactive_streams.testing import RecordingSubscriber, race

# -- §1.1 and §3.17: demand, counted exactly and saturating -------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_spec101_on_next_beyond_demand_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§1.1: a third on_next after request(2) is reported, naming rule 1.1."""
    publisher, subscriber = wire(mode, request=2)
    publisher.down.on_next(1)
    publisher.down.on_next(2)
    violation = offend(mode, "1.1", caplog, lambda: publisher.down.on_next(3))
    assert isinstance(violation, OverflowViolation)
    if mode == "raise":
        assert subscriber.elements == [1, 2]
        assert_torn_down(publisher, subscriber, violation)
    else:
        assert subscriber.elements == [1, 2, 3]  # passed on unchanged
        assert publisher.upstream.cancels == 0


@pytest.mark.parametrize("mode", MODES)
def test_spec101_on_next_with_no_request_at_all_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§1.1: an on_next before any request is reported."""
    publisher, subscriber = wire(mode)
    offend(mode, "1.1", caplog, lambda: publisher.down.on_next("eager"))
    assert subscriber.elements == ([] if mode == "raise" else ["eager"])


def test_spec317_demand_saturates_at_unbounded() -> None:
    """§3.17: requests adding up past UNBOUNDED leave the demand at exactly UNBOUNDED
    ("effectively unbounded"), and many elements pass without a violation. Through signals
    alone a saturated count cannot be told from one just above UNBOUNDED (that would take
    2**63 elements), so the count is read where the checker shows it: its repr."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.request(UNBOUNDED - 1)
    subscriber.request(5)
    subscriber.request(UNBOUNDED)
    assert f"demand={UNBOUNDED} " in repr(subscriber.subscription)
    for i in range(10_000):
        publisher.down.on_next(i)
    assert f"demand={UNBOUNDED} " in repr(subscriber.subscription)  # never counted down
    publisher.down.on_complete()
    assert found == []
    assert subscriber.completed


def test_spec101_demand_just_below_unbounded_is_still_counted() -> None:
    """§1.1: demand below UNBOUNDED is counted exactly: one element too many is reported,
    both for small demand and for demand one short of UNBOUNDED (which is not unbounded)."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.request(1)
    subscriber.request(2)
    for i in range(4):
        publisher.down.on_next(i)
    assert [v.rule for v in found] == ["1.1"]

    found.clear()
    publisher = HandPublisher()
    subscriber = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.request(UNBOUNDED - 2)
    subscriber.request(1)  # UNBOUNDED - 1 in all: three elements leave 2**63 - 4 owed
    for i in range(3):
        publisher.down.on_next(i)
    assert found == []
    # counted down, not treated as unbounded (the checker's repr shows its count)
    assert f"demand={UNBOUNDED - 4} " in repr(subscriber.subscription)


def test_spec101_a_request_racing_a_cancel_from_another_thread_is_counted() -> None:
    """cancel() on one thread, request(1) on another: the checker orders them at its lock,
    but the publisher may see the request first and rightly emit for it (its cancel takes
    effect "eventually", §3.12). That element is not a §1.1 violation; a request made after
    cancel() returned on the same thread is owed nothing (§3.6), and is not counted."""
    found: list[ProtocolViolation] = []
    cancelling = threading.Event()
    release = threading.Event()

    class SlowCancel(Upstream):
        def cancel(self) -> None:
            cancelling.set()
            release.wait(5)  # the publisher has not seen the cancel yet
            super().cancel()

    publisher = HandPublisher(SlowCancel())
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    canceller = threading.Thread(target=subscriber.cancel)
    canceller.start()
    assert cancelling.wait(5)
    subscriber.request(1)  # reaches the publisher before the cancel does
    publisher.down.on_next("owed")
    release.set()
    canceller.join(5)
    assert found == []


def test_spec306_a_request_after_cancel_on_the_same_thread_is_not_counted() -> None:
    """§3.6: request(1) after cancel() returned on this thread is owed nothing (§1.1)."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.cancel()
    subscriber.request(1)  # a no-op for the publisher (§3.6)
    publisher.down.on_next("after cancel")
    assert [v.rule for v in found] == ["1.1"]


def test_spec306_the_first_cancel_keeps_its_thread_after_another_cancels_too() -> None:
    """cancel() here, then again on another thread: a request made here afterwards is still
    owed nothing (this thread's program order puts it after its own cancel)."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.cancel()
    other = threading.Thread(target=subscriber.cancel)
    other.start()
    other.join(5)
    subscriber.request(1)
    publisher.down.on_next("after cancel")
    assert [v.rule for v in found] == ["1.1"]


def test_spec306_a_deferring_cancel_through_the_checker_counts_as_a_cancel() -> None:
    """§3.6: publish_on's deferring cancel passed through checked() counts as a cancel: a
    request made after it on the same thread is owed nothing, so an element for it is
    reported (§1.1)."""
    found: list[ProtocolViolation] = []
    deferred: list[bool] = []

    class Deferring(Upstream):
        def cancel_deferring_cleanup(self) -> None:
            deferred.append(True)

    publisher = HandPublisher(Deferring())
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscription: Any = subscriber.subscription
    subscription.cancel_deferring_cleanup()
    subscriber.request(1)
    publisher.down.on_next("after")
    assert deferred == [True] and [v.rule for v in found] == ["1.1"]


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Thread switches at every chance (sys.setswitchinterval(1e-6)), restored afterwards."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.stress
@pytest.mark.parametrize("switch", ["default", "often"])
def test_spec101_violations_racing_on_two_threads_tear_down_once(
    switch: str, request: pytest.FixtureRequest
) -> None:
    """Raise mode: two unrequested on_next released at once on two threads; the first seen
    raises its violation (the other raises one too, or is dropped once the stream is torn
    down); the Subscriber gets on_error exactly once, serially, and the upstream is
    cancelled once (200 rounds)."""
    if switch == "often":
        request.getfixturevalue("switch_often")
    for _ in range(200):
        publisher, subscriber = wire("raise")
        raised: list[BaseException] = []

        def offend_here(
            x: int, publisher: HandPublisher = publisher, raised: list[BaseException] = raised
        ) -> None:
            try:
                publisher.down.on_next(x)
            except ProtocolViolation as violation:
                raised.append(violation)

        race(lambda: offend_here(1), lambda: offend_here(2))
        assert 1 <= len(raised) <= 2  # the later one may find the stream torn down: dropped
        assert isinstance(subscriber.error, ProtocolViolation)
        assert subscriber.error in raised
        assert subscriber.elements == []
        assert publisher.upstream.cancels == 1
        subscriber.assert_no_violations()


# -- §1.3: overlapping signals, and nesting through request (§3.2, §3.3) ------------------------


@pytest.mark.parametrize("mode", MODES)
def test_spec103_overlapping_signals_from_two_threads_are_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§1.3: on_next from a second thread while the first is still inside on_next is reported;
    in raise mode on_error(violation) waits until the first signal returns, so it stays serial."""
    publisher, subscriber = wire(mode, request=2)
    inside = threading.Event()
    release = threading.Event()
    held: list[tuple[bool, Exception | None]] = []  # asserted here, not in the other thread

    def hold_first(element: Any) -> None:
        if element == 1:
            inside.set()
            held.append((release.wait(5), subscriber.error))

    subscriber.on_next_hook = hold_first
    first = threading.Thread(target=publisher.down.on_next, args=(1,))
    first.start()
    assert inside.wait(5)
    try:
        violation = offend(mode, "1.3", caplog, lambda: publisher.down.on_next(2))
    finally:
        release.set()
        first.join(5)
    assert not first.is_alive()
    assert "another thread" in str(violation)  # the cross-thread overlap, not a nested one
    assert held == [(True, None)]  # the pending on_error did not overlap the first signal
    if mode == "raise":
        assert subscriber.elements == [1]
        assert_torn_down(publisher, subscriber, violation)
    else:
        assert sorted(subscriber.elements) == [1, 2]
        assert any(v.startswith("§1.3") for v in subscriber.violations)  # passed on as it came


@pytest.mark.parametrize("mode", MODES)
def test_spec103_a_signal_nested_on_the_same_thread_without_request_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§1.3: on_next(2) signalled from inside on_next(1) on the same thread, not through a
    request (an unserialized Subject fed from its own subscriber) overlaps it."""
    publisher, subscriber = wire(mode, request=5)
    seen: list[ProtocolViolation] = []

    def reenter(element: Any) -> None:
        if element == 1:
            try:
                publisher.down.on_next(2)
            except ProtocolViolation as violation:  # raise mode: raised to the offender
                seen.append(violation)

    subscriber.on_next_hook = reenter
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        publisher.down.on_next(1)
    if mode == "raise":
        assert [v.rule for v in seen] == ["1.3"]
        assert subscriber.elements == [1]
    else:
        logged = [r.getMessage() for r in caplog.records if r.name == "reactive_streams"]
        assert len(logged) == 1 and "§1.3: on_next was signalled from inside" in logged[0]
        assert subscriber.elements == [1, 2]  # passed on as it came


def test_spec103_another_thread_overlapping_a_signal_nested_through_request_is_reported() -> None:
    """§1.3: thread A is inside on_next and, from it, inside request(); an on_next from thread
    B meanwhile overlaps A's signal. Nesting through request (§3.3) is allowed on A's own
    thread only: B's signal is reported as an overlap from another thread."""
    found: list[ProtocolViolation] = []
    inside = threading.Event()
    release = threading.Event()

    class Holding(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            if len(self.requests) == 2:  # the request made from inside on_next(0)
                inside.set()
                release.wait(5)

    publisher = HandPublisher(Holding())
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(1)
    subscriber.on_next_hook = lambda x: subscriber.request(1) if x == 0 else None
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    first = threading.Thread(target=publisher.down.on_next, args=(0,))
    first.start()
    try:
        assert inside.wait(5)
        other = threading.Thread(target=publisher.down.on_next, args=(1,))
        other.start()
        other.join(5)
        assert not other.is_alive()
    finally:
        release.set()
        first.join(5)
    assert not first.is_alive()
    assert [v.rule for v in found] == ["1.3"]
    assert "another thread" in str(found[0])


def test_spec303_signals_nested_through_request_are_allowed() -> None:
    """on_next -> request -> on_next on one thread is the recursion §3.2/§3.3 allow (bounded
    by the publisher): no violation, whatever the depth."""
    found: list[ProtocolViolation] = []

    class Synchronous(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            publisher.down.on_next(len(subscriber.elements))  # emits inside request

    publisher = HandPublisher(Synchronous())
    subscriber: RecordingSubscriber[int] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.on_next_hook = lambda x: subscriber.request(1) if x < 5 else None
    subscriber.request(1)
    assert subscriber.elements == [0, 1, 2, 3, 4, 5]
    assert found == []


def test_spec103_a_signal_re_entered_inside_one_a_request_delivered_is_reported() -> None:
    """§1.3: on_next(a) -> request -> on_next(b) is allowed, but the publisher re-entering
    on_next(c) from inside on_next(b) (not through a request) overlaps b: a request in
    progress lower on the stack allows only the signals it delivers itself."""
    found: list[ProtocolViolation] = []

    class Synchronous(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            if len(self.requests) == 2:  # the request made from inside on_next("a")
                publisher.down.on_next("b")

    publisher = HandPublisher(Synchronous())
    subscriber: RecordingSubscriber[str] = RecordingSubscriber(3)

    def hook(x: str) -> None:
        if x == "a":
            subscriber.request(1)
        elif x == "b":
            publisher.down.on_next("c")  # an unserialized re-entry

    subscriber.on_next_hook = hook
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    publisher.down.on_next("a")
    assert [v.rule for v in found] == ["1.3"]
    assert "from inside another signal" in str(found[0])


def _log_mode(request: int) -> tuple[HandPublisher, Gated, list[str]]:
    found: list[str] = []
    publisher = HandPublisher()
    subscriber = Gated()
    checked(publisher, on_violation=lambda v: found.append(v.rule)).subscribe(subscriber)  # type: ignore[arg-type]
    assert subscriber.subscription is not None
    subscriber.subscription.request(request)
    return publisher, subscriber, found


def test_spec103_log_mode_keeps_tracking_a_signal_it_passed_on_overlapping() -> None:
    """An overlapping on_next that log mode passes on is still a signal in progress: one
    that overlaps it is reported too, even after the signal it first overlapped returned."""
    publisher, subscriber, found = _log_mode(10)
    first = subscriber.send(publisher, 1)
    second = subscriber.send(publisher, 2)  # overlaps 1
    subscriber.open(1)
    first.join(5)
    third = subscriber.send(publisher, 3)  # 1 is done, but 2 is still inside
    subscriber.open(2)
    subscriber.open(3)
    second.join(5)
    third.join(5)
    assert found == ["1.3", "1.3"]
    subscriber.open(4)
    publisher.down.on_next(4)  # everything has returned: no overlap now
    assert found == ["1.3", "1.3"]


def test_spec101_log_mode_counts_an_overlapping_element_against_demand() -> None:
    """The element passed on despite its overlap used demand up: the third element for a
    request(2) is reported as §1.1."""
    publisher, subscriber, found = _log_mode(2)
    first = subscriber.send(publisher, "a")
    second = subscriber.send(publisher, "b")  # overlaps "a"
    subscriber.open("a")
    subscriber.open("b")
    first.join(5)
    second.join(5)
    subscriber.open("c")
    publisher.down.on_next("c")
    assert found == ["1.3", "1.1"]


class _Nesting(Gated):
    """``on_next("b")`` first signals ``on_next("b2")`` itself, nested on its own thread."""

    def __init__(self) -> None:
        super().__init__()
        self.publisher: HandPublisher | None = None

    def on_next(self, element: Any) -> None:
        if element == "b":
            assert self.publisher is not None
            self.publisher.down.on_next("b2")
        super().on_next(element)


def test_spec103_log_mode_counts_the_depth_of_an_overlapping_signal() -> None:
    """An overlapping signal with another nested in it is still in progress once the nested
    one returns: a third thread overlapping it then is reported too."""
    found: list[str] = []
    publisher = HandPublisher()
    subscriber = _Nesting()
    subscriber.publisher = publisher
    checked(publisher, on_violation=lambda v: found.append(v.rule)).subscribe(subscriber)  # type: ignore[arg-type]
    assert subscriber.subscription is not None
    subscriber.subscription.request(10)
    first = subscriber.send(publisher, "a")
    subscriber.open("b2")
    second = subscriber.send(publisher, "b")  # overlaps "a", and so does "b2" inside it
    assert found == ["1.3", "1.3"]
    subscriber.open("a")
    first.join(5)
    third = subscriber.send(publisher, "c")  # "a" is done, "b" is not
    subscriber.open("b")
    subscriber.open("c")
    second.join(5)
    third.join(5)
    assert found == ["1.3", "1.3", "1.3"]
    subscriber.open("d")
    publisher.down.on_next("d")  # everything has returned: no overlap now
    assert found == ["1.3", "1.3", "1.3"]


# -- §1.7, §1.9, §2.12: the order of signals ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("on_complete", "on_next"),
        ("on_complete", "on_complete"),
        ("on_error", "on_complete"),
        ("on_complete", "on_error"),
    ],
)
def test_spec107_signal_after_terminal_is_reported(
    mode: str, first: str, then: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§1.7: any signal after on_complete / on_error is reported."""
    publisher, subscriber = wire(mode, request=5)
    args: dict[str, tuple[Any, ...]] = {
        "on_next": (1,),
        "on_complete": (),
        "on_error": (RuntimeError("late"),),
    }
    getattr(publisher.down, first)(*args[first])
    assert subscriber.is_terminated
    terminal = (subscriber.completed, subscriber.error)
    offend(mode, "1.7", caplog, lambda: getattr(publisher.down, then)(*args[then]))
    if mode == "raise":
        assert (subscriber.completed, subscriber.error) == terminal  # nothing more delivered
        assert publisher.upstream.cancels == 0  # §1.6: already cancelled by the terminal
        subscriber.assert_no_violations()
    else:
        assert any(v.startswith("§1.7") for v in subscriber.violations)


def test_spec107_on_subscribe_after_a_terminal_signal_is_reported() -> None:
    """§1.7 (reporting mode): on_complete before on_subscribe is reported (§1.9), and the
    on_subscribe that follows it is reported too, as a signal after a terminal one (§1.7)."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher(send_on_subscribe=False)
    subscriber: RecordingSubscriber[int] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    publisher.down.on_complete()
    publisher.down.on_subscribe(Upstream())
    assert [v.rule for v in found] == ["1.9", "1.7"]
    assert str(found[1]).startswith("§1.7: on_subscribe after a terminal signal")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("signal", ["on_next", "on_error", "on_complete"])
def test_spec109_signal_before_on_subscribe_is_reported(
    mode: str, signal: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§1.9: on_next / on_error / on_complete before on_subscribe is reported."""
    publisher, subscriber = wire(mode, send_on_subscribe=False)
    args: dict[str, tuple[Any, ...]] = {
        "on_next": (1,),
        "on_complete": (),
        "on_error": (RuntimeError("early"),),
    }
    violation = offend(mode, "1.9", caplog, lambda: getattr(publisher.down, signal)(*args[signal]))
    if mode == "raise":
        # The Subscriber is told properly: on_subscribe first, then on_error (§1.9).
        assert subscriber.subscribe_count == 1
        assert subscriber.error is violation
        subscriber.assert_no_violations()
        late = Upstream()
        publisher.down.on_subscribe(late)  # the real on_subscribe, too late: refused
        assert late.cancels == 1
        assert subscriber.subscribe_count == 1
    else:
        assert any(v.startswith("§1.9") for v in subscriber.violations)


@pytest.mark.parametrize("mode", MODES)
def test_spec212_second_on_subscribe_is_reported_and_cancelled(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§2.12/§2.5: a second on_subscribe is reported and that extra subscription cancelled."""
    publisher, subscriber = wire(mode, request=1)
    extra = Upstream()
    violation = offend(mode, "2.12", caplog, lambda: publisher.down.on_subscribe(extra))
    assert extra.cancels == 1
    assert extra.requests == []
    assert subscriber.subscribe_count == 1  # never passed on: the Subscriber has its one
    if mode == "raise":
        assert_torn_down(publisher, subscriber, violation)
    else:
        assert publisher.upstream.cancels == 0


# -- §2.3, §2.13, §3.13: the Subscriber's side --------------------------------------------------


class RequestsOnComplete(RecordingSubscriber[Any]):
    """Breaks §2.3: requests more from inside on_complete."""

    def on_complete(self) -> None:
        super().on_complete()
        assert self.subscription is not None
        self.subscription.request(1)


@pytest.mark.parametrize("mode", MODES)
def test_spec203_request_from_on_complete_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§2.3: a Subscriber calling request() inside on_complete is reported."""
    publisher = HandPublisher()
    subscriber = RequestsOnComplete()
    checked(publisher, on_violation=mode).subscribe(subscriber)  # type: ignore[arg-type]
    offend(mode, "2.3", caplog, publisher.down.on_complete)
    assert subscriber.completed
    assert publisher.upstream.requests == ([] if mode == "raise" else [1])


def test_spec203_an_overlapping_terminal_in_log_mode_leaves_no_false_2_3_behind() -> None:
    """Reporting mode: on_complete overlapping an on_next on another thread is reported (§1.3)
    and passed on; a later request() from the thread that signalled it, long after its
    on_complete returned, is not mistaken for a call from inside on_complete (§2.3)."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(2)
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    inside = threading.Event()
    release = threading.Event()

    def hold(element: int) -> None:
        inside.set()
        release.wait(5)

    subscriber.on_next_hook = hold
    first = threading.Thread(target=publisher.down.on_next, args=(1,))
    first.start()
    try:
        assert inside.wait(5)
        publisher.down.on_complete()
    finally:
        release.set()
        first.join(5)
    assert not first.is_alive()
    assert [v.rule for v in found] == ["1.3"]
    subscriber.request(1)  # on this thread, after its on_complete returned
    assert [v.rule for v in found] == ["1.3"]


@pytest.mark.parametrize("mode", MODES)
def test_spec213_none_element_is_reported_as_type_error(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§2.13: on_next(None) is reported; the caller gets a TypeError either way."""
    publisher, subscriber = wire(mode, request=1)
    if mode == "raise":
        violation = offend(mode, "2.13", caplog, lambda: publisher.down.on_next(None))
        assert isinstance(violation, TypeError)
        assert_torn_down(publisher, subscriber, violation)
    else:
        # passed on as it came; the Subscriber raises TypeError (§2.13)
        offend(mode, "2.13", caplog, lambda: publisher.down.on_next(None), passes=TypeError)


def test_spec213_a_subscriber_raising_inside_a_synchronous_request_is_named() -> None:
    """A Subscriber whose on_next raises, under a publisher that emits inside request(),
    makes request() raise: the checker names the Subscriber's fault (§2.13), not a
    Subscription that raises (§3.16); and on_subscribe raising inside subscribe() is
    §2.13 too, not a publisher whose subscribe raises (§1.9)."""
    found: list[ProtocolViolation] = []

    class Synchronous(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            publisher.down.on_next("x")

    publisher = HandPublisher(Synchronous())
    subscriber: RecordingSubscriber[str] = RecordingSubscriber()

    def fail(_: str) -> None:
        raise ValueError("subscriber bug")

    subscriber.on_next_hook = fail
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="subscriber bug"):
        subscriber.request(1)
    assert [v.rule for v in found] == ["2.13"]

    class FailsOnSubscribe(RecordingSubscriber[Any]):
        def on_subscribe(self, subscription: Subscription) -> None:
            raise ValueError("on_subscribe bug")

    found.clear()
    with pytest.raises(ValueError, match="on_subscribe bug"):
        checked(HandPublisher(), on_violation=found.append).subscribe(  # type: ignore[arg-type]
            FailsOnSubscribe()
        )
    assert [v.rule for v in found] == ["2.13"]


def test_spec213_another_thread_s_raising_subscriber_does_not_blur_the_naming() -> None:
    """The Subscriber's exception from a signal inside request() is named §2.13 on its thread,
    even when, before request() unwinds, the same Subscriber raises from a signal on another
    thread: each thread's last exception is kept apart."""
    found: list[ProtocolViolation] = []

    class Synchronous(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            try:
                publisher.down.on_next("here")
            finally:  # the signal is over: another thread's signal is legal now
                other = threading.Thread(target=signal_elsewhere)
                other.start()
                other.join(5)

    def signal_elsewhere() -> None:
        with pytest.raises(ValueError, match="there"):
            publisher.down.on_next("there")

    def fail(element: str) -> None:
        raise ValueError(element)

    publisher = HandPublisher(Synchronous())
    subscriber: RecordingSubscriber[str] = RecordingSubscriber()
    subscriber.on_next_hook = fail
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="here"):
        subscriber.request(2)
    assert [v.rule for v in found] == ["2.13"]
    assert "'here'" in str(found[0])


def test_spec313_raise_mode_lets_go_of_the_subscriber_after_a_terminal_signal() -> None:
    """§3.13: once the stream is over, the checked subscription (which its publisher may
    keep referencing) drops its reference to the Subscriber, so the Subscriber can be freed."""
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(1)
    checked(publisher).subscribe(subscriber)  # type: ignore[arg-type]
    ref = weakref.ref(subscriber)
    publisher.down.on_complete()
    del subscriber
    gc.collect()
    assert ref() is None  # the publisher still holds the checked subscription


# -- §3.9: invalid requests are answered with on_error ------------------------------------------


class CompletesOnBadRequest(Upstream):
    """A synchronous publisher's Subscription that answers an invalid request with
    on_complete, inside the call, where §3.9 asks for on_error."""

    publisher: HandPublisher

    def request(self, n: int) -> None:
        super().request(n)
        if type(n) is not int or n <= 0:
            self.publisher.down.on_complete()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [0, -1, -(2**70), 1.5, True])
def test_spec309_completion_instead_of_on_error_is_reported(
    mode: str, n: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """§3.9: request(n <= 0) (or a non-int) answered with on_complete inside the call,
    instead of on_error, is reported."""
    upstream = CompletesOnBadRequest()
    publisher, subscriber = wire(mode, request=1, upstream=upstream)
    upstream.publisher = publisher
    offend(mode, "3.9", caplog, lambda: subscriber.request(n))
    assert upstream.requests == [1, n]  # passed upstream unchanged
    if mode == "raise":
        assert isinstance(subscriber.error, ProtocolViolation)
        assert not subscriber.completed
    else:
        assert subscriber.completed


def test_spec309_a_completion_after_a_queued_bad_request_is_not_reported() -> None:
    """A publisher that queues its signals (the JVM examples' AsyncIterablePublisher) sends
    its last element and on_complete in one run; a request(0) made from inside that on_next
    waits in its queue and is read after the end, when it is a no-op (§1.6, §3.6): legal,
    and not reported, though it came on the same thread."""
    found: list[ProtocolViolation] = []

    class Mailbox(Upstream):
        """Requests are queued, to be read after the run in progress."""

    publisher = HandPublisher(Mailbox())
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(10)
    subscriber.on_next_hook = lambda element: subscriber.request(0)
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    publisher.down.on_next(1)  # one run: the last element, then the end
    publisher.down.on_complete()
    assert found == []
    assert subscriber.elements == [1] and subscriber.completed


@pytest.mark.parametrize("mode", MODES)
def test_spec309_on_next_ignoring_a_bad_request_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """§3.9: elements already requested may still come, but on_next for demand added after
    request(0), which the publisher should have answered with on_error, is reported."""
    publisher, subscriber = wire(mode, request=1)
    subscriber.request(0)
    subscriber.request(1)
    publisher.down.on_next("in flight")  # within the demand registered before request(0)
    violation = offend(mode, "3.9", caplog, lambda: publisher.down.on_next("ignored"))
    if mode == "raise":
        assert subscriber.elements == ["in flight"]
        assert_torn_down(publisher, subscriber, violation)


def test_spec309_a_bad_request_racing_the_end_from_another_thread_is_not_reported() -> None:
    """The publisher had completed (or was about to) on its thread when another thread made
    request(0), which a terminated publisher ignores (§3.6): an on_complete from the
    publisher's thread after it, and the demand another thread requested meanwhile, are
    not a §3.9 violation; the checker cannot know which the publisher saw first."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    other = threading.Thread(target=subscriber.request, args=(0,))
    other.start()
    other.join(5)
    subscriber.request(2)  # this thread's demand: it may have reached the publisher first
    publisher.down.on_next(0)
    publisher.down.on_next(1)
    publisher.down.on_complete()
    assert found == []
    subscriber.request(0)  # on this thread, the program order is known: reported
    assert found == []
    publisher.down.on_complete()
    assert [v.rule for v in found] == ["1.7"]  # the stream had ended already


def test_spec309_on_error_answer_is_not_a_violation() -> None:
    """§3.9: request(0) answered by on_error is correct: nothing is reported."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.request(0)
    error = IllegalRequestError("§3.9: request(n) requires n > 0, got 0")
    publisher.down.on_error(error)
    assert found == []
    assert subscriber.error is error


def test_spec309_bad_request_after_cancel_is_ignored() -> None:
    """§3.9 applies only while not cancelled: request(0) after cancel expects nothing."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.cancel()
    subscriber.request(0)
    publisher.down.on_next("in flight")  # §2.8: requested before the cancel
    publisher.down.on_complete()
    assert found == []


def test_spec309_overlapping_bad_requests_on_two_threads_leave_no_stale_mark() -> None:
    """Two invalid requests overlapping on two threads, the first in leaving first: a later
    on_complete on the first thread, outside any request call, is not taken for an answer
    to its bad request (each thread's calls are counted apart)."""
    found: list[ProtocolViolation] = []
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    class Overlapping(Upstream):
        def request(self, n: int) -> None:
            super().request(n)
            if threading.current_thread().name == "first":
                first_in.set()
                second_in.wait(5)
            else:
                second_in.set()
                first_out.wait(5)

    publisher = HandPublisher(Overlapping())
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    second_done = threading.Event()

    def first() -> None:
        subscriber.request(0)
        first_out.set()
        second_done.wait(5)
        publisher.down.on_complete()  # later, outside any request call

    def second() -> None:
        first_in.wait(5)
        subscriber.request(-1)
        second_done.set()

    threads = [threading.Thread(target=first, name="first"), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert found == [] and subscriber.completed


def test_spec309_a_completion_inside_a_nested_bad_request_is_reported() -> None:
    """§3.9: a request(0) made from inside the signal another request(0) delivered, on the
    same thread, then on_complete inside the outer call: still an answer to a bad request
    (the calls are counted, not just marked)."""
    found: list[ProtocolViolation] = []
    calls = 0

    class Nested(Upstream):
        def request(self, n: int) -> None:
            nonlocal calls
            super().request(n)
            calls += 1
            if calls == 2:  # the outer request(0): a signal, whose subscriber asks again
                publisher.down.on_next("x")
                publisher.down.on_complete()

    publisher = HandPublisher(Nested())
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(1)
    subscriber.on_next_hook = lambda element: subscriber.request(0)
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    subscriber.request(0)
    assert [v.rule for v in found] == ["3.9"]


# -- §3.15, §3.16: a Subscription that raises ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_spec316_request_raising_is_reported(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """§3.16: an upstream request() that raises is reported."""
    boom = RuntimeError("boom")
    publisher, subscriber = wire(mode, upstream=Upstream(fail_request=boom))
    if mode == "raise":
        violation = offend(mode, "3.16", caplog, lambda: subscriber.request(1))
        assert violation.__cause__ is boom
        assert_torn_down(publisher, subscriber, violation)
    else:
        offend(mode, "3.16", caplog, lambda: subscriber.request(1), passes=RuntimeError)


@pytest.mark.parametrize("mode", MODES)
def test_spec315_cancel_raising_is_reported(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """§3.15: an upstream cancel() that raises is reported."""
    publisher, subscriber = wire(mode, upstream=Upstream(fail_cancel=RuntimeError("boom")))
    if mode == "raise":
        violation = offend(mode, "3.15", caplog, subscriber.cancel)
        assert subscriber.error is violation
    else:
        offend(mode, "3.15", caplog, subscriber.cancel, passes=RuntimeError)
