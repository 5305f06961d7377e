"""reactive_streams.map_async: bounded concurrent calls of an async function, in a window."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reactive_streams import UNBOUNDED, OverflowViolation, map_async, pipe, snapshot
from reactive_streams._loop import shared_loop
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.testing import (
    CountedIterable,
    RecordingSubscriber,
    RecordingSubscription,
    race,
    switch_interval,
)

TIMEOUT = 10.0


class Gated:
    """An async function whose call for ``x`` waits until the test opens ``x``'s gate, then
    returns ``10 * x`` (or raises ``errors[x]``); it records the calls running at once, the
    most ever, and the calls that were cancelled (their ``CancelledError`` seen)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or shared_loop()
        self.cond = threading.Condition()
        self.running = 0
        self.most = 0
        self.started: list[int] = []
        self.finished: list[int] = []
        self.cancelled: list[int] = []
        self.errors: dict[int, Exception] = {}
        self._gates: dict[int, asyncio.Event] = {}  # owned: the loop

    def _gate(self, x: int) -> asyncio.Event:
        return self._gates.setdefault(x, asyncio.Event())

    async def __call__(self, x: int) -> int:
        with self.cond:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(x)
            self.cond.notify_all()
        try:
            await self._gate(x).wait()
            if x in self.errors:
                raise self.errors[x]
            return 10 * x
        except asyncio.CancelledError:
            with self.cond:
                self.cancelled.append(x)
            raise
        finally:
            with self.cond:
                self.running -= 1
                self.finished.append(x)
                self.cond.notify_all()

    def open(self, *xs: int) -> None:
        for x in xs:
            self.loop.call_soon_threadsafe(lambda x=x: self._gate(x).set())  # type: ignore[misc]

    def wait(self, what: str, predicate: Any) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, TIMEOUT), f"timed out waiting for {what}"

    def await_started(self, n: int) -> None:
        self.wait(f"{n} calls started", lambda: len(self.started) >= n)

    def await_finished(self, n: int) -> None:
        self.wait(f"{n} calls finished", lambda: len(self.finished) >= n)


async def tenfold(x: int) -> int:
    await asyncio.sleep(0)
    return 10 * x


def fed(stage: Any, sub: RecordingSubscriber[Any]) -> RecordingSubscription:
    """Subscribe ``sub`` to ``stage``, then hand ``stage`` an upstream that records requests."""
    stage.subscribe(sub)
    upstream = RecordingSubscription()
    stage.on_subscribe(upstream)
    return upstream


class TestArguments:
    """map_async() refuses what cannot work, naming the parameter."""

    def test_fn_must_be_async(self) -> None:
        with pytest.raises(TypeError, match="fn must be an async function"):
            map_async(lambda x: x, concurrency=1)

    @pytest.mark.parametrize("bad", [0, -1])
    def test_concurrency_at_least_one(self, bad: int) -> None:
        with pytest.raises(ValueError, match="concurrency must be >= 1"):
            map_async(tenfold, concurrency=bad)

    @pytest.mark.parametrize("bad", [1.5, True, None, "2"])
    def test_concurrency_an_int(self, bad: Any) -> None:
        with pytest.raises(TypeError, match="concurrency must be an int"):
            map_async(tenfold, concurrency=bad)

    def test_prefetch_at_least_concurrency(self) -> None:
        with pytest.raises(ValueError, match=r"prefetch must be >= concurrency \(4\)"):
            map_async(tenfold, concurrency=4, prefetch=3)
        with pytest.raises(TypeError, match="prefetch must be an int"):
            map_async(tenfold, concurrency=4, prefetch=4.0)  # type: ignore[arg-type]

    def test_ordered_and_loop(self) -> None:
        with pytest.raises(TypeError, match="ordered must be a bool"):
            map_async(tenfold, concurrency=1, ordered=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="loop must be an asyncio event loop"):
            map_async(tenfold, concurrency=1, loop=object())  # type: ignore[arg-type]
        closed = asyncio.new_event_loop()
        closed.close()
        with pytest.raises(ValueError, match="loop is closed"):
            map_async(tenfold, concurrency=1, loop=closed)


