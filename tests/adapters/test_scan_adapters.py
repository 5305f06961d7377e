"""Every adapter stage answers scan(): snapshot(sink) walks through it to the source (issue 22).

Counts are checked against each other and against prefetch / buffer_size, at points where the
pipeline is settled (synchronous stages, or on the loop between awaits), never against time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import aioreactive as rx
import pytest
import reactivex
from aioreactive import AsyncAnonymousObserver
from reactivex import operators as ops
from reactivex.subject import Subject

from reactive_streams import Scan, Scannable, Snapshot, pipe, snapshot
from reactive_streams.adapters._rx_to import _observer_queue
from reactive_streams.adapters.aioreactive import from_async_observable, to_async_observable
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.adapters.rx import from_observable, rx_processor


def names(shot: Snapshot) -> list[str]:
    return [stage.name for stage in shot]


def arrived(sink: Scan) -> int:
    """What a prefetching sink has received: asked of upstream, less what is in flight."""
    assert sink.asked is not None and sink.in_flight is not None
    return sink.asked - sink.in_flight


def received(stage: Scan) -> int:
    """What a stage has received: what it holds and what it passed on."""
    assert stage.delivered is not None
    return stage.buffered + stage.delivered


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def double(x: int) -> int:
    return x * 2


def even(x: int) -> bool:
    return x % 2 == 0


async def numbers(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


# -- from_observable ---------------------------------------------------------------------------


class TestFromObservable:
    @pytest.mark.parametrize("overflow", ["buffer", "drop", "latest", "error"])
    def test_snapshot_names_the_strategy_and_counts_agree(self, overflow: str) -> None:
        """A Subject fed on this thread: the counts after each step, exactly."""
        subject: Subject[int] = Subject()
        it = to_iterator(from_observable(subject, overflow=overflow, buffer_size=3), prefetch=4)
        for i in range(3):
            subject.on_next(i)
        assert next(it) == 0
        source, sink = shot = snapshot(it)
        assert names(shot) == [f"from_observable({overflow})", "to_iterator"]
        assert source.upstream is None and source.asked is None  # Rx: not walked
        assert (source.delivered, source.requested, source.buffered) == (3, 1, 0)
        assert (sink.asked, sink.in_flight, sink.buffered, sink.delivered) == (4, 1, 2, 1)
        assert source.delivered == arrived(sink) == received(sink)
        assert source.requested == sink.in_flight
        if overflow == "error":
            return  # an element beyond demand fails the stream
        for i in range(3, 6):  # one for the demand left, two held
            subject.on_next(i)
        source, sink = snapshot(it)
        assert (source.delivered, source.requested, source.buffered) == (4, 0, 2)
        assert source.buffered <= 3  # buffer_size
        assert source.delivered == arrived(sink) == received(sink)
        assert source.state == "holds 2, no demand from downstream"
        it.close()

    def test_latest_reports_what_it_holds(self) -> None:
        """LATEST pops through poll (no fused queue): its buffer still shows, and stays
        within buffer_size however much the Observable sends past it."""
        subject: Subject[int] = Subject()
        it = to_iterator(from_observable(subject, overflow="latest", buffer_size=3), prefetch=2)
        for i in range(10):
            subject.on_next(i)
        source, sink = snapshot(it)
        assert (source.delivered, source.buffered, sink.buffered) == (2, 3, 2)
        assert [next(it) for _ in range(5)] == [0, 1, 7, 8, 9]
        it.close()

    def test_block_with_a_slow_consumer_holds_at_most_buffer_size(self) -> None:
        """A cold Observable on block's own thread waits for room: the snapshot sees the
        buffer fill to buffer_size and never beyond, while the consumer takes its time."""
        buffer_size = 8
        it = to_iterator(
            from_observable(reactivex.range(1000), overflow="block", buffer_size=buffer_size),
            prefetch=4,
        )
        assert next(it) == 0
        wait_for(lambda: snapshot(it)[0].buffered == buffer_size)  # the producer waits
        for taken in range(1, 200):
            assert next(it) == taken
            source, sink = shot = snapshot(it)
            assert names(shot) == ["from_observable(block)", "to_iterator"]
            assert 0 <= source.buffered <= buffer_size
            assert sink.buffered <= 4 and sink.asked is not None
            assert source.delivered is not None and source.delivered <= sink.asked
        it.close()
        (sink,) = snapshot(it)  # §3.13: the link is let go
        assert sink.cancelled


# -- to_observable ------------------------------------------------------------------------------


class TestToObservable:
    def test_drain_is_named_and_links_to_its_upstream(self) -> None:
        """The drain inside to_observable (reachable from here only: Rx's subscribe wraps
        the disposable) walks through its prefetch queue to the source."""
        seen: list[int] = []
        subject: Subject[int] = Subject()
        queue, drain = _observer_queue(reactivex.Observer(seen.append), 4)
        from_observable(subject, overflow="drop", buffer_size=3).subscribe(queue)
        subject.on_next(0)
        subject.on_next(1)
        source, stage = shot = snapshot(drain)
        assert names(shot) == ["from_observable(drop)", "to_observable"]
        assert seen == [0, 1] and stage.delivered == 2 and stage.buffered == 0
        assert stage.asked == 4 and stage.in_flight == 2 == source.requested
        assert source.delivered == received(stage)
        drain.cancel()
        assert snapshot(drain)[-1].cancelled


# -- rx_processor -------------------------------------------------------------------------------


class TestRxProcessor:
    def test_two_processors_between_a_source_and_a_sink(self) -> None:
        """sink -> output drain -> processor -> ... -> source; every count agrees with its
        neighbours', and none exceeds its buffer_size or prefetch."""
        it = to_iterator(
            pipe(
                from_iterable(range(1000)),
                rx_processor(ops.map(double), buffer_size=8),
                rx_processor(ops.filter(even), buffer_size=8),
            ),
            prefetch=4,
        )
        assert [next(it), next(it)] == [0, 2]
        shot = snapshot(it)
        assert names(shot) == [
            "from_iterable",
            "rx_processor",
            "rx_processor → subscriber",
            "rx_processor",
            "rx_processor → subscriber",
            "to_iterator",
        ]
        source, first, out1, second, out2, sink = shot
        assert all(stage.subscribed for stage in shot)
        assert sink.delivered == 2 and sink.asked == 4
        assert out2.delivered == arrived(sink) == received(sink)
        for processor, output, upstream in ((first, out1, source), (second, out2, out1)):
            assert processor.asked is not None and processor.in_flight is not None
            inputs = processor.asked - processor.in_flight
            assert upstream.delivered == inputs  # one output per input (map, filter of evens)
            assert inputs == processor.buffered + received(output)  # output holds none
            assert processor.buffered <= 8 and output.buffered == 0  # counted once
            assert processor.requested == output.requested
            assert not processor.cancelled and not processor.terminated
        upstreams = [stage.upstream for stage in shot.stages[1:]]  # the stage objects, source first
        it.close()
        assert len(snapshot(it)) == 1  # §3.13: the sink lets its upstream go
        assert all(isinstance(stage, Scannable) for stage in upstreams)
        after = [stage.scan() for stage in upstreams if isinstance(stage, Scannable)]
        assert all(scan.cancelled and not scan.terminated for scan in after)

    def test_a_processor_whose_chain_ended_is_terminated(self) -> None:
        """Upstream completed through the chain: terminated, holding what it made."""
        processor = rx_processor(ops.map(double), buffer_size=4)
        from_iterable(range(3)).subscribe(processor)
        (stage,) = snapshot(processor)  # the upstream subscription is let go at its end
        assert stage.terminated and not stage.cancelled and stage.buffered == 3
        assert stage.state == "terminated, holds 3"

    def test_a_processor_scanned_alone(self) -> None:
        """No subscriber yet: the processor's own row, with what it holds and asked for."""
        processor = rx_processor(ops.map(double), buffer_size=4)
        from_iterable(range(10)).subscribe(processor)
        source, stage = shot = snapshot(processor)
        assert names(shot) == ["from_iterable", "rx_processor"]
        assert stage.subscribed and stage.requested == 0
        assert stage.asked == source.delivered == stage.buffered == 4  # the first, then room

    def test_a_middle_stage_never_subscribed_is_named(self) -> None:
        """The issue's check: the source was never subscribed to the middle stage; the
        snapshot from the sink names it and says so."""
        middle = rx_processor(ops.map(double))
        last = rx_processor(ops.filter(even))
        middle.subscribe(last)  # from_iterable(...).subscribe(middle) was forgotten
        it = to_iterator(last, prefetch=4)
        shot = snapshot(it)
        assert names(shot) == [
            "rx_processor",
            "rx_processor → subscriber",
            "rx_processor",
            "rx_processor → subscriber",
            "to_iterator",
        ]
        stuck = shot[0]
        assert not stuck.subscribed and stuck.upstream is None and stuck.asked == 0
        assert stuck.state.startswith("never subscribed")
        assert all(stage.subscribed for stage in shot.stages[1:])
        # the first input alone is asked for (to measure), the sink's prefetch in full
        assert [stage.requested for stage in shot.stages[:4]] == [1, 1, 4, 4]
        assert "never subscribed" in str(shot).splitlines()[1]
        it.close()


