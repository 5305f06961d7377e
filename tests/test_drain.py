"""reactive_streams._drain: the one drain loop, driven by tiny Sources under every policy."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import queue
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from reactive_streams import UNBOUNDED, IllegalRequestError, publish_on
from reactive_streams._drain import (
    EMPTY,
    END,
    INLINE,
    DrainPolicy,
    DrainSubscription,
    OnExecutor,
    OnLoop,
    QueueSink,
)
from reactive_streams._drain import Source as DrainSource
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import (
    REQUEST_PATTERNS,
    CountedIterable,
    Incomparable,
    PausedAt,
    RecordingSubscriber,
    longest_turn,
    race,
    shutting_down,
    stack_depth,
    taking_turns,
)

T = TypeVar("T")


# -- tiny sources -------------------------------------------------------------------------------


class PullSource(DrainSource[T]):
    """Pulls from an iterable, one element per poll; counts polls and closes."""

    def __init__(self, items: Iterable[T], *, end_known: bool = False) -> None:
        self.items: Iterator[T] = iter(items)
        self.end_known = end_known
        self.exhausted = False
        self.polls = 0
        self.closes = 0
        self.poll_threads: set[int] = set()
        self._lock = threading.Lock()

    def poll(self) -> Any:
        self.polls += 1
        self.poll_threads.add(threading.get_ident())
        try:
            return next(self.items)
        except StopIteration:
            self.exhausted = True
            return END

    def at_end(self) -> bool:
        return self.end_known and self.exhausted

    def close(self) -> None:
        with self._lock:
            self.closes += 1


class PlainPullSource(PullSource[T]):
    """A ``PullSource`` whose ``values()`` is an iterator of elements only, as
    ``from_iterable``'s: the drain's loop runs over that iterator itself."""

    def values(self) -> Iterator[T]:
        return map(self._pulled, self.items)

    def _pulled(self, element: T) -> T:
        self.polls += 1
        self.poll_threads.add(threading.get_ident())
        return element


class PushSource(DrainSource[T]):
    """A queue filled from outside; wakes the drain on every push and at the end."""

    def __init__(self) -> None:
        self.queue_: deque[T] = deque()
        self.done = False
        self.error: Exception | None = None
        self.closes = 0
        self.wake: Callable[[], None] = lambda: None

    def bind(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def push(self, *items: T) -> None:
        self.queue_.extend(items)
        self.wake()

    def finish(self, error: Exception | None = None) -> None:
        self.error = error
        self.done = True
        self.wake()

    def poll(self) -> Any:
        done = self.done
        if self.queue_:
            return self.queue_.popleft()
        if done:
            if self.error is not None:
                raise self.error
            return END
        return EMPTY

    def at_end(self) -> bool:
        return self.done and not self.queue_

    def close(self) -> None:
        self.closes += 1


def start(
    source: DrainSource[T],
    subscriber: RecordingSubscriber[T] | None = None,
    policy: DrainPolicy = INLINE,
) -> tuple[DrainSubscription[T], RecordingSubscriber[T]]:
    """Subscribe a recorder (or ``subscriber``) to ``source`` through a DrainSubscription."""
    sub: RecordingSubscriber[T] = subscriber if subscriber is not None else RecordingSubscriber()
    drain = DrainSubscription(sub, source, policy)
    drain.start()
    return drain, sub





# -- emission -----------------------------------------------------------------------------------


def test_spec101_emits_exactly_as_far_as_demand_reaches() -> None:
    """§1.1: never more on_next than requested; the source is polled only under demand."""
    source = PullSource(range(100))
    drain, sub = start(source)
    assert source.polls == 0
    sub.request(3)
    assert sub.elements == [0, 1, 2]
    assert source.polls == 3
    sub.request(2)
    assert sub.elements == [0, 1, 2, 3, 4]
    assert source.polls == 5
    sub.assert_no_violations()


def test_spec105_completes_after_the_last_element() -> None:
    """§1.5: a finite source completes once exhausted, with the elements in order."""
    drain, sub = start(PullSource("abc"))
    sub.request(10)
    assert sub.elements == ["a", "b", "c"]
    assert sub.completed
    sub.assert_no_violations()


def test_spec102_completes_when_demand_met_exactly() -> None:
    """§1.2: with demand met exactly, a source that knows it is over (at_end) completes with no
    more demand; a pull source that cannot know completes on the next request."""
    known: PushSource[int] = PushSource()
    known.push(1, 2)
    known.finish()
    _, sub = start(known)
    sub.request(2)
    assert sub.elements == [1, 2]
    assert sub.completed

    pull = PullSource([1, 2])
    _, other = start(pull)
    other.request(2)
    assert not other.completed
    assert pull.polls == 2  # never pulled ahead of demand to find out
    other.request(1)
    assert other.completed
    assert other.elements == [1, 2]


@pytest.mark.parametrize("policy", ["inline", "executor"])
def test_spec302_reentrant_request_does_not_recurse(policy: str) -> None:
    """§3.2/§3.3: request(1) from each of 100_000 on_next calls trampolines: the stack does not
    grow and the recursion limit is never hit."""
    depths: list[int] = []
    n = 100_000

    def hook(element: int) -> None:
        if element in (0, n - 1):
            depths.append(stack_depth())

    sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
    sub.on_next_hook = hook
    with ThreadPoolExecutor(1) as pool:
        chosen = INLINE if policy == "inline" else OnExecutor(pool, batch=1024)
        start(PullSource(range(n)), sub, chosen)
        sub.await_terminal(30)
    assert sub.completed, sub.error
    assert len(sub.elements) == n
    assert depths[0] == depths[1]
    sub.assert_no_violations()


@pytest.mark.stress
def test_spec103_concurrent_pushes_and_requests_are_signalled_serially(
    switching: float | None,
) -> None:
    """§1.3: pushes, wakes and requests from several threads still give serial signals."""
    source: PushSource[int] = PushSource()
    drain, sub = start(source)
    barrier = threading.Barrier(4)

    def producer(base: int) -> None:
        barrier.wait(5)
        for i in range(250):
            source.push(base + i)
            sub.request(1)

    threads = [threading.Thread(target=producer, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    source.finish()
    sub.await_terminal()
    assert sorted(sub.elements) == sorted(k * 1000 + i for k in range(4) for i in range(250))
    for k in range(4):  # each producer's elements keep their order
        mine = [e for e in sub.elements if e // 1000 == k]
        assert mine == sorted(mine)
    assert sub.completed
    sub.assert_no_violations()


@pytest.mark.stress
@pytest.mark.parametrize("policy", ["inline", "executor"])
def test_spec101_requests_from_many_threads_racing_the_drain(
    policy: str, switching: float | None
) -> None:
    """§1.1/§1.3: four threads request one element at a time, 100 times each, while the
    drain emits: exactly what was requested arrives, serially, in order, and the source is
    pulled no further (50 rounds)."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(50):
            source = PullSource(itertools.count())
            chosen = INLINE if policy == "inline" else OnExecutor(pool, batch=8)
            sub: RecordingSubscriber[int] = RecordingSubscriber()
            drain, _ = start(source, sub, policy=chosen)

            def requests(recorder: RecordingSubscriber[int] = sub) -> None:
                for _ in range(100):
                    recorder.request(1)

            race(requests, requests, requests, requests)
            sub.await_count(400)
            sub.expect_no_signals(0.001)
            assert sub.elements == list(range(400)) and source.polls == 400
            sub.assert_no_violations()
            drain.cancel()


