"""adapters/aioreactive.py: from_async_observable and to_async_observable."""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

import aioreactive as rx
import pytest
from aioreactive import AsyncAnonymousObserver, AsyncObservable, AsyncObserver
from asyncio_helpers import ManualPublisher, on_loop_result, running_loop, settle
from expression.system import AsyncDisposable

from reactive_streams import UNBOUNDED, checked
from reactive_streams.adapters.aioreactive import from_async_observable, to_async_observable
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import CountedIterable, RecordingSubscriber

# -- helpers -----------------------------------------------------------------------------------


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in debug mode, running on a helper thread; torn down cleanly."""
    with running_loop() as event_loop:
        yield event_loop




class AwaitingSource(AsyncObservable[int]):
    """A cold aioreactive source that awaits each ``asend`` and records what it did.

    ``started``/``finished`` count ``asend`` calls begun and returned; ``disposed`` is set when
    its subscription is disposed; ``then`` is how it ends: None (complete) or an exception.
    """

    def __init__(self, count: int, then: Exception | None = None) -> None:
        self.count = count
        self.then = then
        self.started = 0
        self.finished = 0
        self.disposed = threading.Event()
        self.cancelled_in_asend = threading.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    async def subscribe_async(
        self,
        send: Any = None,
        throw: Any = None,
        close: Any = None,
    ) -> AsyncDisposable:
        assert isinstance(send, AsyncObserver)
        observer: AsyncObserver[int] = send

        async def run() -> None:
            for i in range(self.count):
                self.started += 1
                try:
                    await observer.asend(i)
                except asyncio.CancelledError:
                    self.cancelled_in_asend.set()
                    raise
                self.finished += 1
            if self.then is None:
                await observer.aclose()
            else:
                await observer.athrow(self.then)

        task = asyncio.get_running_loop().create_task(run())
        self.tasks.add(task)

        async def dispose() -> None:
            task.cancel()
            self.disposed.set()

        return AsyncDisposable.create(dispose)


class Capturing(AsyncObservable[int]):
    """A source that only records the observers subscribed to it (and never signals)."""

    def __init__(self) -> None:
        self.observers: list[AsyncObserver[int]] = []

    async def subscribe_async(
        self, send: Any = None, throw: Any = None, close: Any = None
    ) -> AsyncDisposable:
        self.observers.append(send)
        return AsyncDisposable.empty()


class Recorder:
    """An aioreactive observer recording its calls; ``gate`` (if set) holds each asend."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.error: Exception | None = None
        self.closed = asyncio.Event()
        self.in_asend = 0
        self.max_in_asend = 0
        self.gate: asyncio.Semaphore | None = None

    def observer(self) -> AsyncObserver[Any]:
        return AsyncAnonymousObserver(self.asend, self.athrow, self.aclose)

    async def asend(self, value: Any) -> None:
        self.in_asend += 1
        self.max_in_asend = max(self.max_in_asend, self.in_asend)
        try:
            if self.gate is not None:
                await self.gate.acquire()
            self.values.append(value)
        finally:
            self.in_asend -= 1

    async def athrow(self, error: Exception) -> None:
        self.error = error
        self.closed.set()

    async def aclose(self) -> None:
        self.closed.set()


# -- from_async_observable: paced by demand ----------------------------------------------------


