"""adapters/_async_from.py: from_async_iterable, an async iterable as a Publisher."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import itertools
import random
import threading
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asyncio_helpers import (
    CountingAsyncIterator,
    FreshEachTime,
    loop_thread,
    on_loop_result,
    running_loop,
    settle,
)

from reactive_streams import UNBOUNDED, checked, publish_on
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.testing import RecordingSubscriber, cancelled_while_delivering


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in debug mode, running on a helper thread; torn down cleanly."""
    with running_loop() as event_loop:
        yield event_loop




# -- pulled as far as demand reaches -----------------------------------------------------------


class TestDemand:
    """__anext__ is awaited once per unit of demand, never ahead of it (§1.1, §3.10)."""

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

    @pytest.mark.skipif(
        not hasattr(asyncio, "eager_task_factory"), reason="asyncio.eager_task_factory is 3.12+"
    )
    @pytest.mark.parametrize("suspends", [False, True])
    def test_from_async_iterable_under_an_eager_task_factory_delivers_everything(
        self,
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


# -- where it runs: the loop, a task, one context ----------------------------------------------


class TestWhereItRuns:
    """Signals on the loop; __anext__ in a task, in the subscription's one context."""

    def test_signals_arrive_on_the_loop_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        """on_next and on_complete run on the loop's thread; the subscriber lives elsewhere."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)
        from_async_iterable(FreshEachTime(3), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [0, 1, 2] and sub.completed
        assert sub.signal_threads == {threading.get_ident(), loop_thread(loop)}
        sub.assert_no_violations()

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

    @pytest.mark.asyncio
    async def test_same_loop_subscriber_in_debug_mode(self) -> None:
        """Loop captured at subscribe time: a coroutine's subscriber gets everything, in order."""
        asyncio.get_running_loop().set_debug(True)
        got = [x async for x in to_async_iterator(from_async_iterable(FreshEachTime(50)))]
        assert got == list(range(50))

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

    def test_a_bad_loop_is_refused_at_the_call(self) -> None:
        """loop= must be an event loop (TypeError), and not a closed one, which could never
        run the stream (ValueError, at the call rather than at subscribe)."""
        with pytest.raises(TypeError, match="loop must be an asyncio event loop"):
            from_async_iterable(CountingAsyncIterator(1), loop="loop")  # type: ignore[arg-type]
        closed = asyncio.new_event_loop()
        closed.close()
        with pytest.raises(ValueError, match="loop is closed"):
            from_async_iterable(CountingAsyncIterator(1), loop=closed)


# -- what can be subscribed, and how often -----------------------------------------------------


class TestSources:
    """Async iterables, bare iterators, one-shot generators (§1.9), and what is refused."""

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


# -- cancel ------------------------------------------------------------------------------------


class TestCancel:
    """Cancel stops the pump and aclose()s the iterator on its loop (§3.12, §3.13)."""

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

    def test_publish_on_cancel_while_delivering_closes_an_async_upstream_at_once(
        self,
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


# -- errors of the source ----------------------------------------------------------------------


class TestErrors:
    """A failing source becomes on_error after its elements (§1.4); None is refused (§2.13)."""

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


# -- the loop ending under a stream ------------------------------------------------------------


class TestLoopShutdown:
    """asyncio.run ending mid-stream fails the stream; a cancel then still acloses."""

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


# -- requests and cancels from many threads ----------------------------------------------------


class TestConcurrency:
    """request and cancel from any thread, racing the loop (§1.3, §2.7, §3.5)."""

    def test_requests_from_many_threads(
        self, loop: asyncio.AbstractEventLoop, switching: None
    ) -> None:
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
    def test_cancel_races_emission(self, loop: asyncio.AbstractEventLoop, switching: None) -> None:
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
        self, loop: asyncio.AbstractEventLoop, switching: None
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
