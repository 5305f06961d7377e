"""pipe(): the wiring order, refusals named by position, a pipeline through two rx_processor
stages (in order, bounded, cancelled from the sink), and the reprs that tell a blocked
consumer what it waits for."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from reactivex import operators as ops

from reactive_streams import Publisher, Subscriber, Subscription, pipe
from reactive_streams.adapters.async_iterables import to_async_iterator
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.adapters.rx import rx_processor
from reactive_streams.testing import RecordingSubscriber, RecordingSubscription

WAITING = "waiting: no upstream subscribed yet (was subscribe() called?)"


class Source:
    """A Publisher that logs ``subscribe`` and hands the subscriber to ``inner``."""

    def __init__(self, log: list[str], inner: Publisher[Any]) -> None:
        self.name = "source"
        self._log = log
        self._inner = inner

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self._log.append(f"source.subscribe({getattr(subscriber, 'name', '?')})")
        self._inner.subscribe(subscriber)


class Forward:
    """A pass-through Processor that hands ``on_subscribe`` straight to its downstream, as
    the simplest hand-written stage does; with ``hold=False`` it drops one that comes while
    it has no downstream yet (it cannot buffer), with ``hold=True`` it keeps it until then."""

    def __init__(self, name: str, log: list[str], *, hold: bool = False) -> None:
        self.name = name
        self._log = log
        self._hold = hold
        self._held: Subscription | None = None
        self.downstream: Subscriber[Any] | None = None
        self.had_downstream: bool | None = None  # at on_subscribe

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self._log.append(f"{self.name}.subscribe({getattr(subscriber, 'name', '?')})")
        self.downstream = subscriber
        if self._held is not None:
            subscriber.on_subscribe(self._held)

    def on_subscribe(self, subscription: Subscription) -> None:
        self.had_downstream = self.downstream is not None
        if self.downstream is not None:
            self.downstream.on_subscribe(subscription)
        elif self._hold:
            self._held = subscription

    def on_next(self, element: Any) -> None:
        assert self.downstream is not None
        self.downstream.on_next(element)

    def on_error(self, error: Exception) -> None:
        assert self.downstream is not None
        self.downstream.on_error(error)

    def on_complete(self) -> None:
        assert self.downstream is not None
        self.downstream.on_complete()


class Silent:
    """A Publisher that keeps its subscriber and never calls ``on_subscribe``."""

    def __init__(self) -> None:
        self.subscribers: list[Subscriber[Any]] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscribers.append(subscriber)


class Failing:
    """An iterable whose iteration fails at once."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("boom")


# -- wiring -----------------------------------------------------------------------------------


def test_stages_are_subscribed_from_the_sink_end_and_the_source_last() -> None:
    """pipe(source, a, b, c) makes b.subscribe(c), a.subscribe(b), then source.subscribe(a)."""
    log: list[str] = []
    a, b, c = (Forward(name, log, hold=True) for name in "abc")
    pipe(Source(log, from_iterable([1])), a, b, c)
    assert log == ["b.subscribe(c)", "a.subscribe(b)", "source.subscribe(a)"]


def test_every_stage_has_its_downstream_before_a_synchronous_source_signals_it() -> None:
    """Forwarding stages that cannot hold an early on_subscribe get theirs with a downstream
    in place, so a synchronous source's elements all reach the subscriber of the result."""
    log: list[str] = []
    a, b = Forward("a", log), Forward("b", log)
    last = Forward("last", log, hold=True)  # nobody subscribed to the result yet: it holds
    result = pipe(from_iterable(range(5)), a, b, last)
    assert (a.had_downstream, b.had_downstream, last.had_downstream) == (True, True, False)
    sink: RecordingSubscriber[int] = RecordingSubscriber(10)
    result.subscribe(sink)
    sink.await_terminal()
    assert sink.elements == [0, 1, 2, 3, 4] and sink.completed
    sink.assert_no_violations()


def test_pipe_returns_the_last_stage_or_the_source() -> None:
    """No stage: the source itself; else the last stage itself, unsubscribed so far."""
    source = from_iterable([1])
    assert pipe(source) is source
    a, b = rx_processor(), rx_processor()
    assert pipe(source, a, b) is b