def test_spec304_request_from_another_thread_while_draining_returns_at_once() -> None:
    """§3.4: a request from another thread while the drain is inside on_next only registers
    demand and returns; the draining thread delivers it after on_next returns."""
    inside = threading.Event()
    release = threading.Event()
    other_returned = threading.Event()
    released: list[bool] = []  # asserted on the test thread: the drain would swallow it (§2.13)

    def hold(element: int) -> None:
        if element == 0:
            inside.set()
            released.append(release.wait(5))

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = hold
    drain, _ = start(PullSource(range(10)), sub)
    first = threading.Thread(target=sub.request, args=(1,))
    first.start()
    assert inside.wait(5)

    def other() -> None:
        sub.request(4)
        other_returned.set()

    second = threading.Thread(target=other)
    second.start()
    assert other_returned.wait(5)  # did not wait for the drain
    assert sub.elements == [0]
    release.set()
    first.join(5)
    second.join(5)
    assert released == [True]
    assert sub.elements == [0, 1, 2, 3, 4]
    assert sub.signal_threads == {threading.get_ident(), first.ident}  # on_subscribe, then drain
    sub.assert_no_violations()


# -- §3.9 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, -(2**64), 1.5, True, None, "3"])
def test_spec309_bad_request_signals_on_error_once(bad: Any) -> None:
    """§3.9: request(n <= 0) or a non-int is answered by one on_error(IllegalRequestError)."""
    source = PullSource(range(10))
    drain, sub = start(source)
    sub.request(2)
    sub.request(bad)
    sub.request(-7)  # a second bad request is not a second on_error
    sub.request(3)  # §3.6: the subscription is over
    assert isinstance(sub.error, IllegalRequestError)
    assert sub.error.rule == "3.9"
    assert repr(bad) in str(sub.error)
    assert sub.elements == [0, 1]
    assert source.closes == 1
    sub.assert_no_violations()


def test_spec309_first_of_several_reentrant_bad_requests_is_reported_once() -> None:
    """§3.9: two bad requests made while the drain is busy give one on_error, for the first."""
    sub: RecordingSubscriber[int] = RecordingSubscriber()

    def twice(element: int) -> None:
        sub.request(0)
        sub.request(-7)

    sub.on_next_hook = twice
    start(PullSource(range(10)), sub)
    sub.request(1)
    assert isinstance(sub.error, IllegalRequestError)
    assert "got 0" in str(sub.error)
    sub.assert_no_violations()


def test_spec309_bad_request_from_another_thread_is_delivered_serially() -> None:
    """§3.9/§1.3: a bad request from another thread while on_next runs does not signal on that
    thread; the draining thread delivers on_error after on_next returns."""
    inside = threading.Event()
    release = threading.Event()
    released: list[bool] = []  # asserted on the test thread: the drain would swallow it (§2.13)

    def hold(element: int) -> None:
        if element == 0:
            inside.set()
            released.append(release.wait(5))

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = hold
    start(PullSource(range(10)), sub)
    drainer = threading.Thread(target=sub.request, args=(1,))
    drainer.start()
    assert inside.wait(5)
    bad = threading.Thread(target=sub.request, args=(0,))
    bad.start()
    bad.join(5)
    assert not bad.is_alive()
    assert sub.error is None  # not delivered while on_next is still running
    release.set()
    drainer.join(5)
    assert released == [True]
    assert isinstance(sub.error, IllegalRequestError)
    assert bad.ident not in sub.signal_threads
    sub.assert_no_violations()


