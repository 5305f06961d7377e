"""RxPY adapter benchmarks: the cost of real backpressure beside RxPY's own subscribe, and the
memory a bounded overflow strategy holds beside an unbounded buffer."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from collections import deque
from collections.abc import Callable
from typing import Any

import reactivex
from reactivex.subject import Subject

from benchmarks._harness import Result, compare
from benchmarks.core_bench import _Counter, _rxpy
from reactive_streams import UNBOUNDED, Subscription
from reactive_streams.adapters.rx import from_observable

__all__ = ["QUICK", "run"]

QUICK = {"n": 100_000, "repeats": 2, "mem_items": 50_000}


def _ours(n: int) -> int:
    counter = _Counter(256)
    from_observable(reactivex.from_iterable(range(n))).subscribe(counter)
    counter.done.wait()
    assert counter.count == n
    return n


class _NoDemand:
    """A subscription that ignores requests: the floor line below keeps no demand."""

    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


def _forwarding(n: int) -> int:
    """The floor of any adapter that sees each element in Python through RxPY's public
    ``subscribe``: Rx's observer calls one function of ours, which calls the same counting
    subscriber, as Rx's observer calls the lease in ``block``; no demand is kept."""
    counter = _Counter(256)
    counter.subscription = _NoDemand()
    on_next = counter.on_next

    def forward(element: Any) -> None:
        on_next(element)

    reactivex.from_iterable(range(n)).subscribe(on_next=forward)
    assert counter.count == n
    return n


# -- peak memory: a fast hot source, a slow consumer ------------------------------------------


class _Slow:
    """A subscriber that only counts; the benchmark requests for it, one at a time."""

    def __init__(self) -> None:
        self.count = 0
        self.done = threading.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, element: Any) -> None:
        self.count += 1

    def on_error(self, error: Exception) -> None:
        self.done.set()
        raise error

    def on_complete(self) -> None:
        self.done.set()


def _push(subject: Subject[int], items: int, finished: threading.Event) -> None:
    """The producer thread: every item as fast as ``on_next`` returns, then the end."""
    on_next = subject.on_next
    for i in range(items):
        on_next(i)
    subject.on_completed()
    finished.set()


def _hot_latest(items: int, buffer_size: int) -> int:
    """from_observable(latest): the consumer takes one element a millisecond at most."""
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, overflow="latest", buffer_size=buffer_size)
    slow = _Slow()
    publisher.subscribe(slow)
    assert slow.subscription is not None
    finished = threading.Event()
    producer = threading.Thread(target=_push, args=(subject, items, finished))
    producer.start()
    while not finished.wait(0.001):
        slow.subscription.request(1)
    producer.join()
    slow.subscription.request(UNBOUNDED)  # what is left: at most buffer_size
    assert slow.done.wait(30)
    assert slow.count + publisher.dropped == items
    return slow.count


def _hot_unbounded(items: int) -> int:
    """The same Subject, producer and consumer, with an unbounded buffer in between."""
    subject: Subject[int] = Subject()
    buffer: deque[int] = deque()
    subject.subscribe(on_next=buffer.append)
    finished = threading.Event()
    producer = threading.Thread(target=_push, args=(subject, items, finished))
    producer.start()
    taken = 0
    while not finished.wait(0.001):
        if buffer:
            buffer.popleft()
            taken += 1
    producer.join()
    assert taken + len(buffer) == items
    return taken


def _peak_mb(fn: Callable[[], object]) -> float:
    """Peak memory traced by tracemalloc (MB, 10**6 bytes) while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def peak_memory(items: int, buffer_size: int = 256) -> Result:
    """Peak traced memory of ``latest`` with a hot source and a slow consumer, beside an
    unbounded buffer in the same run (reported only: lower is better)."""
    ours = _peak_mb(lambda: _hot_latest(items, buffer_size))
    baseline = _peak_mb(lambda: _hot_unbounded(items))
    return Result(
        f"peak traced memory: Subject x {items:,} from a thread -> from_observable(latest, "
        f"buffer_size={buffer_size}) -> slow subscriber (lower is better)",
        ours,
        baseline,
        "MB",
        None,
        baseline_name="the same Subject into an unbounded deque (every element kept until "
        "taken, as an unbounded buffer such as ops.observe_on does), same consumer",
        note="reported only: tracemalloc peak over the whole run; the consumer takes one "
        "element a millisecond at most; the bound does not depend on the number of items",
        lower_is_better=True,
    )


def run(n: int = 300_000, repeats: int = 7, mem_items: int = 200_000) -> list[Result]:
    """The rx benchmarks: ``n`` elements per throughput run; ``mem_items`` pushes for the
    memory line (tracemalloc makes each push several times slower: a few seconds for 200k)."""
    return [
        compare(
            "from_observable(from_iterable(range), block) -> counting subscriber, request(256)",
            lambda: _ours(n),
            lambda: _rxpy(n),
            repeats=repeats,
            target=0.45,
            baseline_name="reactivex.from_iterable(...).subscribe(on_next=...) (no backpressure)",
            note="the owned thread delivers straight to on_next under a lease of demand "
            "(one lock per lease), subscribed through RxPY's public subscribe (Rx's observer "
            "calls the lease), and waits for room when demand runs out; the floor line below "
            "is the same path with none of the lease's work",
        ),
        compare(
            "floor: reactivex.from_iterable(range) -> RxPY's own subscribe -> one Python call "
            "-> the same counting subscriber, no demand kept",
            lambda: _forwarding(n),
            lambda: _rxpy(n),
            repeats=repeats,
            baseline_name="reactivex.from_iterable(...).subscribe(on_next=...) (no backpressure)",
            note="reported only: what one call per element between Rx's observer and the "
            "subscriber costs, before any check; the lease above adds its work per element "
            "(the credit, the reentrancy guard, a look at the drain's counter for a request "
            "or cancel from another thread)",
        ),
        peak_memory(mem_items),
    ]
