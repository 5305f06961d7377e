"""reactive_streams.adapters.iterables: from_iterable and to_iterator, both directions."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import random
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from reactive_streams import (
    UNBOUNDED,
    OverflowViolation,
    ProtocolViolation,
    Publisher,
    Subscriber,
    Subscription,
    publish_on,
)
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.testing import (
    REQUEST_PATTERNS,
    Incomparable,
    RecordingSubscriber,
    RecordingSubscription,
    longest_turn,
    shutting_down,
    taking_turns,
)

# -- helpers ------------------------------------------------------------------------------------


class Counting:
    """A generator factory that counts next() calls and notices close()."""

    def __init__(self, n: int | None = None, fail: Exception | None = None) -> None:
        self.n = n
        self.fail = fail
        self.pulled = 0
        self.closed = threading.Event()

    def __call__(self) -> Iterator[int]:
        try:
            i = 0
            while self.n is None or i < self.n:
                self.pulled += 1
                yield i
                i += 1
            if self.fail is not None:
                raise self.fail
        finally:
            self.closed.set()


class RequestLog:
    """Wraps a publisher; records every request(n) its subscriber makes."""

    def __init__(self, inner: Publisher[int]) -> None:
        self.inner = inner
        self.requests: list[int] = []
        self.cancels = 0
        self._lock = threading.Lock()

    @property
    def requested(self) -> int:
        with self._lock:
            return sum(self.requests)

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        log = self

        class Sub:
            def on_subscribe(self, subscription: Subscription) -> None:
                class Logged:
                    def request(self, n: int) -> None:
                        with log._lock:
                            log.requests.append(n)
                        subscription.request(n)

                    def cancel(self) -> None:
                        log.cancels += 1
                        subscription.cancel()

                subscriber.on_subscribe(Logged())

            def on_next(self, element: int) -> None:
                subscriber.on_next(element)

            def on_error(self, error: Exception) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self.inner.subscribe(Sub())


class Silent:
    """A publisher that subscribes and then never signals anything by itself; it records the
    requests it gets. ``hot``: it holds its subscriber until cancelled (as a Subject does), so
    a test can signal it by hand; ``then_raise``: subscribe() raises after on_subscribe (a
    broken publisher, §1.9)."""

    def __init__(self, *, hot: bool = False, then_raise: Exception | None = None) -> None:
        self.cancelled = threading.Event()
        self.hot = hot
        self.then_raise = then_raise
        self.subscribers: list[Subscriber[Any]] = []
        self.requests: list[int] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        silent = self

        class Nothing:
            def request(self, n: int) -> None:
                silent.requests.append(n)

            def cancel(self) -> None:
                silent.subscribers.clear()
                silent.cancelled.set()

        if self.hot:
            self.subscribers.append(subscriber)
        subscriber.on_subscribe(Nothing())
        if self.then_raise is not None:
            raise self.then_raise


# -- from_iterable ---------------------------------------------------------------------------------


def test_from_iterable_is_cold() -> None:
    """Each subscriber of a re-iterable gets every element from the start."""
    publisher = from_iterable([1, 2, 3])
    first: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    second: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.elements == second.elements == [1, 2, 3]
    assert first.completed and second.completed


@pytest.mark.parametrize("kind", ["generator", "iterator"])
def test_from_iterable_one_shot_second_subscriber_gets_on_subscribe_then_on_error(
    kind: str,
) -> None:
    """§1.9: a one-shot generator or iterator serves one subscriber; a second one gets
    on_subscribe, then on_error explaining why."""
    source = Counting(3)() if kind == "generator" else iter([0, 1, 2])
    publisher = from_iterable(source)
    first: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    publisher.subscribe(first)
    second: RecordingSubscriber[int] = RecordingSubscriber()
    publisher.subscribe(second)  # returns normally
    assert first.elements == [0, 1, 2]
    assert second.subscribe_count == 1
    assert isinstance(second.error, RuntimeError)
    assert "one-shot" in str(second.error)
    assert second.elements == []
    second.assert_no_violations()


def test_from_iterable_pulls_only_as_far_as_demand() -> None:
    """The generator's next() is called once per unit of demand, never ahead."""
    counting = Counting()
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    from_iterable(counting()).subscribe(sub)
    assert counting.pulled == 0
    sub.request(3)
    assert counting.pulled == 3
    sub.request(1)
    assert counting.pulled == 4
    assert sub.elements == [0, 1, 2, 3]
    sub.cancel()


@pytest.mark.parametrize(
    ("container", "empty"),
    [([1, 2], []), ((1, 2), ()), (range(1, 3), range(0)), ({1: "a", 2: "b"}, {})],
    ids=["list", "tuple", "range", "dict"],
)
def test_from_iterable_over_a_container_completes_right_after_the_last_element(
    container: Any, empty: Any
) -> None:
    """A builtin container knows how many elements are left: request(2) over two elements
    delivers both and completes at once (§1.2), and an empty one completes with no demand."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    from_iterable(container).subscribe(sub)
    assert sub.elements == [1, 2] and sub.completed
    nothing: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_iterable(empty).subscribe(nothing)
    assert nothing.elements == [] and nothing.completed


def test_from_iterable_over_a_generator_finds_its_end_with_demand() -> None:
    """A generator's end is only known by pulling it, and it is never pulled without demand:
    request(2) over two elements delivers both; the next request completes."""
    counting = Counting(2)
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    from_iterable(counting()).subscribe(sub)
    assert sub.elements == [0, 1] and not sub.completed and counting.pulled == 2
    sub.request(1)
    assert sub.completed and sub.elements == [0, 1]


def test_from_iterable_cancel_closes_the_generator() -> None:
    """§3.13: cancel close()s the generator, so its finally block runs."""
    counting = Counting()
    generator = counting()  # held here, so only an explicit close() can run its finally
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    from_iterable(generator).subscribe(sub)
    assert not counting.closed.is_set()
    sub.cancel()
    assert counting.closed.is_set()
    assert generator.gi_frame is None  # closed, not merely dropped
    assert counting.pulled == 2


def test_from_iterable_raising_source_errors_after_the_items() -> None:
    """§1.4: an exception from the iterator reaches on_error after the items it produced."""
    boom = ValueError("boom")
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    from_iterable(Counting(3, fail=boom)()).subscribe(sub)
    assert sub.elements == [0, 1, 2]
    assert sub.error is boom


def test_from_iterable_none_element_is_on_error_type_error() -> None:
    """§2.13: None from the iterator becomes on_error(TypeError) after the earlier items."""
    sub: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
    from_iterable([1, None, 2]).subscribe(sub)
    assert sub.elements == [1]
    assert isinstance(sub.error, TypeError)


def test_from_iterable_failing_iter_is_on_error() -> None:
    """§1.9: an iterable whose __iter__ raises gives on_subscribe then on_error."""
    boom = RuntimeError("no iterator")

    class Bad:
        def __iter__(self) -> Iterator[int]:
            raise boom

    sub: RecordingSubscriber[int] = RecordingSubscriber()
    from_iterable(Bad()).subscribe(sub)
    assert sub.subscribe_count == 1
    assert sub.error is boom


def test_from_iterable_rejects_non_iterables_at_once() -> None:
    """from_iterable(None) or a non-iterable is a TypeError when called."""
    with pytest.raises(TypeError):
        from_iterable(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        from_iterable(42)  # type: ignore[arg-type]


def test_from_iterable_rejects_a_non_executor_at_once() -> None:
    """executor= that is not a concurrent.futures.Executor is a TypeError when called, as in
    publish_on, not a failure at subscribe."""
    with pytest.raises(TypeError, match="Executor"):
        from_iterable([1, 2], executor=object())  # type: ignore[arg-type]


def test_from_iterable_over_a_range_longer_than_maxsize_keeps_emitting() -> None:
    """range(2**64) is in memory, but its length does not fit a C ssize_t: asking whether it
    is at its end must not fail it (§1.4 is for a failing source); it emits as far as
    demand reaches, directly and through a fused queue."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(3)
    from_iterable(range(2**64)).subscribe(sub)
    assert sub.elements == [0, 1, 2]
    sub.request(2)
    assert sub.elements == [0, 1, 2, 3, 4]
    assert not sub.is_terminated
    with to_iterator(from_iterable(range(2**64)), prefetch=4) as iterator:
        assert list(itertools.islice(iterator, 10)) == list(range(10))