def test_spec309_reentrant_bad_request_before_the_end_beats_completion() -> None:
    """§3.9: request(0) from the last on_next is answered with on_error, not on_complete."""
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = lambda element: sub.request(0)
    start(PullSource([1]), sub)
    sub.request(5)
    assert sub.elements == [1]
    assert isinstance(sub.error, IllegalRequestError)
    assert not sub.completed


# -- cancel -------------------------------------------------------------------------------------


def test_spec307_cancel_is_idempotent_and_closes_once() -> None:
    """§3.5/§3.7: cancel twice closes the source once; §3.6: request after it does nothing."""
    source = PullSource(itertools.count())
    drain, sub = start(source)
    sub.request(2)
    drain.cancel()
    drain.cancel()
    polls = source.polls
    sub.request(5)
    assert source.closes == 1
    assert source.polls == polls
    assert sub.elements == [0, 1]
    assert drain.is_cancelled
    assert not sub.is_terminated


@pytest.mark.parametrize("kind", [PullSource, PlainPullSource])
def test_spec312_cancel_from_on_next_stops_at_once(kind: type[PullSource[int]]) -> None:
    """§3.12: cancel() from inside on_next: no further on_next, the source is closed."""
    source = kind(itertools.count())
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = lambda element: sub.cancel() if element == 2 else None
    start(source, sub)
    sub.request(100)
    assert sub.elements == [0, 1, 2]
    assert source.closes == 1


@pytest.mark.stress
@pytest.mark.parametrize("policy", ["inline", "executor"])
def test_spec305_cancel_from_many_threads_at_once(policy: str, switching: float | None) -> None:
    """§3.5: eight threads released together call cancel (one also requests): the source is
    closed exactly once and nothing is signalled afterwards (200 rounds)."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(200):
            source = PullSource(itertools.count())
            chosen = INLINE if policy == "inline" else OnExecutor(pool, batch=16)
            drain, sub = start(source, policy=chosen)
            sub.request(50)
            barrier = threading.Barrier(8)

            def racer(
                index: int,
                gate: threading.Barrier = barrier,
                d: Any = drain,
                recorder: RecordingSubscriber[int] = sub,
            ) -> None:
                gate.wait(5)
                if index == 0:  # through the recorder, which checks §1.1 against it
                    recorder.request(UNBOUNDED)
                d.cancel()

            threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            sub.await_condition(lambda s=source: s.closes == 1, what="the source closed")
            count = len(sub.elements)
            drain.request(10)
            sub.expect_no_signals(0.001)
            assert len(sub.elements) == count
            assert source.closes == 1
            assert not sub.is_terminated
            sub.assert_no_violations()


def test_spec107_nothing_after_terminal() -> None:
    """§1.7: after on_complete, request and cancel signal nothing and close nothing again."""
    source = PullSource([1, 2])
    drain, sub = start(source)
    sub.request(5)
    assert sub.completed
    sub.request(5)
    drain.cancel()
    assert sub.elements == [1, 2]
    assert source.closes == 1
    assert drain.is_cancelled  # §1.6
    sub.assert_no_violations()


# -- §3.13 references ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["cancel", "complete", "error"])
def test_spec313_references_dropped(how: str) -> None:
    """§3.13: after cancel or a terminal signal the drain holds neither subscriber nor source."""
    source: PushSource[int] = PushSource()
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    drain = DrainSubscription(sub, source)
    drain.start()
    source_ref = weakref.ref(source)
    sub_ref = weakref.ref(sub)
    if how == "cancel":
        drain.cancel()
    elif how == "complete":
        source.finish()
    else:
        source.finish(RuntimeError("boom"))
    del source, sub
    gc.collect()
    assert source_ref() is None
    assert sub_ref() is None
    assert drain.is_cancelled


# -- §2.13 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [PullSource, PlainPullSource])
def test_spec213_raising_on_next_cancels_closes_and_logs(
    kind: type[PullSource[int]], caplog: pytest.LogCaptureFixture
) -> None:
    """§2.13: a subscriber raising in on_next counts as cancelled: the source is closed, nothing
    more is signalled, and the error is logged to "reactive_streams" naming §2.13."""
    boom = RuntimeError("subscriber bug")

    def explode(element: int) -> None:
        if element == 1:
            raise boom

    source = kind(itertools.count())
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = explode
    drain, _ = start(source, sub)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        sub.request(5)
    assert sub.elements == [0, 1]
    assert source.closes == 1
    assert drain.is_cancelled
    assert not sub.is_terminated
    records = [r for r in caplog.records if r.name == "reactive_streams"]
    assert len(records) == 1
    assert records[0].getMessage().startswith("§2.13: ")
    assert records[0].exc_info is not None and records[0].exc_info[1] is boom
    sub.request(5)
    assert sub.elements == [0, 1]


def test_spec213_raising_on_subscribe_counts_as_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.13: a subscriber raising in on_subscribe is cancelled and reported, never signalled."""

    class Broken(RecordingSubscriber[int]):
        def on_subscribe(self, subscription: Any) -> None:
            super().on_subscribe(subscription)
            raise RuntimeError("bad on_subscribe")

    source = PullSource([1])
    sub = Broken(1)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        start(source, sub)
    assert sub.elements == []
    assert source.closes == 1
    assert any(r.getMessage().startswith("§2.13: ") for r in caplog.records)


