"""Async pipelines that mix libraries, every hop backpressured.

1. A plain generator, pulled on a worker thread (``from_iterable`` + ``publish_on``), consumed
   with ``async for`` (``to_async_iterator``): the generator never runs more than the two
   bounded windows (16 + 32 elements) ahead of the coroutine.
2. An aioreactive source that awaits its observer, bridged with ``from_async_observable`` and
   consumed with ``async for``: each ``asend`` waits for demand.
3. A Publisher turned into an aioreactive ``AsyncObservable`` (``to_async_observable``), whose
   slow observer slows the producing async generator.

Run it with ``python docs/examples/async_pipeline.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import aioreactive as rx

from reactive_streams import publish_on
from reactive_streams.adapters.aioreactive import from_async_observable, to_async_observable
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.adapters.iterables import from_iterable


def even_numbers(below: int) -> Iterator[int]:
    """A blocking-style generator: it runs on the pool thread, never on the event loop."""
    for i in range(below):
        if i % 2 == 0:
            yield i


async def generator_to_async_for() -> None:
    with ThreadPoolExecutor(1, thread_name_prefix="producer") as pool:
        numbers = publish_on(from_iterable(even_numbers(10_000)), pool, prefetch=16)
        total = 0
        async for n in to_async_iterator(numbers, prefetch=32):
            total += n * n
    print(f"sum of squares of even numbers below 10000: {total}")


async def ticks(count: int) -> AsyncIterator[int]:
    for i in range(count):
        await asyncio.sleep(0)  # some asynchronous work per element
        yield i


async def aioreactive_to_async_for() -> None:
    # rx.from_async_iterable awaits its observer's asend, so demand paces it. (rx.from_iterable
    # would not: it posts everything to an unbounded mailbox; see docs/adapters.md.)
    source = rx.from_async_iterable(ticks(10))
    received = [x async for x in to_async_iterator(from_async_observable(source), prefetch=4)]
    print(f"aioreactive source -> {len(received)} elements: {received}")


async def publisher_to_aioreactive() -> None:
    produced = 0

    async def readings() -> AsyncIterator[int]:
        nonlocal produced
        for i in range(100):
            produced += 1
            yield i

    sent: list[int] = []
    most_ahead = 0
    done = asyncio.Event()

    async def asend(x: int) -> None:
        nonlocal most_ahead
        sent.append(x)
        most_ahead = max(most_ahead, produced - len(sent))
        await asyncio.sleep(0.0005)  # a slow observer

    async def aclose() -> None:
        done.set()

    observable = to_async_observable(from_async_iterable(readings()), prefetch=8)
    subscription = await observable.subscribe_async(rx.AsyncAnonymousObserver(asend, None, aclose))
    await done.wait()
    await subscription.dispose_async()
    print(f"{len(sent)} readings sent to a slow observer, at most {most_ahead} produced ahead")


async def main() -> None:
    await generator_to_async_for()
    await aioreactive_to_async_for()
    await publisher_to_aioreactive()


if __name__ == "__main__":
    asyncio.run(main(), debug=True)
