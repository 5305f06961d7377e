"""``pipe``: a Publisher wired through Processors in one call, instead of one ``subscribe`` a
stage (which, when one is forgotten, leaves the consumer waiting for ever with no hint).
"""

from __future__ import annotations

import reprlib
from typing import Any, Final, TypeVar, overload

from reactive_streams.api import Processor, Publisher

__all__ = ["pipe"]

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
E = TypeVar("E")
F = TypeVar("F")
G = TypeVar("G")

_SUBSCRIBER: Final = ("on_subscribe", "on_next", "on_error", "on_complete")
_REPR: Final = reprlib.Repr()
_REPR.maxother = 80  # what the caller passed, cut to a line


@overload
def pipe(source: Publisher[A], /) -> Publisher[A]: ...
@overload
def pipe(source: Publisher[A], s1: Processor[A, B], /) -> Publisher[B]: ...
@overload
def pipe(source: Publisher[A], s1: Processor[A, B], s2: Processor[B, C], /) -> Publisher[C]: ...
@overload
def pipe(
    source: Publisher[A], s1: Processor[A, B], s2: Processor[B, C], s3: Processor[C, D], /
) -> Publisher[D]: ...
@overload
def pipe(
    source: Publisher[A],
    s1: Processor[A, B],
    s2: Processor[B, C],
    s3: Processor[C, D],
    s4: Processor[D, E],
    /,
) -> Publisher[E]: ...
@overload
def pipe(
    source: Publisher[A],
    s1: Processor[A, B],
    s2: Processor[B, C],
    s3: Processor[C, D],
    s4: Processor[D, E],
    s5: Processor[E, F],
    /,
) -> Publisher[F]: ...
@overload
def pipe(
    source: Publisher[A],
    s1: Processor[A, B],
    s2: Processor[B, C],
    s3: Processor[C, D],
    s4: Processor[D, E],
    s5: Processor[E, F],
    s6: Processor[F, G],
    /,
) -> Publisher[G]: ...
@overload
def pipe(  # seven stages or more: the element types are not followed
    source: Publisher[Any],
    s1: Processor[Any, Any],
    s2: Processor[Any, Any],
    s3: Processor[Any, Any],
    s4: Processor[Any, Any],
    s5: Processor[Any, Any],
    s6: Processor[Any, Any],
    s7: Processor[Any, Any],
    /,
    *more: Processor[Any, Any],
) -> Publisher[Any]: ...


def pipe(source: Publisher[Any], /, *stages: Processor[Any, Any]) -> Publisher[Any]:
    """Subscribe each stage to the one before it, and return the last (or ``source``).

    The wiring goes from the sink end: the last stage is subscribed to the one before it
    first, and ``source`` to the first stage last. So every stage has its downstream before
    its upstream can signal it, and a synchronous source (``from_iterable``) is subscribed
    only once the chain exists. Demand flows once the returned Publisher has a subscriber
    (a buffering stage, ``rx_processor``, may take what fits its buffer before). All of it
    runs on the calling thread, inside the stages' ``subscribe`` and ``on_subscribe``.
    Stages are numbered from 1, the source being 0, as the arguments are. A stage already
    subscribed to another upstream keeps that one and cancels ``source``'s (§2.5); a unicast
    stage that has a subscriber refuses the next with ``on_error`` (§1.11).

    Raises:
        TypeError: ``source`` is not a Publisher, a stage is not a Processor (§1.9, §2.13:
            refused before anything is subscribed), or one object comes twice (a cycle).

    Example:
        >>> from reactive_streams.adapters.iterables import from_iterable, to_iterator
        >>> from reactive_streams.adapters.rx import rx_processor
        >>> from reactivex import operators as ops
        >>> tens = pipe(from_iterable(range(4)), rx_processor(ops.map(lambda x: x * 10)))
        >>> list(to_iterator(tens))
        [0, 10, 20, 30]
    """
    if source is None or not callable(getattr(source, "subscribe", None)):  # §1.9, early
        raise TypeError(f"pipe(): the source is not a Publisher: {_lacks(source, ['subscribe'])}")
    seen = {id(source): 0}
    for position, stage in enumerate(stages, 1):
        missing = [name for name in (*_SUBSCRIBER, "subscribe") if not _has(stage, name)]
        if stage is None or missing:
            raise TypeError(
                f"pipe(): stage {position} is not a Processor: {_lacks(stage, missing)}"
            )
        earlier = seen.setdefault(id(stage), position)
        if earlier != position:  # a cycle: the stage would be its own upstream (§2.5)
            what = "the source" if earlier == 0 else f"stage {earlier}"
            raise TypeError(f"pipe(): stage {position} is {what} again: {_REPR.repr(stage)}")
    chain: list[Publisher[Any]] = [source, *stages]
    for position in range(len(stages), 0, -1):  # from the sink end, the source last
        upstream, stage = chain[position - 1], stages[position - 1]
        try:
            upstream.subscribe(stage)  # §1.9: must return normally; if not, say where
        except Exception as exc:
            what = "the source" if position == 1 else f"stage {position - 1}"
            exc.add_note(f"pipe(): raised by {what}'s subscribe(stage {position})")
            raise
    return chain[-1]


def _has(stage: object, name: str) -> bool:
    return callable(getattr(stage, name, None))


def _lacks(got: object, missing: list[str]) -> str:
    if got is None:
        return "got None"
    return (
        f"got {_REPR.repr(got)} (type {type(got).__qualname__}), which lacks a callable "
        f"{', '.join(missing)}"
    )
