"""reactive_streams.retry: resubscription after on_error, the demand kept, backoff, cancel."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import random
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from reactive_streams import (
    UNBOUNDED,
    IllegalRequestError,
    OverflowViolation,
    Publisher,
    Subscriber,
    Subscription,
    retry,
)
from reactive_streams._subscription import EMPTY_SUBSCRIPTION
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.publishers._retry import WINDOW, RetryPublisher
from reactive_streams.testing import RecordingSubscriber, RecordingSubscription, race, stack_depth

T = TypeVar("T")


# -- instruments ---------------------------------------------------------------------------------


class Run:
    """One subscription to a :class:`Flaky` source: what it was asked for, and its cancel."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.requests: list[int] = []
        self.cancelled = threading.Event()
        self.ended = threading.Event()  # on_error or on_complete came
        self.lock = threading.Lock()

    @property
    def requested(self) -> int:
        with self.lock:
            return sum(self.requests)


class _MeteredSubscription:
    def __init__(self, inner: Subscription, run: Run) -> None:
        self._inner, self._run = inner, run

    def request(self, n: int) -> None:
        with self._run.lock:
            self._run.requests.append(n)
        self._inner.request(n)

    def cancel(self) -> None:
        self._run.cancelled.set()
        self._inner.cancel()


class _Metered(Subscriber[T]):
    """Passes every signal on, with the subscription metered into ``run``."""

    def __init__(self, inner: Subscriber[T], run: Run) -> None:
        self._inner, self._run = inner, run

    def on_subscribe(self, subscription: Subscription) -> None:
        self._inner.on_subscribe(_MeteredSubscription(subscription, self._run))

    def on_next(self, element: T) -> None:
        self._inner.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._run.ended.set()
        self._inner.on_error(error)

    def on_complete(self) -> None:
        self._run.ended.set()
        self._inner.on_complete()


def _failing(count: int, error: Exception) -> Iterator[int]:
    yield from range(count)
    raise error


class Flaky:
    """A cold Publisher over ``from_iterable``: its subscription number ``i`` (from 1) emits
    ``range(fail_after[i - 1])`` then fails with ``RuntimeError("attempt i failed")``; past
    the list, it emits ``range(n)`` (endless for ``n=None``) and completes."""

    def __init__(
        self,
        *fail_after: int,
        n: int | None = 10,
        executor: ThreadPoolExecutor | None = None,
        gate: Callable[[int], None] | None = None,
    ) -> None:
        self.fail_after = fail_after
        self.n = n
        self.executor = executor
        self.gate = gate  # called with the subscription's number inside subscribe
        self.runs: list[Run] = []
        self.lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        with self.lock:
            run = Run(len(self.runs) + 1)
            self.runs.append(run)
        if self.gate is not None:
            self.gate(run.number)
        values: Iterable[int]
        if run.number <= len(self.fail_after):
            values = _failing(
                self.fail_after[run.number - 1], RuntimeError(f"attempt {run.number} failed")
            )
        else:
            values = itertools.count() if self.n is None else range(self.n)
        from_iterable(values, executor=self.executor).subscribe(_Metered(subscriber, run))

    @property
    def subscriptions(self) -> int:
        with self.lock:
            return len(self.runs)


class Handle:
    """What :class:`FakeTimer` returns: the delay asked for, the action, and its cancels."""

    def __init__(self, delay: float, action: Callable[[], None]) -> None:
        self.delay, self.action = delay, action
        self.cancels = 0
        self.lock = threading.Lock()

    def cancel(self) -> None:
        with self.lock:
            self.cancels += 1

    def fire(self) -> None:
        self.action()


class FakeTimer:
    """A timer hook that only records: the test fires each backoff when it chooses."""

    def __init__(self) -> None:
        self.handles: list[Handle] = []

    def __call__(self, delay: float, action: Callable[[], None]) -> Handle:
        handle = Handle(delay, action)
        self.handles.append(handle)
        return handle

    @property
    def delays(self) -> list[float]:
        return [h.delay for h in self.handles]


def _settled(source: Flaky) -> bool:
    """Every subscription made to ``source`` has failed, completed or been cancelled."""
    with source.lock:
        return all(run.cancelled.is_set() or run.ended.is_set() for run in source.runs)


