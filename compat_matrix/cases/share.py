"""TCK cases for ``reactive_streams.share`` (one upstream subscription, many subscribers).

``share(from_iterable(range(n)), buffer_size=8)``, with the default ``min_subscribers=1``: the
first subscriber connects, and the subscribers the multi-subscriber tests add next join at the
oldest element still held, so the optional §1.11 tests run (a window of 8 holds the 5 elements
the one-by-one test spreads over three subscribers; the longer tests replenish). Then the same
with an upstream that emits on an executor's threads. The failed publisher shares an iterable
whose ``__iter__`` raises: every subscriber gets its ``on_error``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from compat_matrix.cases.iterables import FromIterableVerification
from reactive_streams import Publisher, share
from reactive_streams.adapters.iterables import from_iterable

_EXECUTOR = ThreadPoolExecutor(4, thread_name_prefix="tck-share")


class ShareVerification(FromIterableVerification):
    """``share(from_iterable(range(n)), buffer_size=8)``: upstream pulled inline."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return share(from_iterable(range(elements)), buffer_size=8)

    def create_failed_publisher(self) -> Publisher[int] | None:
        failed = super().create_failed_publisher()
        assert failed is not None
        return share(failed)


class ShareOnExecutorVerification(ShareVerification):
    """``share(from_iterable(range(n), executor=...), buffer_size=8)``: the elements come
    on executor threads, while the subscribers request from the test's."""

    def create_publisher(self, elements: int) -> Publisher[int]:
        return share(from_iterable(range(elements), executor=_EXECUTOR), buffer_size=8)


CASES = [
    ("share", ShareVerification),
    ("share(executor)", ShareOnExecutorVerification),
]