# -- asyncio adapters -----------------------------------------------------------------------------


class TestAsyncIterables:
    @pytest.mark.asyncio
    async def test_from_async_iterable_to_async_iterator(self) -> None:
        """On the loop, between awaits, the two stages agree: what the source delivered is
        what the sink holds plus what it handed over, elements of a round in hand included."""
        it = to_async_iterator(from_async_iterable(numbers(100)), prefetch=4)
        before = snapshot(it)
        assert names(before) == ["to_async_iterator"] and not before[0].subscribed
        assert [await it.__anext__(), await it.__anext__()] == [0, 1]
        source, sink = shot = snapshot(it)
        assert names(shot) == ["from_async_iterable", "to_async_iterator"]
        assert sink.delivered == 2 and sink.asked == 4 and sink.buffered <= 2
        assert source.delivered == arrived(sink) == received(sink)
        assert source.requested == sink.in_flight
        assert source.in_flight in (0, 1) and source.asked is None
        await it.aclose()

    @pytest.mark.asyncio
    async def test_to_async_iterator_mid_round(self) -> None:
        """A synchronous source fills the window at once: the elements of a round handed
        over but not yet reported are delivered, not in flight."""
        it = to_async_iterator(from_iterable(range(100)), prefetch=8)
        got = [await it.__anext__() for _ in range(3)]
        assert got == [0, 1, 2]
        source, sink = snapshot(it)
        assert (sink.delivered, sink.buffered, sink.in_flight) == (3, 5, 0)
        assert source.delivered == arrived(sink) == 8
        await it.aclose()

    @pytest.mark.asyncio
    async def test_to_async_iterator_after_a_full_round(self) -> None:
        """A round handed over in full and reported: nothing counts twice while the
        iterator waits for more."""
        subject: Subject[int] = Subject()
        it = to_async_iterator(from_observable(subject, overflow="buffer"), prefetch=8)
        async with it:
            for i in range(6):  # one round: until_replenish is 75% of 8
                subject.on_next(i)
            assert [await it.__anext__() for _ in range(6)] == list(range(6))
            waiting = asyncio.ensure_future(it.__anext__())
            for _ in range(1000):  # loop turns, until it reported the round (and waits)
                if snapshot(it)[0].requested == 8:
                    break
                await asyncio.sleep(0)
            source, sink = snapshot(it)
            assert (sink.asked, sink.delivered, sink.buffered) == (14, 6, 0)
            assert source.delivered == 6 and source.requested == 8
            subject.on_next(6)
            assert await waiting == 6