def test_from_iterable_on_an_executor_pulls_there() -> None:
    """With executor=, next() and the signals run on the executor, not the requester."""
    pulled_on: set[int] = set()

    def items() -> Iterator[int]:
        for i in range(50):
            pulled_on.add(threading.get_ident())
            yield i

    with ThreadPoolExecutor(1) as pool:
        worker = pool.submit(threading.get_ident).result(5)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        from_iterable(items(), executor=pool).subscribe(sub)
        sub.await_terminal()
    assert sub.elements == list(range(50))
    assert pulled_on == {worker}


# -- from_iterable(executor=...): streams sharing one executor take turns ----------------------




def numbers(n: int) -> Iterator[int]:
    """A generator: pulled element by element, never copied in chunks."""
    yield from range(n)


@pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
@pytest.mark.parametrize("source", [range, numbers], ids=["range", "generator"])
def test_from_iterable_streams_on_one_worker_take_turns_of_at_most_a_batch(
    source: Callable[[int], Iterable[int]], every: int
) -> None:
    """Two streams of 20,000 on a shared ThreadPoolExecutor(1): a task delivers at most
    1,024 and gives the thread up, whatever the request pattern (request(1) or request(16)
    from on_next once kept it for the whole stream)."""
    log: list[str] = []
    gate = threading.Event()  # holds the worker until both streams have subscribed
    with ThreadPoolExecutor(1) as pool:
        pool.submit(gate.wait, 10)
        subs = [taking_turns(log, name, every) for name in "ab"]
        for sub in subs:
            from_iterable(source(20_000), executor=pool).subscribe(sub)
        gate.set()
        for sub in subs:
            sub.await_terminal(30)
    for sub in subs:
        assert sub.completed and sub.elements == list(range(20_000))
        sub.assert_no_violations()
    assert longest_turn(log) <= 1024


@pytest.mark.parametrize("every", REQUEST_PATTERNS.values(), ids=list(REQUEST_PATTERNS))
def test_from_iterable_outlives_its_executors_shutdown_by_a_batch_at_most(every: int) -> None:
    """shutdown(cancel_futures=True) from the running stream's on_next: it delivers at most
    the rest of its batch, then fails and closes its generator; the stream waiting its turn
    fails at once, its generator never pulled."""
    pool = ThreadPoolExecutor(1)
    gate = threading.Event()
    pool.submit(gate.wait, 10)
    log: list[str] = []
    running, queued = shutting_down(log, every, pool)  # at the third element
    sources = [Counting(20_000), Counting(20_000)]
    for source, sub in zip(sources, (running, queued), strict=True):
        from_iterable(source(), executor=pool).subscribe(sub)
    gate.set()
    for sub in (running, queued):
        sub.await_terminal(30)
    assert 3 <= len(running.elements) <= 1024  # the shutdown came inside its first task
    assert isinstance(running.error, RuntimeError)
    assert queued.elements == [] and isinstance(queued.error, RuntimeError)
    assert sources[0].closed.wait(5) and sources[1].pulled == 0
    running.assert_no_violations()
    queued.assert_no_violations()


# -- to_iterator -------------------------------------------------------------------------------


def test_to_iterator_yields_every_element() -> None:
    """to_iterator gives the publisher's elements in order, then stops."""
    assert list(to_iterator(from_iterable(range(1000)), prefetch=7)) == list(range(1000))


@pytest.mark.parametrize("prefetch", [1, 2, 4, 16])
def test_to_iterator_never_requests_more_than_prefetch_ahead(prefetch: int) -> None:
    """At most prefetch elements are ever requested beyond what the loop consumed, and the
    generator is never pulled further than that."""
    counting = Counting(200)
    log = RequestLog(from_iterable(counting()))
    consumed = 0
    with to_iterator(log, prefetch=prefetch) as iterator:
        assert log.requested == prefetch
        for element in iterator:
            consumed += 1
            assert element == consumed - 1
            assert log.requested - consumed <= prefetch
            assert counting.pulled - consumed <= prefetch
    assert consumed == 200


def test_to_iterator_close_cancels() -> None:
    """close() cancels the subscription (the generator is closed); next() then stops."""
    counting = Counting()
    generator = counting()  # held here, so only a cancel can close it
    iterator = to_iterator(from_iterable(generator), prefetch=4)
    assert next(iterator) == 0
    iterator.close()
    assert counting.closed.is_set()
    assert generator.gi_frame is None
    with pytest.raises(StopIteration):
        next(iterator)


def _waiting(thread: threading.Thread) -> bool:
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and frame.f_code.co_name == "wait"


class _NextWaiting:
    """One ``next(iterator, None)`` on a thread of its own, entered once it waits for an
    element; ``result()`` joins it. Leaving the block closes the iterator, which wakes the
    thread if an assertion failed before it got its element."""

    def __init__(self, iterator: Iterator[int]) -> None:
        self.iterator = iterator
        self.got: list[int | None] = []
        self.thread = threading.Thread(
            target=lambda: self.got.append(next(iterator, None)), daemon=True
        )

    def __enter__(self) -> _NextWaiting:
        self.thread.start()
        deadline = time.monotonic() + 5
        while not _waiting(self.thread):  # next() found the queue empty and waits
            assert time.monotonic() < deadline
            time.sleep(0.001)
        return self

    def result(self) -> list[int | None]:
        self.thread.join(5)
        return self.got

    def __exit__(self, *exc: object) -> None:
        close = getattr(self.iterator, "close", None)
        if close is not None:
            close()
        self.thread.join(5)


def test_to_iterator_close_from_another_thread_wakes_a_blocked_next() -> None:
    """close() on one thread ends a next() blocked on another with StopIteration."""
    silent = Silent()
    iterator = to_iterator(silent, prefetch=4)
    outcome: list[str] = []
    entered = threading.Event()

    def consume() -> None:
        entered.set()
        try:
            next(iterator)
            outcome.append("element")
        except StopIteration:
            outcome.append("stopped")

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    assert entered.wait(5)
    deadline = time.monotonic() + 5
    while not _waiting(consumer):  # next() is blocked in Condition.wait
        assert time.monotonic() < deadline
        entered.wait(0.001)
    iterator.close()
    consumer.join(5)
    assert outcome == ["stopped"]
    assert silent.cancelled.is_set()