def _instant_failure(subscriber: Subscriber[int]) -> None:
    subscriber.on_subscribe(EMPTY_SUBSCRIPTION)
    subscriber.on_error(RuntimeError("fails inside subscribe"))


# -- what arrives: elements, the demand kept, the last error ----------------------------------


def test_a_source_failing_twice_then_succeeding_delivers_everything_with_the_demand_kept() -> None:
    """request(5): the first attempt gives 3 and fails, so the second is asked for 2 (the
    demand left, not the 5 again); it fails at once, so the third is asked for 2 as well and
    restarts from the beginning (0, 1); what is asked later goes to the third alone."""
    source = Flaky(3, 0, n=10)
    sub: RecordingSubscriber[int] = RecordingSubscriber(5)
    retry(source, attempts=3).subscribe(sub)
    assert sub.await_count(5) == [0, 1, 2, 0, 1]
    assert [run.requests for run in source.runs] == [[5], [2], [2]]
    sub.request(UNBOUNDED)
    sub.await_terminal()
    assert sub.completed, sub.error
    assert sub.elements == [0, 1, 2, *range(10)]
    assert [run.requests for run in source.runs] == [[5], [2], [2, WINDOW]]
    sub.assert_no_violations()


def test_attempts_exhausted_delivers_the_last_error_with_a_note_naming_the_earlier() -> None:
    """Three attempts that all fail: the elements of each, in order, then the third error
    itself, with a note naming the count and the first two errors. No fourth subscription."""
    source = Flaky(0, 1, 2)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    retry(source, attempts=3).subscribe(sub)
    sub.await_terminal()
    assert sub.elements == [0, 0, 1]
    error = sub.error
    assert isinstance(error, RuntimeError) and str(error) == "attempt 3 failed"
    assert error.__notes__ == [
        "reactive_streams.retry: attempt 3 of 3 failed; before it: "
        "attempt 1: RuntimeError('attempt 1 failed'); attempt 2: RuntimeError('attempt 2 failed')"
    ]
    assert source.subscriptions == 3
    sub.assert_no_violations()


