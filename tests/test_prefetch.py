"""PrefetchQueue: the bounded window between an upstream Publisher and one consumer."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from reactive_streams import OverflowViolation
from reactive_streams._drain import EMPTY, END
from reactive_streams._prefetch import PrefetchQueue
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import CountedIterable, RecordingSubscription

# -- instruments ----------------------------------------------------------------------------------


class _RaisingCancel(RecordingSubscription):
    def cancel(self) -> None:
        super().cancel()
        raise RuntimeError("cancel failed")


class _GatedLock:
    """The lock of the queue's ``Upstream`` (which decides each request, §2.7), with a gate:
    once ``armed`` for a thread, that thread's next acquisition first calls ``at_gate()``
    (an interleaving a test forces: a thread preempted right before the lock, or an
    interrupt landing there)."""

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


# -- accepting the upstream: once (§2.5) ----------------------------------------------------------


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


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_spec205_a_subscription_after_close_is_cancelled_and_never_requested(lazy: bool) -> None:
    """§2.5, §3.13: a queue closed before its upstream subscribed (a consumer that gave up
    early) cancels the subscription it then gets, and asks it for nothing, even when the
    consumer looks for elements again."""
    queue: PrefetchQueue[int] = PrefetchQueue(4, lazy=lazy)
    queue.close()
    upstream = RecordingSubscription()
    queue.on_subscribe(upstream)
    queue.want(1)
    assert upstream.cancelled.is_set() and upstream.requests == []
    assert queue.poll() is END


# -- requests: one at a time (§2.7), none after the upstream's end (§2.4) -------------------------


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


# -- an interrupt between or inside requests ------------------------------------------------------


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


# -- cancel: interrupt from another thread, close -------------------------------------------------


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


# -- the upstream's errors and violations ---------------------------------------------------------


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