class TestAioreactive:
    @pytest.mark.asyncio
    async def test_from_async_observable(self) -> None:
        """The one-slot hand-off shows as buffered (0 or 1), and agrees with the sink."""
        it = to_async_iterator(
            from_async_observable(rx.from_async_iterable(numbers(50))), prefetch=4
        )
        assert [await it.__anext__(), await it.__anext__()] == [0, 1]
        source, sink = shot = snapshot(it)
        assert names(shot) == ["from_async_observable", "to_async_iterator"]
        assert source.buffered in (0, 1) and source.in_flight in (0, 1)
        assert source.upstream is None and sink.delivered == 2
        assert source.delivered == arrived(sink) == received(sink)
        await it.aclose()

    @pytest.mark.asyncio
    async def test_to_async_observable_disposable_scans(self) -> None:
        """The disposable subscribe_async returns is the sink: an asend held open counts as
        delivered, and the window behind it stays within prefetch."""
        gate = asyncio.Event()
        entered = asyncio.Event()

        async def asend(value: int) -> None:
            entered.set()
            await gate.wait()

        observable = to_async_observable(from_iterable(range(100)), prefetch=4)
        disposable = await observable.subscribe_async(AsyncAnonymousObserver(asend))
        await asyncio.wait_for(entered.wait(), 10)
        source, sink = shot = snapshot(disposable)
        assert names(shot) == ["from_iterable", "to_async_observable"]
        assert sink.delivered == 1 and sink.asked == 4 and sink.buffered == 3
        assert source.delivered == arrived(sink) == 4
        await disposable.dispose_async()
        assert snapshot(disposable)[-1].cancelled