def test_to_iterator_with_block_cancels() -> None:
    """Leaving a with block cancels, even when left by an exception."""
    counting = Counting()
    generator = counting()
    with pytest.raises(KeyError):
        with to_iterator(from_iterable(generator), prefetch=4) as iterator:
            next(iterator)
            raise KeyError("leave")
    assert counting.closed.is_set()
    assert generator.gi_frame is None


def test_to_iterator_dropped_cancels() -> None:
    """§3.13: an iterator dropped without close() cancels when garbage-collected."""
    silent = Silent()
    iterator = to_iterator(silent, prefetch=4)
    del iterator
    gc.collect()
    assert silent.cancelled.is_set()


def test_to_iterator_dropped_cancels_at_once_without_a_gc_pass() -> None:
    """§2.6/§3.13: the last reference to the iterator going cancels then and there: nothing
    the publisher holds refers back to it, so no cyclic garbage collection is needed."""
    counting = Counting()
    generator = counting()  # held here, so only a cancel can close it
    gc.disable()
    try:
        iterator = to_iterator(from_iterable(generator), prefetch=4)
        assert next(iterator) == 0
        del iterator
        assert counting.closed.is_set()
    finally:
        gc.enable()


def test_to_iterator_dropped_over_a_hot_publisher_cancels() -> None:
    """§2.6: a hot publisher holds its subscriber (the queue) until cancelled; that does not
    keep the dropped iterator alive, so it cancels."""
    hot = Silent(hot=True)
    gc.disable()
    try:
        iterator = to_iterator(hot, prefetch=4)
        del iterator
        assert hot.cancelled.is_set()
        assert hot.subscribers == []
    finally:
        gc.enable()


def test_to_iterator_close_wakes_every_blocked_next() -> None:
    """close() ends every next() blocked on other threads, not just one of them."""
    silent = Silent()
    iterator = to_iterator(silent, prefetch=4)
    outcome: list[str] = []

    def consume() -> None:
        try:
            next(iterator)
            outcome.append("element")
        except StopIteration:
            outcome.append("stopped")

    consumers = [threading.Thread(target=consume, daemon=True) for _ in range(2)]
    for consumer in consumers:
        consumer.start()
    deadline = time.monotonic() + 5
    while not all(_waiting(consumer) for consumer in consumers):  # both blocked in wait()
        assert time.monotonic() < deadline
        silent.cancelled.wait(0.001)
    iterator.close()
    for consumer in consumers:
        consumer.join(5)
    assert outcome == ["stopped", "stopped"]


def test_spec313_to_iterator_cancels_a_subscription_whose_subscribe_then_raised() -> None:
    """§1.9/§3.13: a publisher whose subscribe raises after it called on_subscribe: next()
    raises its error, and the subscription it handed over is cancelled, not leaked."""
    boom = RuntimeError("subscribe failed after on_subscribe")
    broken = Silent(then_raise=boom)
    iterator = to_iterator(broken, prefetch=4)
    assert broken.cancelled.is_set()
    with pytest.raises(RuntimeError) as info:
        next(iterator)
    assert info.value is boom


def test_to_iterator_raises_the_error_where_iteration_reaches_it() -> None:
    """The publisher's error is raised by next() after the elements before it; then it stops."""
    boom = ValueError("boom")
    iterator = to_iterator(from_iterable(Counting(3, fail=boom)()), prefetch=2)
    assert [next(iterator) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError) as info:
        next(iterator)
    assert info.value is boom
    with pytest.raises(StopIteration):
        next(iterator)


def test_to_iterator_requests_at_the_limit_after_a_wait_split_the_count() -> None:
    """One element taken, then a next() that waits (the element came after the request:
    the publisher is producing, so nothing more is asked for yet), then a burst:
    request(6), 75% of prefetch=8, goes out at the 6th element taken in all, not 6 after
    the wait."""
    silent = Silent(hot=True)
    iterator = to_iterator(silent, prefetch=8)
    upstream = silent.subscribers[0]
    upstream.on_next(0)
    assert next(iterator) == 0
    with _NextWaiting(iterator) as waiting:
        assert silent.requests == [8]
        for i in range(1, 8):
            upstream.on_next(i)
        assert waiting.result() == [1]
        assert [next(iterator) for _ in range(3)] == [2, 3, 4]
        assert silent.requests == [8]  # 5 taken
        assert next(iterator) == 5
        assert silent.requests == [8, 6]  # the 6th


def test_to_iterator_running_dry_before_the_next_window_arrives_asks_for_the_rest() -> None:
    """A whole window queued at once: request(6) (75% of prefetch=8) at the 6th element,
    with 2 still queued; when next() then finds the queue empty and none of that request
    has arrived, the 2 are asked for before it waits, so the publisher can send the whole
    window in one go."""
    silent = Silent(hot=True)
    iterator = to_iterator(silent, prefetch=8)
    upstream = silent.subscribers[0]
    for i in range(8):
        upstream.on_next(i)
    assert [next(iterator) for _ in range(6)] == list(range(6))
    assert silent.requests == [8, 6]
    assert [next(iterator) for _ in range(2)] == [6, 7]
    with _NextWaiting(iterator) as waiting:
        assert silent.requests == [8, 6, 2]
        upstream.on_next(8)
        assert waiting.result() == [8]


def test_to_iterator_counts_fast_path_elements_when_next_has_to_wait() -> None:
    """Two elements taken without waiting, then a third that next() has to wait for: all
    three count as consumed, the 75% threshold of prefetch=4, so 3 more are requested (if
    the two taken before the wait were not counted, a publisher that sent all it was asked
    for and a consumer waiting for more would wait for each other for ever). The two came
    one by one after the first request, so the wait asks for nothing more by itself."""
    silent = Silent(hot=True)
    iterator = to_iterator(silent, prefetch=4)
    upstream = silent.subscribers[0]
    upstream.on_next(0)
    upstream.on_next(1)
    assert next(iterator) == 0 and next(iterator) == 1  # both queued: no wait
    assert silent.requests == [4]  # 2 of 4 consumed: below 75%
    with _NextWaiting(iterator) as waiting:
        assert silent.requests == [4]
        upstream.on_next(2)
        assert waiting.result() == [2]
        assert silent.requests == [4, 3]


def test_spec107_to_iterator_drops_an_on_next_after_the_end() -> None:
    """An upstream breaking §1.7 (on_next after on_complete): the late element is dropped,
    never yielded after the stream ended."""
    silent = Silent(hot=True)
    iterator = to_iterator(silent, prefetch=4)
    upstream = silent.subscribers[0]
    upstream.on_next(1)
    upstream.on_complete()
    upstream.on_next(2)
    assert list(iterator) == [1]