class TestConcurrencyAndOrder:
    def test_concurrency_bound_never_exceeded(self) -> None:
        """At most ``concurrency`` calls run at once, and the bound is reached."""
        gated = Gated()
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        pipe(from_iterable(range(12)), map_async(gated, concurrency=3)).subscribe(sub)
        for x in range(12):
            gated.await_started(min(x + 3, 12))
            assert gated.running <= 3
            gated.open(x)
        sub.await_terminal(TIMEOUT)
        assert sub.elements == [10 * x for x in range(12)] and sub.completed
        assert gated.most == 3
        sub.assert_no_violations()

    @pytest.mark.parametrize("ordered", [True, False])
    def test_results_finishing_out_of_order(self, ordered: bool) -> None:
        """Ordered: a result waits for those before it; unordered: as the calls finish."""
        gated = Gated()
        stage = map_async(gated, concurrency=3, ordered=ordered)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        pipe(from_iterable(range(3)), stage).subscribe(sub)
        gated.await_started(3)
        gated.open(2)
        gated.await_finished(1)
        gated.open(1)
        gated.await_finished(2)
        if ordered:  # both results released to the stage, held behind the first call
            sub.await_condition(
                lambda: (stage.scan().in_flight, stage.scan().buffered) == (1, 2),  # type: ignore[attr-defined]
                TIMEOUT,
                "two results held",
            )
            assert sub.elements == []
        else:
            sub.await_count(2, TIMEOUT)
            assert sub.elements == [20, 10]
        gated.open(0)
        sub.await_terminal(TIMEOUT)
        assert sub.elements == ([0, 10, 20] if ordered else [20, 10, 0])
        sub.assert_no_violations()


