"""to_observable: delivery, the prefetch window, dispose; whole pipelines (reactivex 4.x to 6.x)."""

from __future__ import annotations

import runpy
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.testing import TestScheduler
from rx_helpers import CountingPublisher, switching

from reactive_streams import Subscriber
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.adapters.rx import from_observable, rx_processor, to_observable
from reactive_streams.testing import CountedIterable, RecordingSubscription

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rx_pipeline.py"


# -- delivery, and the end ---------------------------------------------------------------------


def test_to_observable_delivers_then_completes() -> None:
    """to_observable emits every element in order, then on_completed."""
    out: list[Any] = []
    to_observable(from_iterable(range(5))).subscribe(
        on_next=out.append, on_completed=lambda: out.append("done")
    )
    assert out == [0, 1, 2, 3, 4, "done"]


def test_to_observable_errors_reach_rx_on_error() -> None:
    """A failing publisher becomes Rx on_error, after the elements before it."""

    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("source broke")

    out: list[Any] = []
    errors: list[Exception] = []
    to_observable(from_iterable(failing())).subscribe(on_next=out.append, on_error=errors.append)
    assert out == [1] and isinstance(errors[0], ValueError)


def test_to_observable_subscribe_failure_reaches_rx_on_error() -> None:
    """A publisher whose subscribe raises gives Rx on_error; if it raised after handing
    over a subscription, that subscription is cancelled (§3.13)."""

    class Broken:
        def subscribe(self, subscriber: Any) -> None:
            raise RuntimeError("no")

    errors: list[Exception] = []
    to_observable(Broken()).subscribe(on_error=errors.append)
    assert isinstance(errors[0], RuntimeError)

    handed_over = RecordingSubscription()

    class RaisesAfterOnSubscribe:
        def subscribe(self, subscriber: Any) -> None:
            subscriber.on_subscribe(handed_over)
            raise RuntimeError("half way")

    errors.clear()
    to_observable(RaisesAfterOnSubscribe()).subscribe(on_error=errors.append)
    assert isinstance(errors[0], RuntimeError) and "half way" in str(errors[0])
    assert handed_over.cancelled.is_set()


def test_to_observable_an_observer_raising_ends_with_on_error() -> None:
    """An observer whose on_next raises gets on_error with that error, as from Rx's own
    from_iterable, and the publisher is cancelled: nothing else reaches the observer."""
    gen = CountedIterable()
    seen: list[Any] = []
    errors: list[Exception] = []

    def on_next(x: int) -> None:
        seen.append(x)
        if x == 2:
            raise ValueError("observer failed")

    to_observable(from_iterable(gen), prefetch=4).subscribe(
        on_next=on_next, on_error=errors.append, on_completed=lambda: seen.append("done")
    )
    assert seen == [0, 1, 2]
    assert len(errors) == 1 and str(errors[0]) == "observer failed"
    assert gen.closed.is_set()


# -- demand: a window of prefetch, for each Rx subscription ------------------------------------


def test_to_observable_keeps_at_most_prefetch_requested_ahead() -> None:
    """The window: requested - taken never exceeds prefetch; replenished in 75% steps."""
    upstream = CountingPublisher(from_iterable(range(1000)))
    worst = 0
    taken = 0

    def on_next(_: int) -> None:
        nonlocal worst, taken
        taken += 1
        worst = max(worst, upstream.requested - taken)

    to_observable(upstream, prefetch=16).subscribe(on_next)
    assert taken == 1000 and worst <= 16 and upstream.max_in_flight <= 16


def test_to_observable_refuses_a_bad_prefetch_at_the_call() -> None:
    """A prefetch that is not a positive int is a ValueError when to_observable is called,
    not an error at subscribe time."""
    for bad in (0, -1):
        with pytest.raises(ValueError):
            to_observable(from_iterable([1]), prefetch=bad)


def test_to_observable_resubscribes_for_each_observer() -> None:
    """Each Rx subscription subscribes to the publisher afresh."""
    source = to_observable(from_observable(reactivex.from_iterable(range(3))))
    first: list[int] = []
    second: list[int] = []
    done = threading.Barrier(3)
    source.subscribe(first.append, on_completed=lambda: done.wait(5))
    source.subscribe(second.append, on_completed=lambda: done.wait(5))
    done.wait(5)
    assert first == second == [0, 1, 2]


# -- dispose cancels the publisher -------------------------------------------------------------


def test_to_observable_dispose_cancels() -> None:
    """dispose() cancels the publisher: a generator behind it is closed."""
    gen = CountedIterable()
    seen = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        source = to_observable(from_iterable(gen, executor=pool), prefetch=4)
        disposable = source.subscribe(lambda x: seen.set())
        assert seen.wait(5)
        disposable.dispose()
        assert gen.closed.wait(5)


def test_to_observable_disposed_before_it_connects_never_subscribes() -> None:
    """Disposed before the scheduler ran the connection: the publisher is never subscribed."""
    subscribed: list[Subscriber[Any]] = []

    class Recording:
        def subscribe(self, subscriber: Subscriber[Any]) -> None:
            subscribed.append(subscriber)

    scheduler = TestScheduler()
    disposable = to_observable(Recording()).subscribe(lambda x: None, scheduler=scheduler)
    disposable.dispose()
    scheduler.start()  # runs what was scheduled: the connection, which finds it disposed
    assert subscribed == []


def test_to_observable_take_stops_an_infinite_synchronous_publisher() -> None:
    """ops.take(n) over an infinite synchronous publisher returns and closes it."""
    gen = CountedIterable()
    out: list[int] = []
    to_observable(from_iterable(gen), prefetch=8).pipe(ops.take(5)).subscribe(out.append)
    assert out == [0, 1, 2, 3, 4] and gen.closed.is_set() and gen.pulled <= 8


def _race_dispose_once(pool: ThreadPoolExecutor) -> None:
    gen = CountedIterable()
    seen = threading.Event()
    source = to_observable(from_iterable(gen, executor=pool), prefetch=4)
    disposable = source.subscribe(lambda _: seen.set())
    assert seen.wait(5)
    disposable.dispose()
    assert gen.closed.wait(5)


@pytest.mark.stress
def test_dispose_racing_emission_from_an_executor() -> None:
    """to_observable: dispose() racing emission on an executor thread closes the source."""
    with ThreadPoolExecutor(2) as pool:
        for round_ in range(100):
            with switching(often=round_ % 2 == 1):
                _race_dispose_once(pool)


# -- whole pipelines ---------------------------------------------------------------------------


def test_mixed_pipeline_generator_rx_processor_to_observable() -> None:
    """generator -> rx_processor -> to_observable -> from_observable(block) -> to_iterator."""
    stage = rx_processor(ops.map(lambda x: x * 3), ops.filter(lambda x: x % 2 == 1))
    from_iterable(range(200)).subscribe(stage)
    back = from_observable(to_observable(stage, prefetch=8), buffer_size=8)
    assert list(to_iterator(back, prefetch=8)) == [x * 3 for x in range(200) if x % 2 == 1]


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/examples/rx_pipeline.py runs; latest ends on the newest price, nothing unaccounted."""
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "the last one 99999; " in out and "seen + dropped == sent: True" in out
    assert "sum of squares divisible by 3 below 10000: 111127776111" in out
    assert "take(3): [0, 1, 4]; the infinite generator was closed: True" in out
