"""rx_processor: the demand policy and its bound, the chain's end, cancel, operators no request
paces, a misbehaving upstream (reactivex 4.x to 6.x)."""

from __future__ import annotations

import gc
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import reactivex
from reactivex import Observable
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler
from reactivex.subject import Subject
from rx_helpers import CountingPublisher, switching

from reactive_streams import UNBOUNDED, OverflowViolation, Publisher, Subscriber
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.adapters.rx import from_observable, rx_processor
from reactive_streams.testing import CountedIterable, RecordingSubscriber, RecordingSubscription

# -- demand: the output buffer bounds what is requested ----------------------------------------


def _reference(operators: list[Any], items: list[int]) -> list[Any]:
    out: list[Any] = []
    reactivex.from_iterable(items).pipe(*operators).subscribe(out.append)
    return out


CHAINS: dict[str, Callable[[], list[Any]]] = {
    "map": lambda: [ops.map(lambda x: x * 2)],
    "filter": lambda: [ops.filter(lambda x: x % 3 == 0)],
    "flat_map x5": lambda: [ops.flat_map(lambda x: reactivex.from_iterable([x] * 5))],
    "buffer_with_count": lambda: [ops.buffer_with_count(4)],
    "map+filter+flat_map+batch": lambda: [
        ops.map(lambda x: x + 1),
        ops.filter(lambda x: x % 2 == 0),
        ops.flat_map(lambda x: reactivex.of(x, -x)),
        ops.buffer_with_count(3),
    ],
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_rx_processor_keeps_the_bound_and_honest_demand(name: str) -> None:
    """Held outputs stay <= buffer_size and upstream in flight <= buffer_size, whatever the
    chain; everything arrives as plain Rx would produce it."""
    size = 16
    produced = 0

    def count(_: Any) -> None:
        nonlocal produced
        produced += 1

    upstream = CountingPublisher(from_iterable(range(500)))
    stage = rx_processor(*CHAINS[name](), ops.do_action(on_next=count), buffer_size=size)
    upstream.subscribe(stage)
    sub: RecordingSubscriber[Any] = RecordingSubscriber(0)
    stage.subscribe(sub)
    held_max = produced
    for _ in range(400):
        if sub.is_terminated:
            break
        sub.request(3)
        held_max = max(held_max, produced - len(sub.elements))
        assert upstream.requested - upstream.sent <= size
    sub.request(10**6)
    sub.await_terminal()
    assert held_max <= size, f"held {held_max} outputs for buffer_size={size}"
    assert upstream.max_in_flight <= size
    assert sub.elements == _reference(CHAINS[name](), list(range(500)))
    sub.assert_no_violations()


def test_rx_processor_requests_upstream_in_batches_of_at_least_75_percent() -> None:
    """The documented demand policy: after the one input that measures the expansion E,
    upstream is asked in batches of at least 75% of buffer_size // E (E = 1 for map), not
    one input at a time, even when downstream takes one element at a time."""
    upstream = CountingPublisher(from_iterable(range(200)))
    stage = rx_processor(ops.map(lambda x: x), buffer_size=8)
    upstream.subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(sub)
    for _ in range(200):
        if sub.is_terminated:
            break
        sub.request(1)
    sub.request(1000)
    sub.await_terminal()
    assert sub.elements == list(range(200))
    sizes = upstream.requests
    assert sizes[0] == 1 and min(sizes[1:]) >= 6, sizes


def test_rx_processor_bounds_expansion_when_nothing_is_requested() -> None:
    """flat_map x10 with no downstream demand: the buffer stops at buffer_size."""
    upstream = CountingPublisher(from_iterable(range(10_000)))
    produced = 0

    def count(_: Any) -> None:
        nonlocal produced
        produced += 1

    stage = rx_processor(
        ops.flat_map(lambda x: reactivex.from_iterable(range(10))),
        ops.do_action(on_next=count),
        buffer_size=16,
    )
    upstream.subscribe(stage)
    assert produced <= 16 and upstream.sent == 1  # 10 held; 2 more inputs would not fit


def test_rx_processor_progresses_when_one_input_expands_beyond_the_buffer() -> None:
    """An input that expands into more than buffer_size is requested alone and delivered."""
    stage = rx_processor(ops.flat_map(lambda x: reactivex.from_iterable(range(50))), buffer_size=8)
    upstream = CountingPublisher(from_iterable(range(3)))
    upstream.subscribe(stage)
    assert upstream.sent == 1
    assert list(to_iterator(stage, prefetch=4)) == list(range(50)) * 3
    assert upstream.max_in_flight == 1


class _FeedingUpstream:
    """An upstream Subscription that, for its first ``rounds`` requests, delivers the inputs
    asked for from another thread while the request is still in progress (a publisher
    emitting on its own thread at once), and counts overlapping request calls (§2.7)."""

    def __init__(self, stage: Subscriber[int], rounds: int) -> None:
        self.stage = stage
        self.rounds = rounds
        self.requests: list[int] = []
        self.active = 0
        self.overlaps = 0
        self.sent = 0
        self.lock = threading.Lock()

    def request(self, n: int) -> None:
        with self.lock:
            self.active += 1
            self.overlaps += self.active > 1
            self.requests.append(n)
            feed = len(self.requests) <= self.rounds
        try:
            if feed:  # the inputs arrive on another thread, whose on_next wants more
                emitter = threading.Thread(target=self._send, args=(n,))
                emitter.start()
                emitter.join(10)
        finally:
            with self.lock:
                self.active -= 1

    def _send(self, n: int) -> None:
        for _ in range(n):
            self.sent += 1
            self.stage.on_next(self.sent)

    def cancel(self) -> None:
        pass


def test_rx_processor_requests_upstream_serially() -> None:
    """§2.7: an input's on_next on upstream's thread, arriving while the processor's own
    request is in progress on another, does not call request at once: the request in
    progress looks again when it returns and asks for what the inputs freed. Before, the
    two calls overlapped; nothing is lost either way, and never more is outstanding than
    the buffer allows."""
    stage = rx_processor(ops.filter(lambda x: False), buffer_size=4)  # every input: room
    upstream = _FeedingUpstream(stage, rounds=5)
    stage.on_subscribe(upstream)
    assert upstream.overlaps == 0
    assert upstream.requests[0] == 1 and len(upstream.requests) == 6  # 5 fed, then waits
    assert sum(upstream.requests) - upstream.sent == 4  # what the buffer allows, outstanding


@pytest.mark.parametrize(
    "late",
    [ops.subscribe_on(NewThreadScheduler()), ops.delay_subscription(0.05)],
    ids=["subscribe_on", "delay_subscription"],
)
def test_rx_processor_an_operator_that_subscribes_late_loses_nothing(late: Any) -> None:
    """subscribe_on / delay_subscription subscribe to the chain's input later, on another
    thread: upstream is asked for nothing until then (the input is hot), so every element
    arrives; they all used to be dropped, and the stream completed empty."""
    counted = CountingPublisher(from_iterable(range(100)))
    stage = rx_processor(late, buffer_size=16)
    counted.subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
    stage.subscribe(sub)
    sub.await_terminal()
    assert sub.elements == list(range(100)) and sub.completed
    assert counted.max_in_flight <= 16


# -- the chain's end and errors ----------------------------------------------------------------


def test_rx_processor_take_cancels_upstream_at_once() -> None:
    """A chain that ends by itself (take) cancels upstream, even before any subscriber."""
    gen = CountedIterable()
    stage = rx_processor(ops.take(3), buffer_size=8)
    from_iterable(gen).subscribe(stage)
    assert gen.closed.is_set()
    assert list(to_iterator(stage)) == [0, 1, 2]


def test_rx_processor_operator_error_follows_the_outputs_and_cancels_upstream() -> None:
    """A raising operator: buffered outputs first, then on_error; upstream cancelled."""

    def fragile(x: int) -> int:
        if x == 3:
            raise ValueError("bad element")
        return x

    gen = CountedIterable()
    stage = rx_processor(ops.map(fragile), buffer_size=8)
    from_iterable(gen).subscribe(stage)
    assert gen.closed.is_set()
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2] and isinstance(sub.error, ValueError)