class TestDemand:
    def test_upstream_asked_within_the_window(self) -> None:
        """Nothing is asked before demand; then the window, then 75% of it as delivered."""
        gated = Gated()
        stage = map_async(gated, concurrency=2, prefetch=4)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        upstream = fed(stage, sub)
        assert upstream.requests == []  # no demand yet: nothing asked
        sub.request(UNBOUNDED)
        assert upstream.requests == [4]
        for x in range(4):
            stage.on_next(x)
        gated.await_started(2)
        assert stage.scan() == snapshot(stage)[-1]  # type: ignore[attr-defined]
        scan = stage.scan()  # type: ignore[attr-defined]
        assert (scan.asked, scan.in_flight, scan.buffered) == (4, 2, 2)
        gated.open(0, 1)
        sub.await_count(2, TIMEOUT)
        assert upstream.requests == [4]  # 2 delivered: below the limit of 3
        gated.open(2)
        sub.await_count(3, TIMEOUT)
        sub.await_condition(lambda: upstream.total == 7, TIMEOUT, "request(3)")
        assert upstream.requests == [4, 3]

    def test_scan(self) -> None:
        """scan(): its name, the subscriber's outstanding demand, what it asked, the calls
        in flight, what it holds, and whether an upstream subscribed."""
        gated = Gated()
        stage: Any = map_async(gated, concurrency=1, prefetch=3)
        sub: RecordingSubscriber[int] = RecordingSubscriber(5)
        stage.subscribe(sub)
        scan = stage.scan()
        assert scan.name == "map_async(concurrency=1)" and scan.subscribed is False
        upstream = RecordingSubscription()
        stage.on_subscribe(upstream)
        for x in range(3):
            stage.on_next(x)
        gated.await_started(1)
        scan = stage.scan()
        assert (scan.requested, scan.asked, scan.in_flight, scan.buffered) == (5, 3, 1, 2)
        assert scan.subscribed and scan.upstream is upstream
        gated.open(0)
        sub.await_count(1, TIMEOUT)
        sub.await_condition(lambda: stage.scan().requested == 4, TIMEOUT, "requested 4")
        sub.cancel()
        assert stage.scan().cancelled and stage.scan().upstream is None

    @pytest.mark.parametrize("ordered", [True, False])
    def test_window_holds_against_a_synchronous_source(self, ordered: bool) -> None:
        """Pulled from the source and not yet delivered never exceeds ``prefetch``."""
        source = CountedIterable(300)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        most = 0

        def check(element: int) -> None:
            nonlocal most
            most = max(most, source.pulled - len(sub.elements))

        sub.on_next_hook = check
        stage = map_async(tenfold, concurrency=3, prefetch=5, ordered=ordered)
        pipe(from_iterable(source), stage).subscribe(sub)
        sub.await_terminal(TIMEOUT)
        assert sorted(sub.elements) == [10 * x for x in range(300)]
        assert 0 < most <= 5 - 1  # the one just delivered is counted out already
        sub.assert_no_violations()

    def test_slow_subscriber_stops_upstream(self) -> None:
        """Results wait for demand, and upstream is asked no further than the window."""
        source = CountedIterable()  # endless
        stage = map_async(tenfold, concurrency=2, prefetch=4)
        sub: RecordingSubscriber[int] = RecordingSubscriber(2)
        pipe(from_iterable(source), stage).subscribe(sub)

        def idle(buffered: int) -> None:
            sub.await_condition(
                lambda: (stage.scan().in_flight, stage.scan().buffered) == (0, buffered),  # type: ignore[attr-defined]
                TIMEOUT,
                f"idle, holding {buffered}",
            )

        idle(2)  # 2 delivered, 2 held: the window is full
        assert sub.elements == [0, 10] and source.pulled == 4
        sub.request(1)  # 3 delivered: the limit, so 3 more asked
        idle(4)
        assert source.pulled == 7 and len(sub.elements) == 3
        sub.cancel()
        assert source.closed.wait(TIMEOUT)

    def test_request_from_on_next(self) -> None:
        """request(1) from inside each on_next: every result, in order, no violation."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
        pipe(from_iterable(range(200)), map_async(tenfold, concurrency=4)).subscribe(sub)
        sub.await_terminal(TIMEOUT)
        assert sub.elements == [10 * x for x in range(200)] and sub.completed
        sub.assert_no_violations()


class TestEndings:
    def test_fn_error_cancels_calls_and_upstream(self) -> None:
        """fn's exception, the same object, ends the stream; the other calls are cancelled
        (they see CancelledError) and so is upstream."""
        gated = Gated()
        boom = ValueError("boom")
        gated.errors[1] = boom
        stage = map_async(gated, concurrency=3)
        upstream = RecordingSubscription()
        cancelled_first: list[bool] = []

        class Sub(RecordingSubscriber[int]):
            def on_error(self, error: Exception) -> None:
                cancelled_first.append(upstream.cancelled.is_set())
                super().on_error(error)

        sub = Sub(UNBOUNDED)
        stage.subscribe(sub)
        stage.on_subscribe(upstream)
        for x in range(3):
            stage.on_next(x)
        gated.await_started(3)
        gated.open(1)
        sub.await_terminal(TIMEOUT)
        assert sub.error is boom and sub.elements == []
        assert cancelled_first == [True]  # upstream cancelled before on_error
        gated.wait("cancelled calls", lambda: sorted(gated.cancelled) == [0, 2])
        sub.assert_no_violations()

    def test_upstream_error_cancels_calls(self) -> None:
        """Upstream's on_error cancels the calls in flight and reaches the subscriber."""
        gated = Gated()
        stage = map_async(gated, concurrency=2)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        fed(stage, sub)
        stage.on_next(0)
        gated.await_started(1)
        error = RuntimeError("upstream failed")
        stage.on_error(error)
        sub.await_terminal(TIMEOUT)
        assert sub.error is error
        gated.wait("cancelled call", lambda: gated.cancelled == [0])

    def test_completes_after_the_calls_in_flight(self) -> None:
        """on_complete from upstream waits for the calls in flight to be delivered."""
        gated = Gated()
        stage = map_async(gated, concurrency=2)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        fed(stage, sub)
        stage.on_next(0)
        stage.on_next(1)
        gated.await_started(2)
        stage.on_complete()
        assert not sub.completed
        gated.open(1, 0)
        sub.await_terminal(TIMEOUT)
        assert sub.elements == [0, 10] and sub.completed

    def test_none_result_is_an_error(self) -> None:
        """fn returning None fails the stream with §2.13's TypeError."""

        async def nothing(x: int) -> None:
            return None

        sub: RecordingSubscriber[Any] = RecordingSubscriber(UNBOUNDED)
        pipe(from_iterable(range(3)), map_async(nothing, concurrency=1)).subscribe(sub)
        sub.await_terminal(TIMEOUT)
        assert isinstance(sub.error, TypeError) and "§2.13" in str(sub.error)

    def test_cancel_cancels_calls_in_flight(self) -> None:
        """A cancel from the subscriber cancels the calls in flight and upstream."""
        gated = Gated()
        stage = map_async(gated, concurrency=2)
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        upstream = fed(stage, sub)
        for x in range(3):
            stage.on_next(x)
        gated.await_started(2)
        sub.cancel()
        assert upstream.cancelled.is_set()
        gated.wait("cancelled calls", lambda: sorted(gated.cancelled) == [0, 1])
        assert gated.started == [0, 1]  # the waiting element never got a call
        assert not sub.is_terminated

    @pytest.mark.stress
    def test_cancel_from_many_threads(self) -> None:
        """Eight threads cancel at once: the calls and upstream are cancelled, once."""
        for _ in range(20):
            gated = Gated()
            stage = map_async(gated, concurrency=3)
            sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
            upstream = fed(stage, sub)
            for x in range(3):
                stage.on_next(x)
            gated.await_started(3)
            subscription = sub.subscription
            assert subscription is not None
            race(*[subscription.cancel] * 8)
            assert upstream.cancelled.is_set()
            gated.wait("cancelled calls", lambda g=gated: sorted(g.cancelled) == [0, 1, 2])
            assert not sub.is_terminated
            sub.assert_no_violations()

    def test_upstream_beyond_demand_is_cancelled(self) -> None:
        """An on_next nothing asked for (§1.1) cancels upstream at once; the subscriber,
        coming later, gets OverflowViolation."""
        stage = map_async(tenfold, concurrency=1)
        upstream = RecordingSubscription()
        stage.on_subscribe(upstream)
        stage.on_next(1)
        assert upstream.cancelled.is_set()
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        stage.subscribe(sub)
        assert isinstance(sub.error, OverflowViolation) and "§1.1" in str(sub.error)

    def test_unicast(self) -> None:
        """A second subscriber gets on_error naming §1.9/§1.11."""
        stage = map_async(tenfold, concurrency=1)
        stage.subscribe(RecordingSubscriber())
        second: RecordingSubscriber[int] = RecordingSubscriber()
        stage.subscribe(second)
        assert isinstance(second.error, RuntimeError) and "§1.9/§1.11" in str(second.error)


