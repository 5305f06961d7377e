"""``IterablePublisher``: a cold Publisher over an iterable, pulled as far as demand reaches."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from functools import partial
from operator import length_hint
from types import GeneratorType
from typing import Final, Generic, TypeVar, final

from reactive_streams._drain import END, INLINE, DrainPolicy, DrainSubscription, Source
from reactive_streams._subscription import OneShot, reject, require_subscriber
from reactive_streams.api import Subscriber

__all__ = ["IterablePublisher"]

T = TypeVar("T")


_CONTAINERS: Final[tuple[Iterable[object], ...]] = (
    [],
    (),
    range(0),
    range(2**64),
    "",
    "\u00e9",
    b"",
    bytearray(),
    set(),
    frozenset(),
    {},
    {}.values(),
    {}.items(),
    reversed([]),
    deque(),
)
_IN_MEMORY: Final = frozenset(type(iter(container)) for container in _CONTAINERS)
"""The iterator types of builtin containers: their elements are in memory, never slow."""


@final
class _IteratorSource(Source[T]):
    """One ``next()`` per unit of demand; ``close()`` closes a generator so ``finally`` runs."""

    __slots__ = ("_iterator", "in_memory", "poll")

    plain = True  # values() is the iterator itself: it never yields EMPTY

    def __init__(self, iterator: Iterator[T]) -> None:
        self._iterator: Iterator[T] | None = iterator
        self.in_memory = type(iterator) in _IN_MEMORY  # by what iterates, not what was given
        self.poll = partial(next, iterator, END)  # type: ignore[method-assign]

    def values(self) -> Iterator[T]:
        assert self._iterator is not None
        return self._iterator  # the drain iterates it directly: one next() per unit of demand

    def at_end(self) -> bool:
        # A builtin container's iterator knows how many elements are left: the end is
        # signalled right after the last element (§1.2), without waiting for demand to pull
        # it. Any other iterator only finds its end by a next() made for demand.
        iterator = self._iterator
        if not self.in_memory or iterator is None:
            return False
        try:
            return length_hint(iterator) == 0
        except OverflowError:  # more than sys.maxsize left (range(2**64)): not the end
            return False

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None
        close = getattr(iterator, "close", None)  # generators and closable iterators (§3.13)
        if close is not None:
            close()


@final
class IterablePublisher(Generic[T]):
    """A cold Publisher: each Subscriber iterates ``iterable`` afresh.

    The iterator is advanced once per unit of demand, on the thread that calls ``request``
    (or per ``policy``), so a generator runs only as far as the subscriber asked (§1.1, §3.10).
    A one-shot iterator or generator serves one Subscriber; a second one is rejected with
    ``on_subscribe`` then ``on_error`` (§1.9). A raising iterator becomes ``on_error`` after
    the elements it already produced (§1.4); ``None`` from it becomes ``on_error(TypeError)``.
    Cancel closes a generator, so its ``finally`` blocks run (§3.13).
    """

    __slots__ = ("__weakref__", "_iterable", "_one_shot", "_policy")

    def __init__(self, iterable: Iterable[T], *, policy: DrainPolicy = INLINE) -> None:
        if not isinstance(iterable, Iterable):
            raise TypeError(f"from_iterable() requires an iterable, got {type(iterable).__name__}")
        self._iterable = iterable
        self._one_shot = (
            OneShot("iterator or generator")
            if isinstance(iterable, Iterator | GeneratorType)
            else None
        )
        self._policy = policy

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_subscriber(subscriber)  # §1.9
        if self._one_shot is not None:
            used = self._one_shot.take()
            if used is not None:
                reject(subscriber, used)
                return
        try:
            iterator = iter(self._iterable)
        except Exception as exc:  # §1.4: a failing source becomes on_error
            reject(subscriber, exc)
            return
        DrainSubscription(
            subscriber, _IteratorSource(iterator), self._policy, name="from_iterable"
        ).start()

    def __repr__(self) -> str:
        return f"from_iterable({self._iterable!r})"