def test_the_note_names_the_last_three_earlier_errors_and_counts_the_rest() -> None:
    """Six failing attempts: the note names attempts 3 to 5 and counts the two before."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    retry(Flaky(0, 0, 0, 0, 0, 0), attempts=6).subscribe(sub)
    sub.await_terminal()
    (note,) = sub.error.__notes__  # type: ignore[union-attr]
    assert "attempt 6 of 6 failed; before it: 2 more, then attempt 3:" in note
    assert "attempt 5: RuntimeError('attempt 5 failed')" in note and "attempt 2:" not in note


def test_one_attempt_passes_the_error_through_untouched() -> None:
    """attempts=1 is no retry: one subscription, its error as it came (no note, no context)."""
    source = Flaky(2)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    retry(source, attempts=1).subscribe(sub)
    sub.await_terminal()
    assert sub.elements == [0, 1] and isinstance(sub.error, RuntimeError)
    assert str(sub.error) == "attempt 1 failed" and not getattr(sub.error, "__notes__", None)
    assert source.subscriptions == 1


def test_on_complete_passes_through_and_no_attempt_follows() -> None:
    """A first attempt that completes: the subscriber completes, nothing is resubscribed."""
    source = Flaky(n=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    retry(source, attempts=5).subscribe(sub)
    sub.await_terminal()
    assert sub.completed and sub.elements == [0, 1, 2, 3] and source.subscriptions == 1


def test_each_subscriber_gets_its_own_attempts_and_one_on_subscribe() -> None:
    """Two subscribers of one retry publisher: each sees on_subscribe once, and its own
    attempts (the source's subscriptions 1 and 2 fail, and go to the first subscriber)."""
    source = Flaky(0, 0, n=3)
    publisher = retry(source, attempts=3)
    first: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    second: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    publisher.subscribe(first)
    publisher.subscribe(second)
    for sub in (first, second):
        sub.await_terminal()
        assert sub.completed and sub.elements == [0, 1, 2] and sub.subscribe_count == 1
        sub.assert_no_violations()
    assert source.subscriptions == 4


def test_an_unbounded_request_is_passed_on_in_windows() -> None:
    """request(UNBOUNDED) over an endless synchronous source: elements flow (nothing waits
    for the source to end), and the source is never asked for more than WINDOW at a time,
    so what is queued between it and the subscriber stays bounded."""
    source = Flaky(n=None)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    sub.on_next_hook = lambda element: sub.cancel() if element == 3 * WINDOW else None
    retry(source, attempts=2).subscribe(sub)
    sub.await_count(3 * WINDOW + 1)
    assert source.runs[0].cancelled.wait(5)
    assert source.runs[0].requests[0] == WINDOW
    assert max(source.runs[0].requests) <= WINDOW
    assert sub.elements == list(range(3 * WINDOW + 1))


def test_a_to_iterator_consumer_sees_the_restarted_source() -> None:
    """Through to_iterator (its window of 256): one failure after 300 elements, then all
    1000 again from the beginning (the documented restart of a cold source). Consumed on
    a thread of its own, so a stall fails the test instead of hanging it."""
    got: list[list[int]] = []
    consumer = threading.Thread(
        target=lambda: got.append(list(to_iterator(retry(Flaky(300, n=1000), attempts=2)))),
        daemon=True,
    )
    consumer.start()
    consumer.join(30)
    assert got == [[*range(300), *range(1000)]]


# -- backoff: the delays asked of the timer, and where the next attempt runs ----------------


def test_backoff_doubles_and_waits_for_the_timer() -> None:
    """backoff=0.5 over three failures: the timer is asked for 0.5, 1.0, 2.0 s, one at a
    time, and the source is subscribed again only when the timer fires."""
    timer = FakeTimer()
    source = Flaky(0, 0, 0, n=3)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    RetryPublisher(source, attempts=4, backoff=0.5, timer=timer).subscribe(sub)
    for waited in range(1, 4):
        assert source.subscriptions == waited and len(timer.handles) == waited
        assert not sub.is_terminated
        timer.handles[-1].fire()
    sub.await_terminal()
    assert timer.delays == [0.5, 1.0, 2.0]
    assert sub.completed and sub.elements == [0, 1, 2] and source.subscriptions == 4
    assert all(h.cancels == 0 for h in timer.handles)


def test_after_a_backoff_signals_arrive_on_the_timer_thread() -> None:
    """The default timer: the next attempt is subscribed on a thread of its own (named
    rs-retry-backoff), where a synchronous source then delivers; not on the test thread."""
    source = Flaky(0, n=3)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    threads: list[str] = []
    sub.on_next_hook = lambda element: threads.append(threading.current_thread().name)
    retry(source, attempts=2, backoff=0.001).subscribe(sub)
    sub.await_terminal()
    assert sub.completed and sub.elements == [0, 1, 2]
    assert threads == ["rs-retry-backoff"] * 3


def test_a_running_loop_is_never_blocked_by_a_backoff() -> None:
    """Subscribed and requested from a coroutine with backoff=60: the calls return with the
    first attempt failed and the second not yet made (no wait on the loop); cancel from the
    loop then stops the timer thread, and no second subscription follows."""
    source = Flaky(0, n=3)
    sub: RecordingSubscriber[int] = RecordingSubscriber()

    async def main() -> None:
        retry(source, attempts=2, backoff=60).subscribe(sub)
        sub.request(3)
        await asyncio.sleep(0)  # the loop got its turn: nothing waited on it
        assert source.subscriptions == 1 and not sub.is_terminated
        sub.cancel()

    asyncio.run(main())
    for thread in threading.enumerate():
        if thread.name == "rs-retry-backoff":
            thread.join(5)
            assert not thread.is_alive()
    assert source.subscriptions == 1 and not sub.is_terminated


# -- cancel and request across threads --------------------------------------------------------


@pytest.mark.stress
def test_spec305_cancel_during_backoff_from_many_threads(switching: float | None) -> None:
    """§3.5/§3.7: eight threads cancel at once during a backoff: the timer is cancelled
    once, and when it fires anyway nothing is subscribed again (§3.12). 50 rounds."""
    for _ in range(50):
        timer = FakeTimer()
        source = Flaky(0, n=3)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        RetryPublisher(source, attempts=3, backoff=1.0, timer=timer).subscribe(sub)
        assert len(timer.handles) == 1
        race(*[sub.cancel] * 8)
        assert timer.handles[0].cancels == 1
        timer.handles[0].fire()  # a timer that fires in spite of its cancel
        sub.request(5)  # §3.6: a no-op
        assert source.subscriptions == 1 and sub.elements == [] and not sub.is_terminated


@pytest.mark.stress
def test_spec305_cancel_racing_a_failure_leaves_no_attempt_running(
    switching: float | None,
) -> None:
    """A cancel racing an attempt's on_error on an executor thread (backoff 0): nothing is
    signalled, and every attempt ends up failed or cancelled, one subscribed in the race
    included (§3.12, §3.13). 100 rounds."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(100):
            source = Flaky(0, 0, 0, 0, n=None, executor=pool)
            sub: RecordingSubscriber[int] = RecordingSubscriber()
            retry(source, attempts=5).subscribe(sub)
            race(functools.partial(sub.request, 1), sub.cancel)
            sub.await_condition(functools.partial(_settled, source), what="all attempts over")
            assert sub.elements == [] and not sub.is_terminated
            sub.assert_no_violations()


def test_spec304_request_from_another_thread_while_resubscribing() -> None:
    """§3.4: while the second attempt's subscribe is in progress on one thread (held at a
    gate), a request from another thread returns at once; once subscribed, the second
    attempt is asked for all the demand left (3 + 4, none delivered) and delivers it."""
    at_gate, release = threading.Event(), threading.Event()

    def gate(number: int) -> None:
        if number == 2:
            at_gate.set()
            release.wait(10)

    source = Flaky(0, n=10, gate=gate)
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    retry(source, attempts=2).subscribe(sub)
    first = threading.Thread(target=sub.request, args=(3,))
    first.start()  # attempt 1 fails inside this request; attempt 2 is subscribed there
    assert at_gate.wait(5)
    returned = threading.Event()

    def other() -> None:
        sub.request(4)
        returned.set()

    threading.Thread(target=other).start()
    assert returned.wait(5), "request() waited for a resubscription in progress"
    release.set()
    first.join(5)
    assert sub.await_count(7) == list(range(7))
    assert source.runs[1].requested == 7
    sub.assert_no_violations()


def test_spec303_reentrant_request_from_on_next_keeps_the_stack_flat() -> None:
    """§3.2/§3.3: request(1) from every on_next, across two failed attempts and 5000
    elements of the third: every element arrives, the stack is as deep at the last as at
    the first, and the second and third attempts are asked one at a time."""
    depths: list[int] = []
    source = Flaky(2, 3, n=5000)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
    sub.on_next_hook = lambda element: depths.append(stack_depth())
    retry(source, attempts=3).subscribe(sub)
    sub.await_terminal(30)
    assert sub.completed, sub.error
    assert sub.elements == [0, 1, 0, 1, 2, *range(5000)]
    assert len(set(depths)) == 1
    assert set(source.runs[2].requests) == {1}
    sub.assert_no_violations()


@pytest.mark.parametrize("where", ["inside subscribe", "inside request"])
def test_5000_synchronous_failures_do_not_recurse(where: str) -> None:
    """attempts=5000, backoff 0, a source failing synchronously (inside subscribe, or at
    its first request): the resubscriptions loop, so the stack is as deep at the 5000th
    attempt as at the second, and the 5000th error arrives."""
    depths: list[int] = []
    count = itertools.count(1)

    def subscribe(subscriber: Subscriber[int]) -> None:
        number = next(count)
        depths.append(stack_depth())
        if where == "inside subscribe":
            _instant_failure(subscriber)
        else:
            from_iterable(_failing(0, RuntimeError(f"attempt {number} failed"))).subscribe(
                subscriber
            )

    source = type("Failing", (), {"subscribe": staticmethod(subscribe)})()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    retry(source, attempts=5000).subscribe(sub)
    sub.await_terminal()
    assert isinstance(sub.error, RuntimeError) and len(depths) == 5000
    assert len(set(depths[1:])) == 1


@pytest.mark.stress
@pytest.mark.parametrize("seed", range(20))
def test_random_schedules_deliver_each_attempt_in_order(seed: int, switching: float | None) -> None:
    """Seeded: attempts failing after a random number of elements, on executor threads,
    while two threads request random amounts: the subscriber gets each failed attempt's
    elements then the last attempt's, serially (§1.3), never beyond demand (§1.1)."""
    rng = random.Random(seed)
    fail_after = [rng.randrange(0, 40) for _ in range(rng.randrange(0, 4))]
    n = rng.randrange(0, 200)
    expected = [i for k in fail_after for i in range(k)] + list(range(n))
    chunks = [rng.randrange(1, 30) for _ in range(40)]
    with ThreadPoolExecutor(2) as pool:
        source = Flaky(*fail_after, n=n, executor=pool)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        retry(source, attempts=len(fail_after) + 1).subscribe(sub)

        def requests(part: list[int]) -> Callable[[], None]:
            def run() -> None:
                for k in part:
                    sub.request(k)

            return run

        race(requests(chunks[::2]), requests(chunks[1::2]))
        sub.request(UNBOUNDED)
        sub.await_terminal(10)
    assert sub.completed, sub.error
    assert sub.elements == expected
    sub.assert_no_violations()