class TestLoops:
    @pytest.fixture
    def user_loop(self) -> Iterator[asyncio.AbstractEventLoop]:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="user-loop", daemon=True)
        thread.start()
        yield loop
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT)
        loop.close()

    def test_user_loop_on_another_thread(self, user_loop: asyncio.AbstractEventLoop) -> None:
        """Calls run on the loop passed in, on its own thread."""
        threads: set[str] = set()

        async def where(x: int) -> int:
            threads.add(threading.current_thread().name)
            assert asyncio.get_running_loop() is user_loop
            return x

        stage = map_async(where, concurrency=2, loop=user_loop)
        assert list(to_iterator(pipe(from_iterable(range(10)), stage))) == list(range(10))
        assert threads == {"user-loop"}

    def test_subscriber_on_the_loop_thread(self) -> None:
        """Subscribing and requesting on the calls' own loop: nothing waits on it."""

        async def main() -> list[int]:
            loop = asyncio.get_running_loop()
            sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
            stage = map_async(tenfold, concurrency=3, loop=loop)
            pipe(from_iterable(range(50)), stage).subscribe(sub)
            while not sub.is_terminated:
                await asyncio.sleep(0)
            sub.assert_no_violations()
            return sub.elements

        assert asyncio.run(asyncio.wait_for(main(), TIMEOUT)) == [10 * x for x in range(50)]

    def test_shared_loop_is_one(self) -> None:
        """Every map_async without loop= runs on one loop, on the rs-map-async-loop thread."""
        seen: list[tuple[asyncio.AbstractEventLoop, str]] = []

        async def note(x: int) -> int:
            seen.append((asyncio.get_running_loop(), threading.current_thread().name))
            return x

        first, second = map_async(note, concurrency=2), map_async(note, concurrency=1)
        assert list(to_iterator(pipe(from_iterable(range(4)), first, second))) == [0, 1, 2, 3]
        assert {loop for loop, _ in seen} == {shared_loop()}
        assert {name for _, name in seen} == {"rs-map-async-loop"}
        assert shared_loop() is shared_loop()

    def test_deliveries_and_the_upstream_pulls_they_cause_never_run_on_the_loop(self) -> None:
        """A finished call wakes the drain from the loop's thread; the drain runs on the
        delivery pool instead: on_next, and the pulls of a synchronous upstream that its
        requests cause, never run on the loop (a blocking generator would stall its calls)."""
        pulled_on: set[str] = set()

        def source() -> Iterator[int]:
            for i in range(200):
                pulled_on.add(threading.current_thread().name)
                yield i

        async def same(x: int) -> int:
            await asyncio.sleep(0)
            return x

        delivered_on: set[str] = set()

        class Sink(RecordingSubscriber[int]):
            def on_next(self, element: int) -> None:
                delivered_on.add(threading.current_thread().name)
                super().on_next(element)

        sub = Sink(UNBOUNDED)
        pipe(from_iterable(source()), map_async(same, concurrency=4, prefetch=8)).subscribe(sub)
        sub.await_terminal(TIMEOUT)
        assert sub.elements == list(range(200)) and sub.completed
        assert delivered_on and "rs-map-async-loop" not in delivered_on, delivered_on
        assert "rs-map-async-loop" not in pulled_on, pulled_on


