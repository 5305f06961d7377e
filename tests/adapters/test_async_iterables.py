"""adapters.async_iterables: from_async_iterable and to_async_iterator, both directions."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import itertools
import logging
import random
import runpy
import threading
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from reactive_streams import UNBOUNDED, OverflowViolation, Subscriber, checked, publish_on
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import (
    CountedIterable,
    Incomparable,
    RecordingSubscriber,
    RecordingSubscription,
    cancelled_while_delivering,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "async_pipeline.py"


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in debug mode, running on a helper thread; torn down cleanly."""
    event_loop = asyncio.new_event_loop()
    event_loop.set_debug(True)
    thread = threading.Thread(target=event_loop.run_forever, name="test-loop", daemon=True)
    thread.start()
    yield event_loop

    async def shutdown() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_asyncgens()

    asyncio.run_coroutine_threadsafe(shutdown(), event_loop).result(10)
    event_loop.call_soon_threadsafe(event_loop.stop)
    thread.join(10)
    event_loop.close()


def loop_thread(loop: asyncio.AbstractEventLoop) -> int:
    """The id of the thread ``loop`` runs on."""

    async def ident() -> int:
        return threading.get_ident()

    return asyncio.run_coroutine_threadsafe(ident(), loop).result(10)


def on_loop_result(loop: asyncio.AbstractEventLoop, fn: Any) -> Any:
    """Run the coroutine ``fn()`` on ``loop`` and return its result."""
    return asyncio.run_coroutine_threadsafe(fn(), loop).result(10)


def settle(loop: asyncio.AbstractEventLoop, rounds: int = 20) -> None:
    """Let ``loop`` run ``rounds`` iterations, so that anything already scheduled has run."""

    async def spin() -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)

    asyncio.run_coroutine_threadsafe(spin(), loop).result(10)


class CountingAsyncIterator:
    """An async iterator over ``range(n)`` that counts ``__anext__`` calls and their thread."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0
        self.threads: set[int] = set()

    def __aiter__(self) -> CountingAsyncIterator:
        return self

    async def __anext__(self) -> int:
        self.threads.add(threading.get_ident())
        self.calls += 1
        if self.calls > self.n:
            raise StopAsyncIteration
        await asyncio.sleep(0)  # a real suspension: the fetch is asynchronous
        return self.calls - 1


class FreshEachTime:
    """A re-iterable async iterable: each ``__aiter__`` starts a new generator."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __aiter__(self) -> AsyncIterator[int]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[int]:
        for i in range(self.n):
            yield i


