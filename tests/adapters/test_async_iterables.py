"""adapters/async_iterables.py: the public module, both directions together."""

from __future__ import annotations

import asyncio
import runpy
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reactive_streams import publish_on
from reactive_streams.adapters import async_iterables
from reactive_streams.adapters._async_from import AsyncIterablePublisher
from reactive_streams.adapters._async_to import AsyncPublisherIterator
from reactive_streams.adapters.async_iterables import from_async_iterable, to_async_iterator
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.testing import Incomparable

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "async_pipeline.py"


# -- the public names --------------------------------------------------------------------------


async def _numbers() -> AsyncIterator[int]:
    yield 1


class TestPublicNames:
    """What reactive_streams.adapters.async_iterables exports."""

    def test_the_public_names_are_the_private_modules_own(self) -> None:
        """Both directions import from the public module, which re-exports the classes and
        functions of _async_from and _async_to (the same objects)."""
        assert async_iterables.__all__ == [
            "AsyncIterablePublisher",
            "AsyncPublisherIterator",
            "from_async_iterable",
            "to_async_iterator",
        ]
        assert async_iterables.AsyncIterablePublisher is AsyncIterablePublisher
        assert async_iterables.AsyncPublisherIterator is AsyncPublisherIterator
        assert isinstance(from_async_iterable(_numbers()), AsyncIterablePublisher)
        assert isinstance(to_async_iterator(from_iterable([1])), AsyncPublisherIterator)


# -- pipelines and the example -----------------------------------------------------------------


class TestPipelines:
    """Both directions in one pipeline, with other stages; the docs' example."""

    @pytest.mark.asyncio
    async def test_pipeline_generator_publish_on_async_for(self) -> None:
        """generator -> from_iterable -> publish_on -> to_async_iterator: all in order, bounded."""
        asyncio.get_running_loop().set_debug(True)
        produced = 0
        consumed = 0
        max_ahead = 0
        lock = threading.Lock()

        def numbers() -> Iterator[int]:
            nonlocal produced, max_ahead
            for i in range(3000):
                with lock:
                    produced += 1
                    max_ahead = max(max_ahead, produced - consumed)
                yield i

        got: list[int] = []
        with ThreadPoolExecutor(1, thread_name_prefix="pipeline") as pool:
            stage = publish_on(from_iterable(numbers()), pool, prefetch=16)
            async for x in to_async_iterator(stage, prefetch=32):
                with lock:
                    consumed += 1
                got.append(x)
                if x % 100 == 0:
                    await asyncio.sleep(0.001)  # a slow consumer, without blocking the loop
        assert got == list(range(3000))
        # publish_on holds at most 16, the iterator at most 32, plus one in each hand-off.
        assert max_ahead <= 16 + 32 + 2

    @pytest.mark.asyncio
    async def test_pipeline_async_generator_to_async_iterator_same_loop(self) -> None:
        """async generator -> from_async_iterable -> to_async_iterator, on one loop, debug mode."""
        asyncio.get_running_loop().set_debug(True)
        ahead: list[int] = []
        consumed = 0

        async def gen() -> AsyncIterator[int]:
            for i in range(500):
                ahead.append(i - consumed)
                yield i

        got = []
        async for x in to_async_iterator(from_async_iterable(gen()), prefetch=10):
            got.append(x)
            consumed += 1
        assert got == list(range(500))
        assert max(ahead) <= 10

    @pytest.mark.asyncio
    async def test_elements_that_refuse_comparison_pass_from_and_to_async(self) -> None:
        """Elements whose == raises (numpy arrays, DataFrames): the pump's queue, the drain and
        the iterator's window pass them whole and in order."""

        async def gen() -> AsyncIterator[Incomparable]:
            for i in range(300):
                if i % 7 == 0:
                    await asyncio.sleep(0)
                yield Incomparable(i)

        got = [x.value async for x in to_async_iterator(from_async_iterable(gen()), prefetch=16)]
        assert got == list(range(300))

    def test_example_runs(self, capsys: pytest.CaptureFixture[str]) -> None:
        """docs/examples/async_pipeline.py runs to completion and prints its summary."""
        runpy.run_path(str(EXAMPLE), run_name="__main__")
        out = capsys.readouterr().out
        assert "sum of squares of even numbers below 10000: 166616670000" in out
        assert "aioreactive source -> 10 elements" in out