@pytest.mark.stress
@pytest.mark.parametrize("seed", range(12))
def test_random_schedules(seed: int) -> None:
    """Random concurrency, window, order, call lengths and requests from another thread,
    with a thread switch at almost every chance: every result once, in order when asked,
    within the window, and no rule broken."""
    rng = random.Random(seed)
    concurrency = rng.randint(1, 5)
    prefetch = rng.randint(concurrency, 3 * concurrency)
    ordered = rng.random() < 0.5
    n = rng.randint(0, 120)
    turns = [rng.randint(0, 3) for _ in range(n)]

    async def work(x: int) -> int:
        for _ in range(turns[x]):
            await asyncio.sleep(0)
        return x

    source = CountedIterable(n)
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    most = 0

    def check(element: int) -> None:
        nonlocal most
        most = max(most, source.pulled - len(sub.elements))

    sub.on_next_hook = check
    with switch_interval(1e-6):
        stage = map_async(work, concurrency=concurrency, prefetch=prefetch, ordered=ordered)
        pipe(from_iterable(source), stage).subscribe(sub)
        while not sub.is_terminated:
            sub.request(rng.randint(1, 7))
            sub.await_condition(
                lambda: len(sub.elements) == sub.requested or sub.is_terminated, TIMEOUT
            )
    assert sub.completed, sub.error
    assert (sub.elements if ordered else sorted(sub.elements)) == list(range(n))
    assert most < prefetch
    sub.assert_no_violations()