@pytest.mark.parametrize(
    ("bad", "lacks"),
    [
        (None, "got None"),
        ("text", "'text' (type str), which lacks a callable on_subscribe, on_next"),
        (from_iterable([1]), "lacks a callable on_subscribe, on_next, on_error, on_complete"),
        (RecordingSubscriber(), "which lacks a callable subscribe"),
    ],
    ids=["None", "str", "Publisher only", "Subscriber only"],
)
def test_a_stage_that_is_no_processor_is_named_by_position_and_nothing_is_wired(
    bad: object, lacks: str
) -> None:
    """TypeError "pipe(): stage 2 is not a Processor: ..." saying what it lacks, raised
    before any subscribe (the source and the good stages are left untouched), wherever the
    bad stage is."""
    log: list[str] = []
    with pytest.raises(TypeError, match=r"^pipe\(\): stage 2 is not a Processor: ") as info:
        pipe(Source(log, from_iterable([1])), Forward("a", log, hold=True), bad)  # type: ignore[call-overload]
    assert lacks in str(info.value)
    assert log == []
    with pytest.raises(TypeError, match=r"^pipe\(\): stage 1 is not a Processor: "):
        pipe(Source(log, from_iterable([1])), bad, Forward("b", log), Forward("c", log))  # type: ignore[call-overload]
    assert log == []


@pytest.mark.parametrize("bad", [None, [1, 2], RecordingSubscriber()], ids=repr)
def test_a_source_that_is_no_publisher_is_refused(bad: object) -> None:
    """TypeError "pipe(): the source is not a Publisher: ...", before any stage is wired."""
    log: list[str] = []
    with pytest.raises(TypeError, match=r"^pipe\(\): the source is not a Publisher: "):
        pipe(bad, Forward("a", log), Forward("b", log))  # type: ignore[call-overload]
    assert log == []


def test_a_stage_given_twice_is_refused() -> None:
    """A stage that comes again (or is the source) would be its own upstream: TypeError."""
    a = rx_processor()
    with pytest.raises(TypeError, match=r"^pipe\(\): stage 3 is stage 1 again"):
        pipe(from_iterable([1]), a, rx_processor(), a)
    with pytest.raises(TypeError, match=r"^pipe\(\): stage 1 is the source again"):
        pipe(a, a)


def test_a_raising_subscribe_is_named_in_a_note() -> None:
    """A subscribe that raises (breaking §1.9) goes on to the caller, noted with its place."""

    class Broken:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            raise RuntimeError("broken")

    with pytest.raises(RuntimeError, match="broken") as info:
        pipe(Broken(), rx_processor())
    assert "pipe(): raised by the source's subscribe(stage 1)" in info.value.__notes__


def test_a_stage_subscribed_before_keeps_its_upstream_and_cancels_the_new_one() -> None:
    """§2.5: a stage already subscribed to another upstream keeps it; the source pipe()
    gives it is cancelled, and the stage still delivers the first upstream's elements."""
    stage = rx_processor()
    from_iterable([1, 2, 3]).subscribe(stage)
    offered = RecordingSubscription()

    class Offers:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_subscribe(offered)

    assert pipe(Offers(), stage) is stage
    assert offered.cancelled.is_set() and offered.requests == []
    assert list(to_iterator(stage)) == [1, 2, 3]


def test_a_unicast_stage_that_has_a_subscriber_refuses_the_next_stage() -> None:
    """§1.11: rx_processor serves one subscriber; the stage pipe() adds after it gets
    on_error, which the consumer raises."""
    taken = rx_processor()
    taken.subscribe(RecordingSubscriber())
    result = pipe(from_iterable(range(3)), taken, rx_processor())
    with pytest.raises(RuntimeError, match="§1.11"):
        list(to_iterator(result))


# -- a pipeline through two rx_processor stages ---------------------------------------------


