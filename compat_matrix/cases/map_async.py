"""TCK cases for ``reactive_streams.map_async``: awaits an async function per element.

The publisher is ``pipe(from_iterable(range(n)), map_async(identity, concurrency=4))``; the
processor is ``map_async(identity, concurrency=4)`` alone, an identity stage serving one
subscriber (the §1.11 multi-subscriber tests answer "unicast", as for ``log``). The calls run
on the process's shared loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactive_streams import Processor, Publisher, map_async, pipe
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import IdentityProcessorVerification, PublisherVerification


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: the error must pass the stage (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable cannot be iterated")


async def identity(element: Any) -> Any:
    """The stage's function: each element as it came, after one turn of the loop."""
    return element


class MapAsyncPublisherVerification(PublisherVerification[int]):
    """``pipe(from_iterable(range(n)), map_async(identity, concurrency=4))``."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return pipe(from_iterable(range(elements)), map_async(identity, concurrency=4))

    def create_failed_publisher(self) -> Publisher[int] | None:
        return pipe(from_iterable(_FailingIterable()), map_async(identity, concurrency=4))


class MapAsyncProcessorVerification(IdentityProcessorVerification[Any]):
    """``map_async(identity, concurrency=4)`` as an identity Processor; one subscriber."""

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return map_async(identity, concurrency=4)

    def create_element(self, i: int) -> Any:
        return i

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return pipe(from_iterable(_FailingIterable()), map_async(identity, concurrency=4))

    def max_supported_subscribers(self) -> int:
        return 1


CASES = [
    ("map_async", MapAsyncPublisherVerification),
    ("map_async as a Processor", MapAsyncProcessorVerification),
]