def test_spec213_none_from_a_source_is_on_error_type_error() -> None:
    """§2.13: None is never an element: a source producing it ends with on_error(TypeError)."""
    drain, sub = start(PullSource([1, None, 3]))  # type: ignore[list-item]
    sub.request(5)
    assert sub.elements == [1]
    assert isinstance(sub.error, TypeError)


def test_spec109_subscribe_none_raises_type_error() -> None:
    """§1.9: subscribe(None) raises TypeError for the drain-based publishers."""
    with pytest.raises(TypeError, match="§1.9"):
        from_iterable([1]).subscribe(None)  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(TypeError, match="§1.9"):
            publish_on(from_iterable([1]), pool).subscribe(None)  # type: ignore[arg-type]


# -- terminal without demand ---------------------------------------------------------------------


def test_spec209_empty_source_completes_without_demand() -> None:
    """§2.9/§1.2: an empty, finished queue completes with no request at all."""
    source: PushSource[int] = PushSource()
    source.finish()
    drain, sub = start(source)
    assert sub.completed
    assert sub.requested == 0
    assert source.closes == 1


def test_spec209_source_finishing_later_completes_without_demand() -> None:
    """§2.9: a push source that ends while nothing is requested completes at once."""
    source: PushSource[int] = PushSource()
    drain, sub = start(source)
    assert not sub.completed
    source.finish()
    assert sub.completed


def test_spec210_failed_source_errors_without_demand() -> None:
    """§2.10/§1.4: a failed queue signals on_error with no request."""
    source: PushSource[int] = PushSource()
    boom = RuntimeError("failed")
    source.finish(boom)
    drain, sub = start(source)
    assert sub.error is boom


def test_spec104_failing_poll_becomes_on_error_after_the_elements() -> None:
    """§1.4: a source that raises ends with on_error after the elements it produced."""
    boom = ValueError("boom")

    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise boom

    drain, sub = start(PullSource(items()))
    sub.request(10)
    assert sub.elements == [1, 2]
    assert sub.error is boom


# -- policies -----------------------------------------------------------------------------------


class CountingExecutor(ThreadPoolExecutor):
    """A one-thread pool that counts submitted tasks."""

    def __init__(self) -> None:
        super().__init__(1, thread_name_prefix="counting")
        self.submits = 0
        self.thread_ids: set[int] = set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submits += 1

        def run() -> Any:
            self.thread_ids.add(threading.get_ident())
            return fn(*args, **kwargs)

        return super().submit(run)


def test_on_executor_signals_on_the_executor_and_reschedules_batches_in_order() -> None:
    """OnExecutor: signals arrive on the executor thread; with batch=4 the drain yields the
    thread every 4 elements by resubmitting, and delivers every element in order."""
    with CountingExecutor() as pool:
        drain, sub = start(PullSource(range(1000)), policy=OnExecutor(pool, batch=4))
        sub.request(UNBOUNDED)
        sub.await_terminal()
    assert sub.elements == list(range(1000))
    assert sub.completed
    assert pool.submits >= 1000 // 4
    assert sub.signal_threads - {threading.get_ident()} == pool.thread_ids
    sub.assert_no_violations()


class ThreadPerTask(Executor):
    """Runs each task on a thread of its own, at once; keeps the threads."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        thread = threading.Thread(target=fn, args=args, kwargs=kwargs)
        self.threads.append(thread)
        thread.start()
        done: Future[Any] = Future()
        done.set_result(None)
        return done


def test_delivering_here_holds_while_the_task_before_has_ended() -> None:
    """delivering_here() asked inside on_next, by the thread delivering: it stays True
    after the drain task that rescheduled this one has finished (its exit must not wipe
    the id the next drainer set). The block strategy's feedback check depends on it."""
    pool = ThreadPerTask()
    answers: list[bool] = []
    drain, sub = start(PullSource(range(5)), policy=OnExecutor(pool, batch=1))

    def check(element: int) -> None:
        for thread in list(pool.threads):  # let every task before this one end first
            if thread is not threading.current_thread():
                thread.join(5)
        answers.append(drain.delivering_here())

    sub.on_next_hook = check
    sub.request(5)
    sub.await_condition(lambda: len(answers) == 5, what="5 answers")
    assert answers == [True] * 5
    sub.assert_no_violations()


def test_a_drain_task_the_executor_cancels_fails_the_subscriber() -> None:
    """shutdown(cancel_futures=True) drops the queued drain task: the subscription ends with
    on_error instead of keeping the WIP for a task that never runs (every later request
    and cancel would then be ignored), and the source is closed."""
    pool = ThreadPoolExecutor(1)
    gate = threading.Event()
    pool.submit(gate.wait)  # the only worker is busy: the drain task waits in the queue
    source = PullSource(range(10))
    drain, sub = start(source, policy=OnExecutor(pool))
    sub.request(5)
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    sub.await_terminal()
    assert isinstance(sub.error, RuntimeError) and "cancelled" in str(sub.error)
    assert source.closes == 1 and sub.elements == []
    sub.assert_no_violations()


def test_on_executor_shut_down_fails_the_subscriber() -> None:
    """A shut-down executor ends the subscription: the source is closed and the subscriber,
    which did not cancel, gets on_error saying why (§1.4) instead of waiting forever."""
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    source = PullSource(range(10))
    drain, sub = start(source, policy=OnExecutor(pool))
    sub.request(5)  # returns normally (§3.16)
    assert drain.is_cancelled
    assert source.closes == 1
    assert sub.elements == []
    assert isinstance(sub.error, RuntimeError)
    assert "could not be scheduled" in str(sub.error)
    assert isinstance(sub.error.__cause__, RuntimeError)  # the executor's own error
    sub.assert_no_violations()