class ManualPublisher:
    """A publisher whose single subscriber the test signals directly, from any thread."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[Any] | None = None
        self.subscription = RecordingSubscription()
        self.subscribed = threading.Event()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self.subscription)
        self.subscribed.set()


# -- from_async_iterable ----------------------------------------------------------------------


class TestFromAsyncIterable:
    def test_anext_is_awaited_only_as_far_as_demand(self, loop: asyncio.AbstractEventLoop) -> None:
        """Each unit of demand starts one __anext__, never more, whatever the source holds."""
        source = CountingAsyncIterator(100)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_iterable(source, loop=loop).subscribe(sub)
        sub.await_subscribed()
        settle(loop)
        assert source.calls == 0
        sub.request(3)
        assert sub.await_count(3) == [0, 1, 2]
        settle(loop)
        assert source.calls == 3
        sub.request(2)
        assert sub.await_count(5) == [0, 1, 2, 3, 4]
        settle(loop)
        assert source.calls == 5
        assert source.threads == {loop_thread(loop)}
        sub.cancel()
        sub.assert_no_violations()

    @pytest.mark.stress
    def test_requests_racing_the_pump_start_are_all_served(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """request(1) twice from another thread, the second landing before the pump task has
        started: both are served, and no __anext__ runs beyond the two (found by a stall)."""
        for _ in range(50):
            source = CountingAsyncIterator(10)
            sub: RecordingSubscriber[int] = RecordingSubscriber()
            from_async_iterable(source, loop=loop).subscribe(sub)
            sub.await_subscribed()
            sub.request(1)
            sub.request(1)
            assert sub.await_count(2) == [0, 1]
            settle(loop)
            assert source.calls == 2
            sub.cancel()

    def test_a_source_that_never_suspends_lets_the_loop_run(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Unbounded demand over an infinite async generator that never awaits: the pump yields
        to the loop between bursts, so another task on the loop keeps running."""
        ticks = 0

        async def forever() -> AsyncIterator[int]:
            i = 0
            while True:
                yield i
                i += 1

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        ticking = asyncio.run_coroutine_threadsafe(ticker(), loop)
        from_async_iterable(forever(), loop=loop).subscribe(sub)
        sub.await_count(10_000)
        seen = ticks
        sub.await_count(len(sub.elements) + 5_000)
        assert ticks > seen  # the ticker ran while the source kept producing
        sub.cancel()
        ticking.cancel()
        sub.assert_no_violations()

    def test_signals_arrive_on_the_loop_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        """on_next and on_complete run on the loop's thread; the subscriber lives elsewhere."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_async_iterable(FreshEachTime(3), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [0, 1, 2] and sub.completed
        assert sub.signal_threads == {threading.get_ident(), loop_thread(loop)}
        sub.assert_no_violations()

    def test_cancel_runs_the_generator_finally(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel aclose()s a generator suspended at a yield, on its loop, so finally runs."""
        finished = threading.Event()
        finally_threads: list[int] = []

        async def gen() -> AsyncGenerator[int, None]:
            try:
                for i in range(1000):
                    yield i
            finally:
                finally_threads.append(threading.get_ident())
                finished.set()

        agen = gen()  # held here, so the loop's GC finalizer cannot be what closes it
        sub: RecordingSubscriber[int] = RecordingSubscriber(2)
        from_async_iterable(agen, loop=loop).subscribe(sub)
        sub.await_count(2)
        sub.cancel()
        assert finished.wait(5)
        assert finally_threads == [loop_thread(loop)]
        assert agen.ag_frame is None  # type: ignore[attr-defined]  # closed, not abandoned
        assert not sub.is_terminated
        sub.assert_no_violations()

    def test_cancel_interrupts_an_anext_in_flight(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel while __anext__ awaits: the generator sees CancelledError and its finally runs."""
        waiting = threading.Event()
        seen: list[BaseException] = []
        finished = threading.Event()

        async def gen() -> AsyncIterator[int]:
            try:
                yield 0
                waiting.set()
                await asyncio.Event().wait()  # never set: only cancellation ends this
                yield 1
            except BaseException as exc:
                seen.append(exc)
                raise
            finally:
                finished.set()

        sub: RecordingSubscriber[int] = RecordingSubscriber(5)
        from_async_iterable(gen(), loop=loop).subscribe(sub)
        assert sub.await_count(1) == [0]  # delivered once the pump awaits the next one
        assert waiting.wait(5)
        sub.cancel()
        assert finished.wait(5)
        assert len(seen) == 1 and isinstance(seen[0], asyncio.CancelledError)
        assert sub.elements == [0] and not sub.is_terminated

    def test_raising_source_errors_after_its_elements(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """A source that raises delivers its elements, then on_error with its exception."""

        async def gen() -> AsyncIterator[int]:
            yield 1
            yield 2
            raise ValueError("boom")

        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_async_iterable(gen(), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [1, 2]
        assert isinstance(sub.error, ValueError) and str(sub.error) == "boom"
        sub.assert_no_violations()

    def test_none_element_becomes_type_error(self, loop: asyncio.AbstractEventLoop) -> None:
        """None is never an element: yielding it ends the stream with on_error(TypeError),
        and the generator, left suspended at that yield, is aclose()d: its finally runs."""
        cleaned = threading.Event()

        async def gen() -> AsyncIterator[int | None]:
            try:
                yield 1
                yield None
                yield 2
            finally:
                cleaned.set()

        sub: RecordingSubscriber[int | None] = RecordingSubscriber(10)
        from_async_iterable(gen(), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [1] and isinstance(sub.error, TypeError)
        assert cleaned.wait(5)

    def test_a_failing_custom_iterator_is_still_aclosed(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """An iterator whose __anext__ raises has not ended by itself (a connection that
        reset still holds its socket): after on_error, its aclose() runs (§3.13)."""

        class Reset:
            def __init__(self) -> None:
                self.closed = threading.Event()

            def __aiter__(self) -> Reset:
                return self

            async def __anext__(self) -> int:
                raise ConnectionResetError("reset")

            async def aclose(self) -> None:
                self.closed.set()

        source = Reset()
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_iterable(source, loop=loop).subscribe(sub)
        sub.await_terminal()
        assert isinstance(sub.error, ConnectionResetError)
        assert source.closed.wait(5)

    def test_a_source_raising_cancelled_error_fails_the_stream(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """A source that raises CancelledError by itself (it awaited a task someone else
        cancelled) fails the stream (§1.4) with an error that says so, instead of ending its
        pump silently: the subscriber is not left waiting, and a later request does not turn
        the failure into on_complete."""

        async def gen() -> AsyncIterator[int]:
            yield 1
            other = asyncio.ensure_future(asyncio.sleep(10))
            asyncio.get_running_loop().call_soon(other.cancel)
            yield await other

        sub: RecordingSubscriber[int] = RecordingSubscriber(2)
        from_async_iterable(gen(), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [1]
        assert isinstance(sub.error, RuntimeError) and "CancelledError" in str(sub.error)
        assert isinstance(sub.error.__cause__, asyncio.CancelledError)
        assert sub.subscription is not None
        sub.subscription.request(1)
        settle(loop)
        assert not sub.completed
        sub.assert_no_violations()

    def test_the_loop_shutting_down_mid_stream_fails_the_stream(self) -> None:
        """asyncio.run ending (it cancels every task) while the pump awaits the next element:
        the subscriber, on another thread or loop, gets on_error instead of waiting forever,
        and the generator's finally still runs."""
        cleaned = threading.Event()

        async def ticks() -> AsyncIterator[int]:
            try:
                for i in itertools.count():
                    await asyncio.sleep(0.005)
                    yield i
            finally:
                cleaned.set()

        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)

        async def main() -> None:
            from_async_iterable(ticks()).subscribe(sub)
            while len(sub.elements) < 3:  # the pump is running, awaiting the next tick
                await asyncio.sleep(0.005)

        asyncio.run(main(), debug=True)
        sub.await_terminal()
        assert sub.elements == list(range(len(sub.elements))) and sub.elements
        assert isinstance(sub.error, RuntimeError) and "cancelled from outside" in str(sub.error)
        assert cleaned.is_set()
        sub.assert_no_violations()

    def test_the_loop_ending_before_the_pump_starts_fails_the_stream(self) -> None:
        """A request on the loop's last turn (from another thread, say): asyncio.run cancels
        the pump task before its first step. The subscriber still hears on_error, and no
        coroutine is left never awaited."""

        async def numbers() -> AsyncIterator[int]:
            for i in range(10):
                await asyncio.sleep(0)
                yield i

        sub: RecordingSubscriber[int] = RecordingSubscriber(0)

        async def main() -> None:
            from_async_iterable(numbers()).subscribe(sub)
            asyncio.get_running_loop().call_soon(sub.request, 5)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main(), debug=True)
            gc.collect()
        sub.await_terminal(5)
        assert sub.elements == []
        assert isinstance(sub.error, RuntimeError) and "cancelled from outside" in str(sub.error)
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []

    def test_a_base_exception_from_the_source_fails_the_stream(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """A source raising a BaseException that is no Exception (nor a cancellation):
        on_error after the elements before it, naming it; it used to escape the pump task,
        and a later request completed the stream as if nothing had happened."""

        class GaveUp(BaseException):
            pass

        async def source() -> AsyncIterator[int]:
            yield 1
            raise GaveUp("source gave up")

        sub: RecordingSubscriber[int] = RecordingSubscriber(3)
        from_async_iterable(source(), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [1] and not sub.completed
        assert isinstance(sub.error, RuntimeError) and "not an Exception" in str(sub.error)
        assert isinstance(sub.error.__cause__, GaveUp)
        sub.request(1)
        sub.expect_no_signals(0.05)
        sub.assert_no_violations()

    @pytest.mark.parametrize("queued", [False, True], ids=["last step", "queued for last turn"])
    def test_a_cancel_as_the_loop_ends_still_acloses(self, queued: bool) -> None:
        """cancel() as main()'s last step, or queued for the loop's very last turn, then
        asyncio.run ends: the clean-up task is cancelled while it waits for the pump to
        unwind, or by asyncio.run's task sweep before its first step (it is then started
        once more), and the iterator is aclose()d all the same (§3.13). An async generator
        is saved by the loop's shutdown_asyncgens anyway; a class is not."""

        class Source:
            def __init__(self) -> None:
                self.closed = False
                self.reading = asyncio.Event()

            def __aiter__(self) -> Source:
                return self

            async def __anext__(self) -> int:
                self.reading.set()
                await asyncio.sleep(0.01)
                return 1

            async def aclose(self) -> None:
                self.closed = True

        source = Source()
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)

        async def main() -> None:
            from_async_iterable(source).subscribe(sub)
            await source.reading.wait()  # the pump is inside __anext__
            if queued:
                asyncio.get_running_loop().call_soon(sub.cancel)
            else:
                sub.cancel()

        asyncio.run(main(), debug=True)
        assert source.closed

    def test_a_cancel_during_shutdown_lets_the_generator_finally_finish(self) -> None:
        """The pump is already cancelled (the end of asyncio.run cancels every task) and the
        generator's finally awaits its clean-up when the subscriber cancels too (its own
        task was cancelled by the same shutdown): the pump is not cancelled a second time,
        which would cut that finally short."""
        events: list[str] = []
        reading = asyncio.Event()

        async def source() -> AsyncIterator[int]:
            try:
                reading.set()
                await asyncio.sleep(10)
                yield 1
            finally:
                events.append("finally")
                await asyncio.sleep(0.01)  # closing a connection, say
                events.append("cleaned up")

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)

        async def main() -> None:
            from_async_iterable(source()).subscribe(sub)
            await reading.wait()  # the pump awaits __anext__
            (pump,) = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            pump.cancel()  # what asyncio.run's shutdown does
            await asyncio.sleep(0)  # the generator is in its finally, awaiting
            sub.cancel()
            await asyncio.wait((pump,), timeout=5)  # its finally runs to its end, or is cut

        asyncio.run(main(), debug=True)
        assert events == ["finally", "cleaned up"]

    def test_a_cancel_while_the_source_withdraws_one_of_its_own_still_stops_it(self) -> None:
        """The source cancels its own read and withdraws that cancel (what asyncio.timeout
        does when it fires), and the subscriber's cancel lands in between, while the pump
        has a cancel pending: the pump must still be stopped and the source aclose()d. The
        pending cancel was taken for a shutdown's, and the source read on for ever."""

        class Retrying:
            def __init__(self) -> None:
                self.closed = False
                self.reading = asyncio.Event()
                self.withdraw = False

            def __aiter__(self) -> Retrying:
                return self

            async def __anext__(self) -> int:
                while True:
                    try:
                        self.reading.set()
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        task = asyncio.current_task()
                        if not self.withdraw or task is None:
                            raise
                        self.withdraw = False  # its own: withdraw it, and read again
                        task.uncancel()

            async def aclose(self) -> None:
                self.closed = True

        source = Retrying()
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)

        async def main() -> bool:
            from_async_iterable(source).subscribe(sub)
            await source.reading.wait()
            (pump,) = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            source.withdraw = True
            pump.cancel()  # the source's own timeout firing, say
            sub.cancel()  # in the same turn: the pump has a cancel pending
            for _ in range(100):
                if source.closed:
                    break
                await asyncio.sleep(0.01)
            return source.closed  # before asyncio.run's shutdown would close it anyway

        assert asyncio.run(main(), debug=True)

    def test_an_iterator_without_aiter_is_accepted(self, loop: asyncio.AbstractEventLoop) -> None:
        """An iterable's __aiter__ need only return something with __anext__ (aiter() and
        async for accept that): so does from_async_iterable, aclose() included."""

        class Bare:
            def __init__(self) -> None:
                self.left = 3
                self.closed = threading.Event()

            async def __anext__(self) -> int:
                if not self.left:
                    raise StopAsyncIteration
                self.left -= 1
                return self.left

            async def aclose(self) -> None:
                self.closed.set()

        class Iterable:
            def __init__(self) -> None:
                self.iterator = Bare()

            def __aiter__(self) -> Bare:
                return self.iterator

        whole: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_async_iterable(Iterable(), loop=loop).subscribe(whole)
        whole.await_terminal()
        assert whole.elements == [2, 1, 0] and whole.completed
        cut: RecordingSubscriber[int] = RecordingSubscriber(1)
        iterable = Iterable()
        from_async_iterable(iterable, loop=loop).subscribe(cut)
        cut.await_count(1)
        assert cut.subscription is not None
        cut.subscription.cancel()
        assert iterable.iterator.closed.wait(5)

    def test_empty_source_completes_without_demand(self, loop: asyncio.AbstractEventLoop) -> None:
        """An empty source completes once polled; a failing __aiter__ fails at subscribe (§1.9)."""

        class BadIterable:
            def __aiter__(self) -> AsyncIterator[int]:
                raise OSError("cannot open")

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_iterable(FreshEachTime(0), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.completed and sub.elements == []
        bad: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_iterable(BadIterable(), loop=loop).subscribe(bad)
        assert isinstance(bad.error, OSError) and bad.subscription is not None

    def test_generator_runs_in_a_task_and_one_context(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """__anext__ runs inside a task (asyncio.timeout works) and context vars persist."""
        var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=0)
        tasks: list[asyncio.Task[Any] | None] = []

        async def gen() -> AsyncIterator[int]:
            for _ in range(5):
                async with asyncio.timeout(5):  # needs a current task
                    await asyncio.sleep(0)
                tasks.append(asyncio.current_task())
                var.set(var.get() + 1)
                yield var.get()

        sub: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_iterable(gen(), loop=loop).subscribe(sub)
        for _ in range(5):
            sub.request(1)
        sub.await_count(5)
        assert sub.elements == [1, 2, 3, 4, 5]
        assert None not in tasks

    def test_abandoned_idle_subscription_leaves_no_pending_task(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Demand met and subscriber dropped without cancel: no task of ours stays pending."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(3)
        from_async_iterable(FreshEachTime(100), loop=loop).subscribe(sub)
        sub.await_count(3)
        settle(loop)

        async def pumps() -> list[asyncio.Task[Any]]:
            return [t for t in asyncio.all_tasks() if "_AsyncIteratorSource" in repr(t.get_coro())]

        assert on_loop_result(loop, pumps) == []

    def test_no_running_loop_rejects_with_a_clear_error(self) -> None:
        """Without loop= and without a running loop, the subscriber gets on_subscribe, on_error."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_iterable(FreshEachTime(3)).subscribe(sub)
        assert sub.subscription is not None
        assert isinstance(sub.error, RuntimeError) and "loop=" in str(sub.error)
        sub.assert_no_violations()

    def test_closed_loop_rejects(self) -> None:
        """A loop closed between the call and subscribe is reported through on_error, not
        raised (one closed already at the call is a ValueError there)."""
        closed = asyncio.new_event_loop()
        publisher = from_async_iterable(FreshEachTime(3), loop=closed)
        closed.close()
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        publisher.subscribe(sub)
        assert isinstance(sub.error, RuntimeError) and "closed" in str(sub.error)

    def test_one_shot_iterator_serves_one_subscriber(self, loop: asyncio.AbstractEventLoop) -> None:
        """A generator serves one subscriber (a second is rejected); a re-iterable serves many."""

        async def gen() -> AsyncIterator[int]:
            yield 1

        one_shot = from_async_iterable(gen(), loop=loop)
        first: RecordingSubscriber[int] = RecordingSubscriber(5)
        second: RecordingSubscriber[int] = RecordingSubscriber(5)
        one_shot.subscribe(first)
        one_shot.subscribe(second)
        first.await_terminal()
        assert first.elements == [1] and first.completed
        assert isinstance(second.error, RuntimeError) and "§1.9" in str(second.error)
        many = from_async_iterable(FreshEachTime(2), loop=loop)
        subs: list[RecordingSubscriber[int]] = [RecordingSubscriber(5) for _ in range(3)]
        for sub in subs:
            many.subscribe(sub)
        for sub in subs:
            sub.await_terminal()
            assert sub.elements == [0, 1] and sub.completed

    def test_not_an_async_iterable_is_a_type_error(self) -> None:
        """from_async_iterable() of a plain iterable raises TypeError at once."""
        with pytest.raises(TypeError, match="async iterable"):
            from_async_iterable([1, 2, 3])  # type: ignore[arg-type]

    def test_a_bad_loop_is_refused_at_the_call(self) -> None:
        """loop= must be an event loop (TypeError), and not a closed one, which could never
        run the stream (ValueError, at the call rather than at subscribe)."""
        with pytest.raises(TypeError, match="loop must be an asyncio event loop"):
            from_async_iterable(CountingAsyncIterator(1), loop="loop")  # type: ignore[arg-type]
        closed = asyncio.new_event_loop()
        closed.close()
        with pytest.raises(ValueError, match="loop is closed"):
            from_async_iterable(CountingAsyncIterator(1), loop=closed)

    def test_requests_from_many_threads(self, loop: asyncio.AbstractEventLoop) -> None:
        """request(1) from 8 threads at once adds up: exactly the demand arrives, in order."""
        source = CountingAsyncIterator(10_000)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_iterable(source, loop=loop).subscribe(sub)
        subscription = sub.await_subscribed()
        sub.requested = 200  # about to be requested behind the recorder's back
        barrier = threading.Barrier(8)

        def hammer() -> None:
            barrier.wait()
            for _ in range(25):
                subscription.request(1)

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sub.await_count(200) == list(range(200))
        settle(loop)
        assert source.calls == 200 and len(sub.elements) == 200
        sub.cancel()
        sub.assert_no_violations()

    @pytest.mark.stress
    def test_cancel_races_emission(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel from other threads while the loop emits: no violation, the finally always runs."""
        for _ in range(50):
            finished = threading.Event()

            async def gen(done: threading.Event = finished) -> AsyncIterator[int]:
                try:
                    i = 0
                    while True:
                        yield i
                        i += 1
                finally:
                    done.set()

            sub: RecordingSubscriber[int] = RecordingSubscriber(10_000)
            from_async_iterable(gen(), loop=loop).subscribe(sub)
            sub.await_count(1)
            barrier = threading.Barrier(3)

            def cancel(s: RecordingSubscriber[int] = sub, b: threading.Barrier = barrier) -> None:
                b.wait()
                s.cancel()

            threads = [threading.Thread(target=cancel) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert finished.wait(5)
            count = len(sub.elements)
            settle(loop)
            assert len(sub.elements) == count  # nothing after cancel took effect
            assert sub.elements == list(range(count))
            sub.assert_no_violations()

    @pytest.mark.stress
    def test_checked_finds_no_violation_under_racing_requests_and_cancels(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """checked() sees no rule broken while threads request and cancel at random."""
        violations: list[Exception] = []
        rng = random.Random(7)
        for round_ in range(40):
            publisher = checked(
                from_async_iterable(FreshEachTime(rng.randrange(0, 60)), loop=loop),
                on_violation=violations.append,
            )
            sub: RecordingSubscriber[int] = RecordingSubscriber(request_on_next=rng.randrange(0, 2))
            publisher.subscribe(sub)
            subscription = sub.await_subscribed()
            barrier = threading.Barrier(3)
            seed = rng.random()

            def poke(
                which: int,
                s: Any = subscription,
                b: threading.Barrier = barrier,
                seed: float = seed,
            ) -> None:
                r = random.Random(seed + which)
                b.wait()
                for _ in range(20):
                    if r.random() < 0.05:
                        s.cancel()
                    else:
                        s.request(r.randrange(1, 4))

            threads = [threading.Thread(target=poke, args=(i,)) for i in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            settle(loop)
            assert not violations, (round_, violations)
            assert sub.elements == list(range(len(sub.elements)))

    @pytest.mark.asyncio
    async def test_same_loop_subscriber_in_debug_mode(self) -> None:
        """Loop captured at subscribe time: a coroutine's subscriber gets everything, in order."""
        asyncio.get_running_loop().set_debug(True)
        got = [x async for x in to_async_iterator(from_async_iterable(FreshEachTime(50)))]
        assert got == list(range(50))


# -- to_async_iterator ------------------------------------------------------------------------


class TestToAsyncIterator:
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

    @pytest.mark.asyncio
    async def test_publisher_whose_subscribe_raises(self) -> None:
        """A subscribe() that raises surfaces its error at the async for."""

        class Broken:
            def subscribe(self, subscriber: Subscriber[Any]) -> None:
                raise RuntimeError("cannot subscribe")

        with pytest.raises(RuntimeError, match="cannot subscribe"):
            async for _ in to_async_iterator(Broken()):
                pass

    def test_bad_arguments(self) -> None:
        """None publisher is a TypeError; a non-positive prefetch is a ValueError."""
        with pytest.raises(TypeError):
            to_async_iterator(None)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            to_async_iterator(from_iterable([1]), prefetch=0)

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


# -- pipelines and the example ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_pipeline_generator_publish_on_async_for() -> None:
    """generator -> from_iterable -> publish_on -> to_async_iterator: all in order, bounded."""
    asyncio.get_running_loop().set_debug(True)
    produced = 0
    consumed = 0
    max_ahead = 0
    lock = threading.Lock()

    def numbers() -> Iterator[int]:
        nonlocal produced, max_ahead
        for i in range(3000):
            with lock:
                produced += 1
                max_ahead = max(max_ahead, produced - consumed)
            yield i

    got: list[int] = []
    with ThreadPoolExecutor(1, thread_name_prefix="pipeline") as pool:
        stage = publish_on(from_iterable(numbers()), pool, prefetch=16)
        async for x in to_async_iterator(stage, prefetch=32):
            with lock:
                consumed += 1
            got.append(x)
            if x % 100 == 0:
                await asyncio.sleep(0.001)  # a slow consumer, without blocking the loop
    assert got == list(range(3000))
    # publish_on holds at most 16, the iterator at most 32, plus one in each hand-off.
    assert max_ahead <= 16 + 32 + 2


@pytest.mark.asyncio
async def test_pipeline_async_generator_to_async_iterator_same_loop() -> None:
    """async generator -> from_async_iterable -> to_async_iterator, on one loop, debug mode."""
    asyncio.get_running_loop().set_debug(True)
    ahead: list[int] = []
    consumed = 0

    async def gen() -> AsyncIterator[int]:
        for i in range(500):
            ahead.append(i - consumed)
            yield i

    got = []
    async for x in to_async_iterator(from_async_iterable(gen()), prefetch=10):
        got.append(x)
        consumed += 1
    assert got == list(range(500))
    assert max(ahead) <= 10


@pytest.mark.asyncio
async def test_elements_that_refuse_comparison_pass_from_and_to_async() -> None:
    """Elements whose == raises (numpy arrays, DataFrames): the pump's queue, the drain and
    the iterator's window pass them whole and in order."""

    async def gen() -> AsyncIterator[Incomparable]:
        for i in range(300):
            if i % 7 == 0:
                await asyncio.sleep(0)
            yield Incomparable(i)

    got = [x.value async for x in to_async_iterator(from_async_iterable(gen()), prefetch=16)]
    assert got == list(range(300))


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/examples/async_pipeline.py runs to completion and prints its summary."""
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "sum of squares of even numbers below 10000: 166616670000" in out
    assert "aioreactive source -> 10 elements" in out


@pytest.mark.skipif(
    not hasattr(asyncio, "eager_task_factory"), reason="asyncio.eager_task_factory is 3.12+"
)
@pytest.mark.parametrize("suspends", [False, True])
def test_from_async_iterable_under_an_eager_task_factory_delivers_everything(
    suspends: bool,
) -> None:
    """§3.8: a loop whose task factory runs a task's first step inside create_task (3.12+)
    changes nothing: a pump started from inside on_next's request neither finishes before
    it is recorded (the stream stalled after one element) nor enters the subscription's
    context twice (a RuntimeError that wedged the loop)."""

    async def numbers() -> AsyncIterator[int]:
        for i in range(100):
            if suspends:
                await asyncio.sleep(0)
            yield i

    async def main() -> RecordingSubscriber[int]:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        sub.on_next_hook = lambda element: sub.request(1)
        from_async_iterable(numbers()).subscribe(sub)
        for _ in range(500):
            if sub.completed:
                break
            await asyncio.sleep(0)
        return sub

    result: list[RecordingSubscriber[int]] = []
    runner = threading.Thread(target=lambda: result.append(asyncio.run(main())), daemon=True)
    runner.start()
    runner.join(10)
    assert result, "asyncio.run never returned: the loop was wedged"
    assert result[0].elements == list(range(100)) and result[0].completed


def test_spec312_to_async_iterator_hands_over_nothing_after_aclose_from_another_task() -> None:
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


def test_publish_on_cancel_while_delivering_closes_an_async_upstream_at_once(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """§3.12: publish_on over from_async_iterable: a cancel while on_next is slow stops the
    pump and acloses the async generator at once, on its loop, though its drain is idle
    (the pump awaits __anext__): it does not pull the window on until on_next returns."""
    pulled = 0
    closed = threading.Event()

    async def numbers() -> AsyncIterator[int]:
        nonlocal pulled
        try:
            for i in range(1000):
                pulled += 1
                yield i
                await asyncio.sleep(0.002)
        finally:
            closed.set()

    with ThreadPoolExecutor(1) as pool:
        source = from_async_iterable(numbers(), loop=loop)
        with cancelled_while_delivering(publish_on(source, pool, prefetch=256)):
            assert closed.wait(5)  # while on_next still holds the drain
            assert pulled < 256


def test_spec312_to_async_iterator_hands_over_nothing_after_a_close_during_a_burst_pause() -> None:
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
