"""A pipeline written in a few lines, typed end to end (``mypy --strict`` checks this file).

1. ``pipe``: a generator -> two ``rx_processor`` stages -> ``to_iterator`` with a ``timeout``:
   mypy follows the element type from ``int`` to ``str`` through the operators.
2. ``retry``: a cold source whose first two reads fail (a dropped connection, say) is
   subscribed again, with a doubling backoff; the consumer sees one clean stream.
3. ``timeout``: a source that goes silent ends the loop with ``TimeoutError``, and the source
   is cancelled (its generator closed) instead of blocking the consumer for ever.

Run it with ``python docs/examples/typed_pipeline.py``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from reactivex import operators as ops

from reactive_streams import Publisher, pipe, retry
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.adapters.rx import rx_processor


def even(n: int) -> bool:
    return n % 2 == 0


def label(n: int) -> str:
    return f"#{n}"


def typed_stages() -> list[str]:
    labels: Publisher[str] = pipe(
        from_iterable(range(10)),
        rx_processor(ops.filter(even)),
        rx_processor(ops.map(label)),
    )
    with to_iterator(labels, prefetch=4, timeout=30.0) as it:  # each next() waits 30 s at most
        return list(it)


class FlakyReads:
    """A cold source: every subscription iterates afresh; the first two reads fail."""

    def __init__(self) -> None:
        self.reads = itertools.count(1)

    def __iter__(self) -> Iterator[int]:
        if next(self.reads) <= 2:
            raise ConnectionError("transient: the connection dropped")
        return iter(range(5))


def retried() -> list[int]:
    source = retry(from_iterable(FlakyReads()), attempts=3, backoff=0.01)  # 0.01 s, then 0.02 s
    return list(to_iterator(source, timeout=30.0))


def going_silent(resume: threading.Event, closed: threading.Event) -> Iterator[int]:
    try:
        yield 1
        yield 2
        resume.wait(30)  # silent: no element, no end (until the example lets it go on)
        yield 3  # never delivered: the timeout cancelled the stream meanwhile
    finally:
        closed.set()  # the cancel closes the generator: its finally runs


def timed_out() -> tuple[list[int], str, bool]:
    resume, closed = threading.Event(), threading.Event()
    got: list[int] = []
    with ThreadPoolExecutor(1) as pool:  # the generator runs on the pool's thread
        source = from_iterable(going_silent(resume, closed), executor=pool)
        try:
            for n in to_iterator(source, timeout=0.5):
                got.append(n)
        except TimeoutError as exc:
            message = str(exc)
        else:
            raise AssertionError("the silent source never timed out")
        resume.set()  # the generator's thread returns from its wait and sees the cancel
    return got, message, closed.wait(30)


def main() -> None:
    print("pipe:", typed_stages())  # ['#0', '#2', '#4', '#6', '#8']
    print("retry:", retried())  # [0, 1, 2, 3, 4]
    got, message, closed = timed_out()
    print("timeout:", got, "|", message, "| generator closed:", closed)


if __name__ == "__main__":
    main()