class Rejecting(Executor):
    """Runs its first ``room`` tasks on ``pool``, then rejects every submit with queue.Full,
    as an executor with a bounded work queue does."""

    def __init__(self, pool: ThreadPoolExecutor, room: int) -> None:
        self.pool = pool
        self.room = room

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self.room <= 0:
            raise queue.Full("the executor's queue is full")
        self.room -= 1
        return self.pool.submit(fn, *args, **kwargs)


def test_spec109_an_executor_rejecting_the_first_drain_fails_the_subscriber() -> None:
    """A submit that raises something other than RuntimeError (queue.Full) at subscribe: start()
    returns normally (§1.9), the subscriber gets on_error after on_subscribe (§1.4), the source
    is closed, and later requests and cancels do nothing."""
    with ThreadPoolExecutor(1) as pool:
        source = PullSource(range(10))
        drain, sub = start(source, policy=OnExecutor(Rejecting(pool, 0)))  # returns normally
        assert drain.is_cancelled and source.closes == 1
        assert isinstance(sub.error, RuntimeError) and "could not be scheduled" in str(sub.error)
        assert isinstance(sub.error.__cause__, queue.Full)
        sub.request(1)
        sub.cancel()
        assert source.polls == 0 and source.closes == 1
        sub.assert_no_violations()


def test_spec316_an_executor_rejecting_a_later_drain_fails_the_subscriber() -> None:
    """A submit rejected at request(): request() returns normally (§3.16) and the WIP it took
    is not left held: the subscriber gets on_error (§1.4) and the source is closed (§3.13)."""
    with ThreadPoolExecutor(1) as pool:
        source = PullSource(range(10))
        drain, sub = start(source, policy=OnExecutor(Rejecting(pool, 1)))  # room for start()
        pool.submit(lambda: None).result(5)  # the start() drain ran (one FIFO thread)
        assert not sub.is_terminated
        sub.request(1)  # returns normally
        assert drain.is_cancelled and source.closes == 1
        assert isinstance(sub.error, RuntimeError)
        assert isinstance(sub.error.__cause__, queue.Full)
        assert sub.elements == []
        sub.assert_no_violations()


def test_a_policy_that_fails_after_cancel_signals_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """cancel() whose drain cannot be scheduled: the source is still closed, and the
    subscriber, which cancelled, hears nothing (§3.6, §1.8). Nothing was lost, so nothing is
    logged as an error (an iterator left open at interpreter exit did log a traceback): a
    debug line only."""
    loop = asyncio.new_event_loop()
    source = PullSource(range(10))
    drain, subscriber = start(source, policy=OnLoop(loop))
    loop.run_until_complete(asyncio.sleep(0))  # the drain start() scheduled runs, goes idle
    loop.close()
    with caplog.at_level(logging.DEBUG, logger="reactive_streams"):
        drain.cancel()
    assert source.closes == 1
    assert not subscriber.is_terminated
    assert [r.levelno for r in caplog.records if "could not be scheduled" in r.getMessage()] == [
        logging.DEBUG
    ]


@pytest.fixture
def running_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in debug mode running on a helper thread."""
    loop = asyncio.new_event_loop()
    loop.set_debug(True)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_on_loop_signals_on_the_loop_thread(running_loop: asyncio.AbstractEventLoop) -> None:
    """OnLoop: on_next / on_complete run on the loop's thread, in batches, in order."""

    async def ident() -> int:
        return threading.get_ident()

    loop_thread = asyncio.run_coroutine_threadsafe(ident(), running_loop).result(5)
    drain, sub = start(PullSource(range(3000)), policy=OnLoop(running_loop, batch=100))
    sub.request(UNBOUNDED)
    sub.await_terminal()
    assert sub.elements == list(range(3000))
    assert sub.signal_threads == {threading.get_ident(), loop_thread}  # on_subscribe is here
    sub.assert_no_violations()


def test_on_loop_yields_to_the_loop_after_each_batch(
    running_loop: asyncio.AbstractEventLoop,
) -> None:
    """OnLoop: a drain that reschedules itself after a batch runs again from call_soon, not
    nested inside the batch before: the stack stays flat however many batches there are,
    and the loop gets its turn between them."""
    depths: list[int] = []
    drain, sub = start(PullSource(range(50)), policy=OnLoop(running_loop, batch=1))
    sub.on_next_hook = lambda element: depths.append(stack_depth())
    sub.request(UNBOUNDED)
    sub.await_terminal()
    assert sub.elements == list(range(50)) and sub.completed
    assert len(set(depths)) == 1  # 50 batches of one, each at the same depth
    sub.assert_no_violations()


def test_on_loop_closed_fails_the_subscriber() -> None:
    """A closed loop ends the subscription: the source is closed and the subscriber gets
    on_error (§1.4), delivered on the thread that found the loop closed."""
    loop = asyncio.new_event_loop()
    loop.close()
    source = PullSource(range(10))
    drain, sub = start(source, policy=OnLoop(loop))
    sub.request(5)
    assert drain.is_cancelled
    assert source.closes == 1
    assert sub.elements == []
    assert isinstance(sub.error, RuntimeError)
    assert "could not be scheduled" in str(sub.error)
    sub.assert_no_violations()