# -- §3.9, §3.6, misbehaving upstreams ---------------------------------------------------------


def test_spec309_request_zero_signals_error_and_cancels_the_attempt() -> None:
    """§3.9: request(0) ends the stream with IllegalRequestError, and the current attempt
    is cancelled (not retried)."""
    source = Flaky(n=None)
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    retry(source, attempts=3).subscribe(sub)
    sub.await_count(2)
    sub.request(0)
    sub.await_terminal()
    assert isinstance(sub.error, IllegalRequestError) and "§3.9" in str(sub.error)
    assert source.runs[0].cancelled.wait(5) and source.subscriptions == 1


def test_spec309_request_zero_during_a_backoff_cancels_the_timer() -> None:
    """§3.9 between attempts: on_error at once, the pending timer cancelled, and firing it
    subscribes nothing."""
    timer = FakeTimer()
    source = Flaky(0, n=3)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    RetryPublisher(source, attempts=2, backoff=1.0, timer=timer).subscribe(sub)
    sub.request(-1)
    assert isinstance(sub.error, IllegalRequestError)
    assert timer.handles[0].cancels == 1
    timer.handles[0].fire()
    assert source.subscriptions == 1


def test_spec306_request_after_cancel_asks_nothing() -> None:
    """§3.6: after cancel, request(n) passes nothing upstream and delivers nothing."""
    source = Flaky(n=None)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    retry(source, attempts=2).subscribe(sub)
    sub.cancel()
    sub.request(10)
    assert source.runs[0].requests == [1] and source.runs[0].cancelled.is_set()
    assert sub.elements == [0]