def test_spec107_to_iterator_reports_an_on_error_after_on_complete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An upstream breaking §1.7 (on_error after on_complete): iteration still ends cleanly
    after the elements, and the late error is reported, naming §1.7, not lost."""
    silent = Silent(hot=True)
    iterator = to_iterator(silent, prefetch=4)
    upstream = silent.subscribers[0]
    upstream.on_next(1)
    upstream.on_complete()
    late = RuntimeError("late")
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        upstream.on_error(late)
    assert list(iterator) == [1]
    reported = [r for r in caplog.records if r.exc_info is not None and r.exc_info[1] is late]
    assert len(reported) == 1 and reported[0].getMessage().startswith("§1.7: ")


def test_spec108_to_iterator_reports_an_on_error_racing_its_close_as_legal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§1.8: an upstream on_error arriving after close() cancelled it is legal: logged
    naming §1.8, not as a §1.7 violation, and never raised by the closed iterator."""
    silent = Silent(hot=True)
    iterator = to_iterator(silent, prefetch=4)
    upstream = silent.subscribers[0]
    iterator.close()
    late = RuntimeError("racing")
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        upstream.on_error(late)
    assert list(iterator) == []
    reported = [r for r in caplog.records if r.exc_info is not None and r.exc_info[1] is late]
    assert len(reported) == 1 and reported[0].getMessage().startswith("§1.8: ")


class _Box:
    """An element that can be weakly referenced."""


def test_spec313_to_iterator_close_lets_go_of_the_queued_elements() -> None:
    """§3.13: close() empties the queue: the elements prefetched but never taken are freed
    while the closed iterator itself is still referenced."""
    refs: list[weakref.ref[_Box]] = []

    def boxes() -> Iterator[_Box]:
        for _ in range(100):
            box = _Box()
            refs.append(weakref.ref(box))
            yield box
            del box

    iterator = to_iterator(from_iterable(boxes()), prefetch=8)
    first = next(iterator)
    iterator.close()
    gc.collect()
    assert len(refs) == 8 and refs[0]() is first
    assert all(ref() is None for ref in refs[1:])
    with pytest.raises(StopIteration):  # the closed iterator, still referenced until here
        next(iterator)


def test_to_iterator_across_threads() -> None:
    """Signals from executor threads reach a consumer iterating on another thread."""
    results: list[int] = []
    with ThreadPoolExecutor(2) as pool:
        source = publish_on(from_iterable(range(5000)), pool, prefetch=32)

        def consume() -> None:
            results.extend(to_iterator(source, prefetch=8))

        consumer = threading.Thread(target=consume)
        consumer.start()
        consumer.join(30)
    assert not consumer.is_alive()
    assert results == list(range(5000))


# -- to_iterator(timeout=...): each wait bounded, then upstream cancelled --------------------

TIMES_OUT = 0.05  # where a test asserts that a timeout happened (a slow machine only waits longer)
NEVER = 30.0  # where a test asserts that no timeout happens


class _Hot:
    """A publisher that keeps its one subscriber for the test (or a producer thread) to
    signal, and counts the cancels it gets (under a lock: they may come from any thread)."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[int] | None = None
        self.cancels = 0
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        hot = self

        class Counted:
            def request(self, n: int) -> None:
                pass

            def cancel(self) -> None:
                with hot._lock:
                    hot.cancels += 1

        self.subscriber = subscriber
        subscriber.on_subscribe(Counted())


def test_to_iterator_timeout_on_a_silent_publisher_cancels_and_raises() -> None:
    """§3.12: a publisher that never signals after on_subscribe: next() waits timeout
    seconds, cancels upstream and raises TimeoutError naming the timeout; then the iterator
    is closed: every later next() raises StopIteration."""
    silent = Silent()
    iterator = to_iterator(silent, timeout=TIMES_OUT)
    message = r"^to_iterator\(\): no element or end within timeout=0\.05 s; upstream cancelled$"
    with pytest.raises(TimeoutError, match=message):
        next(iterator)
    assert silent.cancelled.is_set()
    for _ in range(2):
        with pytest.raises(StopIteration):
            next(iterator)


def test_to_iterator_timeout_after_elements_then_silence_closes_the_generator() -> None:
    """A generator (on an executor) that yields three elements, then blocks: the elements
    come first, even when the consumer takes them long after they were queued (a timeout
    only fires on an empty queue), then TimeoutError; the cancel closes the generator once
    its blocked next() returns (§3.13: its finally runs)."""
    blocked = threading.Event()
    release = threading.Event()
    closed = threading.Event()

    def three_then_silence() -> Iterator[int]:
        try:
            yield from range(3)
            blocked.set()
            release.wait(NEVER)
            yield from itertools.count(3)  # ends only if cancelled
        finally:
            closed.set()

    with ThreadPoolExecutor(1) as pool:
        iterator = to_iterator(
            from_iterable(three_then_silence(), executor=pool), prefetch=8, timeout=TIMES_OUT
        )
        assert blocked.wait(5)  # the three are queued
        queued_at = time.monotonic()
        while time.monotonic() - queued_at <= 2 * TIMES_OUT:  # longer than the timeout
            time.sleep(0.01)
        assert [next(iterator) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(TimeoutError, match=r"timeout=0\.05 s"):
            next(iterator)
        release.set()
        assert closed.wait(5)
        assert next(iterator, None) is None


def test_to_iterator_timeout_counts_from_each_wait_not_from_the_last_element() -> None:
    """The timeout bounds each next()'s wait, counted from when it starts to wait (like
    Reactor's timeout() per element): a next() called long after the element before it
    still waits the whole timeout before it gives up."""
    hot = _Hot()
    iterator = to_iterator(hot, timeout=TIMES_OUT)
    assert hot.subscriber is not None
    hot.subscriber.on_next(0)
    assert next(iterator) == 0
    taken_at = time.monotonic()
    while time.monotonic() - taken_at <= 2 * TIMES_OUT:  # the consumer busy elsewhere
        time.sleep(0.01)
    waiting_from = time.monotonic()
    with pytest.raises(TimeoutError):
        next(iterator)
    assert time.monotonic() - waiting_from >= TIMES_OUT * 0.9  # a clock tick of slack
    assert hot.cancels == 1


def test_to_iterator_timeout_never_fires_while_the_publisher_answers_each_wait() -> None:
    """A slow publisher that emits only once next() is already waiting, each time, then
    completes: every element arrives within the timeout, so none fires; the end is a
    plain StopIteration and nothing is cancelled."""
    hot = _Hot()
    iterator = to_iterator(hot, prefetch=32, timeout=NEVER)  # all 20 requested up front
    got: list[int] = []
    failure: list[BaseException] = []

    def consume() -> None:
        try:
            got.extend(iterator)
        except BaseException as exc:
            failure.append(exc)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    assert hot.subscriber is not None
    for i in range(20):
        deadline = time.monotonic() + 5
        while not _waiting(consumer):  # next() found the queue empty and waits
            assert time.monotonic() < deadline and consumer.is_alive()
            time.sleep(0.001)
        hot.subscriber.on_next(i)
    while not _waiting(consumer):
        time.sleep(0.001)
    hot.subscriber.on_complete()
    consumer.join(5)
    assert failure == [] and got == list(range(20)) and hot.cancels == 0


class _ArrivesAsTheWaitTimesOut:
    """Wraps the iterator's wake-up event: when a wait times out, ``arrive()`` runs before
    the wait returns, so an element lands exactly as the timeout fires."""

    def __init__(self, event: threading.Event, arrive: Callable[[], None]) -> None:
        self._event = event
        self._arrive = arrive

    def clear(self) -> None:
        self._event.clear()

    def set(self) -> None:
        self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        woke = self._event.wait(timeout)
        if not woke:
            self._arrive()
        return woke


def test_to_iterator_timeout_returns_an_element_landing_as_it_fires() -> None:
    """An element that lands as the wait times out is returned, never dropped: the timeout
    fires only on a queue found empty after the wait; the next wait times out afresh."""
    hot = _Hot()
    iterator = to_iterator(hot, timeout=TIMES_OUT)
    subscriber = hot.subscriber
    assert subscriber is not None
    landed = itertools.count(7)
    iterator._wakeup = _ArrivesAsTheWaitTimesOut(  # type: ignore[assignment]
        iterator._wakeup, lambda: subscriber.on_next(next(landed))
    )
    assert next(iterator) == 7
    assert next(iterator) == 8
    assert hot.cancels == 0


@pytest.mark.stress
def test_to_iterator_timeout_racing_elements_from_another_thread(switching: None) -> None:
    """A producer thread emits a few elements with gaps around the timeout, then stops, so
    each round ends in TimeoutError, some elements racing it: what next() returned is in
    order, nothing is returned after the TimeoutError (the producer goes on emitting into
    the cancelled subscription) and upstream is cancelled exactly once (seeded rounds)."""
    timeout = 0.002
    rng = random.Random(20)
    for round_ in range(100):
        hot = _Hot()
        iterator = to_iterator(hot, prefetch=16, timeout=timeout)
        subscriber = hot.subscriber
        assert subscriber is not None
        gaps = [rng.uniform(0.5, 1.5) * timeout for _ in range(rng.randrange(1, 7))]

        def produce(gaps: list[float] = gaps, subscriber: Subscriber[int] = subscriber) -> None:
            for i, gap in enumerate(gaps):
                time.sleep(gap)
                subscriber.on_next(i)

        producer = threading.Thread(target=produce)
        producer.start()
        got: list[int] = []
        with pytest.raises(TimeoutError):
            while True:
                got.append(next(iterator))
        assert next(iterator, None) is None
        producer.join(5)
        assert next(iterator, None) is None, round_
        assert got == list(range(len(got))), (round_, got)
        assert hot.cancels == 1, round_


def test_to_iterator_refuses_a_bad_timeout_at_the_call() -> None:
    """timeout is None or a finite number of seconds > 0: a non-number (or a bool) is a
    TypeError, zero, a negative, NaN or infinity a ValueError, both naming timeout."""
    source = from_iterable([1])
    for wrong_type in ("1", True, [1.0]):
        with pytest.raises(TypeError, match=r"^to_iterator\(\): timeout must be"):
            to_iterator(source, timeout=wrong_type)  # type: ignore[arg-type]
    for wrong_value in (0, -1.0, float("nan"), float("inf"), 10**400):
        with pytest.raises(ValueError, match=r"^to_iterator\(\): timeout must be"):
            to_iterator(source, timeout=wrong_value)
    assert list(to_iterator(from_iterable([1, 2]), timeout=1)) == [1, 2]  # an int is fine


# -- fusion: a drain publisher appends straight into to_iterator's queue ----------------------


@pytest.fixture
def on_next_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts PrefetchQueue.on_next calls: zero means the drain filled the queue directly."""
    from reactive_streams._prefetch import PrefetchQueue

    calls: list[int] = []
    original = PrefetchQueue.on_next

    def counted(self: PrefetchQueue[Any], element: Any) -> None:
        calls.append(1)
        original(self, element)

    monkeypatch.setattr(PrefetchQueue, "on_next", counted)
    return calls