def test_on_loop_closing_mid_stream_fails_the_subscriber() -> None:
    """A loop closed after some elements: the next request returns normally (§3.16), and
    the subscriber gets on_error after the elements it had, instead of waiting forever."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    source = PullSource(itertools.count())
    drain, sub = start(source, policy=OnLoop(loop))
    sub.request(3)
    sub.await_count(3)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
    sub.request(3)  # returns normally (§3.16)
    assert drain.is_cancelled
    assert source.closes == 1
    assert sub.elements == [0, 1, 2]
    assert isinstance(sub.error, RuntimeError)
    sub.assert_no_violations()


# -- fairness: a task's share of a shared worker or loop ---------------------------------------





@pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
@pytest.mark.parametrize("where", ["executor", "loop"])
def test_a_task_delivers_at_most_batch_elements_whatever_the_request_pattern(
    where: str, every: int, running_loop: asyncio.AbstractEventLoop
) -> None:
    """Two streams on one worker (or loop) take turns of at most ``batch`` elements, also
    when each requests from on_next: that demand, arriving while the task runs, once kept
    the worker for the whole stream."""
    batch, n = 32, 300  # batch above 16: request(16) never fills one alone
    log: list[str] = []
    gate = threading.Event()  # holds the worker until both drains are queued
    with ThreadPoolExecutor(1) as pool:
        policy: Callable[[], DrainPolicy]
        if where == "executor":
            pool.submit(gate.wait, 10)
            policy = lambda: OnExecutor(pool, batch)  # noqa: E731
        else:
            running_loop.call_soon_threadsafe(gate.wait, 10)
            policy = lambda: OnLoop(running_loop, batch)  # noqa: E731
        subs = [
            start(PlainPullSource(range(n)), taking_turns(log, name, every), policy())[1]
            for name in "ab"
        ]
        gate.set()
        for sub in subs:
            sub.await_terminal(10)
    for sub in subs:
        assert sub.completed and sub.elements == list(range(n))
        sub.assert_no_violations()
    assert longest_turn(log) <= batch


@pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
def test_no_stream_outlives_its_executors_shutdown_by_more_than_a_batch(every: int) -> None:
    """shutdown(cancel_futures=True) from inside the running stream's on_next: it delivers
    the rest of its task's batch at most, then fails (its next task is refused); the
    stream whose task was queued fails at once. Both sources are closed."""
    batch = 32
    pool = ThreadPoolExecutor(1)
    gate = threading.Event()
    pool.submit(gate.wait, 10)
    log: list[str] = []
    running, queued = shutting_down(log, every, pool)  # at the third element
    sources = [PullSource(range(1000)), PullSource(range(1000))]
    for source, sub in zip(sources, (running, queued), strict=True):
        start(source, sub, OnExecutor(pool, batch))
    gate.set()
    for sub in (running, queued):
        sub.await_terminal(10)
    assert 3 <= len(running.elements) <= batch  # the shutdown came inside its first task
    assert isinstance(running.error, RuntimeError) and "scheduled" in str(running.error)
    assert queued.elements == []
    assert isinstance(queued.error, RuntimeError) and "cancelled" in str(queued.error)
    assert [source.closes for source in sources] == [1, 1]
    running.assert_no_violations()
    queued.assert_no_violations()


# -- fusion into a QueueSink ---------------------------------------------------------------------


class FusedPushSource(PushSource[T]):
    """A PushSource whose buffer the drain may pop directly (``queue``)."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: deque[T] = self.queue_


