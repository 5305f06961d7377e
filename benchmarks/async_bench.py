"""asyncio adapter benchmarks: from_async_iterable -> to_async_iterator beside a plain
``async for`` and beside aioreactive's own from_iterable -> observer (no backpressure)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from benchmarks._harness import Result, compare
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator

__all__ = ["run"]


async def _agen(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


def _ours(n: int) -> int:
    async def main() -> int:
        count = 0
        async for _ in to_async_iterator(from_async_iterable(_agen(n)), prefetch=256):
            count += 1
        return count

    return asyncio.run(main())


def _plain(n: int) -> int:
    async def main() -> int:
        count = 0
        async for _ in _agen(n):
            count += 1
        return count

    return asyncio.run(main())


def _aioreactive(n: int) -> int:
    import aioreactive as rx

    async def main() -> int:
        count = 0
        done = asyncio.Event()

        async def asend(_: int) -> None:
            nonlocal count
            count += 1

        async def aclose() -> None:
            done.set()

        async def athrow(error: Exception) -> None:
            done.set()

        observer = rx.AsyncAnonymousObserver(asend, athrow, aclose)
        await rx.from_iterable(range(n)).subscribe_async(observer)
        await done.wait()
        return count

    return asyncio.run(main())


def run(n: int = 100_000, repeats: int = 7) -> list[Result]:
    results = [
        compare(
            "from_async_iterable -> to_async_iterator",
            lambda: _ours(n),
            lambda: _plain(n),
            repeats=repeats,
            target=0.25,
            baseline_name="plain async for over the same async generator",
        )
    ]
    try:
        results.append(
            compare(
                "from_async_iterable -> to_async_iterator vs aioreactive",
                lambda: _ours(n),
                lambda: _aioreactive(n),
                repeats=repeats,
                baseline_name="aioreactive from_iterable -> observer (unbounded mailbox)",
                note="reported only: aioreactive applies no backpressure here",
            )
        )
    except ImportError:
        pass
    return results
