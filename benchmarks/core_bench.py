"""Benchmarks of the core and the iterables adapter, each beside a baseline from the same run."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks._harness import Result, compare
from reactive_streams import UNBOUNDED, Publisher, Subscription, publish_on
from reactive_streams.adapters.iterables import from_iterable, to_iterator

__all__ = ["run"]


class _Counter:
    """A minimal counting Subscriber that requests ``batch`` at a time."""

    __slots__ = ("batch", "count", "done", "mark", "subscription")

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.count = 0
        self.mark = batch
        self.done = threading.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(self.batch)

    def on_next(self, element: Any) -> None:
        self.count += 1
        if self.count == self.mark:  # the batch is used up: ask for the next one
            self.mark += self.batch
            self.subscription.request(self.batch)  # type: ignore[union-attr]

    def on_error(self, error: Exception) -> None:
        self.done.set()
        raise error

    def on_complete(self) -> None:
        self.done.set()


class _UnboundedCounter(_Counter):
    """Requests ``UNBOUNDED`` once and only counts: the same work as the RxPY baseline."""

    __slots__ = ()

    def on_next(self, element: Any) -> None:
        self.count += 1


def _ours(n: int, batch: int) -> int:
    counter = _UnboundedCounter(batch) if batch == UNBOUNDED else _Counter(batch)
    from_iterable(range(n)).subscribe(counter)
    assert counter.count == n
    return n


def _rxpy(n: int) -> int:
    import reactivex

    count = 0

    def on_next(_: Any) -> None:
        nonlocal count
        count += 1

    reactivex.from_iterable(range(n)).subscribe(on_next=on_next)
    assert count == n
    return n


def _publish_on_across_threads(n: int, prefetch: int = 256) -> int:
    # The producer (the iterator) runs on one thread, the consumer on another.
    with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
        source: Publisher[int] = from_iterable(range(n), executor=producer)
        counter = _Counter(256)
        publish_on(source, consumer, prefetch=prefetch).subscribe(counter)
        counter.done.wait()
    assert counter.count == n
    return n


def _queue_handoff(n: int) -> int:
    q: queue.Queue[object] = queue.Queue(256)
    end = object()

    def produce() -> None:
        for i in range(n):
            q.put(i)
        q.put(end)

    thread = threading.Thread(target=produce)
    thread.start()
    count = 0
    while q.get() is not end:
        count += 1
    thread.join()
    assert count == n
    return n


def executor_round_trip(rounds: int = 2000, repeats: int = 3) -> float:
    """Seconds for a task to hop from one ``ThreadPoolExecutor(1)`` to another and back (the
    best of ``repeats`` ping-pongs of ``rounds`` round trips): what each prefetch window of
    ``publish_on`` costs at least, since the consumer's request wakes the producer's executor
    and the refill wakes the consumer's, one thread at a time under the GIL."""
    with ThreadPoolExecutor(1) as first, ThreadPoolExecutor(1) as second:
        return min(_ping_pong(first, second, rounds) for _ in range(repeats))


def _ping_pong(first: ThreadPoolExecutor, second: ThreadPoolExecutor, rounds: int) -> float:
    left = rounds
    done = threading.Event()

    def there() -> None:
        second.submit(back)

    def back() -> None:
        nonlocal left
        left -= 1
        if left:
            first.submit(there)
        else:
            done.set()

    start = time.perf_counter()
    first.submit(there)
    done.wait()
    return (time.perf_counter() - start) / rounds


def _to_iterator(n: int) -> int:
    count = 0
    for _ in to_iterator(from_iterable(range(n))):
        count += 1
    return count


def _plain_for(n: int) -> int:
    count = 0
    for _ in range(n):
        count += 1
    return count


def _publish_on_line(
    n: int, prefetch: int, hop: float, repeats: int, target: float | None = None
) -> Result:
    """``publish_on`` beside ``queue.Queue``, with the floor the executor hand-offs set."""
    # The producer runs while the consumer waits (the GIL): the consumer asks for 75% at the
    # limit, and for the rest when it runs dry before any of that arrived (Replenisher.ran_dry),
    # so the producer refills the whole window at once.
    window = prefetch
    line = compare(
        "publish_on across threads (producer thread -> consumer thread)"
        + (f", prefetch={prefetch}" if prefetch != 256 else ""),
        lambda: _publish_on_across_threads(n, prefetch),
        lambda: _queue_handoff(n),
        repeats=repeats,  # thread wake-ups dominate both: the noisiest lines
        target=target,
        baseline_name="queue.Queue(256) producer/consumer, one item at a time",
    )
    line.note = ("" if target else "reported only; ") + (
        f"each window of {window} elements costs at least one executor round trip (the "
        f"request wakes the producer's executor, the refill the consumer's): "
        f"{hop * 1e6:.0f} us in this run (two ThreadPoolExecutor(1) in ping-pong), so "
        f"{hop / window * 1e9:.0f} of our {1e9 / line.ours:.0f} ns per element"
    )
    return line


def run(n: int = 1_000_000, repeats: int = 5) -> list[Result]:
    """All core benchmarks; ``n`` elements per run."""
    results = []
    try:
        import reactivex  # noqa: F401

        rx_available = True
    except ImportError:
        rx_available = False
    rx = (lambda: _rxpy(n)) if rx_available else None
    results.append(
        compare(
            "from_iterable -> counting subscriber, request(UNBOUNDED)",
            lambda: _ours(n, UNBOUNDED),
            rx,
            repeats=repeats,
            target=1.0,
            baseline_name="reactivex.from_iterable(...).subscribe(on_next=...) (no backpressure)",
        )
    )
    results.append(
        compare(
            "from_iterable -> counting subscriber, request(256) batches",
            lambda: _ours(n, 256),
            rx,
            repeats=repeats,
            target=1.0,
            baseline_name="reactivex.from_iterable(...).subscribe(on_next=...) (no backpressure)",
        )
    )
    small = max(n // 10, 1)
    results.append(
        compare(
            "from_iterable -> counting subscriber, request(1) stop-and-wait",
            lambda: _ours(small, 1),
            (lambda: _rxpy(small)) if rx_available else None,
            repeats=repeats,
            baseline_name="reactivex.from_iterable(...).subscribe(on_next=...) (no backpressure)",
            note="reported only: one request per element",
        )
    )
    hop = executor_round_trip()  # measured beside the lines it explains
    results.append(_publish_on_line(n // 2, 256, hop, repeats + 2, target=5.0))
    results.append(_publish_on_line(n // 2, 1024, hop, max(repeats - 2, 2)))
    results.append(
        compare(
            "to_iterator(from_iterable(range)) in a for loop",
            lambda: _to_iterator(n),
            lambda: _plain_for(n),
            repeats=repeats,
            baseline_name="plain for over range",
            note="reported only",
        )
    )
    return results
