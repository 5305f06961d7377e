"""RxPY inside backpressured pipelines (reactivex 4.x to 6.x).

1. A hot RxPY ``Subject`` fed by a fast thread -> ``from_observable(overflow="latest",
   buffer_size=1)`` -> a slow asyncio consumer (``to_async_iterator``): each time it looks it
   gets the newest price; older prices are dropped and counted, never queued.
2. A generator -> ``rx_processor(ops.map, ops.filter)`` -> ``publish_on`` -> ``async for``: the
   operator chain runs inside the pipeline and the generator is pulled only as far as the
   bounded windows reach.
3. A Publisher -> ``to_observable`` -> an RxPY chain ending in ``take(3)``: Rx's own disposal
   cancels the publisher, whose generator is closed.

Run it with ``python docs/examples/rx_pipeline.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from reactivex import operators as ops
from reactivex.subject import Subject

from reactive_streams import publish_on
from reactive_streams.adapters.async_iterables import to_async_iterator
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.adapters.rx import from_observable, rx_processor, to_observable

TICKS = 100_000


async def hot_subject_latest_slow_consumer() -> None:
    prices: Subject[int] = Subject()
    latest = from_observable(prices, overflow="latest", buffer_size=1)

    def feed() -> None:  # a fast producer on its own thread: it never waits
        for price in range(TICKS):
            prices.on_next(price)
        prices.on_completed()

    seen: list[int] = []
    async with to_async_iterator(latest, prefetch=1) as stream:  # subscribed from here on
        feeding = asyncio.create_task(asyncio.to_thread(feed))
        async for price in stream:
            seen.append(price)
            await asyncio.sleep(0.001)  # a slow consumer
        await feeding
    print(
        f"slow consumer saw {len(seen)} of {TICKS} prices, the last one {seen[-1]}; "
        f"dropped {latest.dropped}; seen + dropped == sent: {len(seen) + latest.dropped == TICKS}"
    )


async def generator_rx_processor_async_for() -> None:
    pulled = 0

    def readings() -> Iterator[int]:
        nonlocal pulled
        for i in range(10_000):
            pulled += 1
            yield i

    stage = rx_processor(ops.map(lambda x: x * x), ops.filter(lambda x: x % 3 == 0), buffer_size=16)
    with ThreadPoolExecutor(1, thread_name_prefix="rx-stage") as pool:
        from_iterable(readings()).subscribe(stage)
        total = 0
        consumed = 0
        most_ahead = 0
        async for square in to_async_iterator(publish_on(stage, pool, prefetch=16), prefetch=16):
            total += square
            consumed += 1
            most_ahead = max(most_ahead, pulled - consumed * 3)  # ~1 in 3 inputs kept
    print(f"sum of squares divisible by 3 below 10000: {total}")
    print(  # three windows of 16 outputs, each output ~3 inputs: the generator never runs away
        f"the generator ran at most {most_ahead} inputs ahead of the consumer's need"
    )


def publisher_to_rx_take() -> None:
    closed = False

    def counter() -> Iterator[int]:
        nonlocal closed
        try:
            yield from itertools.count()
        finally:
            closed = True

    def square(x: int) -> int:
        return x * x

    out: list[int] = []
    to_observable(from_iterable(counter()), prefetch=8).pipe(
        ops.map(square), ops.take(3)
    ).subscribe(out.append)
    print(f"to_observable + take(3): {out}; the infinite generator was closed: {closed}")


async def main() -> None:
    await hot_subject_latest_slow_consumer()
    await generator_rx_processor_async_for()
    publisher_to_rx_take()


if __name__ == "__main__":
    asyncio.run(main(), debug=True)
