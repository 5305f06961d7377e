"""adapters.rx: from_observable strategies, to_observable, rx_processor."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.subject import Subject

from adapters.iterables import from_iterable, to_iterator
from adapters.rx import from_observable, rx_processor, to_observable
from rs_core import OverflowViolation
from rs_core.testing import RecordingSubscriber


def test_block_paces_a_cold_source_by_demand_and_buffer_size() -> None:
    """A cold Observable is pulled at most buffer_size (+1 waiting) beyond demand."""
    pulled = 0

    def gen() -> Iterator[int]:
        nonlocal pulled
        for i in range(100_000):
            pulled += 1
            yield i

    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    from_observable(reactivex.from_iterable(gen()), buffer_size=16).subscribe(sub)
    sub.await_count(10)
    sub.await_condition(lambda: pulled >= 10 + 16, what="the buffer to fill")
    sub.expect_no_signals(0.05)
    assert pulled <= 10 + 16 + 1
    sub.cancel()
    sub.assert_no_violations()


def test_block_is_lossless_and_ordered_through_to_iterator() -> None:
    """Every element of a cold source arrives, in order."""
    assert list(to_iterator(from_observable(reactivex.range(5000)), prefetch=64)) == list(
        range(5000)
    )


def test_cancel_ends_the_owned_thread() -> None:
    """Cancelling releases a blocked emitter and its thread ends."""
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    from_observable(reactivex.range(10**9), buffer_size=4).subscribe(sub)
    sub.await_count(1)
    owned = [t for t in threading.enumerate() if t.name == "rs-from-observable"]
    assert owned
    sub.cancel()
    for thread in owned:
        thread.join(5)
        assert not thread.is_alive()


def _hot(strategy: str, size: int, n: int, initial: int) -> tuple[Any, RecordingSubscriber[int]]:
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, overflow=strategy, buffer_size=size)
    sub: RecordingSubscriber[int] = RecordingSubscriber(initial)
    publisher.subscribe(sub)
    for i in range(n):
        subject.on_next(i)
    return publisher, sub


def test_drop_keeps_the_oldest_and_counts_drops() -> None:
    """drop: beyond buffer_size the newest are dropped and counted."""
    publisher, sub = _hot("drop", 3, 10, 1)
    sub.request(10)
    assert sub.elements == [0, 1, 2, 3] and publisher.dropped == 6


def test_latest_keeps_the_newest() -> None:
    """latest: the oldest buffered elements give way to the newest."""
    publisher, sub = _hot("latest", 2, 10, 0)
    sub.request(5)
    assert sub.elements == [8, 9] and publisher.dropped == 8


def test_buffer_overflow_error_names_the_bound_after_buffered_elements() -> None:
    """buffer: overflow becomes on_error naming buffer_size, after the buffered elements."""
    _, sub = _hot("buffer", 2, 5, 0)
    sub.request(5)
    assert sub.elements == [0, 1]
    assert isinstance(sub.error, OverflowViolation) and "buffer_size=2" in str(sub.error)


def test_error_strategy_fails_on_an_element_without_demand() -> None:
    """error: the first element beyond demand fails the stream (§1.1)."""
    _, sub = _hot("error", 16, 3, 1)
    sub.await_terminal()
    assert sub.elements == [0] and isinstance(sub.error, OverflowViolation)


def test_block_on_an_event_loop_thread_errors_instead_of_deadlocking() -> None:
    """An Observable emitting on a running loop's thread is never blocked: a clear error."""
    subject: Subject[int] = Subject()
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    from_observable(subject, buffer_size=1).subscribe(sub)

    async def emit() -> None:
        for i in range(3):
            subject.on_next(i)

    asyncio.run(emit())
    sub.request(5)
    sub.await_terminal()
    assert isinstance(sub.error, RuntimeError) and "event loop" in str(sub.error)


def test_bad_overflow_name_is_rejected() -> None:
    """An unknown strategy is a ValueError naming the choices."""
    with pytest.raises(ValueError, match="overflow must be one of"):
        from_observable(reactivex.empty(), overflow="spill")


def test_to_observable_delivers_and_dispose_cancels() -> None:
    """to_observable emits everything; dispose() cancels the publisher (generator closed)."""
    out: list[Any] = []
    to_observable(from_iterable(range(5))).subscribe(
        on_next=out.append, on_completed=lambda: out.append("done")
    )
    assert out == [0, 1, 2, 3, 4, "done"]
    closed = threading.Event()

    def gen() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    seen = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        source = to_observable(from_iterable(gen(), executor=pool), prefetch=4)
        disposable = source.subscribe(lambda x: seen.set())
        assert seen.wait(5)
        disposable.dispose()
        assert closed.wait(5)


def test_rx_processor_keeps_demand_honest() -> None:
    """map/filter inside the processor; upstream never asked beyond the buffer."""
    requested = 0

    class Counting:
        def __init__(self) -> None:
            self.inner = from_iterable(range(1000))

        def subscribe(self, subscriber: Any) -> None:
            class Wrap:
                def on_subscribe(self, s: Any) -> None:
                    class S:
                        def request(self, n: int) -> None:
                            nonlocal requested
                            requested += n
                            s.request(n)

                        def cancel(self) -> None:
                            s.cancel()

                    subscriber.on_subscribe(S())

                def on_next(self, x: Any) -> None:
                    subscriber.on_next(x)

                def on_error(self, e: Exception) -> None:
                    subscriber.on_error(e)

                def on_complete(self) -> None:
                    subscriber.on_complete()

            self.inner.subscribe(Wrap())

    stage = rx_processor(ops.map(lambda x: x * 2), ops.filter(lambda x: x % 3 == 0), buffer_size=8)
    Counting().subscribe(stage)
    # Nothing downstream yet: filtered-out elements free room, kept ones fill the buffer.
    assert len(stage._source._items) <= 8  # type: ignore[attr-defined]
    assert requested >= 8
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    stage.subscribe(sub)
    sub.await_count(2)
    assert sub.elements == [0, 6]
    sub.request(10**6)
    sub.await_terminal()
    assert sub.elements == [x * 2 for x in range(1000) if (x * 2) % 3 == 0]
    sub.assert_no_violations()


def test_rx_processor_expanding_and_batching_operators() -> None:
    """flat_map and buffer_with_count run with demand kept and nothing lost."""
    stage = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), ops.buffer_with_count(3))
    from_iterable(range(6)).subscribe(stage)
    assert list(to_iterator(stage)) == [[0, 0, 1], [1, 2, 2], [3, 3, 4], [4, 5, 5]]


def test_rx_processor_is_unicast() -> None:
    """A second subscriber is rejected with on_subscribe then on_error (§1.11 allows it)."""
    stage = rx_processor()
    stage.subscribe(RecordingSubscriber(0))
    second: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(second)
    assert second.subscription is not None and isinstance(second.error, RuntimeError)