@pytest.mark.parametrize("prefetch", [1, 3, 16])
def test_fused_to_iterator_pulls_only_as_far_as_prefetch(
    prefetch: int, on_next_calls: list[int]
) -> None:
    """from_iterable -> to_iterator is fused (no on_next call) and the generator is still
    never pulled more than prefetch ahead of the loop."""
    counting = Counting(100)
    consumed = 0
    for element in to_iterator(from_iterable(counting()), prefetch=prefetch):
        assert element == consumed
        consumed += 1
        assert counting.pulled - consumed <= prefetch
    assert consumed == 100 and on_next_calls == []


def test_fused_first_element_is_not_held_back_by_a_slow_source(on_next_calls: list[int]) -> None:
    """The fused drain wakes the consumer on the first element: next() returns it while the
    generator, on another thread, is still busy producing the second."""
    release = threading.Event()

    def slow() -> Iterator[int]:
        yield 0
        assert release.wait(10)  # not released until the consumer has element 0
        yield 1

    with ThreadPoolExecutor(1) as pool:
        iterator = to_iterator(from_iterable(slow(), executor=pool), prefetch=8)
        assert next(iterator) == 0
        release.set()
        assert list(iterator) == [1]
    assert on_next_calls == []


@pytest.mark.parametrize("kind", ["list (copied in chunks)", "generator (element-wise)"])
def test_fused_none_from_the_source_is_type_error(kind: str) -> None:
    """None pulled by a fused drain fails the stream after the elements before it, whether
    the source is copied a chunk at a time or pulled element by element."""
    values: list[int | None] = [1, None, 3]
    source = values if kind.startswith("list") else (value for value in values)
    iterator = to_iterator(from_iterable(source))
    assert next(iterator) == 1
    with pytest.raises(TypeError, match="2.13"):
        next(iterator)


# -- in-memory sources: copied into a fused queue a chunk at a time ----------------------------


class _Numbers:
    """A user-defined iterator: it may block, so it is never copied in chunks."""

    def __init__(self) -> None:
        self.i = 0

    def __iter__(self) -> _Numbers:
        return self

    def __next__(self) -> int:
        self.i += 1
        return self.i