def test_rx_processor_passes_upstream_errors_after_the_outputs() -> None:
    """An upstream on_error reaches the subscriber after the outputs already produced."""

    def failing() -> Iterator[int]:
        yield from range(3)
        raise KeyError("upstream")

    stage = rx_processor(ops.map(lambda x: x * 10))
    from_iterable(failing()).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    assert sub.elements == [0] and not sub.is_terminated
    sub.request(5)
    assert sub.elements == [0, 10, 20] and isinstance(sub.error, KeyError)


def test_rx_processor_a_fallback_for_an_upstream_error_is_delivered() -> None:
    """catch emits its fallback inside upstream's on_error: within an input's signals, so
    the fallback's outputs arrive after the ones before the error, then on_complete."""

    def failing() -> Iterator[int]:
        yield from range(3)
        raise KeyError("upstream")

    stage = rx_processor(ops.catch(reactivex.of(7, 8)), buffer_size=8)
    from_iterable(failing()).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2, 7, 8]
    assert sub.completed and sub.error is None
    sub.assert_no_violations()


def test_rx_processor_none_output_fails_the_stream() -> None:
    """A chain that produces None fails the stream with TypeError (§2.13)."""
    stage = rx_processor(ops.map(lambda x: None))
    from_iterable(range(3)).subscribe(stage)
    sub: RecordingSubscriber[Any] = RecordingSubscriber(5)
    stage.subscribe(sub)
    assert sub.elements == [] and isinstance(sub.error, TypeError)