class Pulled:
    """A generator over ``range(n)`` counting the pulls; ``closed`` is set by its finally."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pulled = 0
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[int]:
        return self._run()

    def _run(self) -> Iterator[int]:
        try:
            for i in range(self.n):
                self.pulled += 1  # owned: the thread pulling (serial, §1.3)
                yield i
        finally:
            self.closed.set()


def test_a_pipeline_of_two_rx_stages_delivers_in_order_with_bounded_in_flight() -> None:
    """from_iterable -> map(x2) -> filter(x % 4 == 0) -> to_iterator: every output in order,
    and the generator never more inputs ahead of the consumer than the stages' stated
    bounds add up to (prefetch 8 outputs, 16 in each stage's buffer, 16 requested by b)."""
    source = Pulled(10_000)
    doubled = rx_processor(ops.map(lambda x: x * 2), buffer_size=16)
    fourths = rx_processor(ops.filter(lambda x: x % 4 == 0), buffer_size=16)
    ahead = 0
    out = []
    for consumed, value in enumerate(
        to_iterator(pipe(from_iterable(source), doubled, fourths), prefetch=8), 1
    ):
        out.append(value)
        ahead = max(ahead, source.pulled - 2 * consumed)  # one output per two inputs
    assert out == [4 * i for i in range(5_000)]
    assert ahead <= 2 * 8 + 2 * 16 + 16 + 16 + 1, f"pulled {ahead} inputs ahead"


def test_cancel_from_the_sink_reaches_the_source_and_closes_the_generator() -> None:
    """close() on the consumer cancels both stages and the source: the generator's finally
    runs, it is pulled no further, and each stage's repr says it is cancelled."""
    source = Pulled(10_000)
    a, b = rx_processor(ops.map(lambda x: x + 1)), rx_processor(ops.map(lambda x: x * 2))
    iterator = to_iterator(pipe(from_iterable(source), a, b), prefetch=4)
    assert [next(iterator) for _ in range(3)] == [2, 4, 6]
    iterator.close()
    assert source.closed.wait(10)
    pulled = source.pulled
    assert "cancelled" in repr(a) and "cancelled" in repr(b)
    assert list(iterator) == [] and source.pulled == pulled


def _watched_round() -> None:
    """One run of the test below."""
    source = Pulled(10**9)
    a = rx_processor(ops.map(lambda x: x + 1), buffer_size=8)
    b = rx_processor(ops.filter(lambda x: x % 2 == 0), buffer_size=8)
    stop = threading.Event()
    failures: list[BaseException] = []
    with ThreadPoolExecutor(2) as pool:
        iterator = to_iterator(pipe(from_iterable(source, executor=pool), a, b), prefetch=4)

        def watch() -> None:
            try:
                while not stop.is_set():
                    repr(iterator), repr(a), repr(b)  # noqa: B018
            except BaseException as exc:
                failures.append(exc)

        watcher = threading.Thread(target=watch)
        watcher.start()
        got = [next(iterator) for _ in range(200)]
        closer = threading.Thread(target=iterator.close)
        closer.start()
        rest = list(iterator)  # ends once close() lands (maybe after a few more)
        closer.join(10)
        stop.set()
        watcher.join(10)
        assert source.closed.wait(10)
    assert got + rest == list(range(2, 2 * len(got + rest) + 1, 2))
    assert failures == []


def test_a_pipeline_across_threads_stays_ordered_while_watched_and_cancelled(
    switching: float | None,
) -> None:
    """The source pulled on an executor, the consumer on this thread, a watcher calling the
    reprs all along, and close() from another thread: in order, no repr raises, the
    consumer stops and the generator is closed."""
    for _ in range(5):
        _watched_round()


# -- reprs: what a blocked consumer waits for -------------------------------------------------


def test_a_consumer_blocked_on_a_stage_never_subscribed_names_it() -> None:
    """a.subscribe(b) forgotten: the consumer of b, blocked in next(), says in its repr that
    b (named by its address) has no upstream yet; wiring b then unblocks it."""
    a, b = rx_processor(ops.map(lambda x: x * 10)), rx_processor(ops.map(lambda x: x + 1))
    from_iterable(range(3)).subscribe(a)
    iterator = to_iterator(b)
    got: list[int] = []
    consumer = threading.Thread(target=lambda: got.append(next(iterator)))
    consumer.start()
    try:
        text = repr(iterator)
        assert text.startswith("<BlockingIterator 0 queued, 256 requested in all")
        assert f"<RxProcessor at {id(b):#x} {WAITING}" in text
        assert WAITING not in repr(a)
        a.subscribe(b)  # the missing link
        consumer.join(10)
        assert got == [1]
        assert WAITING not in repr(iterator)
    finally:
        iterator.close()  # wakes the consumer if it still waits (a failed assertion)
        consumer.join(10)


def test_a_consumer_whose_publisher_never_subscribed_it_says_so() -> None:
    """A publisher that never calls on_subscribe: both consumers' reprs say they wait for
    it, and name it; closed, they say so."""
    silent = Silent()
    iterator = to_iterator(silent)
    assert repr(iterator) == f"<BlockingIterator {WAITING}, from {silent!r}>"
    iterator.close()
    assert repr(iterator) == "<BlockingIterator closed>"

    async def main() -> list[str]:
        async_iterator = to_async_iterator(silent)
        texts = [repr(async_iterator)]
        async with async_iterator:
            texts.append(repr(async_iterator))
        texts.append(repr(async_iterator))
        return texts

    before, waiting, closed = asyncio.run(main())
    assert before.startswith("<AsyncPublisherIterator not subscribed yet")
    assert waiting == f"<AsyncPublisherIterator {WAITING}, from {silent!r}>"
    assert closed == "<AsyncPublisherIterator closed>"


def test_the_consumer_reprs_tell_queued_requested_and_the_end() -> None:
    """Subscribed: how many queued and requested in all; then completed or failed (with
    what is still queued), and closed."""
    iterator = to_iterator(from_iterable(range(10)), prefetch=4)
    assert next(iterator) == 0
    assert re.match(
        r"<BlockingIterator \d queued, \d+ requested in all \(prefetch=4\), from from_iterable",
        repr(iterator),
    )
    assert list(iterator) == list(range(1, 10))
    assert repr(iterator) == "<BlockingIterator closed>"
    short = to_iterator(from_iterable(range(2)))
    assert repr(short).startswith("<BlockingIterator completed, 2 queued, from ")
    failing = to_iterator(pipe(from_iterable([1, 0]), rx_processor(ops.map(lambda x: 1 // x))))
    assert repr(failing).startswith(
        "<BlockingIterator failed with ZeroDivisionError('integer division or modulo by zero'), "
        "1 queued"
    )

    async def main() -> tuple[str, list[int]]:
        async_iterator = to_async_iterator(from_iterable(range(10)), prefetch=4)
        first = [await async_iterator.__anext__()]
        text = repr(async_iterator)
        return text, first + [x async for x in async_iterator]

    text, got = asyncio.run(main())
    assert re.match(r"<AsyncPublisherIterator \d queued, \d+ requested in all \(prefetch=4\)", text)
    assert got == list(range(10))


def test_the_rx_processor_repr_follows_its_life() -> None:
    """No upstream, no subscriber; then requested upstream and by its subscriber; then
    failed (while the error waits for the subscriber), ended or cancelled."""
    stage = rx_processor(ops.map(lambda x: x))
    assert repr(stage) == f"<RxProcessor at {id(stage):#x} {WAITING}, 0 queued, no subscriber yet>"
    upstream = RecordingSubscription()
    stage.on_subscribe(upstream)
    sink: RecordingSubscriber[int] = RecordingSubscriber(5)
    stage.subscribe(sink)
    assert repr(stage).endswith(
        f"{upstream.total} requested upstream, 0 queued, 5 requested by its subscriber in all>"
    )
    stage.on_complete()
    assert "ended, 0 queued" in repr(stage)

    failed = rx_processor()
    from_iterable(Failing()).subscribe(failed)
    assert "failed with RuntimeError('boom')" in repr(failed)

    cancelled = rx_processor()
    from_iterable(range(10**6)).subscribe(cancelled)
    taker: RecordingSubscriber[int] = RecordingSubscriber(1)
    cancelled.subscribe(taker)
    taker.cancel()
    assert "cancelled" in repr(cancelled)