class _Captured:
    """A publisher that hands each subscriber a RecordingSubscription and keeps both."""

    def __init__(self) -> None:
        self.subscribers: list[Subscriber[int]] = []
        self.subscriptions: list[RecordingSubscription] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        subscription = RecordingSubscription()
        self.subscribers.append(subscriber)
        self.subscriptions.append(subscription)
        subscriber.on_subscribe(subscription)


def test_spec103_a_replaced_attempts_late_signals_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An upstream that signals after its own on_error: its on_next and on_complete are
    ignored (the new attempt's elements alone arrive), its second on_error is reported
    (§1.7), never delivered."""
    source = _Captured()
    sub: RecordingSubscriber[int] = RecordingSubscriber(3)
    retry(source, attempts=2).subscribe(sub)
    old = source.subscribers[0]
    old.on_next(0)
    old.on_error(RuntimeError("first"))
    assert len(source.subscribers) == 2
    assert source.subscriptions[1].requests == [2]
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        old.on_next(99)
        old.on_complete()
        old.on_error(RuntimeError("late"))
    source.subscribers[1].on_next(7)
    assert sub.elements == [0, 7] and not sub.is_terminated
    assert "§1.7" in caplog.text and "late" in caplog.text
    sub.assert_no_violations()


def test_spec101_an_attempt_sending_more_than_asked_fails_the_stream() -> None:
    """§1.1: an attempt's on_next beyond what it was asked for cancels it and ends the
    stream with OverflowViolation; no retry (a violation is not transient)."""
    source = _Captured()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    retry(source, attempts=3).subscribe(sub)
    source.subscribers[0].on_next(1)
    source.subscribers[0].on_next(2)
    assert isinstance(sub.error, OverflowViolation) and "§1.1" in str(sub.error)
    assert source.subscriptions[0].cancelled.is_set() and len(source.subscribers) == 1
    assert sub.elements == [1]


def test_spec213_an_attempt_signalling_none_fails_the_stream_without_retry() -> None:
    """§2.13: an attempt's on_next(None) raises TypeError to that upstream, cancels it and
    ends the stream with the §2.13 error; no retry (a bug, not a transient failure)."""
    source = _Captured()
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    retry(source, attempts=3).subscribe(sub)
    source.subscribers[0].on_next(1)
    with pytest.raises(TypeError):
        source.subscribers[0].on_next(None)  # type: ignore[arg-type]
    assert isinstance(sub.error, TypeError) and "§2.13" in str(sub.error)
    assert source.subscriptions[0].cancelled.is_set() and len(source.subscribers) == 1
    assert sub.elements == [1]


def test_a_subscribe_that_raises_counts_as_that_attempts_failure() -> None:
    """§1.9 broken by the upstream (subscribe raises): that attempt failed; the next one runs."""
    calls = itertools.count(1)

    def subscribe(subscriber: Subscriber[int]) -> None:
        if next(calls) == 1:
            raise RuntimeError("subscribe bug")
        from_iterable(range(2)).subscribe(subscriber)

    source = type("Broken", (), {"subscribe": staticmethod(subscribe)})()
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    retry(source, attempts=2).subscribe(sub)
    sub.await_terminal()
    assert sub.completed and sub.elements == [0, 1]


# -- arguments -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"attempts": 0}, ValueError, "attempts"),
        ({"attempts": -2}, ValueError, "attempts"),
        ({"attempts": 1.5}, TypeError, "attempts"),
        ({"attempts": True}, TypeError, "attempts"),
        ({"attempts": "3"}, TypeError, "attempts"),
        ({"attempts": 2, "backoff": -0.1}, ValueError, "backoff"),
        ({"attempts": 2, "backoff": math.inf}, ValueError, "backoff"),
        ({"attempts": 2, "backoff": math.nan}, ValueError, "backoff"),
        ({"attempts": 2, "backoff": "1"}, TypeError, "backoff"),
        ({"attempts": 2, "backoff": True}, TypeError, "backoff"),
    ],
)
def test_arguments_are_checked_naming_the_parameter(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    """A bad attempts or backoff is refused at the call, the message naming it."""
    with pytest.raises(error, match=names):
        retry(from_iterable(range(3)), **kwargs)


def test_retry_of_none_and_subscribe_of_none_raise_type_error() -> None:
    """retry(None) is a TypeError at the call; subscribe(None) too (§1.9)."""
    with pytest.raises(TypeError, match="retry"):
        retry(None, attempts=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="§1.9"):
        retry(from_iterable(range(3)), attempts=2).subscribe(None)  # type: ignore[arg-type]


def test_an_int_backoff_is_accepted() -> None:
    """backoff=1 (an int) is a number of seconds like 1.0; the publisher is a Publisher."""
    publisher: Publisher[int] = retry(from_iterable(range(3)), attempts=2, backoff=1)
    assert list(to_iterator(publisher)) == [0, 1, 2]


def test_a_timer_that_cannot_start_ends_the_stream_naming_the_attempt() -> None:
    """A timer hook that raises (no thread can start): the stream ends with a RuntimeError
    naming the attempt and the upstream's error, caused by the hook's error."""

    def broken(delay: float, action: Callable[[], None]) -> Handle:
        raise RuntimeError("can't start new thread")

    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    RetryPublisher(Flaky(0), attempts=2, backoff=1.0, timer=broken).subscribe(sub)
    assert isinstance(sub.error, RuntimeError) and "attempt 2" in str(sub.error)
    assert "attempt 1 failed" in str(sub.error)
    assert str(sub.error.__cause__) == "can't start new thread"
