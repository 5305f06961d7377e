"""RxPY adapter benchmarks: the cost of real backpressure beside RxPY's own subscribe."""

from __future__ import annotations

import reactivex

from adapters.rx import from_observable
from benchmarks._harness import Result, compare
from benchmarks.core_bench import _Counter, _rxpy

__all__ = ["run"]


def _ours(n: int) -> int:
    counter = _Counter(256)
    from_observable(reactivex.from_iterable(range(n))).subscribe(counter)
    counter.done.wait()
    assert counter.count == n
    return n


def run(n: int = 300_000, repeats: int = 3) -> list[Result]:
    return [
        compare(
            "from_observable(from_iterable(range), block) -> counting subscriber, request(256)",
            lambda: _ours(n),
            lambda: _rxpy(n),
            repeats=repeats,
            target=0.5,
            baseline_name="reactivex.from_iterable(...).subscribe(on_next=...) (no backpressure)",
            note="the emitter runs on a thread the adapter owns and waits for room",
        )
    ]