def _emit_then_raise(source: Observable[int]) -> Observable[int]:
    """An operator that emits, then raises outside Rx's error handling, for each input and
    at the end."""

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        def on_next(x: int) -> None:
            observer.on_next(x)
            raise ZeroDivisionError("after the output")

        def on_completed() -> None:
            observer.on_next(100)
            raise KeyError("after the last output")

        return source.subscribe(on_next, observer.on_error, on_completed, scheduler=scheduler)

    return Observable(subscribe)


def test_rx_processor_an_operator_raising_at_the_end_fails_the_stream() -> None:
    """An operator whose on_completed raises outside Rx's handling: the subscriber gets that
    error after the outputs (as for on_next), and nothing is raised into upstream (§2.13)."""
    stage = rx_processor(_emit_then_raise, buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    stage.on_subscribe(RecordingSubscription())
    stage.on_complete()  # returns
    assert sub.elements == [100] and isinstance(sub.error, KeyError)


@pytest.mark.parametrize("where", ["operator", "upstream"])
def test_rx_processor_drops_the_subscriber_after_an_error(where: str) -> None:
    """§3.13 after on_error: the processor (still held by the user) no longer keeps the
    subscriber alive. The error it delivered was raised inside the drain, so its traceback
    holds the frames that delivered it; the processor's buffer and the chain's input Subject
    both kept that error."""

    def failing() -> Iterator[int]:
        yield 1
        raise KeyError("upstream")

    if where == "operator":
        stage = rx_processor(ops.map(lambda x: 1 // (x - 3)))
        source: Publisher[int] = from_iterable(range(5))
    else:
        stage = rx_processor(ops.map(lambda x: x))
        source = from_iterable(failing())
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    stage.subscribe(sub)
    source.subscribe(stage)
    assert sub.error is not None
    sub.error = None  # the subscriber lets go of the error itself
    gone = weakref.ref(sub)
    del sub
    gc.collect()
    assert gone() is None


# -- cancel ------------------------------------------------------------------------------------


def test_rx_processor_cancel_cancels_upstream() -> None:
    """Downstream cancel cancels upstream (its generator closes)."""
    gen = CountedIterable()
    stage = rx_processor(ops.map(lambda x: x), buffer_size=4)
    from_iterable(gen).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(2)
    stage.subscribe(sub)
    sub.cancel()
    assert gen.closed.is_set() and gen.pulled <= 2 + 4 + 1


@pytest.mark.parametrize("signal", ["on_next", "on_complete"])
def test_rx_processor_an_operator_raising_after_a_cancel_is_quiet(
    signal: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The subscriber cancels inside its first on_next, while the operator that emitted it
    goes on to raise: the stream is over, so nothing is reported and nothing is raised
    into upstream."""

    class CancelAtFirst(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            super().on_next(element)
            self.cancel()

    stage = rx_processor(_emit_then_raise, buffer_size=4)
    sub = CancelAtFirst(10)
    stage.subscribe(sub)
    stage.on_subscribe(RecordingSubscription())
    with caplog.at_level(logging.ERROR):
        stage.on_next(1) if signal == "on_next" else stage.on_complete()  # returns
    assert len(sub.elements) == 1 and sub.error is None
    assert [r.getMessage() for r in caplog.records] == []


@pytest.mark.parametrize("late", ["on_next", "on_complete", "on_error"])
def test_rx_processor_a_signal_from_inside_upstreams_cancel_reaches_nothing(
    late: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream whose cancel() delivers one more signal at once (in flight): after the
    subscriber's cancel nothing reaches the chain; a late on_error is reported (§1.8),
    never lost silently, and a late on_complete is dropped."""
    seen: list[int] = []
    completed: list[bool] = []
    stage = rx_processor(
        ops.map(lambda x: seen.append(x) or x),
        ops.do_action(on_completed=lambda: completed.append(True)),
        buffer_size=4,
    )

    class Upstream:
        def request(self, n: int) -> None:
            pass

        def cancel(self) -> None:
            if late == "on_next":
                stage.on_next(99)
            elif late == "on_complete":
                stage.on_complete()
            else:
                stage.on_error(KeyError("late"))

    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    stage.on_subscribe(Upstream())
    stage.on_next(1)
    with caplog.at_level(logging.ERROR):
        sub.cancel()
    assert seen == [1] and completed == [] and sub.elements == [1]
    reported = [r.getMessage() for r in caplog.records]
    if late == "on_error":
        assert len(reported) == 1 and "§1.8" in reported[0] and "after the end" in reported[0]
    else:
        assert reported == []


def _race_processor_cancel_once(pool: ThreadPoolExecutor) -> None:
    gen = CountedIterable()
    stage = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    from_iterable(gen, executor=pool).subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0, request_on_next=1)
    stage.subscribe(sub)
    sub.request(4)
    sub.await_count(4)
    sub.cancel()
    assert gen.closed.wait(5)
    elements = list(sub.elements)
    assert elements == sorted(elements)
    sub.assert_no_violations()


@pytest.mark.stress
def test_rx_processor_cancel_racing_upstream_from_another_thread() -> None:
    """rx_processor: downstream cancel racing upstream on_next on an executor thread."""
    with ThreadPoolExecutor(2) as pool:
        for round_ in range(100):
            with switching(often=round_ % 2 == 1):
                _race_processor_cancel_once(pool)


# -- outputs no request paces: at the input's end, and while the chain is subscribed -----------


def test_rx_processor_outputs_after_the_input_ended_are_bounded_too() -> None:
    """Operators that emit when their input ends (take_last, concat) emit what no request
    paces: the buffer takes buffer_size of them beyond the subscriber's demand; past that
    the stream fails with §1.1 (OverflowViolation), after the outputs held. An endless
    fallback is stopped, not left growing the buffer inside upstream's on_complete."""
    small = rx_processor(ops.take_last(10), buffer_size=16)
    from_iterable(range(100)).subscribe(small)
    assert list(to_iterator(small)) == list(range(90, 100))  # within the allowance

    held = rx_processor(ops.take_last(1000), buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    held.subscribe(sub)
    from_iterable(range(1000)).subscribe(held)
    sub.request(100)
    assert sub.elements == list(range(16))  # the first buffer_size of the last 1000
    assert isinstance(sub.error, OverflowViolation) and "after its input ended" in str(sub.error)

    endless = rx_processor(ops.concat(reactivex.repeat_value(0)), buffer_size=16)
    out: RecordingSubscriber[int] = RecordingSubscriber(0)
    endless.subscribe(out)
    from_iterable(range(3)).subscribe(endless)  # returns
    out.request(100)
    assert out.elements == [0, 1, 2] + [0] * 13  # the buffer held 16 in all
    assert isinstance(out.error, OverflowViolation)


def test_rx_processor_outputs_after_the_end_within_demand_all_arrive() -> None:
    """Outputs after the input ended that the subscriber's demand takes never count as
    overflow: sorting a whole stream (to_list, then flat_map) delivers all of it, whether
    the demand came first or the outputs are emitted inside the subscriber's own request
    (the drain is then up the stack, and they wait in the buffer for it)."""
    for demand in (UNBOUNDED, 1000):
        stage = rx_processor(
            ops.to_list(), ops.flat_map(lambda xs: sorted(xs, reverse=True)), buffer_size=16
        )
        sub: RecordingSubscriber[int] = RecordingSubscriber(demand)
        stage.subscribe(sub)
        from_iterable(range(1000)).subscribe(stage)
        sub.await_terminal()
        assert sub.elements == list(range(999, -1, -1)) and sub.error is None

    stage = rx_processor(ops.concat(reactivex.range(100, 200)), buffer_size=16)
    late: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(late)
    from_iterable(range(100)).subscribe(stage)  # 16 in, then paced by the buffer
    assert late.elements == [] and not late.completed
    late.request(200)  # the input ends, and concat emits 100, inside this call
    assert late.elements == list(range(200)) and late.completed


def test_rx_processor_outputs_after_the_end_may_exceed_the_demand_by_buffer_size_only() -> None:
    """Outputs emitted after the input ended inside the subscriber's own request (the drain
    is up the stack: they wait in the buffer) may go beyond the demand there was by
    buffer_size, no further: 30 were requested in all when concat's 100 came, so at most
    16 + 30 of them are taken, then OverflowViolation."""
    stage = rx_processor(ops.concat(reactivex.range(100, 200)), buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(sub)
    from_iterable(range(20)).subscribe(stage)
    sub.request(30)  # the input ends, and concat emits 100, inside this call
    assert sub.elements == list(range(20)) + list(range(100, 110))
    sub.request(1000)
    assert isinstance(sub.error, OverflowViolation)
    after_end = len(sub.elements) - 20
    assert sub.elements == list(range(20)) + list(range(100, 100 + after_end))
    assert after_end <= 16 + 30


def test_rx_processor_outputs_when_the_chain_is_subscribed_come_first() -> None:
    """An operator that emits as the chain is subscribed (start_with) emits while the
    processor is built, not outside an input's signals: its outputs are delivered, first."""
    stage = rx_processor(ops.start_with(-2, -1), buffer_size=4)
    from_iterable(range(3)).subscribe(stage)
    assert list(to_iterator(stage)) == [-2, -1, 0, 1, 2]


def test_rx_processor_outputs_while_the_chain_is_subscribed_are_bounded() -> None:
    """start_with / merge with a cold Observable emit while the processor is built, which
    no request paces: buffer_size of them are held, then the stream fails with §1.1
    (OverflowViolation) after them. An endless one (repeat_value) is stopped: the
    constructor returns. It used to hold every output, or never return."""
    big = rx_processor(ops.start_with(*range(1000)), buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    big.subscribe(sub)
    assert sub.elements == list(range(16))
    assert isinstance(sub.error, OverflowViolation) and "being subscribed" in str(sub.error)

    built: list[Any] = []
    maker = threading.Thread(
        target=lambda: built.append(
            rx_processor(ops.merge(reactivex.repeat_value(0)), buffer_size=16)
        ),
        daemon=True,
    )
    maker.start()
    maker.join(10)
    assert built, "rx_processor(ops.merge(reactivex.repeat_value(0))) did not return"
    upstream = RecordingSubscription()
    built[0].on_subscribe(upstream)
    assert upstream.cancelled.is_set()  # the stream is over: upstream is never asked
    endless: RecordingSubscriber[int] = RecordingSubscriber(100)
    built[0].subscribe(endless)
    assert endless.elements == [0] * 16 and isinstance(endless.error, OverflowViolation)


def test_rx_processor_stops_an_endless_producer_that_ignores_rx_conventions() -> None:
    """A chain whose Observable emits for ever inside its own subscribe, with none of Rx's
    wrapping to catch what on_next raises: the processor's unwinding reaches the
    constructor, which returns; buffer_size outputs, then OverflowViolation."""

    class Raw(Observable[int]):
        def subscribe(self, *args: Any, on_next: Any = None, **kwargs: Any) -> Any:
            for i in itertools.count():
                on_next(i)

    stage = rx_processor(lambda _: Raw(), buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2, 3] and isinstance(sub.error, OverflowViolation)


@pytest.mark.parametrize(
    "operators",
    [
        (ops.merge(reactivex.repeat_value(0)), ops.start_with(None)),
        (ops.merge(reactivex.repeat_value(None)),),
    ],
    ids=["ended by a None first", "endless None"],
)
def test_rx_processor_an_endless_producer_is_stopped_whatever_ended_the_chain(
    operators: tuple[Any, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """The chain ends while the processor is built for another reason than overflow (a None
    output): an endless subscribe-time producer is unwound all the same, and the constructor
    returns; it used to loop for ever, reporting every further None."""
    built: list[Any] = []
    with caplog.at_level(logging.ERROR):
        maker = threading.Thread(
            target=lambda: built.append(rx_processor(*operators, buffer_size=4)), daemon=True
        )
        maker.start()
        maker.join(10)
    assert built, "rx_processor(...) did not return"
    assert len(caplog.records) <= 1
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    built[0].subscribe(sub)
    assert isinstance(sub.error, TypeError) and "None" in str(sub.error)


def test_rx_processor_its_own_unwinding_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    """The processor stops a subscribe-time producer by raising into it; Rx routes that to
    on_error, which must not be reported as a dropped error: only the overflow is told."""
    with caplog.at_level(logging.ERROR):
        stage = rx_processor(ops.start_with(*range(100)), buffer_size=4)
    assert [r.getMessage() for r in caplog.records] == []
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert sub.elements == [0, 1, 2, 3] and isinstance(sub.error, OverflowViolation)


def test_rx_processor_never_unwinds_a_thread_that_is_not_the_constructors() -> None:
    """While the constructor subscribes the chain (a slow subscribe-time source), outputs
    from another thread end the stream (they come outside any input's signals) and are then
    dropped there: the processor's unwinding is for the constructor's own stack only, never
    raised into a user's or a scheduler's thread."""
    caught: list[str] = []
    producers: list[threading.Thread] = []

    def slow(observer: Any, scheduler: Any = None) -> None:
        time.sleep(0.2)  # the constructor's thread is busy here
        observer.on_next(1)

    def foreign(observer: Any, scheduler: Any = None) -> None:
        def run() -> None:
            try:
                for i in range(5):
                    time.sleep(0.02)
                    observer.on_next(i)
            except BaseException as exc:  # noqa: BLE001 - what reached the user's thread
                caught.append(type(exc).__name__)

        producers.append(threading.Thread(target=run, name="user-producer"))
        producers[-1].start()

    stage = rx_processor(
        ops.merge(reactivex.create(foreign), reactivex.create(slow)), buffer_size=8
    )
    producers[0].join(5)  # it has sent all five
    assert not producers[0].is_alive() and caught == []
    sub: RecordingSubscriber[int] = RecordingSubscriber(10)
    stage.subscribe(sub)
    assert isinstance(sub.error, RuntimeError) and "outside its input's signals" in str(sub.error)


def test_rx_processor_a_chain_that_ended_while_subscribed_is_disposed() -> None:
    """The chain fails while the processor is built (start_with(None)): what it subscribed
    to meanwhile (a periodic timer) is disposed, not left ticking for ever."""
    ticks: list[int] = []
    stage = rx_processor(
        ops.merge(reactivex.interval(0.05).pipe(ops.do_action(ticks.append))),
        ops.start_with(None),
        buffer_size=4,
    )
    time.sleep(0.3)
    assert ticks == []
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    assert isinstance(sub.error, TypeError)


# -- operators that shift elements in time, emit at once, or subscribe again -------------------


@pytest.mark.parametrize("shift", ["delay", "observe_on", "inner timer", "sample"])
@pytest.mark.parametrize("n", [3, 100_000])
def test_rx_processor_refuses_an_operator_that_shifts_elements_in_time(shift: str, n: int) -> None:
    """An output that comes outside the input's signals (on a timer or scheduler thread)
    cannot be paced by any request: the stream fails with an error saying so and naming
    the way out, upstream is cancelled, and the chain is disposed. A short stream (over
    before the first output) fails the same way, so a test with little data shows it."""
    operator = {
        "delay": ops.delay(0.01),
        "observe_on": ops.observe_on(NewThreadScheduler()),
        "inner timer": ops.flat_map(lambda x: reactivex.timer(0.01).pipe(ops.map(lambda _: x))),
        "sample": ops.sample(0.01),  # a periodic timer (interval) under the chain's scheduler
    }[shift]
    gen = CountedIterable(n)
    stage = rx_processor(operator, buffer_size=16)
    sub: RecordingSubscriber[int] = RecordingSubscriber(4)
    stage.subscribe(sub)
    with ThreadPoolExecutor(1) as pool:
        from_iterable(gen, executor=pool).subscribe(stage)
        sub.await_terminal()
        assert isinstance(sub.error, RuntimeError)
        assert "emitted outside its input's signals" in str(sub.error)
        assert "from_observable(to_observable(publisher)" in str(sub.error)
        assert sub.elements == []
        if n > 3:
            assert gen.closed.wait(5)  # upstream cancelled


@pytest.mark.parametrize("after", ["on_next", "on_complete"])
def test_rx_processor_an_output_after_the_input_signal_returned_fails_the_stream(
    after: str,
) -> None:
    """An inner Observable that emits after the input's on_next (or on_complete) returned,
    on the very thread that signalled it, is outside the input's signals all the same: the
    stream fails with the error naming the way out (upstream cancelled if it had not ended)."""

    inner: Subject[int] = Subject()
    stage = rx_processor(ops.flat_map(lambda _: inner), buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(4)
    stage.subscribe(sub)
    upstream = RecordingSubscription()
    stage.on_subscribe(upstream)
    assert upstream.total == 1
    stage.on_next(1)  # flat_map subscribes to inner: nothing is emitted yet
    if after == "on_complete":
        stage.on_complete()  # flat_map waits for inner to end
    inner.on_next(10)  # later, on this thread, outside the input's signals
    assert sub.elements == []
    assert isinstance(sub.error, RuntimeError)
    assert "emitted outside its input's signals" in str(sub.error)
    assert upstream.cancelled.is_set() is (after == "on_next")


def test_rx_processor_inner_sources_emit_inside_the_input_under_another_trampoline() -> None:
    """flat_map(x -> reactivex.of(...)) and concat(of(...)) emit at once, inside the input's
    on_next, even when the input arrives inside another Rx trampoline on this thread (an Rx
    source upstream, or another processor): they used to be queued on that trampoline until
    after on_next returned, and the stream failed as if they shifted elements in time."""
    doubled = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    from_observable(reactivex.range(5)).subscribe(doubled)
    assert list(to_iterator(doubled)) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]

    first = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    second = rx_processor(ops.flat_map(lambda x: reactivex.of(x, x)), buffer_size=8)
    from_iterable(range(3)).subscribe(first)
    first.subscribe(second)
    assert list(to_iterator(second)) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]

    tail = rx_processor(ops.concat(reactivex.of(98, 99)), buffer_size=8)
    from_observable(reactivex.range(3), overflow="buffer").subscribe(tail)
    assert list(to_iterator(tail)) == [0, 1, 2, 98, 99]


def test_rx_processor_windows_flattened_in_the_chain_keep_every_element() -> None:
    """A hot inner Observable (a window) must be flattened inside the chain, as documented:
    then every element arrives, in its window."""
    stage = rx_processor(
        ops.window_with_count(3), ops.flat_map(lambda w: w.pipe(ops.to_list())), buffer_size=4
    )
    from_iterable(range(8)).subscribe(stage)
    assert list(to_iterator(stage)) == [[0, 1, 2], [3, 4, 5], [6, 7]]


@pytest.mark.parametrize(
    ("operator", "source"),
    [
        (lambda: ops.repeat(), lambda: iter([1, 2])),
        (lambda: ops.repeat(2), lambda: iter([1, 2])),
        (lambda: ops.retry(), lambda: itertools.chain([1, 2], [None])),
    ],
    ids=["repeat()", "repeat(2)", "retry()"],
)
def test_rx_processor_an_operator_resubscribing_its_input_fails_the_stream(
    operator: Callable[[], Any], source: Callable[[], Iterator[Any]]
) -> None:
    """repeat / retry subscribe to the chain's input again; the upstream Publisher feeds it
    once, so the stream fails with an error that says so and names reactive_streams.retry,
    after the outputs before it, instead of spinning inside upstream's on_complete /
    on_error for ever (or repeating nothing). The upstream's subscribe returns."""
    stage = rx_processor(operator(), buffer_size=8)
    sub: RecordingSubscriber[int] = RecordingSubscriber(100)
    stage.subscribe(sub)
    from_iterable(source()).subscribe(stage)  # returns: the test would hang otherwise
    assert sub.elements == [1, 2]
    assert isinstance(sub.error, RuntimeError) and "a second time" in str(sub.error)
    assert "wrap the Publisher: reactive_streams.retry(publisher, attempts=" in str(sub.error)
    sub.assert_no_violations()


# -- a misbehaving upstream: §2.5, §2.13, §3.16 ------------------------------------------------


def test_spec213_rx_processor_on_next_none_cancels_upstream_and_fails_downstream() -> None:
    """§2.13: upstream's on_next(None) raises TypeError to upstream, and, as every other sink
    does, the processor cancels upstream and fails its subscriber with that rule's error
    after the outputs already buffered, so a consumer never waits for ever."""
    upstream = RecordingSubscription()
    stage = rx_processor(ops.map(lambda x: x * 10))
    stage.on_subscribe(upstream)
    sub: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(sub)
    stage.on_next(1)
    with pytest.raises(TypeError, match="§2.13"):
        stage.on_next(None)  # type: ignore[arg-type]
    assert upstream.cancelled.is_set()
    sub.request(5)
    sub.await_terminal()
    assert sub.elements == [10] and isinstance(sub.error, TypeError)
    assert "§2.13" in str(sub.error)
    sub.assert_no_violations()


def test_spec205_rx_processor_a_second_subscription_whose_cancel_raises_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """§2.5, §3.15: a second on_subscribe is cancelled, and a cancel that raises is reported
    (§3.15 says it must return normally), not raised into the caller; the first stays."""

    class Raising(RecordingSubscription):
        def cancel(self) -> None:
            super().cancel()
            raise RuntimeError("cancel bug")

    first, second = RecordingSubscription(), Raising()
    stage = rx_processor()
    stage.on_subscribe(first)
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        stage.on_subscribe(second)  # returns normally
    assert second.cancelled.is_set() and not first.cancelled.is_set()
    assert any("3.15" in r.getMessage() for r in caplog.records)
    sub: RecordingSubscriber[int] = RecordingSubscriber(3)
    stage.subscribe(sub)
    assert first.total > 0


def test_spec316_rx_processor_fails_the_stream_when_its_first_request_raises() -> None:
    """An upstream request that raises breaks §3.16: the upstream has failed. It is
    cancelled and the subscriber gets on_error naming the rule, caused by its error, instead
    of the error escaping into upstream's on_subscribe."""

    class Flaky:
        def __init__(self) -> None:
            self.calls: list[int] = []
            self.cancelled = False

        def request(self, n: int) -> None:
            self.calls.append(n)
            raise RuntimeError("flaky")

        def cancel(self) -> None:
            self.cancelled = True

    stage = rx_processor(ops.map(lambda x: x), buffer_size=4)
    sub: RecordingSubscriber[int] = RecordingSubscriber(1)
    stage.subscribe(sub)
    upstream = Flaky()
    stage.on_subscribe(upstream)  # its first request(1) raised: returns normally
    sub.await_terminal(5)
    assert isinstance(sub.error, RuntimeError) and "§3.16" in str(sub.error)
    assert str(sub.error.__cause__) == "flaky"
    assert upstream.calls == [1] and upstream.cancelled


def test_spec316_an_upstream_request_raising_fails_the_rx_processor_stream() -> None:
    """§3.16 broken upstream: its request raises when the processor replenishes, from the
    subscriber's request. That request returns normally, and the stream ends with on_error
    carrying the upstream's error (it escaped the drain loop: raised into the subscriber's
    request)."""
    armed = False
    sent = 0

    class Upstream:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            class _Subscription:
                def request(self, n: int) -> None:
                    nonlocal sent
                    if armed:
                        raise RuntimeError("request raised")
                    for _ in range(n):
                        subscriber.on_next(sent)
                        sent += 1

                def cancel(self) -> None:
                    pass

            subscriber.on_subscribe(_Subscription())

    stage = rx_processor(ops.map(lambda x: x), buffer_size=4)
    Upstream().subscribe(stage)
    sub: RecordingSubscriber[int] = RecordingSubscriber()
    stage.subscribe(sub)
    armed = True
    sub.request(100)  # returns normally
    sub.await_terminal(5)
    assert isinstance(sub.error, RuntimeError) and "request raised" in repr(sub.error)
    assert sub.elements == list(range(sent))  # what upstream sent, then the error


# -- one subscriber ----------------------------------------------------------------------------


def test_rx_processor_is_unicast() -> None:
    """A second subscriber is rejected with on_subscribe then on_error (§1.11 allows it)."""
    stage = rx_processor()
    stage.subscribe(RecordingSubscriber(0))
    second: RecordingSubscriber[int] = RecordingSubscriber(0)
    stage.subscribe(second)
    assert second.subscription is not None and isinstance(second.error, RuntimeError)