class _Sequence:
    """A user-defined sequence: ``reversed()`` over it calls its ``__getitem__``."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> int:
        return index


@pytest.mark.parametrize(
    ("source", "in_memory"),
    [
        ([1], True),
        ((1,), True),
        (range(3), True),
        (range(2**65), True),
        ("ab", True),
        (b"ab", True),
        ({1: 2}, True),
        ({1: 2}.items(), True),
        ({1}, True),
        (reversed([1]), True),
        ((i for i in range(3)), False),
        (map(int, "12"), False),
        (_Numbers(), False),
        (reversed(range(3)), True),  # a range_iterator
        (reversed(_Sequence()), False),  # `reversed` over any __getitem__, which may block
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, bool) else str(value),
)
def test_in_memory_sources_are_recognised_by_their_iterator_type(
    source: Any, in_memory: bool
) -> None:
    """Only builtin containers' iterators count as in memory (never slow); a generator, a
    map or a user iterator, which may block between elements, keep the element-wise path."""
    from reactive_streams.publishers._iterable import _IteratorSource

    assert _IteratorSource(iter(source)).in_memory is in_memory


@pytest.mark.parametrize("prefetch", [1, 16, 3000])
def test_in_memory_source_is_pulled_only_as_far_as_prefetch(
    prefetch: int, on_next_calls: list[int]
) -> None:
    """A list iterator copied in chunks is still pulled exactly as far as demand reaches: its
    remaining length shows no look-ahead beyond prefetch, across the 1024-element chunks."""
    import operator

    values = list(range(5000))
    items = iter(values)
    consumed = 0
    for element in to_iterator(from_iterable(items), prefetch=prefetch):
        assert element == consumed
        consumed += 1
        pulled = len(values) - operator.length_hint(items)
        assert pulled - consumed <= prefetch
        if consumed == 1:  # the first window came whole, across chunks of 1024
            assert pulled >= min(prefetch, len(values))
    assert consumed == len(values) and on_next_calls == []


@pytest.mark.parametrize("at", [0, 5, 1023, 1024, 2500])
def test_in_memory_none_fails_after_the_elements_before_it(at: int) -> None:
    """None at any position, including either side of a chunk boundary, fails the stream
    with TypeError after exactly the elements before it."""
    values: list[int | None] = list(range(3000))
    values[at] = None
    received: list[int | None] = []
    with pytest.raises(TypeError, match="2.13"):
        for element in to_iterator(from_iterable(values), prefetch=4096):
            received.append(element)
    assert received == values[:at]


def test_in_memory_iteration_error_comes_after_the_elements_before_it() -> None:
    """A dict that changes size while it is iterated: the elements pulled before the
    iterator raised are delivered, then its RuntimeError is raised at the loop (§1.4)."""
    table = {i: i for i in range(10)}
    received: list[int] = []
    with pytest.raises(RuntimeError, match="changed size"):
        for key in to_iterator(from_iterable(table), prefetch=4):
            received.append(key)
            if key == 1:
                table[100] = 100  # the next chunk's first pull raises
    assert received == [0, 1, 2, 3]


def test_in_memory_source_across_threads_keeps_order_and_bounds(on_next_calls: list[int]) -> None:
    """A list on one executor, publish_on to another, into to_iterator: chunks move queue to
    queue, every element arrives in order, and the list iterator is never further ahead of
    the loop than the two windows together."""
    import operator

    values = list(range(20_000))
    items = iter(values)
    consumed = 0
    with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
        boundary = publish_on(from_iterable(items, executor=producer), consumer, prefetch=32)
        for element in to_iterator(boundary, prefetch=16):
            assert element == consumed
            consumed += 1
            assert len(values) - operator.length_hint(items) - consumed <= 32 + 16
    assert consumed == len(values) and on_next_calls == []


@pytest.mark.stress
def test_in_memory_close_while_the_producer_copies_stops_within_the_window() -> None:
    """close() while a drain on another thread copies chunks: next() stops at once, and the
    cancel is not lost on the running drain: the list is never pulled beyond the window.
    (That the copy stops at the close is pinned down by test_drain's
    test_a_sink_closed_when_its_first_chunk_lands_gets_no_further_chunk; that an element
    copied in after the close is never yielded, by
    test_an_element_arriving_after_close_is_never_yielded_nor_kept: by chance that window
    does not open here.)"""
    import operator

    with ThreadPoolExecutor(1) as pool:
        for _ in range(200):
            items = iter(range(10**6))
            iterator = to_iterator(from_iterable(items, executor=pool), prefetch=2048)
            for _ in range(50):
                next(iterator)
            iterator.close()
            with pytest.raises(StopIteration):
                next(iterator)
            pool.submit(lambda: None).result()  # the drain's task, if any, is over
            assert operator.length_hint(items) >= 10**6 - 2048 - 1536


@pytest.mark.stress
def test_fused_close_while_the_producer_appends_stops_and_closes_the_generator() -> None:
    """close() while a drain on another thread is appending: next() stops at once, and the
    cancel is not lost on the running drain: the generator is closed. (That an element
    appended after the close is never yielded is pinned down by
    test_an_element_arriving_after_close_is_never_yielded_nor_kept: by chance that window
    does not open here.)"""
    with ThreadPoolExecutor(1) as pool:
        for _ in range(200):
            counting = Counting()
            iterator = to_iterator(from_iterable(counting(), executor=pool), prefetch=64)
            for _ in range(50):
                next(iterator)
            iterator.close()
            with pytest.raises(StopIteration):
                next(iterator)
            assert counting.closed.wait(5)


@pytest.mark.parametrize("kind", ["generator (appended one by one)", "list (copied in chunks)"])
def test_an_element_arriving_after_close_is_never_yielded_nor_kept(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() on the consumer's thread lands just before a fused drain on another thread puts
    element 8 into the queue, so 8 arrives in the closed queue: next() stops instead of
    yielding it (§3.12), and the drain, on seeing the cancel, clears the queue again, so
    nothing is kept (§3.13, the QueueSink contract)."""
    import reactive_streams._prefetch as prefetch_module

    at_put = threading.Event()  # the drain is about to put element 8 in
    closed = threading.Event()  # the consumer closed the iterator
    put = threading.Event()  # element 8 is in the closed queue
    looked = threading.Event()  # the consumer called next() meanwhile
    queues: list[deque[Any]] = []

    # The window between the drain's last cancel check and its append / extend is a few
    # bytecodes wide, and no public hook reaches into it. To open it every time, the deque
    # that PrefetchQueue creates is replaced by one that holds the drain there.
    class HoldsElement8(deque[Any]):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            queues.append(self)

        def append(self, element: Any) -> None:
            self._put(super().append, element, element == 8)

        def extend(self, values: Iterable[Any]) -> None:
            chunk = list(values)
            self._put(super().extend, chunk, chunk[:1] == [8])

        def _put(self, put_in: Callable[[Any], None], what: Any, hold: bool) -> None:
            if hold:
                at_put.set()
                closed.wait(5)
            put_in(what)
            if hold:
                put.set()
                looked.wait(5)

    monkeypatch.setattr(prefetch_module, "deque", HoldsElement8)
    values = range(100)
    source = (v for v in values) if kind.startswith("generator") else iter(list(values))
    with ThreadPoolExecutor(1) as pool:
        iterator = to_iterator(from_iterable(source, executor=pool), prefetch=8)
        try:
            assert [next(iterator) for _ in range(6)] == list(range(6))  # 6th: request(6)
            assert at_put.wait(5)
            iterator.close()
        finally:
            closed.set()
        try:
            assert put.wait(5)
            with pytest.raises(StopIteration):
                next(iterator)
        finally:
            looked.set()
        pool.submit(lambda: None).result(5)  # the drain's task is over
    assert len(queues) == 1 and len(queues[0]) == 0


def test_fused_queue_to_queue_keeps_order_and_bounds(on_next_calls: list[int]) -> None:
    """publish_on -> to_iterator moves whole batches queue to queue: every element in order,
    and the generator never further ahead than the two windows together."""
    counting = Counting(5000)
    consumed = 0
    with ThreadPoolExecutor(1) as pool:
        boundary = publish_on(from_iterable(counting()), pool, prefetch=32)
        for element in to_iterator(boundary, prefetch=16):
            assert element == consumed
            consumed += 1
            assert counting.pulled - consumed <= 32 + 16
    assert consumed == 5000 and on_next_calls == []


# -- elements are passed along, never compared ---------------------------------------------------


def _generated(items: list[Incomparable]) -> Iterator[Incomparable]:
    yield from items