class TestPacedByDemand:
    """asend returns once the subscriber has demand: one element in the slot (§1.1)."""

    def test_asend_waits_for_demand(self, loop: asyncio.AbstractEventLoop) -> None:
        """A source awaiting asend is paced by request(): asends return only for demand."""
        source = AwaitingSource(100)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_observable(source, loop=loop).subscribe(sub)
        sub.await_subscribed()
        settle(loop)
        assert source.finished == 0 and source.started <= 1
        sub.request(3)
        assert sub.await_count(3) == [0, 1, 2]
        settle(loop)
        # The 4th asend may have started (it waits inside the adapter): one-slot hand-off.
        assert source.finished == 3 and source.started <= 4
        sub.request(2)
        assert sub.await_count(5) == [0, 1, 2, 3, 4]
        settle(loop)
        assert source.finished == 5 and source.started <= 6
        sub.cancel()
        assert source.disposed.wait(5)
        sub.assert_no_violations()

    def test_signals_on_the_loop_and_completion(self, loop: asyncio.AbstractEventLoop) -> None:
        """Elements and on_complete arrive on the loop thread after the elements, in order."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(100)
        from_async_observable(AwaitingSource(10), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == list(range(10)) and sub.completed
        assert len(sub.signal_threads) == 2  # on_subscribe here, the rest on the loop
        sub.assert_no_violations()

    def test_athrow_after_elements(self, loop: asyncio.AbstractEventLoop) -> None:
        """athrow becomes on_error after the elements already sent (§1.4)."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(100)
        from_async_observable(AwaitingSource(3, ValueError("bad")), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert sub.elements == [0, 1, 2] and isinstance(sub.error, ValueError)
        sub.assert_no_violations()

    def test_terminal_without_demand(self, loop: asyncio.AbstractEventLoop) -> None:
        """An empty source completes and a failing one errors with no request at all (§1.2)."""
        done: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_observable(rx.empty(), loop=loop).subscribe(done)
        done.await_terminal()
        assert done.completed and done.requested == 0
        failed: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_observable(AwaitingSource(0, KeyError("k")), loop=loop).subscribe(failed)
        failed.await_terminal()
        assert isinstance(failed.error, KeyError)

    def test_cancelling_one_waiting_asend_leaves_the_others_waiting(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """The asends waiting for demand share one permit: a producer that gives up (a
        timeout) must neither cancel another's wait nor make later asends fail at once."""
        source = Capturing()
        sub: RecordingSubscriber[str] = RecordingSubscriber(0)
        from_async_observable(source, loop=loop).subscribe(sub)  # type: ignore[arg-type]
        settle(loop)
        observer: AsyncObserver[Any] = source.observers[0]

        async def scenario() -> tuple[bool, bool]:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(observer.asend("gave up"), 0.02)
            with pytest.raises(asyncio.TimeoutError):  # the retry waits again: no demand
                await asyncio.wait_for(observer.asend("gave up again"), 0.02)
            first = asyncio.create_task(observer.asend("first"))
            second = asyncio.create_task(observer.asend("second"))
            await asyncio.sleep(0.01)
            first.cancel()
            await asyncio.sleep(0.01)
            waiting = not second.done()
            sub.request(1)
            await asyncio.wait_for(second, 5)
            return waiting, first.cancelled()

        assert on_loop_result(loop, scenario) == (True, True)
        assert sub.elements == ["second"]
        sub.cancel()

    def test_aioreactive_from_iterable_runs_ahead_of_demand(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Documents aioreactive: from_iterable drains its iterable before the first asend."""
        pulled = 0

        def numbers() -> Iterator[int]:
            nonlocal pulled
            for i in range(5000):
                pulled += 1
                yield i

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_observable(rx.from_iterable(numbers()), loop=loop).subscribe(sub)
        assert sub.await_count(1) == [0]
        settle(loop)
        # One element was requested, yet the whole iterable sits in aioreactive's mailbox.
        assert pulled == 5000 and len(sub.elements) == 1
        sub.cancel()

    @pytest.mark.asyncio
    async def test_hot_subject_is_slowed_by_demand(self) -> None:
        """An AsyncSubject producer that awaits asend is held back by the subscriber's pace."""
        asyncio.get_running_loop().set_debug(True)
        subject: rx.AsyncSubject[int] = rx.AsyncSubject()
        it = to_async_iterator(from_async_observable(subject), prefetch=2)
        await it.__aenter__()
        sent = 0

        async def produce() -> None:
            nonlocal sent
            for i in range(20):
                await subject.asend(i)
                sent += 1
            await subject.aclose()

        producer = asyncio.create_task(produce())
        got = []
        async for x in it:
            got.append(x)
            # prefetch 2, one element in the adapter's slot, one asend waiting
            assert sent - len(got) <= 3
        await producer
        assert got == list(range(20))


# -- from_async_observable: a hot source kept from subscribe() ---------------------------------


class TestHotSource:
    """The source is subscribed before subscribe() returns, on the loop's thread."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("demand", [0, UNBOUNDED], ids=["no demand", "demand"])
    async def test_a_hot_subject_keeps_what_is_sent_right_after_subscribe(
        self, demand: int
    ) -> None:
        """subscribe() on the loop subscribes the AsyncSubject before it returns: asend and
        aclose made right after it, before the code yields, reach the subscriber (§1.2: the
        completion without demand too). They were lost, and the subscriber never ended."""
        asyncio.get_running_loop().set_debug(True)
        subject: rx.AsyncSubject[int] = rx.AsyncSubject()
        sub: RecordingSubscriber[int] = RecordingSubscriber(demand)
        from_async_observable(subject).subscribe(sub)
        if demand:
            await subject.asend(1)
            await subject.asend(2)
        await subject.aclose()
        for _ in range(50):  # loop turns, not time
            if sub.is_terminated:
                break
            await asyncio.sleep(0)
        assert sub.completed and sub.elements == ([1, 2] if demand else [])
        sub.assert_no_violations()

    @pytest.mark.asyncio
    async def test_a_hot_subject_keeps_an_error_sent_right_after_subscribe(self) -> None:
        """athrow right after subscribe(), before the code yields: on_error (§1.4), without
        demand (§1.2). It was lost, and the subscriber never ended."""
        subject: rx.AsyncSubject[int] = rx.AsyncSubject()
        sub: RecordingSubscriber[int] = RecordingSubscriber(0)
        from_async_observable(subject).subscribe(sub)
        await subject.athrow(ValueError("at once"))
        for _ in range(50):  # loop turns, not time
            if sub.is_terminated:
                break
            await asyncio.sleep(0)
        assert isinstance(sub.error, ValueError) and sub.elements == []

    def test_a_subscribe_from_another_thread_keeps_what_the_loop_sends_after_it(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """subscribe() from another thread subscribes on the loop's next turn: whatever the
        loop runs after the subscribe was made (here a send queued right after it) is kept."""
        subject: rx.AsyncSubject[int] = rx.AsyncSubject()
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        from_async_observable(subject, loop=loop).subscribe(sub)

        async def send() -> None:
            await subject.asend(7)
            await subject.aclose()

        asyncio.run_coroutine_threadsafe(send(), loop).result(5)
        sub.await_terminal()
        assert sub.completed and sub.elements == [7]


# -- from_async_observable: cancel -------------------------------------------------------------


class TestCancelSource:
    """Cancel disposes the source's subscription and releases a waiting asend (§3.12)."""

    def test_cancel_disposes_and_releases_a_waiting_asend(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Cancel disposes the aioreactive subscription; a pending asend does not hang."""
        source = AwaitingSource(1000)
        sub: RecordingSubscriber[int] = RecordingSubscriber(2)
        from_async_observable(source, loop=loop).subscribe(sub)
        sub.await_count(2)
        settle(loop)
        assert source.started == 3  # the third asend waits for demand
        sub.cancel()
        assert source.disposed.wait(5)
        settle(loop)
        assert all(task.done() for task in source.tasks)
        assert sub.elements == [0, 1] and not sub.is_terminated

    @pytest.mark.asyncio
    async def test_spec312_cancel_releases_a_waiting_asend_the_disposal_leaves_alone(
        self,
    ) -> None:
        """§3.12/§3.13: an asend waiting for demand returns once the subscriber cancels, by
        the adapter's own doing: this source's disposal does not cancel its sending task."""
        asyncio.get_running_loop().set_debug(True)
        sending: list[asyncio.Task[None]] = []
        subscribed = asyncio.Event()

        class Polite(AsyncObservable[int]):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                sending.append(asyncio.create_task(send.asend(0)))
                subscribed.set()
                return AsyncDisposable.empty()

        sub: RecordingSubscriber[int] = RecordingSubscriber(0)
        from_async_observable(Polite()).subscribe(sub)
        await asyncio.wait_for(subscribed.wait(), 5)
        for _ in range(5):
            await asyncio.sleep(0)  # loop turns, not time: the asend reaches its wait
        assert not sending[0].done()  # no demand: the asend waits
        sub.cancel()
        await asyncio.wait_for(sending[0], 5)
        assert sub.elements == [] and not sub.is_terminated

    @pytest.mark.asyncio
    async def test_spec313_cancel_while_subscribe_async_runs_disposes_what_it_returns(
        self,
    ) -> None:
        """§3.12/§3.13: cancelled while the source's subscribe_async is still running: the
        disposable it then returns is disposed at once."""
        asyncio.get_running_loop().set_debug(True)
        started = asyncio.Event()
        go = asyncio.Event()
        disposed = asyncio.Event()

        class Slow(AsyncObservable[int]):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                started.set()
                await go.wait()

                async def dispose() -> None:
                    disposed.set()

                return AsyncDisposable.create(dispose)

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_observable(Slow()).subscribe(sub)
        await asyncio.wait_for(started.wait(), 5)
        sub.cancel()
        go.set()
        await asyncio.wait_for(disposed.wait(), 5)

    @pytest.mark.asyncio
    async def test_cancelled_in_on_subscribe_never_subscribes_to_the_source(self) -> None:
        """A subscriber that cancels inside on_subscribe: subscribe_async is never called."""
        asyncio.get_running_loop().set_debug(True)
        source = Capturing()

        class Canceller(RecordingSubscriber[int]):
            def on_subscribe(self, subscription: Any) -> None:
                super().on_subscribe(subscription)
                subscription.cancel()

        sub = Canceller()
        from_async_observable(source).subscribe(sub)
        for _ in range(10):
            await asyncio.sleep(0)  # loop turns: a subscribing task would have run by now
        assert source.observers == [] and sub.subscription is not None


# -- from_async_observable: the loop ending under a stream -------------------------------------


class TestLoopShutdown:
    """asyncio.run ending before the stream does: on_error, nothing left never awaited."""

    def test_the_loop_shutting_down_mid_stream_fails_the_stream(self) -> None:
        """asyncio.run ending (it cancels every task) while the subscriber, on another thread,
        still has demand outstanding: it gets on_error instead of waiting forever."""

        async def ticks() -> AsyncIterator[int]:
            for i in itertools.count():
                await asyncio.sleep(0.005)
                yield i

        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)

        async def main() -> None:
            from_async_observable(rx.from_async_iterable(ticks())).subscribe(sub)
            while len(sub.elements) < 3:  # the source is running, awaiting the next tick
                await asyncio.sleep(0.005)

        asyncio.run(main(), debug=True)
        sub.await_terminal(5)
        assert sub.elements == list(range(len(sub.elements))) and sub.elements
        assert isinstance(sub.error, RuntimeError) and "shutting down" in str(sub.error)
        sub.assert_no_violations()

    def test_the_loop_ending_right_after_subscribe_fails_the_stream(self) -> None:
        """asyncio.run ending right after subscribe, before the source's producer sent
        anything (it starts a loop turn later), while the subscriber has demand outstanding:
        it still hears on_error, and no coroutine is left never awaited."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)

        class Late(AwaitingSource):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                await asyncio.sleep(0)  # the producer's first send comes after the sweep
                return await super().subscribe_async(send, throw, close)

        async def main() -> None:
            from_async_observable(Late(10)).subscribe(sub)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main(), debug=True)
            gc.collect()
        sub.await_terminal(5)
        assert isinstance(sub.error, RuntimeError) and "shutting down" in str(sub.error)
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []

    def test_the_loop_ending_right_after_a_cancel_leaves_nothing_never_awaited(self) -> None:
        """A cancel on the loop's last turn (asyncio.run then cancels every task): the
        disposing task may be cancelled before its first step, which leaves no coroutine
        never awaited."""

        async def ticks() -> AsyncIterator[int]:
            for i in itertools.count():
                await asyncio.sleep(0.001)
                yield i

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)

        async def main() -> None:
            from_async_observable(rx.from_async_iterable(ticks())).subscribe(sub)
            while not sub.elements:
                await asyncio.sleep(0.001)
            assert sub.subscription is not None
            asyncio.get_running_loop().call_soon(sub.subscription.cancel)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main(), debug=True)
            gc.collect()
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []

    def test_a_subscribe_on_the_loops_last_turn_fails_the_stream(self) -> None:
        """A subscribe made on the loop (a callback main() queued just before returning):
        its subscribing task is made at once, so asyncio.run's task sweep cancels it and the
        subscriber hears on_error; made one turn later it was never cancelled, and was
        destroyed pending at close while the subscriber waited for ever."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(10)

        async def main() -> None:
            source = AwaitingSource(10)
            asyncio.get_running_loop().call_soon(
                lambda: from_async_observable(source).subscribe(sub)
            )

        asyncio.run(main(), debug=True)
        sub.await_terminal(5)
        assert isinstance(sub.error, RuntimeError) and "shutting down" in str(sub.error)

    def test_a_cancel_on_the_loops_last_turn_still_disposes(self) -> None:
        """A cancel queued for the loop's last turn: the disposing task, cancelled by
        asyncio.run's sweep before its first step, is started once more, and the source's
        subscription is disposed."""
        source = AwaitingSource(10)
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)

        async def main() -> None:
            from_async_observable(source).subscribe(sub)
            while not source.started:  # subscribed, and sending
                await asyncio.sleep(0)
            assert sub.subscription is not None
            asyncio.get_running_loop().call_soon(sub.subscription.cancel)

        asyncio.run(main(), debug=True)
        assert source.disposed.is_set()

    def test_the_loop_ending_while_subscribe_async_awaits_fails_the_stream(self) -> None:
        """asyncio.run ending while the source's subscribe_async is still connecting."""

        class SlowConnect(AsyncObservable[int]):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                await asyncio.sleep(3600)
                return AsyncDisposable.empty()  # pragma: no cover - never reached

        sub: RecordingSubscriber[int] = RecordingSubscriber(5)

        async def main() -> None:
            from_async_observable(SlowConnect()).subscribe(sub)
            await asyncio.sleep(0.05)  # subscribe_async is in flight

        asyncio.run(main(), debug=True)
        sub.await_terminal(5)
        assert isinstance(sub.error, RuntimeError) and "shutting down" in str(sub.error)


# -- from_async_observable: errors of the source -----------------------------------------------


class TestSourceErrors:
    """A source that cannot be subscribed, or throws, fails the stream (§1.4)."""

    def test_subscribe_async_failure_is_on_error(self, loop: asyncio.AbstractEventLoop) -> None:
        """A source whose subscribe_async raises fails the subscriber (§1.4)."""

        class Broken(AsyncObservable[int]):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                raise OSError("no connection")

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_observable(Broken(), loop=loop).subscribe(sub)
        sub.await_terminal()
        assert isinstance(sub.error, OSError)

    def test_a_subscribe_async_cancelled_by_the_source_is_on_error(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """subscribe_async raising CancelledError of its own (a future someone else cancelled)
        while the loop runs on: the source will never be subscribed, so on_error (§1.4)."""

        class Flaky(AsyncObservable[int]):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                connected = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().call_soon(connected.cancel)
                await connected
                return AsyncDisposable.empty()  # pragma: no cover - never reached

        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_observable(Flaky(), loop=loop).subscribe(sub)
        sub.await_terminal(5)
        assert isinstance(sub.error, RuntimeError) and "was cancelled" in str(sub.error)

    @pytest.mark.asyncio
    async def test_a_subscribe_async_raising_cancelled_error_at_once_is_on_error(self) -> None:
        """A subscribe_async that raises CancelledError in its first step (run inside
        subscribe()) fails the stream (§1.4), even when the subscribing task has a
        cancellation of its own pending: nothing escapes subscribe()."""

        class Refusing(AsyncObservable[int]):
            async def subscribe_async(
                self, send: Any = None, throw: Any = None, close: Any = None
            ) -> AsyncDisposable:
                raise asyncio.CancelledError("refused")

        me = asyncio.current_task()
        assert me is not None
        me.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.sleep(0)
        assert me.cancelling()  # still counted as cancelling: subscribe() must not care
        try:
            sub: RecordingSubscriber[int] = RecordingSubscriber(0)
            from_async_observable(Refusing()).subscribe(sub)
            assert isinstance(sub.error, RuntimeError) and "was cancelled" in str(sub.error)
        finally:
            me.uncancel()

    def test_athrow_of_something_not_an_exception_is_on_error(
        self, loop: asyncio.AbstractEventLoop
    ) -> None:
        """athrow(CancelledError()) (a BaseException) or athrow(None) from a source: on_error
        with a RuntimeError naming it, after the elements before it; cancel afterwards still
        disposes nothing twice and raises nothing."""
        for thrown in (asyncio.CancelledError("upstream task was cancelled"), None):
            source = Capturing()
            sub: RecordingSubscriber[int] = RecordingSubscriber(5)
            from_async_observable(source, loop=loop).subscribe(sub)
            settle(loop)
            observer = source.observers[0]
            on_loop_result(loop, partial(observer.asend, 1))
            on_loop_result(loop, partial(observer.athrow, thrown))
            sub.await_terminal(5)
            assert sub.elements == [1]
            assert isinstance(sub.error, RuntimeError) and "not an Exception" in str(sub.error)
            assert sub.error.__cause__ is thrown
            sub.cancel()
            sub.assert_no_violations()


# -- from_async_observable: which loop ---------------------------------------------------------


class TestWhichLoop:
    """The loop given or running at subscribe; a source signalling elsewhere is refused."""

    def test_no_loop_rejects(self) -> None:
        """Without loop= and without a running loop: on_subscribe then on_error, clearly."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_observable(rx.single(1)).subscribe(sub)
        assert sub.subscription is not None
        assert isinstance(sub.error, RuntimeError) and "loop=" in str(sub.error)

    def test_not_an_observable_is_a_type_error(self) -> None:
        """from_async_observable() of something without subscribe_async raises TypeError."""
        with pytest.raises(TypeError, match="AsyncObservable"):
            from_async_observable([1, 2])  # type: ignore[arg-type]

    def test_a_bad_loop_is_refused_at_the_call(self) -> None:
        """loop= must be an event loop, and not a closed one (ValueError at the call)."""
        with pytest.raises(TypeError, match="loop must be an asyncio event loop"):
            from_async_observable(rx.single(1), loop=1)  # type: ignore[arg-type]
        closed = asyncio.new_event_loop()
        closed.close()
        with pytest.raises(ValueError, match="loop is closed"):
            from_async_observable(rx.single(1), loop=closed)

    def test_asend_from_another_loop_is_refused(self, loop: asyncio.AbstractEventLoop) -> None:
        """A source signalling from a different loop gets a clear RuntimeError from asend."""
        leaky = Capturing()
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        from_async_observable(leaky, loop=loop).subscribe(sub)
        settle(loop)
        assert len(leaky.observers) == 1
        with pytest.raises(RuntimeError, match="another event loop"):
            asyncio.run(leaky.observers[0].asend(1))
        sub.cancel()


# -- from_async_observable: requests and cancels from many threads -----------------------------


class TestConcurrency:
    """request and cancel from any thread, racing the loop (§1.3, §2.7, §3.5)."""

    def test_requests_and_cancel_from_many_threads(
        self, loop: asyncio.AbstractEventLoop, switching: None
    ) -> None:
        """Concurrent request(1) from 8 threads: exactly that many elements, in order."""
        source = AwaitingSource(10_000)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_observable(source, loop=loop).subscribe(sub)
        subscription = sub.await_subscribed()
        sub.requested = 160  # about to be requested behind the recorder's back
        barrier = threading.Barrier(8)

        def hammer() -> None:
            barrier.wait()
            for _ in range(20):
                subscription.request(1)

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sub.await_count(160) == list(range(160))
        settle(loop)
        assert source.finished == 160 and len(sub.elements) == 160
        cancellers = [threading.Thread(target=sub.cancel) for _ in range(4)]
        for thread in cancellers:
            thread.start()
        for thread in cancellers:
            thread.join()
        assert source.disposed.wait(5)
        sub.assert_no_violations()

    @pytest.mark.stress
    def test_checked_finds_no_violation_under_racing_requests_and_cancels(
        self, loop: asyncio.AbstractEventLoop, switching: None
    ) -> None:
        """checked() sees no rule broken while threads request and cancel at random."""
        violations: list[Exception] = []
        rng = random.Random(11)
        for round_ in range(40):
            source = AwaitingSource(rng.randrange(0, 60))
            publisher = checked(
                from_async_observable(source, loop=loop), on_violation=violations.append
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
            sub.cancel()


# -- to_async_observable: sending --------------------------------------------------------------


class TestSending:
    """Each asend awaited before the next element; a bounded window; errors to athrow."""

    @pytest.mark.asyncio
    async def test_each_asend_is_awaited_and_the_window_is_bounded(self) -> None:
        """One asend at a time; nothing more is requested while the window is unconsumed."""
        asyncio.get_running_loop().set_debug(True)
        pub = ManualPublisher()
        recorder = Recorder()
        recorder.gate = asyncio.Semaphore(0)
        disposable = await to_async_observable(pub, prefetch=4).subscribe_async(recorder.observer())
        subscriber = pub.subscriber
        assert subscriber is not None
        emitted = 0

        def emit_what_was_requested() -> None:  # the test plays a compliant publisher
            nonlocal emitted
            while emitted < pub.subscription.total and emitted < 40:
                subscriber.on_next(emitted)
                emitted += 1

        emit_what_was_requested()
        for _ in range(20):
            await asyncio.sleep(0)
        assert pub.subscription.requests == [4]  # the observer is stuck in its first asend
        while len(recorder.values) < 40:
            target = len(recorder.values) + 1
            recorder.gate.release()
            while len(recorder.values) < target:
                await asyncio.sleep(0)
            # requested - sent <= prefetch + the one element inside the current asend
            assert pub.subscription.total - len(recorder.values) <= 4 + 1
            emit_what_was_requested()
        assert recorder.values == list(range(40))
        assert recorder.max_in_asend == 1
        await disposable.dispose_async()
        assert pub.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_slow_observer_slows_the_producer(self) -> None:
        """A slow observer bounds how far a generator runs ahead: at most the window."""
        asyncio.get_running_loop().set_debug(True)
        produced = 0

        async def gen() -> AsyncIterator[int]:
            nonlocal produced
            for i in range(200):
                produced += 1
                yield i

        recorder = Recorder()
        ahead: list[int] = []

        async def slow(value: int) -> None:
            ahead.append(produced - len(recorder.values))
            recorder.values.append(value)
            await asyncio.sleep(0)

        observable = to_async_observable(from_async_iterable(gen()), prefetch=8)
        disposable = await observable.subscribe_async(
            AsyncAnonymousObserver(slow, recorder.athrow, recorder.aclose)
        )
        await asyncio.wait_for(recorder.closed.wait(), 10)
        assert recorder.values == list(range(200)) and recorder.error is None
        assert max(ahead) <= 8 + 1
        await disposable.dispose_async()

    @pytest.mark.asyncio
    async def test_error_reaches_athrow_after_elements(self) -> None:
        """The publisher's on_error becomes athrow, after the elements (asend)."""

        def gen() -> Iterator[int]:
            yield 1
            raise ValueError("upstream")

        recorder = Recorder()
        await to_async_observable(from_iterable(gen())).subscribe_async(recorder.observer())
        await asyncio.wait_for(recorder.closed.wait(), 5)
        assert recorder.values == [1] and isinstance(recorder.error, ValueError)

    @pytest.mark.asyncio
    async def test_failing_asend_cancels_upstream_and_athrows(self) -> None:
        """An observer whose asend raises: upstream cancelled, its error sent to athrow."""
        pub = ManualPublisher()
        errors: list[Exception] = []
        done = asyncio.Event()

        async def asend(value: Any) -> None:
            raise RuntimeError("observer broke")

        async def athrow(error: Exception) -> None:
            errors.append(error)
            done.set()

        await to_async_observable(pub).subscribe_async(AsyncAnonymousObserver(asend, athrow))
        assert pub.subscriber is not None
        pub.subscriber.on_next(1)
        await asyncio.wait_for(done.wait(), 5)
        assert pub.subscription.cancelled.is_set()
        assert isinstance(errors[0], RuntimeError)

    def test_to_async_observable_an_asend_raising_cancelled_error_fails_and_cancels(self) -> None:
        """An asend that awaited something cancelled (not the sending task) fails like any
        asend: upstream is cancelled (§3.13) and the observer hears athrow. The task died
        instead, with the subscription open for as long as the disposable was held."""
        source = CountedIterable()
        heard: list[object] = []

        async def main() -> None:
            loop = asyncio.get_running_loop()

            async def asend(x: int) -> None:
                heard.append(x)
                if x == 2:
                    future = loop.create_future()
                    loop.call_soon(future.cancel)
                    await future

            async def athrow(error: Exception) -> None:
                heard.append(error)

            observer: AsyncObserver[int] = AsyncAnonymousObserver(asend, athrow)
            disposable = await to_async_observable(from_iterable(source)).subscribe_async(observer)
            for _ in range(50):
                if source.closed.is_set() and len(heard) == 4:
                    break
                await asyncio.sleep(0)
            assert source.closed.is_set()  # by the failure itself, not by the dispose below
            await disposable.dispose_async()

        asyncio.run(main(), debug=True)
        assert heard[:3] == [0, 1, 2]
        assert isinstance(heard[3], RuntimeError) and "CancelledError" in str(heard[3])
        assert source.closed.is_set()

    @pytest.mark.asyncio
    async def test_plain_functions_and_signals_from_another_thread(self) -> None:
        """subscribe_async(send, throw, close) works; signals from a thread are handed over."""
        got: list[int] = []
        done = asyncio.Event()

        async def send(x: int) -> None:
            got.append(x)

        async def close() -> None:
            done.set()

        pub = ManualPublisher()
        await to_async_observable(pub).subscribe_async(send, None, close)

        def produce() -> None:
            assert pub.subscriber is not None
            for i in range(100):
                pub.subscriber.on_next(i)
            pub.subscriber.on_complete()

        thread = threading.Thread(target=produce)
        thread.start()
        await asyncio.wait_for(done.wait(), 5)
        thread.join()
        assert got == list(range(100))


# -- to_async_observable: dispose --------------------------------------------------------------


class TestDispose:
    """Disposing cancels the subscription; the observer then hears nothing (§3.12)."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("where", ["asend", "aclose"])
    async def test_disposing_from_inside_the_observer_lets_its_code_finish(
        self, where: str
    ) -> None:
        """Disposing the subscription from inside the observer's own asend (take, first) or
        aclose ends the stream without cancelling the code that disposed: what follows its
        dispose_async still runs, and nothing is sent after it."""
        log: list[Any] = []
        held: list[AsyncDisposable] = []

        async def asend(x: int) -> None:
            log.append(x)
            if where == "asend" and x == 1:
                await held[0].dispose_async()
                await asyncio.sleep(0)  # its clean-up awaits something
                log.append("asend cleaned up")

        async def aclose() -> None:
            log.append("aclose")
            if where == "aclose":
                await held[0].dispose_async()
                await asyncio.sleep(0)
                log.append("aclose cleaned up")

        observable = to_async_observable(from_iterable(range(3)))
        held.append(await observable.subscribe_async(AsyncAnonymousObserver(asend, None, aclose)))
        for _ in range(30):
            await asyncio.sleep(0)
        if where == "asend":
            assert log == [0, 1, "asend cleaned up"]
        else:
            assert log == [0, 1, 2, "aclose", "aclose cleaned up"]

    @pytest.mark.asyncio
    async def test_disposing_from_outside_cancels_an_asend_in_progress(self) -> None:
        """Disposing from outside the observer (another task) while its asend awaits: that
        asend is cancelled at its await, and nothing more is sent."""
        pub = ManualPublisher()
        log: list[tuple[str, int]] = []

        async def slow(x: int) -> None:
            log.append(("start", x))
            await asyncio.sleep(0.1)
            log.append(("end", x))

        disposable = await to_async_observable(pub).subscribe_async(slow)
        await asyncio.sleep(0.01)
        assert pub.subscriber is not None
        pub.subscriber.on_next(1)
        pub.subscriber.on_next(2)
        while log != [("start", 1)]:  # the pump is inside asend(1)
            await asyncio.sleep(0)
        await disposable.dispose_async()
        await asyncio.sleep(0.2)
        assert log == [("start", 1)]
        assert pub.subscription.cancelled.is_set()

    def test_disposing_at_once_leaves_no_coroutine_never_awaited(self) -> None:
        """dispose right after subscribe_async cancels the pump task before its first step:
        no 'coroutine ... was never awaited' warning, and upstream is cancelled."""
        pub = ManualPublisher()

        async def main() -> None:
            async def send(x: Any) -> None:
                pass

            disposable = await to_async_observable(pub).subscribe_async(send)
            await disposable.dispose_async()
            await asyncio.sleep(0.01)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main(), debug=True)
            gc.collect()
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
        assert pub.subscription.cancelled.is_set()

    @pytest.mark.asyncio
    async def test_dispose_cancels_the_subscription(self) -> None:
        """Disposing the aioreactive subscription cancels the Reactive Streams one."""
        pub = ManualPublisher()
        recorder = Recorder()
        disposable = await to_async_observable(pub).subscribe_async(recorder.observer())
        assert pub.subscriber is not None
        pub.subscriber.on_next("x")
        while not recorder.values:
            await asyncio.sleep(0)
        await disposable.dispose_async()
        assert pub.subscription.cancelled.is_set()
        assert not recorder.closed.is_set()

    @pytest.mark.asyncio
    async def test_dispose_from_inside_asend_ends_the_signals(self) -> None:
        """An observer that disposes from inside asend (as take or first do) hears nothing
        after it: no aclose, as if the stream had completed, and no more asend."""
        calls: list[object] = []
        disposables: list[AsyncDisposable] = []

        async def asend(value: int) -> None:
            calls.append(value)
            if value == 2:
                await disposables[0].dispose_async()

        async def athrow(error: Exception) -> None:
            calls.append(error)

        async def aclose() -> None:
            calls.append("aclose")

        numbers = CountedIterable(100)
        closed = numbers.closed

        disposables.append(
            await to_async_observable(from_iterable(numbers)).subscribe_async(
                AsyncAnonymousObserver(asend, athrow, aclose)
            )
        )
        for _ in range(50):
            await asyncio.sleep(0)
        assert calls == [0, 1, 2]
        assert closed.is_set()  # the subscription was cancelled (§3.12): the generator closed

    def test_to_async_observable_cancels_upstream_when_asyncio_run_cancels_its_task(self) -> None:
        """asyncio.run ending while an asend awaits cancels the sending task: the subscription
        ends with it (§3.13), though nobody disposed it and the disposable is still held, and
        the observer hears no athrow (the task's own cancellation is no failure)."""
        source = CountedIterable()
        sending = asyncio.Event()
        held: list[AsyncDisposable] = []
        thrown: list[Exception] = []

        async def main() -> None:
            async def asend(x: int) -> None:
                sending.set()
                await asyncio.Event().wait()  # never set

            async def athrow(error: Exception) -> None:
                thrown.append(error)

            observer: AsyncObserver[int] = AsyncAnonymousObserver(asend, athrow)
            disposable = await to_async_observable(from_iterable(source)).subscribe_async(observer)
            held.append(disposable)  # as a user keeps it
            await sending.wait()  # returns with the sending task still waiting in asend

        asyncio.run(main(), debug=True)
        assert source.closed.wait(5)
        assert thrown == []
        assert held  # the disposable was kept, never disposed, all along


# -- pipelines ---------------------------------------------------------------------------------


class TestPipelines:
    """aioreactive and the other adapters in one pipeline."""

    @pytest.mark.asyncio
    async def test_pipeline_aioreactive_source_to_async_iterator(self) -> None:
        """aioreactive source -> from_async_observable -> to_async_iterator: all, in order."""
        asyncio.get_running_loop().set_debug(True)
        produced = 0
        consumed = 0
        ahead: list[int] = []

        async def gen() -> AsyncIterator[int]:
            nonlocal produced
            for i in range(300):
                produced += 1
                ahead.append(produced - consumed)
                yield i

        def double(x: int) -> int:
            return x * 2

        source = rx.pipe(rx.from_async_iterable(gen()), rx.map(double))
        got = []
        async for x in to_async_iterator(from_async_observable(source), prefetch=8):
            got.append(x)
            consumed += 1
        assert got == [2 * i for i in range(300)]
        # prefetch 8 + the adapter's slot + the element aioreactive's worker holds in asend
        assert max(ahead) <= 8 + 2

    @pytest.mark.asyncio
    async def test_roundtrip_publisher_to_aioreactive_and_back(self) -> None:
        """Publisher -> to_async_observable -> from_async_observable -> to_async_iterator."""
        back = from_async_observable(to_async_observable(from_iterable(range(50)), prefetch=4))
        assert [x async for x in to_async_iterator(back, prefetch=4)] == list(range(50))
