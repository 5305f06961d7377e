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
    CountedIterable,
    Incomparable,
    PausedAt,
    RecordingSubscriber,
    race,
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
    """A ``PullSource`` whose ``values()`` is an iterator of elements only (``plain``), as
    ``from_iterable``'s: the drain runs its loop without the ``EMPTY`` check."""

    plain = True

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


def stack_depth() -> int:
    """The number of frames on the current stack."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


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


def test_spec103_concurrent_pushes_and_requests_are_signalled_serially() -> None:
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
def test_spec305_cancel_from_many_threads_at_once(policy: str) -> None:
    """§3.5: eight threads released together call cancel (one also requests): the source is
    closed exactly once and nothing is signalled afterwards (200 rounds)."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(200):
            source = PullSource(itertools.count())
            chosen = INLINE if policy == "inline" else OnExecutor(pool, batch=16)
            drain, sub = start(source, policy=chosen)
            sub.request(50)
            barrier = threading.Barrier(8)

            def racer(index: int, gate: threading.Barrier = barrier, d: Any = drain) -> None:
                gate.wait(5)
                if index == 0:
                    d.request(UNBOUNDED)
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


def test_race_reraises_a_base_exception_raised_by_an_action() -> None:
    """testing.race: an action failing with a BaseException (pytest.fail()) fails the
    caller, instead of dying on its thread unseen."""

    def fail() -> None:
        pytest.fail("an action failed")

    with pytest.raises(pytest.fail.Exception, match="an action failed"):
        race(fail, lambda: None)


def test_paused_at_stops_before_the_marked_line_and_names_a_bad_marker() -> None:
    """reactive_streams.testing.PausedAt: the action's thread stops before the marked line runs (a
    side effect of that line is not seen until resume()), and a marker on no line, or on
    several, is refused at once."""
    seen: list[str] = []

    def steps() -> None:
        seen.append("before")
        seen.append("marked")  # the line to stop at
        seen.append("after")

    paused = PausedAt(steps, "the line to stop at")
    paused.start(steps)
    assert seen == ["before"]
    paused.resume()
    assert seen == ["before", "marked", "after"]
    with pytest.raises(ValueError, match="0 lines"):
        PausedAt(steps, "no such text")
    with pytest.raises(ValueError, match="3 lines"):
        PausedAt(steps, "seen.append")


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
    paused = PausedAt(DrainSubscription._move_queued, "if not self._fill(")
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


# -- the emitter lease -------------------------------------------------------------------------


class LeaseSource(PushSource[T]):
    """A single-producer push source that delivers under the drain's emitter lease when it can
    (the shape of ``from_observable(block)`` on its own thread); counts what took which path.
    Its buffer is exposed as ``queue``, as the lease requires (the drain then pops it fused)."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: deque[T] = self.queue_
        self.leases = 0
        self.fallbacks = 0
        self.most_buffered = 0
        self.interrupts: list[int] = []
        self.drain: DrainSubscription[T] | None = None
        self.emit: Callable[[T], None] = self._fallback

    def attach(self, drain: DrainSubscription[T]) -> None:
        self.drain = drain
        self.emit = drain.emitter(self._fallback)

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
        super().finish(error)
        assert self.drain is not None
        self.drain.release_lease()

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
        """The producer read its credit and is about to claim it when revoke_lease() takes
        the credit back: the producer finds the lease revoked instead of delivering under it,
        and its element takes the regular path; no credit survives the revocation (§1.1)."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)  # the lease: credit 9 left
        paused = PausedAt(DrainSubscription._offer, "self._credit = 0  # delivering")
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
        """The producer claimed its credit (zeroed it) and is about to call on_next when
        revoke_lease() runs: the revoker leaves the credit to it; the producer finds the lease
        revoked, gives the credit back (§1.1), drains from the lease's WIP and sends its
        element down the regular path."""
        source, drain, sub = leased(RecordingSubscriber(10))
        source.push(0)
        paused = PausedAt(DrainSubscription._offer, "self._deliver(element)")
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
        paused = PausedAt(DrainSubscription._offer, "if credit and self._wip == 1:")
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
        paused = PausedAt(DrainSubscription._offer, "if credit and self._wip == 1:")
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
def test_spec312_cancel_from_another_thread_during_a_fast_lease() -> None:
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
def test_spec101_requests_from_another_thread_racing_a_lease() -> None:
    """§1.1/§1.3: a producer taking, renewing and returning leases while another thread
    requests one at a time (100 rounds): never more than requested, serial, in order."""
    for _ in range(100):
        _race_requests_during_a_lease_once()


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