_ITERATOR_PATHS: dict[str, Callable[[list[Incomparable], ThreadPoolExecutor], Iterator[Any]]] = {
    "list -> to_iterator (chunk copy)": lambda items, pool: to_iterator(
        from_iterable(items), prefetch=8
    ),
    "generator -> to_iterator (fused append)": lambda items, pool: to_iterator(
        from_iterable(_generated(items)), prefetch=8
    ),
    "publish_on -> to_iterator (queue to queue)": lambda items, pool: to_iterator(
        publish_on(from_iterable(_generated(items)), pool, prefetch=8), prefetch=4
    ),
}


@pytest.mark.parametrize("path", list(_ITERATOR_PATHS))
def test_elements_that_refuse_comparison_pass_every_fused_path(path: str) -> None:
    """Elements whose == raises (as numpy arrays and DataFrames do in a boolean context)
    arrive whole and in order through each fused path: no marker test compares them."""
    items = [Incomparable(i) for i in range(50)]
    with ThreadPoolExecutor(1) as pool:
        received = list(_ITERATOR_PATHS[path](items, pool))
    assert [element.value for element in received] == list(range(50))


def test_elements_that_refuse_comparison_pass_publish_on_to_a_subscriber() -> None:
    """publish_on's drain pops its queue for a plain subscriber without comparing elements."""
    items = [Incomparable(i) for i in range(50)]
    subscriber: RecordingSubscriber[Incomparable] = RecordingSubscriber(UNBOUNDED)
    with ThreadPoolExecutor(1) as pool:
        publish_on(from_iterable(_generated(items)), pool, prefetch=8).subscribe(subscriber)
        subscriber.await_terminal()
    assert [element.value for element in subscriber.elements] == list(range(50))
    assert subscriber.completed


def test_numpy_arrays_pass_publish_on_and_to_iterator() -> None:
    """The case behind the rule above: numpy arrays through a thread boundary."""
    numpy = pytest.importorskip("numpy")
    arrays = [numpy.arange(i, i + 3) for i in range(20)]
    with ThreadPoolExecutor(1) as pool:
        received = list(to_iterator(publish_on(from_iterable(arrays), pool, prefetch=4)))
    assert len(received) == 20
    assert all((got == want).all() for got, want in zip(received, arrays, strict=True))


@pytest.mark.parametrize(
    "name",
    ["to_iterator", "to_async_iterator", "to_observable", "to_async_observable", "publish_on",
     "checked"],
)  # fmt: skip
def test_functions_taking_a_publisher_refuse_anything_else_at_the_call(name: str) -> None:
    """None, or an object without subscribe(), is a TypeError naming the function, raised
    when it is called rather than as a failure at subscribe time."""
    from reactive_streams import checked
    from reactive_streams.adapters.async_iterables import to_async_iterator

    with ThreadPoolExecutor(1) as executor:
        functions: dict[str, Callable[[Any], object]] = {
            "to_iterator": to_iterator,
            "to_async_iterator": to_async_iterator,
            "publish_on": lambda publisher: publish_on(publisher, executor),
            "checked": checked,
        }
        if name == "to_observable":
            functions[name] = pytest.importorskip("reactive_streams.adapters.rx").to_observable
        elif name == "to_async_observable":
            aio = pytest.importorskip("reactive_streams.adapters.aioreactive")
            functions[name] = aio.to_async_observable
        for not_a_publisher in (None, 42, [1, 2]):
            with pytest.raises(TypeError, match=rf"{name}\(\) requires a Publisher"):
                functions[name](not_a_publisher)


def test_to_iterator_rejects_bad_arguments() -> None:
    """to_iterator(None) is a TypeError; a non-positive prefetch a ValueError."""
    with pytest.raises(TypeError):
        to_iterator(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        to_iterator(from_iterable([1]), prefetch=0)


@pytest.mark.asyncio
@pytest.mark.timeout(30)
async def test_to_iterator_on_a_running_loop_raises_instead_of_blocking() -> None:
    """On an event loop's thread, next() that would block raises RuntimeError saying what to
    use instead; elements already there are returned without blocking."""
    asyncio.get_running_loop().set_debug(True)
    ready = to_iterator(from_iterable([1, 2]), prefetch=4)
    assert next(ready) == 1  # available now: no blocking involved
    silent = Silent()
    waiting = to_iterator(silent, prefetch=4)
    with pytest.raises(RuntimeError, match="event loop") as info:
        next(waiting)
    assert "to_async_iterator" in str(info.value)
    waiting.close()
    assert silent.cancelled.is_set()
    ready.close()


def test_a_generator_requested_unbounded_completes_after_its_last_element() -> None:
    """§1.5: a plain iterator whose length is unknown (a generator, not a list) finds its end
    only by pulling; with unbounded demand that pull ends the drain's loop, and the stream
    completes there (a range or a list would complete through its length hint instead)."""

    def numbers() -> Any:
        yield from range(3)

    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    from_iterable(numbers()).subscribe(sub)
    assert sub.elements == [0, 1, 2]
    assert sub.completed
    assert sub.error is None


@pytest.mark.parametrize(("fail_at", "yielded"), [(1, []), (2, [0, 1, 2, 3])])
def test_spec316_an_upstream_request_raising_loses_no_element_of_to_iterator(
    fail_at: int, yielded: list[int]
) -> None:
    """§3.16 broken upstream: its first request (in on_subscribe) or its replenishing one
    raises. Every element it sent is still yielded, then next() raises the error naming the
    rule (it escaped from the next() that made the request, and the element that next() had
    popped was lost); upstream is cancelled."""
    cancelled: list[bool] = []

    class RaisingRequest:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            calls = 0

            class _Subscription:
                def request(self, n: int) -> None:
                    nonlocal calls
                    calls += 1
                    if calls >= fail_at:
                        raise RuntimeError("request raised")
                    for i in range(n):
                        subscriber.on_next(i)

                def cancel(self) -> None:
                    cancelled.append(True)

            subscriber.on_subscribe(_Subscription())

    got: list[int] = []
    with pytest.raises(RuntimeError, match="§3.16") as failure:
        for element in to_iterator(RaisingRequest(), prefetch=4):
            got.append(element)
    assert got == yielded and cancelled == [True]
    assert str(failure.value.__cause__) == "request raised"


@pytest.mark.parametrize("prefetch", [8, 1])
def test_to_iterator_ends_after_an_interrupt_inside_its_replenishing_request(
    prefetch: int,
) -> None:
    """A KeyboardInterrupt inside the request next() makes (a synchronous upstream pulls
    its generator there) ended that subscription: it leaves next(), and the iteration is
    over, as a generator's is once an exception left it; a later next() stops at once
    instead of waiting for ever."""

    def numbers() -> Iterator[int]:
        for i in range(20):
            if i == 10:
                raise KeyboardInterrupt  # as Ctrl-C does in whatever frame is running
            yield i

    it = to_iterator(from_iterable(numbers()), prefetch=prefetch)
    got: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        for x in it:
            got.append(x)
    assert got == list(range(len(got))) and len(got) < 10
    rest: list[int] = []
    later = threading.Thread(target=lambda: rest.extend(it), daemon=True)
    later.start()
    later.join(5)
    assert not later.is_alive(), "next() after the interrupt waited for ever"
    assert rest == []


def test_spec109_to_iterator_refuses_an_element_before_on_subscribe() -> None:
    """§1.9: an on_next before on_subscribe was never requested (the prefetch window is
    asked for in on_subscribe): iteration raises the violation, and the subscription that
    comes after it is cancelled."""
    late = RecordingSubscription()

    class Early:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_next(1)
            subscriber.on_subscribe(late)

    with pytest.raises(ProtocolViolation) as info:
        list(to_iterator(Early()))
    assert info.value.rule == "1.9"
    assert late.cancelled.is_set() and late.requests == []


def test_to_iterator_ends_after_an_interrupt_inside_the_request_a_waiting_next_makes() -> None:
    """The request a next() that found the queue empty makes (its replenishment, or the one
    poll() leads to) may run a synchronous upstream too: a KeyboardInterrupt there ends the
    iteration and cancels the subscription (§3.13)."""
    upstream = RecordingSubscription()
    requests = 0

    class InterruptedSecondRequest(RecordingSubscription):
        def request(self, n: int) -> None:
            nonlocal requests
            requests += 1
            if requests == 2:
                raise KeyboardInterrupt
            upstream.request(n)

        def cancel(self) -> None:
            upstream.cancel()

    sink: list[Subscriber[int]] = []

    class Held:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            sink.append(subscriber)
            subscriber.on_subscribe(InterruptedSecondRequest())

    it = to_iterator(Held(), prefetch=1)
    raised: list[BaseException] = []

    def waiting_next() -> None:
        try:
            next(it)
        except BaseException as exc:  # noqa: BLE001 (the KeyboardInterrupt under test)
            raised.append(exc)

    waiter = threading.Thread(target=waiting_next)
    it._wakeup.set()  # cleared by next() once in its slow path, where poll() takes elements
    waiter.start()  # finds the queue empty
    deadline = time.monotonic() + 5
    while it._wakeup.is_set() and time.monotonic() < deadline:
        time.sleep(0.001)
    sink[0].on_next(0)  # poll() takes it and replenishes: the request raises
    waiter.join(5)
    assert [type(exc) for exc in raised] == [KeyboardInterrupt]
    assert upstream.cancelled.is_set()
    assert list(it) == []


def test_spec207_a_request_while_the_publisher_is_still_in_its_first_one_waits_for_it() -> None:
    """§2.7: to_iterator makes its first request in on_subscribe, on the publisher's thread,
    which emits inside it; the request due at 75% (next() on the consumer's thread) is not
    made while that call is in progress, but by the publisher's thread once it returns, so
    requests never overlap."""
    may_return = threading.Event()
    calls: list[tuple[str, int, bool]] = []  # thread, n, overlapping another call
    inside = [0]

    class Publisher:
        def subscribe(self, subscriber: Subscriber[Any]) -> None:
            class Subscription:
                def request(self, n: int) -> None:
                    calls.append((threading.current_thread().name, n, inside[0] > 0))
                    inside[0] += 1
                    try:
                        if len(calls) == 1:
                            for i in range(4):
                                subscriber.on_next(i)
                            may_return.wait(5)
                    finally:
                        inside[0] -= 1

                def cancel(self) -> None:
                    pass

            threading.Thread(
                target=subscriber.on_subscribe, args=(Subscription(),), name="publisher"
            ).start()

    with to_iterator(Publisher(), prefetch=4) as iterator:
        assert [next(iterator) for _ in range(3)] == [0, 1, 2]  # request(3) is due
        may_return.set()
        deadline = time.monotonic() + 5
        while len(calls) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.001)
    assert calls == [("publisher", 4, False), ("publisher", 3, False)]


