"""adapters/_async_to.py: to_async_iterator, async for over any Publisher."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import random
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asyncio_helpers import ManualPublisher

from reactive_streams import OverflowViolation, Subscriber, publish_on
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import CountedIterable, RecordingSubscription

# -- the prefetch window -----------------------------------------------------------------------


class TestWindow:
    """At most prefetch requested ahead of the async for, 75% re-requested (§1.1)."""

    @pytest.mark.asyncio
    async def test_never_more_than_prefetch_requested_ahead(self) -> None:
        """Requests stay within prefetch of consumption: prefetch up front, then 75% batches."""
        asyncio.get_running_loop().set_debug(True)
        pub = ManualPublisher()
        it = to_async_iterator(pub, prefetch=8)
        await it.__aenter__()
        subscriber = pub.subscriber
        assert subscriber is not None
        assert pub.subscription.requests == [8]
        consumed = 0
        for i in range(40):
            while pub.subscription.total <= i:  # only what was requested may be sent (§1.1)
                await asyncio.sleep(0)
            subscriber.on_next(i)
            assert await it.__anext__() == i
            consumed += 1
            assert pub.subscription.total - consumed <= 8
        assert set(pub.subscription.requests[1:]) == {6}  # replenished at 75%
        await it.aclose()
        assert pub.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_requests_at_the_limit_after_a_wait_split_the_count(self) -> None:
        """One element taken, then a wait (too few consumed to ask for more), then a burst:
        the burst is handed over in a round that ends at the limit, so request(6) (75% of
        prefetch=8) goes out once 6 were taken in all, not a whole round later."""
        pub = ManualPublisher()
        it = to_async_iterator(pub, prefetch=8)
        await it.__aenter__()
        subscriber = pub.subscriber
        assert subscriber is not None
        subscriber.on_next(0)
        assert await it.__anext__() == 0
        waiting = asyncio.ensure_future(it.__anext__())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done() and pub.subscription.requests == [8]  # 1 < the slack
        for i in range(1, 8):
            subscriber.on_next(i)
        assert await waiting == 1
        assert [await it.__anext__() for _ in range(4)] == [2, 3, 4, 5]
        assert pub.subscription.requests == [8]  # 6 taken; reported when the 7th is asked
        assert await it.__anext__() == 6
        assert pub.subscription.requests == [8, 6]
        await it.aclose()

    @pytest.mark.asyncio
    async def test_running_dry_refills_the_whole_window(self) -> None:
        """A whole window taken: request(6) at the limit, then, when async for finds the
        queue empty with the 2 more taken (the window's slack), request(2) before it waits,
        so the publisher can refill the whole window in one go."""
        pub = ManualPublisher()
        it = to_async_iterator(pub, prefetch=8)
        await it.__aenter__()
        subscriber = pub.subscriber
        assert subscriber is not None
        for i in range(8):
            subscriber.on_next(i)
        assert [await it.__anext__() for _ in range(8)] == list(range(8))
        assert pub.subscription.requests == [8, 6]
        waiting = asyncio.ensure_future(it.__anext__())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done()
        assert pub.subscription.requests == [8, 6, 2]
        subscriber.on_next(8)
        assert await waiting == 8
        await it.aclose()

    @pytest.mark.asyncio
    async def test_a_full_window_handed_over_stays_within_prefetch(self) -> None:
        """A publisher (not fused) that sends all it may as soon as it is asked, so async
        for finds whole windows queued and takes each in one go: what was requested never
        runs more than prefetch ahead of what the loop body has received, and the
        re-requests are 75% windows."""
        requests: list[int] = []
        got: list[int] = []

        class Eager:
            def subscribe(self, subscriber: Subscriber[int]) -> None:
                sent = 0

                class Sub:
                    def request(self, n: int) -> None:
                        nonlocal sent
                        requests.append(n)
                        while sent < min(sum(requests), 100):
                            subscriber.on_next(sent)
                            sent += 1
                        if sent == 100:
                            subscriber.on_complete()

                    def cancel(self) -> None:
                        pass

                subscriber.on_subscribe(Sub())

        async for x in to_async_iterator(Eager(), prefetch=8):
            got.append(x)
            assert sum(requests) - len(got) <= 8  # §1.1 bound, at the loop body
        assert got == list(range(100))
        assert requests[0] == 8 and set(requests[1:]) == {6}

    @pytest.mark.asyncio
    async def test_anext_calls_inside_async_for_keep_the_order(self) -> None:
        """anext(it) inside an async for over it takes the next element: one sequence."""
        got = []
        it = to_async_iterator(from_iterable(range(11)), prefetch=4)
        async for x in it:
            got.append(x)
            if x % 3 == 0:
                got.append(await anext(it))
        assert got == list(range(11))

    @pytest.mark.asyncio
    async def test_overflowing_publisher_is_cancelled_with_1_1_error(self) -> None:
        """A publisher that sends more than requested is cancelled; §1.1 error at the async for."""
        pub = ManualPublisher()
        it = to_async_iterator(pub, prefetch=2)
        await it.__aenter__()
        assert pub.subscriber is not None
        for i in range(3):
            pub.subscriber.on_next(i)
        assert pub.subscription.cancelled.is_set()
        with pytest.raises(OverflowViolation, match="§1.1"):
            async for _ in it:
                pass

    @pytest.mark.asyncio
    async def test_overflow_is_caught_by_the_count_not_the_queue_length(self) -> None:
        """§1.1 counts what was requested in all: once the consumer took 2 of the 4 (too few
        to replenish), a 5th on_next fits in the queue but was never asked for. It is refused,
        the upstream cancelled, and the error raised after the 4 requested elements."""
        pub = ManualPublisher()
        it = to_async_iterator(pub, prefetch=4)  # replenishes 3 at a time
        await it.__aenter__()
        assert pub.subscriber is not None
        for i in range(4):
            pub.subscriber.on_next(i)
        got = [await it.__anext__(), await it.__anext__()]
        assert pub.subscription.total == 4  # nothing re-requested yet
        pub.subscriber.on_next(4)
        assert pub.subscription.cancelled.is_set()
        with pytest.raises(OverflowViolation, match="number 5, beyond the 4 requested"):
            async for x in it:
                got.append(x)
        assert got == [0, 1, 2, 3]


# -- on the loop: signals from any thread, never blocking --------------------------------------


class TestOnTheLoop:
    """Signals from any thread reach the loop; waiting never blocks it."""

    @pytest.mark.asyncio
    async def test_signals_from_another_thread_in_debug_mode(self) -> None:
        """Elements produced on a pool thread are handed to the loop; all arrive, in order."""
        asyncio.get_running_loop().set_debug(True)
        with ThreadPoolExecutor(1) as pool:
            pub = publish_on(from_iterable(range(2000)), pool, prefetch=16)
            got = [x async for x in to_async_iterator(pub, prefetch=32)]
        assert got == list(range(2000))

    @pytest.mark.asyncio
    async def test_waiting_never_blocks_the_loop(self) -> None:
        """While __anext__ waits, other coroutines run: the producer waits for them to tick."""
        ticks = 0
        ticked = threading.Event()

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                if ticks == 100:
                    ticked.set()
                await asyncio.sleep(0)

        pub = ManualPublisher()

        def produce() -> None:
            pub.subscribed.wait(5)
            assert ticked.wait(5)  # only reachable if the loop kept running meanwhile
            assert pub.subscriber is not None
            pub.subscriber.on_next("late")
            pub.subscriber.on_complete()

        tick_task = asyncio.create_task(ticker())
        producer = threading.Thread(target=produce)
        producer.start()
        try:
            got = [x async for x in to_async_iterator(pub)]
        finally:
            tick_task.cancel()
            producer.join()
        assert got == ["late"] and ticks >= 100

    @pytest.mark.asyncio
    async def test_a_synchronous_publisher_still_lets_the_loop_run(self) -> None:
        """from_iterable refills the queue inside the consumer's replenishing request, so the
        queue never runs dry and __anext__ never has to wait: it still lets the loop run about
        every 1024 elements, so other tasks are not starved for the whole stream."""
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        count = 0
        async for _ in to_async_iterator(from_iterable(range(20_000)), prefetch=256):
            count += 1
        after = ticks
        task.cancel()
        assert count == 20_000
        assert after - before >= 20_000 // 1152 - 1  # a checkpoint per 6 windows of 192

    def test_iterating_on_another_event_loop_raises(self) -> None:
        """The iterator belongs to the loop it subscribed on: __anext__ on another loop raises
        a clear RuntimeError instead of waiting for a wake that would come to the first."""
        pub = ManualPublisher()
        it = to_async_iterator(pub)
        asyncio.run(it.__aenter__())  # subscribes on this first loop
        assert pub.subscribed.is_set()

        async def elsewhere() -> Any:
            return await asyncio.wait_for(it.__anext__(), 5)

        with pytest.raises(RuntimeError, match="another event loop"):
            asyncio.run(elsewhere())

    def test_closed_consumer_loop_cancels_upstream(self, caplog: pytest.LogCaptureFixture) -> None:
        """A signal for a consumer whose loop has closed cancels upstream and is reported."""
        pub = ManualPublisher()
        it = to_async_iterator(pub)
        event_loop = asyncio.new_event_loop()
        task = event_loop.create_task(anext(it))

        async def until_waiting() -> None:
            while not pub.subscribed.is_set():
                await asyncio.sleep(0)
            for _ in range(3):
                await asyncio.sleep(0)

        event_loop.run_until_complete(until_waiting())
        event_loop.close()
        assert pub.subscriber is not None
        with caplog.at_level(logging.ERROR, logger="reactive_streams"):
            pub.subscriber.on_next("orphan")
        assert pub.subscription.cancelled.is_set()
        assert "event loop is closed" in caplog.text
        task._log_destroy_pending = False  # type: ignore[attr-defined]  # dies with its loop
        del task
        gc.collect()


# -- cancel: break, aclose, async with, a cancelled task ---------------------------------------


class TestCancel:
    """Every way out of the async for cancels the subscription (§3.12, §3.13)."""

    @pytest.mark.asyncio
    async def test_break_cancels_the_subscription(self) -> None:
        """Leaving an async for with break cancels upstream at once (the iterator is dropped)."""
        pub = ManualPublisher()

        async def feed() -> None:
            while not pub.subscribed.is_set():
                await asyncio.sleep(0)
            assert pub.subscriber is not None
            for i in range(5):
                pub.subscriber.on_next(i)

        feeder = asyncio.create_task(feed())
        async for x in to_async_iterator(pub, prefetch=8):
            if x == 2:
                break
        assert pub.subscription.cancelled.is_set()
        await feeder

    @pytest.mark.asyncio
    async def test_dropping_the_iterator_cancels_at_once(self) -> None:
        """Dropped without aclose, the iterator cancels when its last reference goes, not at
        a collector pass or a later loop iteration (§3.13): subscribed by async with's enter
        alone (never iterated), and after an element was taken (its generator started)."""
        never_iterated = ManualPublisher()
        it = to_async_iterator(never_iterated)
        await it.__aenter__()
        del it
        assert never_iterated.subscription.cancelled.is_set()

        started = ManualPublisher()
        it = to_async_iterator(started)
        await it.__aenter__()
        assert started.subscriber is not None
        started.subscriber.on_next(1)
        assert await anext(it) == 1
        del it
        assert started.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_break_cancels_generator_upstream(self) -> None:
        """break over from_async_iterable: the async generator's finally runs promptly."""
        finished = asyncio.Event()

        async def gen() -> AsyncGenerator[int, None]:
            try:
                for i in range(1000):
                    yield i
            finally:
                finished.set()

        agen = gen()  # held here, so the loop's GC finalizer cannot be what closes it
        async for x in to_async_iterator(from_async_iterable(agen), prefetch=4):
            if x == 3:
                break
        await asyncio.wait_for(finished.wait(), 5)
        assert agen.ag_frame is None  # type: ignore[attr-defined]

    @pytest.mark.asyncio
    async def test_aclose_and_async_with_cancel(self) -> None:
        """aclose() and leaving async with cancel the subscription; later __anext__ stops."""
        pub = ManualPublisher()
        it = to_async_iterator(pub)
        async with it:
            assert pub.subscribed.is_set()
        assert pub.subscription.cancelled.is_set()
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()
        pub2 = ManualPublisher()
        it2 = to_async_iterator(pub2)
        await it2.__aenter__()
        await it2.aclose()
        assert pub2.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_aclose_wakes_a_waiting_consumer(self) -> None:
        """aclose() from another coroutine ends a consumer waiting in __anext__."""
        pub = ManualPublisher()
        it = to_async_iterator(pub)
        consumer = asyncio.create_task(anext(it, "stopped"))
        while not pub.subscribed.is_set():
            await asyncio.sleep(0)
        await it.aclose()
        assert await asyncio.wait_for(consumer, 5) == "stopped"
        assert pub.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_task_cancellation_cancels_and_propagates(self) -> None:
        """Cancelling the consuming task cancels upstream and the CancelledError propagates."""
        pub = ManualPublisher()

        async def consume() -> list[Any]:
            return [x async for x in to_async_iterator(pub)]

        task = asyncio.create_task(consume())
        while not pub.subscribed.is_set():
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pub.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_cancelled_at_a_checkpoint_cancels_the_subscription(self) -> None:
        """A consuming task cancelled while __anext__ lets the loop run is cancelled like one
        waiting for an element: the subscription is cancelled and the generator closed."""
        closed = threading.Event()

        def numbers() -> Iterator[int]:
            try:
                yield from itertools.count()
            finally:
                closed.set()

        seen = 0

        async def consume() -> None:
            nonlocal seen
            async for _ in to_async_iterator(from_iterable(numbers()), prefetch=256):
                seen += 1

        task = asyncio.create_task(consume())
        while seen < 5000:
            await asyncio.sleep(0)  # the consumer's checkpoints let this task run
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert closed.is_set()

    @pytest.mark.asyncio
    async def test_aclose_ends_a_waiting_consumer_quietly_even_with_an_error_queued(
        self,
    ) -> None:
        """An error that reached the queue but not yet the waiting consumer is dropped by
        aclose() from another coroutine, as queued elements are (§3.13): the consumer stops,
        it does not raise."""
        pub = ManualPublisher()
        it = to_async_iterator(pub)
        consumer = asyncio.create_task(anext(it, "stopped"))
        while not pub.subscribed.is_set():
            await asyncio.sleep(0)
        assert it.__aiter__().ag_await is not None  # the consumer waits for a signal
        assert pub.subscriber is not None
        pub.subscriber.on_error(RuntimeError("upstream failed"))  # wakes the consumer ...
        await it.aclose()  # ... which runs only after this
        assert await asyncio.wait_for(consumer, 5) == "stopped"
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()

    @pytest.mark.asyncio
    async def test_aclose_between_two_queued_elements_stops_the_iteration(self) -> None:
        """aclose() after one element of a batch already queued (a synchronous publisher
        fills the window at once): the subscription is cancelled, the rest is dropped
        (§3.13) and the next __anext__ raises StopAsyncIteration, nothing else."""
        numbers = CountedIterable(100)
        closed = numbers.closed

        it = to_async_iterator(from_iterable(numbers), prefetch=8)
        assert await anext(it) == 0
        assert await anext(it) == 1
        await it.aclose()
        assert closed.is_set()  # cancelled (§3.12): the generator was closed
        with pytest.raises(StopAsyncIteration):
            await anext(it)
        assert await anext(it, "stopped") == "stopped"

    def test_spec312_to_async_iterator_hands_over_nothing_after_aclose_from_another_task(
        self,
    ) -> None:
        """§3.12: a task waiting in __anext__ while another task's aclose() returns gets
        StopAsyncIteration, even if an element lands in the queue after aclose() emptied it
        (an upstream on another thread that was already past the queue's closed check)."""
        upstream = RecordingSubscription()

        class Held:
            def subscribe(self, subscriber: Subscriber[str]) -> None:
                subscriber.on_subscribe(upstream)

        async def main() -> object:
            it = to_async_iterator(Held())
            waiting = asyncio.create_task(anext(it, "stopped"))
            while not upstream.requests:  # subscribed; the task waits for an element
                await asyncio.sleep(0)
            await asyncio.sleep(0)
            await it.aclose()  # resolves the waiter; the waiting task has not run yet
            it._window.queue.queue.append("late")  # the late producer's append
            return await waiting

        assert asyncio.run(main(), debug=True) == "stopped"
        assert upstream.cancelled.is_set()

    def test_spec312_to_async_iterator_hands_over_nothing_after_a_close_during_a_burst_pause(
        self,
    ) -> None:
        """§3.12: a synchronous publisher refills the queue inside each replenishment, so the
        iterator pauses after a burst to let the loop run; a close in that pause (aclose()
        from another task, with an element appended after its clear by a late producer) ends
        the iteration there: the late element is never handed over."""

        async def main() -> list[object]:
            it = to_async_iterator(from_iterable(range(10_000)))
            seen: list[object] = []

            def close_meanwhile() -> None:  # runs in the burst's pause: the only one
                it._window.close()  # what aclose() does first, from another task
                it._window.queue.queue.append("late")

            async for value in it:
                if not seen:
                    asyncio.get_running_loop().call_soon(close_meanwhile)
                seen.append(value)
            return seen

        seen = asyncio.run(main(), debug=True)
        assert "late" not in seen and 0 < len(seen) < 10_000


# -- errors ------------------------------------------------------------------------------------


class TestErrors:
    """The publisher's error is raised at the async for; bad arguments at the call."""

    @pytest.mark.asyncio
    async def test_error_is_raised_at_the_async_for(self) -> None:
        """Elements first, then the publisher's error raised where iteration reaches it."""

        def gen() -> Iterator[int]:
            yield 1
            yield 2
            raise KeyError("broken")

        got: list[int] = []
        with pytest.raises(KeyError, match="broken"):
            async for x in to_async_iterator(from_iterable(gen())):
                got.append(x)
        assert got == [1, 2]

    @pytest.mark.asyncio
    async def test_after_the_error_the_iterator_is_exhausted(self) -> None:
        """As to_iterator does: the publisher's error is raised once, where iteration reaches
        it; after that the iterator is closed and only raises StopAsyncIteration."""

        def gen() -> Iterator[int]:
            yield 1
            raise KeyError("broken")

        it = to_async_iterator(from_iterable(gen()))
        assert await it.__anext__() == 1
        with pytest.raises(KeyError, match="broken"):
            await it.__anext__()
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()

    @pytest.mark.asyncio
    async def test_publisher_whose_subscribe_raises(self) -> None:
        """A subscribe() that raises surfaces its error at the async for."""

        class Broken:
            def subscribe(self, subscriber: Subscriber[Any]) -> None:
                raise RuntimeError("cannot subscribe")

        with pytest.raises(RuntimeError, match="cannot subscribe"):
            async for _ in to_async_iterator(Broken()):
                pass

    @pytest.mark.asyncio
    async def test_a_subscribe_raising_after_on_subscribe_cancels_upstream(self) -> None:
        """A publisher that calls on_subscribe, then raises: its error is raised at the async
        for and the subscription it handed over is cancelled (§3.13)."""
        pub = ManualPublisher()

        class RaisesAfter:
            def subscribe(self, subscriber: Subscriber[Any]) -> None:
                pub.subscribe(subscriber)
                raise RuntimeError("subscribe failed half way")

        with pytest.raises(RuntimeError, match="half way"):
            async for _ in to_async_iterator(RaisesAfter()):
                pass
        assert pub.subscription.cancelled.is_set()

    def test_bad_arguments(self) -> None:
        """None publisher is a TypeError; a non-positive prefetch is a ValueError."""
        with pytest.raises(TypeError):
            to_async_iterator(None)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            to_async_iterator(from_iterable([1]), prefetch=0)


# -- timeout: each __anext__'s wait bounded, then upstream cancelled ---------------------------

TIMES_OUT = 0.05  # where a test asserts that a timeout happened (a slow machine only waits longer)
NEVER = 30.0  # where a test asserts that no timeout happens


class _CountsCancels(RecordingSubscription):
    """A RecordingSubscription that also counts its cancels (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancels = 0

    def cancel(self) -> None:
        with self._lock:
            self.cancels += 1
        super().cancel()


def _counting() -> tuple[ManualPublisher, _CountsCancels]:
    pub = ManualPublisher()
    pub.subscription = subscription = _CountsCancels()
    return pub, subscription


class _LandsAsItFires:
    """``asyncio.timeout_at``'s context manager, but when it times out ``arrive()`` runs
    first: an element lands exactly as the timeout fires."""

    def __init__(self, timeout: Any, arrive: Callable[[], None]) -> None:
        self._timeout = timeout
        self._arrive = arrive

    async def __aenter__(self) -> Any:
        return await self._timeout.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._timeout.__aexit__(*exc)
        except TimeoutError:
            self._arrive()
            raise


class TestTimeout:
    """timeout=: each __anext__ waits at most that long for an element or the end, then
    upstream is cancelled (§3.12) and TimeoutError raised; the loop is never blocked."""

    @pytest.mark.asyncio
    async def test_a_silent_publisher_times_out_and_is_cancelled(self) -> None:
        """A publisher that never signals after on_subscribe: __anext__ raises TimeoutError
        naming the timeout, upstream is cancelled once, and every later __anext__ raises
        StopAsyncIteration."""
        asyncio.get_running_loop().set_debug(True)
        pub, subscription = _counting()
        it = to_async_iterator(pub, timeout=TIMES_OUT)
        message = (
            r"^to_async_iterator\(\): no element or end within timeout=0\.05 s; "
            r"upstream cancelled$"
        )
        with pytest.raises(TimeoutError, match=message):
            await anext(it)
        assert subscription.cancels == 1
        for _ in range(2):
            with pytest.raises(StopAsyncIteration):
                await anext(it)
        assert subscription.cancels == 1

    @pytest.mark.asyncio
    async def test_elements_then_silence_closes_the_async_generator(self) -> None:
        """An async generator that yields three elements, then waits for ever: the three
        come first, even taken long after they were queued (a timeout fires only on an
        empty queue), then TimeoutError; the cancel aclose()s the generator (§3.13)."""
        closed = asyncio.Event()

        async def three_then_silence() -> AsyncGenerator[int, None]:
            try:
                for i in range(3):
                    yield i
                await asyncio.Event().wait()
            finally:
                closed.set()

        agen = three_then_silence()  # held here: only a cancel can close it
        it = to_async_iterator(from_async_iterable(agen), prefetch=8, timeout=TIMES_OUT)
        await it.__aenter__()
        await asyncio.sleep(2 * TIMES_OUT)  # longer than the timeout: the three are queued
        assert [await anext(it) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(TimeoutError, match=r"timeout=0\.05 s"):
            await anext(it)
        await asyncio.wait_for(closed.wait(), 5)
        assert agen.ag_frame is None  # type: ignore[attr-defined]

    @pytest.mark.asyncio
    async def test_the_timeout_counts_from_each_wait(self) -> None:
        """The timeout bounds each __anext__'s wait from when it starts (per element, like
        Reactor's timeout()): one called long after the element before it still waits the
        whole timeout before it gives up."""
        pub, subscription = _counting()
        it = to_async_iterator(pub, timeout=TIMES_OUT)
        first = asyncio.ensure_future(anext(it))
        while it.__aiter__().ag_await is None:  # the first __anext__ waits
            await asyncio.sleep(0)
        assert pub.subscriber is not None
        pub.subscriber.on_next(0)
        assert await first == 0
        await asyncio.sleep(2 * TIMES_OUT)  # the consumer busy elsewhere
        loop = asyncio.get_running_loop()
        waiting_from = loop.time()
        with pytest.raises(TimeoutError):
            await anext(it)
        assert loop.time() - waiting_from >= TIMES_OUT * 0.9  # a clock tick of slack
        assert subscription.cancels == 1

    @pytest.mark.asyncio
    async def test_never_times_out_while_a_thread_answers_each_wait(self) -> None:
        """A slow publisher on another thread that emits only once __anext__ already waits
        and the loop has run meanwhile (a ticking task), each time, then completes: no
        timeout fires, the async for ends normally and nothing is cancelled."""
        pub, subscription = _counting()
        it = to_async_iterator(pub, prefetch=32, timeout=NEVER)  # all 20 requested at once
        agen = it.__aiter__()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        def until(condition: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 5
            while not condition():
                assert time.monotonic() < deadline, "the loop did not run"
                time.sleep(0.001)

        def produce() -> None:
            assert pub.subscribed.wait(5) and pub.subscriber is not None
            try:
                for i in range(21):
                    until(lambda: agen.ag_await is not None)  # the async for waits
                    seen = ticks  # a read from another thread: a hint, never written here
                    until(lambda seen=seen: ticks >= seen + 3)  # ... and the loop runs
                    if i < 20:
                        pub.subscriber.on_next(i)
                pub.subscriber.on_complete()
            except AssertionError as exc:
                pub.subscriber.on_error(exc)

        tick_task = asyncio.create_task(ticker())
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            got = [x async for x in agen]
        finally:
            tick_task.cancel()
            await asyncio.to_thread(producer.join, 5)
        assert got == list(range(20)) and subscription.cancels == 0

    @pytest.mark.asyncio
    async def test_the_loop_runs_while_a_timeout_is_pending(self) -> None:
        """While __anext__ waits for its timeout, other tasks run: it awaits asyncio's own
        timeout, never blocks the loop's thread."""
        asyncio.get_running_loop().set_debug(True)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        tick_task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        it = to_async_iterator(ManualPublisher(), timeout=TIMES_OUT)
        before = ticks
        with pytest.raises(TimeoutError):
            await anext(it)
        tick_task.cancel()
        assert ticks - before >= 2

    @pytest.mark.asyncio
    async def test_an_element_landing_as_the_timeout_fires_is_handed_over(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An element that lands as asyncio's timeout fires (the wake-up future cancelled
        with it) is handed over, never dropped: the timeout fires only on a queue found
        empty after the wait; the next __anext__ waits afresh."""
        pub, subscription = _counting()
        it = to_async_iterator(pub, timeout=TIMES_OUT)
        await it.__aenter__()
        landed = itertools.count(7)

        def arrive() -> None:
            assert pub.subscriber is not None
            pub.subscriber.on_next(next(landed))

        real = asyncio.timeout_at
        monkeypatch.setattr(asyncio, "timeout_at", lambda when: _LandsAsItFires(real(when), arrive))
        assert await anext(it) == 7
        assert await anext(it) == 8
        assert subscription.cancels == 0
        await it.aclose()

    @pytest.mark.stress
    @pytest.mark.asyncio
    async def test_timeout_racing_elements_from_another_thread(self, switching: None) -> None:
        """A producer thread emits a few elements with gaps around the timeout, then stops,
        so each round ends in TimeoutError, some elements racing it: what the async for got
        is in order, nothing is handed over after the TimeoutError (the producer goes on
        emitting into the cancelled subscription) and upstream is cancelled exactly once."""
        timeout = 0.002
        rng = random.Random(20)
        for round_ in range(100):
            pub, subscription = _counting()
            it = to_async_iterator(pub, prefetch=16, timeout=timeout)
            await it.__aenter__()
            subscriber = pub.subscriber
            assert subscriber is not None
            gaps = [rng.uniform(0.5, 1.5) * timeout for _ in range(rng.randrange(1, 7))]

            def produce(gaps: list[float] = gaps, subscriber: Subscriber[Any] = subscriber) -> None:
                for i, gap in enumerate(gaps):
                    time.sleep(gap)
                    subscriber.on_next(i)

            producer = threading.Thread(target=produce)
            producer.start()
            got: list[int] = []
            with pytest.raises(TimeoutError):
                async for x in it:
                    got.append(x)
            assert await anext(it, None) is None
            await asyncio.to_thread(producer.join, 5)
            assert await anext(it, None) is None, round_
            assert got == list(range(len(got))), (round_, got)
            assert subscription.cancels == 1, round_

    def test_bad_timeout(self) -> None:
        """timeout is None or a finite number of seconds > 0: a non-number (or a bool) is a
        TypeError, zero, a negative, NaN or infinity a ValueError, both naming timeout."""
        source = from_iterable([1])
        for wrong_type in ("1", True, [1.0]):
            with pytest.raises(TypeError, match=r"^to_async_iterator\(\): timeout must be"):
                to_async_iterator(source, timeout=wrong_type)  # type: ignore[arg-type]
        for wrong_value in (0, -1.0, float("nan"), float("inf"), 10**400):
            with pytest.raises(ValueError, match=r"^to_async_iterator\(\): timeout must be"):
                to_async_iterator(source, timeout=wrong_value)
