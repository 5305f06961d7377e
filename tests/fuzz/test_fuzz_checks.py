"""The fuzzer's checks fail where they should: each broken publisher here breaks one rule,
and the schedule run over it names that rule (a fuzzer that cannot fail finds nothing)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import fuzz_driven
import fuzz_run
import fuzz_sinks
import pytest
from fuzz_plan import Cancel, Plan, draw
from fuzz_run import LoopHarness, run_plan
from fuzz_sources import Gen, Made

from reactive_streams import UNBOUNDED, Subscriber
from reactive_streams.adapters.iterables import from_iterable

PLAN = Plan(
    kind="broken",
    sink="recorder",
    seed=0,
    n=3,
    fail_at=None,
    initial=UNBOUNDED,
    every=0,
    size=1,
    others=(),
    others_after=0,
    cancel=None,
    switching=False,
    spy=False,
    coin=False,
    pair=False,
)


@pytest.fixture(scope="module")
def harness() -> Iterator[LoopHarness]:
    loop = LoopHarness()
    yield loop
    loop.close()


class Broken:
    """A Publisher of ``0, 1, 2`` whose subscription does what ``on_request`` says, with
    ``on_cancel`` called on cancel; both get the subscriber."""

    def __init__(
        self,
        on_request: Callable[[Subscriber[int], int], None],
        on_cancel: Callable[[Subscriber[int]], None] = lambda s: None,
    ) -> None:
        self.on_request = on_request
        self.on_cancel = on_cancel

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        outer = self

        class Subscription:
            def request(self, n: int) -> None:
                outer.on_request(subscriber, n)

            def cancel(self) -> None:
                outer.on_cancel(subscriber)

        subscriber.on_subscribe(Subscription())


def _run(harness: LoopHarness, publisher: Any, plan: Plan = PLAN, **made: Any) -> list[str]:
    result = run_plan(harness, plan, lambda: Made(publisher, [0, 1, 2], **made))
    return result.violations


def _once(action: Callable[[Subscriber[int], int], None]) -> Callable[[Subscriber[int], int], None]:
    done: list[int] = []

    def once(subscriber: Subscriber[int], n: int) -> None:
        if not done:
            done.append(n)
            action(subscriber, n)

    return once


def _all_then_complete(subscriber: Subscriber[int], n: int) -> None:
    for i in range(3):
        subscriber.on_next(i)
    subscriber.on_complete()


def test_a_replayed_schedule_is_the_one_that_broke() -> None:
    """``RS_FUZZ_REPLAY`` gives the sink; the plan drawn with it is the seed's own."""
    for seed in range(200):
        drawn = draw("generator", seed, pull=True)
        assert draw("generator", seed, pull=True, sink=drawn.sink) == drawn


def test_a_correct_publisher_breaks_nothing(harness: LoopHarness) -> None:
    """The baseline: a publisher of ours, the same plan, no violation."""
    assert _run(harness, from_iterable([0, 1, 2])) == []


def test_more_elements_than_requested_is_named_1_1(harness: LoopHarness) -> None:
    violations = _run(harness, Broken(_once(_all_then_complete)), replace(PLAN, initial=1))
    assert any(v.startswith("§1.1") for v in violations), violations


def test_a_signal_after_the_end_is_named_1_7(harness: LoopHarness) -> None:
    def twice(subscriber: Subscriber[int], n: int) -> None:
        _all_then_complete(subscriber, n)
        subscriber.on_complete()

    violations = _run(harness, Broken(_once(twice)))
    assert any(v.startswith("§1.7") for v in violations), violations


def test_overlapping_signals_are_named_1_3(harness: LoopHarness) -> None:
    """An ``on_next`` from the cancelling thread while another is held on the first."""

    def from_a_thread(subscriber: Subscriber[int], n: int) -> None:
        threading.Thread(target=subscriber.on_next, args=(0,), daemon=True).start()

    plan = replace(PLAN, cancel=Cancel("held", 0))
    violations = _run(harness, Broken(_once(from_a_thread), lambda s: s.on_next(1)), plan)
    assert any(v.startswith("§1.3") for v in violations), violations


def test_a_skipped_element_is_loss_and_disorder(harness: LoopHarness) -> None:
    def skipping(subscriber: Subscriber[int], n: int) -> None:
        subscriber.on_next(0)
        subscriber.on_next(2)
        subscriber.on_complete()

    violations = _run(harness, Broken(_once(skipping)))
    assert any(v.startswith("order") for v in violations), violations
    assert any(v.startswith("loss") for v in violations), violations


def test_elements_after_cancel_returned_are_named_3_12(harness: LoopHarness) -> None:
    """Cancelled inside the first ``on_next``, it goes on: two more arrive after the cancel."""
    violations = _run(
        harness, Broken(_once(_all_then_complete)), replace(PLAN, cancel=Cancel("on_next", 0))
    )
    assert any(v.startswith("§3.12: 2 elements") for v in violations), violations


def test_a_generator_left_open_after_cancel_is_named_3_13(harness: LoopHarness) -> None:
    gen = Gen(3, None)
    iterator = iter(gen.iterator)

    def one(subscriber: Subscriber[int], n: int) -> None:
        subscriber.on_next(next(iterator))

    plan = replace(PLAN, cancel=Cancel("on_next", 0))
    violations = _run(harness, Broken(one), plan, released=gen.released)
    assert any(v.startswith("§3.13") for v in violations), violations


def test_an_unended_stream_is_a_hang_and_a_thread_left_running_a_leftover(
    harness: LoopHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publisher that delivers nothing and leaves a thread behind, under short timeouts."""
    monkeypatch.setattr(fuzz_run, "TIMEOUT", 0.5)
    monkeypatch.setattr(fuzz_sinks, "TIMEOUT", 0.5)
    monkeypatch.setattr(fuzz_driven, "TIMEOUT", 0.5)
    stop = threading.Event()

    def leak(subscriber: Subscriber[int], n: int) -> None:
        threading.Thread(target=stop.wait, name="leaked", daemon=True).start()

    try:
        violations = _run(harness, Broken(_once(leak)))
    finally:
        stop.set()
    assert any(v.startswith("hang") for v in violations), violations
    assert any(v.startswith("leftover: threads ['leaked']") for v in violations), violations