class _ParksARequest:
    """A publisher that calls on_subscribe on a thread of its own and emits inside its
    first request; once the consumer has taken ``taken`` elements (its request at 75% then
    waits for this call to return, §2.7), it does ``then`` before returning."""

    def __init__(self, then: Callable[[Subscriber[Any]], None]) -> None:
        self.then = then
        self.taken = threading.Event()
        self.requests: list[int] = []
        self.raised: BaseException | None = None

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        publisher = self

        class Subscription:
            def request(self, n: int) -> None:
                publisher.requests.append(n)
                if len(publisher.requests) == 1:
                    for i in range(n):
                        subscriber.on_next(i)
                    assert publisher.taken.wait(5)
                    publisher.then(subscriber)

            def cancel(self) -> None:
                pass

        def run() -> None:  # the publisher's thread: what on_subscribe raised is kept
            try:
                subscriber.on_subscribe(Subscription())
            except BaseException as exc:
                publisher.raised = exc

        threading.Thread(target=run, daemon=True).start()


def _take_all(publisher: _ParksARequest, taken: int) -> tuple[list[int], BaseException | None]:
    """Iterate to_iterator(publisher, prefetch=4) on a thread; tell the publisher once
    ``taken`` elements were taken; return what came and the error it ended with."""
    got: list[int] = []
    ending: list[BaseException | None] = [None]

    def consume() -> None:
        try:
            for element in to_iterator(publisher, prefetch=4):
                got.append(element)
                if len(got) == taken:
                    publisher.taken.set()
        except Exception as exc:
            ending[0] = exc

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    consumer.join(5)
    assert not consumer.is_alive(), f"the consumer waits for ever, after {got}"
    return got, ending[0]


def test_spec204_a_request_parked_behind_the_first_is_not_made_after_the_end() -> None:
    """§2.4, §2.7: the request due at 75% waits for the publisher's first call to return;
    the publisher completes inside that call, so the parked request is never made."""
    publisher = _ParksARequest(lambda subscriber: subscriber.on_complete())
    assert _take_all(publisher, 3) == ([0, 1, 2, 3], None)
    assert publisher.requests == [4]


def test_spec101_overproduction_is_caught_while_a_request_is_parked() -> None:
    """§1.1: what the upstream may send is what it was really asked for. A request parked
    behind the publisher's first call (§2.7) is not counted until it is made, so three
    elements beyond the four asked for are an OverflowViolation, after the four."""

    def overproduce(subscriber: Subscriber[Any]) -> None:
        for i in range(4, 7):
            subscriber.on_next(i)

    publisher = _ParksARequest(overproduce)
    got, error = _take_all(publisher, 3)
    assert got == [0, 1, 2, 3]
    assert isinstance(error, OverflowViolation)
    assert publisher.requests == [4]


def test_spec316_an_interrupt_in_the_first_request_fails_the_consumer_it_parked() -> None:
    """§3.16, §2.7: the publisher's first request raises a BaseException on its own thread
    after the consumer's request was parked behind it: that request will never be made,
    so the consumer hears why, after the elements before it, instead of waiting for ever;
    the BaseException goes on to the publisher's thread."""

    def interrupt(subscriber: Subscriber[Any]) -> None:
        raise SystemExit("interrupted on the publisher's thread")

    publisher = _ParksARequest(interrupt)
    got, error = _take_all(publisher, 3)
    assert got == [0, 1, 2, 3]
    assert isinstance(error, RuntimeError) and "§3.16" in str(error)
    assert isinstance(error.__cause__, SystemExit)
    deadline = time.monotonic() + 5
    while publisher.raised is None:  # the consumer heard it before the exception went on
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert publisher.raised is error.__cause__
