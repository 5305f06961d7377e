"""TCK cases for ``reactive_streams.log``: a pass-through stage that logs demand and the end.

The publisher is ``pipe(from_iterable(range(n)), log("tck"))``; the processor is ``log("tck")``
alone, an identity stage serving one subscriber (the §1.11 multi-subscriber tests answer
"unicast", as for ``rx_processor``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactive_streams import Processor, Publisher, log, pipe
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import IdentityProcessorVerification, PublisherVerification


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: the error must pass the stage (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable cannot be iterated")


class LogPublisherVerification(PublisherVerification[int]):
    """``pipe(from_iterable(range(n)), log("tck"))``: n elements through the stage."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return pipe(from_iterable(range(elements)), log("tck"))

    def create_failed_publisher(self) -> Publisher[int] | None:
        return pipe(from_iterable(_FailingIterable()), log("tck-failed"))


class LogProcessorVerification(IdentityProcessorVerification[Any]):
    """``log("tck")`` as an identity Processor; one subscriber."""

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return log("tck")

    def create_element(self, i: int) -> Any:
        return i

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return pipe(from_iterable(_FailingIterable()), log("tck-failed"))

    def max_supported_subscribers(self) -> int:
        return 1


CASES = [
    ("log", LogPublisherVerification),
    ("log as a Processor", LogProcessorVerification),
]