def test_queue_to_queue_moves_a_batch_in_one_extend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Into a QueueSink, a fused queue moves in one extend (no on_next call per element),
    every element, in order."""
    from reactive_streams._prefetch import PrefetchQueue

    calls: list[int] = []
    original = PrefetchQueue.on_next

    def counted(self: PrefetchQueue[Any], element: Any) -> None:
        calls.append(element)
        original(self, element)

    monkeypatch.setattr(PrefetchQueue, "on_next", counted)
    source: FusedPushSource[int] = FusedPushSource()
    sink: PrefetchQueue[int] = PrefetchQueue(8)
    DrainSubscription(sink, source).start()
    source.push(*range(5))
    assert list(sink.queue) == [0, 1, 2, 3, 4]
    assert calls == []


class WakeOnFirstSource(FusedPushSource[T]):
    """Wakes the drain only when a push finds the queue empty, as from_observable's buffer
    does: the drain must not stop before it has seen the queue empty."""

    def push(self, *items: T) -> None:
        for item in items:
            self.queue_.append(item)
            if len(self.queue_) == 1:
                self.wake()


class ManualSink(QueueSink[int]):
    """A fused sink that requests only when the test says so."""

    def __init__(self) -> None:
        self.sink: deque[int] = deque()
        self.subscription: Any = None

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription

    def on_next(self, element: int) -> None:
        raise AssertionError("a fused sink is appended to, never called per element")

    def on_error(self, error: Exception) -> None:
        raise AssertionError(error)

    def on_complete(self) -> None:
        pass

    def sink_filled(self) -> None:
        pass


def test_queue_to_queue_moves_an_element_pushed_during_the_move() -> None:
    """The consumer's request drains on its thread and counts one element to move; the
    producer pushes another meanwhile, finds the queue not empty and wakes nobody: the move
    takes it too, rather than leave it behind with demand outstanding (a from_observable
    under publish_on hung so, 1 run in 50 with three merged sources)."""
    source: WakeOnFirstSource[int] = WakeOnFirstSource()
    sink = ManualSink()
    DrainSubscription(sink, source).start()
    source.push(0)  # no demand yet: it waits in the queue
    paused = PausedAt(DrainSubscription._emit, "round")
    paused.start(lambda: sink.subscription.request(5))
    source.push(1)  # the queue holds 0: no wake
    paused.resume()
    assert list(sink.sink) == [0, 1]
    source.push(2)
    assert list(sink.sink) == [0, 1, 2]


class ClosingSink(QueueSink[int]):
    """A fused sink whose consumer closes (cancel, then clear) when the first batch lands."""

    def __init__(self, request: int) -> None:
        self.sink: deque[int] = deque()
        self.request = request
        self.subscription: Any = None
        self.closed = False
        self.terminal: list[str] = []

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        subscription.request(self.request)

    def on_next(self, element: int) -> None:
        raise AssertionError("a fused sink is appended to, never called per element")

    def on_error(self, error: Exception) -> None:
        self.terminal.append(f"error {error!r}")

    def on_complete(self) -> None:
        self.terminal.append("complete")

    def sink_filled(self) -> None:
        if not self.closed:
            self.closed = True
            self.subscription.cancel()  # as PrefetchQueue.close(): cancel before clearing
            self.sink.clear()


def test_a_sink_closed_when_its_first_chunk_lands_gets_no_further_chunk() -> None:
    """In-memory values copied in chunks: a close at the first chunk stops the copy there
    (§3.12) and nothing copied stays in the sink (§3.13); the list is pulled no further."""
    import operator

    from reactive_streams.publishers._iterable import IterablePublisher

    items = iter(list(range(5000)))
    sink = ClosingSink(request=3000)
    IterablePublisher(items).subscribe(sink)  # type: ignore[arg-type]
    assert sink.closed and len(sink.sink) == 0 and sink.terminal == []
    assert operator.length_hint(items) == 5000 - 1024  # one chunk, not the 3000 requested


@pytest.mark.parametrize("end_known", [False, True])
def test_a_polled_source_s_elements_are_never_compared_with_its_markers(end_known: bool) -> None:
    """The drain tells EMPTY and END from elements by identity: elements whose == raises
    (numpy arrays, DataFrames) pass a poll()-based source whole, in order, then the end."""
    items = [Incomparable(i) for i in range(20)]
    _, sub = start(PullSource(items, end_known=end_known))
    sub.request(7)
    sub.request(UNBOUNDED)
    sub.await_terminal()
    assert [element.value for element in sub.elements] == list(range(20))
    assert sub.completed
    sub.assert_no_violations()


class RunsAtOnce(Executor):
    """An executor that runs each task inside submit(), as a caller-runs policy does."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_spec303_an_executor_running_tasks_in_submit_never_nests_the_batches() -> None:
    """§3.3: each batch's reschedule handed to an executor that runs it at once resumes the
    loop in progress instead of nesting a drain per batch (which hit RecursionError after
    about 200 batches: on_error instead of the rest of the stream)."""
    n = 1024 * (sys.getrecursionlimit() + 50)  # more batches than the stack has frames

    class Counter:
        count = 0
        end: object = None

        def on_subscribe(self, subscription: Any) -> None:
            subscription.request(UNBOUNDED)

        def on_next(self, element: int) -> None:
            self.count += 1

        def on_error(self, error: Exception) -> None:
            self.end = error

        def on_complete(self) -> None:
            self.end = "complete"

    counter = Counter()
    from_iterable(range(n), executor=RunsAtOnce()).subscribe(counter)  # runs here, at once
    assert counter.end == "complete" and counter.count == n


def test_spec303_an_executor_running_only_some_tasks_in_submit_keeps_one_drain() -> None:
    """An executor that runs one reschedule inside submit() and hands the next ones to a
    pool: the loop resumed after the inline one, and the pool's drains, never overlap
    (§1.3), and every element arrives once, in order."""
    pool = ThreadPoolExecutor(4)

    class InlineOnce(Executor):
        calls = 0

        def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
            self.calls += 1
            if self.calls == 2:  # the first reschedule: here, at once
                return RunsAtOnce().submit(fn, *args, **kwargs)
            return pool.submit(fn, *args, **kwargs)

    n = 6 * 1024
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    sub.on_next_hook = lambda _: time.sleep(0.00002)  # room for an overlapping drain
    with pool:
        from_iterable(range(n), executor=InlineOnce()).subscribe(sub)
        sub.await_terminal(30)
    assert sub.completed and sub.elements == list(range(n))
    sub.assert_no_violations()  # §1.3: no two signals at once


def test_delivering_here_holds_in_a_loop_resumed_after_an_inline_reschedule() -> None:
    """The loop that resumed after its reschedule ran inline still counts as the drainer:
    delivering_here() is True in every on_next (a source relies on it to fail instead of
    waiting for itself)."""
    answers: list[bool] = []

    class Asker:
        subscription: Any = None

        def on_subscribe(self, subscription: Any) -> None:
            self.subscription = subscription
            subscription.request(UNBOUNDED)

        def on_next(self, element: int) -> None:
            answers.append(self.subscription.delivering_here())

        def on_error(self, error: Exception) -> None:
            pass

        def on_complete(self) -> None:
            pass

    from_iterable(range(3 * 1024), executor=RunsAtOnce()).subscribe(Asker())
    assert len(answers) == 3 * 1024 and all(answers)


def _closing_range(n: int, closed: threading.Event) -> Iterator[int]:
    """``range(n)`` as a generator that sets ``closed`` in its ``finally``."""
    try:
        yield from range(n)
    finally:
        closed.set()


def test_a_base_exception_from_on_next_ends_the_subscription_and_reaches_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A KeyboardInterrupt from on_next reaches the caller of request() (it is no Exception
    to deliver), and the subscription ends with it: released (§3.13), the generator closed
    (its finally runs), later requests and cancels harmless; it kept the WIP for good, so a
    cancel closed nothing. The caller has it: nothing is logged."""
    closed = threading.Event()

    def interrupt(element: int) -> None:
        if element == 1:
            raise KeyboardInterrupt

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = interrupt
    from_iterable(_closing_range(10, closed)).subscribe(sub)
    with (
        pytest.raises(KeyboardInterrupt),
        caplog.at_level(logging.DEBUG, logger="reactive_streams"),
    ):
        sub.request(5)
    assert caplog.records == []
    assert closed.is_set() and sub.elements == [0, 1] and not sub.is_terminated
    subscription = sub.subscription
    assert subscription is not None and subscription.is_cancelled  # type: ignore[attr-defined]
    sub.request(1)
    sub.cancel()
    assert sub.elements == [0, 1]


def test_a_base_exception_on_an_executor_is_reported_and_closes_the_source(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under an executor the BaseException would vanish into the task's Future: the source is
    closed all the same and the failure is logged."""
    closed = threading.Event()

    def leave(element: int) -> None:
        raise SystemExit

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    sub.on_next_hook = leave
    with ThreadPoolExecutor(1) as pool, caplog.at_level(logging.ERROR, logger="reactive_streams"):
        from_iterable(_closing_range(10, closed), executor=pool).subscribe(sub)
        sub.request(5)
        assert closed.wait(5)
    assert "SystemExit" in caplog.text and not sub.is_terminated


def test_spec103_a_thread_handing_a_batch_on_never_takes_another_threads_resume() -> None:
    """§1.3: thread A hands the next batch to thread B and is still inside submit() when B's
    own reschedule runs inline and resumes B's loop: A must not read that resume as its own
    and go on draining beside B (the mark was one flag for the subscription)."""
    first = ThreadPoolExecutor(1, thread_name_prefix="drain-a")
    second = ThreadPoolExecutor(1, thread_name_prefix="drain-b")
    a_may_return = threading.Event()
    a_delivers = threading.Event()
    a_thread = first.submit(threading.get_ident).result(5)
    handed = threading.Event()

    class Handoff(Executor):
        calls = 0

        def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
            self.calls += 1
            if self.calls == 1:  # the first drain: on A
                return first.submit(fn, *args, **kwargs)
            if self.calls == 2:  # A hands the next batch to B, and waits in submit()
                future = second.submit(fn, *args, **kwargs)
                handed.set()
                a_may_return.wait(5)
                return future
            if self.calls == 3:  # B's reschedule runs here, at once: B resumes
                result = RunsAtOnce().submit(fn, *args, **kwargs)
                a_may_return.set()  # A returns from submit() now, and looks
                a_delivers.wait(1)  # (were A to drain again, B would go on beside it)
                return result
            return second.submit(fn, *args, **kwargs)

    def on_a(element: int) -> None:
        if handed.is_set() and threading.get_ident() == a_thread:
            a_delivers.set()
            time.sleep(0.001)

    n = 6 * 1024
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    sub.on_next_hook = on_a
    with first, second:
        from_iterable(range(n), executor=Handoff()).subscribe(sub)
        sub.await_terminal(30)
    assert not a_delivers.is_set()  # A stopped once it had handed the batch on
    assert sub.completed and sub.elements == list(range(n))
    sub.assert_no_violations()


def test_spec306_a_deferring_cancel_cancels_an_idle_inline_drain_and_closes_nothing() -> None:
    """An idle inline subscription cancelled with cancel_deferring_cleanup() is cancelled
    at once (a request racing it is a no-op, §3.6: a synchronous upstream fills no window
    after it), but its source is closed only by the cancel() owed afterwards, on that
    caller's thread: the clean-up never runs on the deferring thread."""
    source = CountedIterable(1000)
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    from_iterable(source).subscribe(sub)
    subscription = sub.subscription
    assert isinstance(subscription, DrainSubscription) and sub.elements == [0, 1]
    deferring = threading.Thread(target=subscription.cancel_deferring_cleanup)
    deferring.start()
    deferring.join(5)
    assert source.closed_on == []
    subscription.request(5)  # §3.6: a no-op now
    assert sub.elements == [0, 1] and source.pulled <= 3
    subscription.cancel()  # the owed cancel runs the clean-up, here
    assert source.closed_on == [threading.get_ident()]
    subscription.cancel()  # §3.7
    assert len(source.closed_on) == 1


def test_start_daemon_starts_no_thread_when_none_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """start_daemon runs its target on a daemon thread, and returns False without running
    it when no thread can start: at interpreter exit (3.11 would wait for ever in start(),
    3.12+ raises RuntimeError), or when the system refuses one."""
    from reactive_streams._subscription import start_daemon

    ran = threading.Event()
    assert start_daemon(ran.set, name="rs-test")
    assert ran.wait(5)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", refuse)
        assert not start_daemon(pytest.fail, "ran", name="rs-test")
    with monkeypatch.context() as patch:
        patch.setattr(sys, "is_finalizing", lambda: True)
        assert not start_daemon(pytest.fail, "ran", name="rs-test")
