"""What a publisher plugs into the drain: a :class:`Source` of elements, the ``EMPTY`` and
``END`` markers its ``poll`` returns, and :class:`QueueSink`, a subscriber of this project's own
that the drain may fill directly, with the two helpers the drain fills one with. Re-exported by
``reactive_streams._drain``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from itertools import islice, repeat, starmap, takewhile
from operator import is_, is_not
from typing import Any, Final, Generic, TypeVar, final

__all__ = ["CHUNK", "EMPTY", "END", "QueueSink", "Source", "appender", "poll_queued", "pull_chunk"]

T = TypeVar("T")


@final
class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


EMPTY: Final = _Marker("EMPTY")
"""Returned by :meth:`Source.poll`: nothing available now; the source calls ``wake()`` later."""
END: Final = _Marker("END")
"""Returned by :meth:`Source.poll`: the source is exhausted; the drain signals ``on_complete``."""


class Source(Generic[T]):
    """What a publisher plugs into the drain: a pull interface over its elements.

    Every method but ``interrupt`` is called by the drain only, serially, never under the
    drain's lock. ``poll`` is called only while the subscriber has unmet demand: a pull source
    pulls one element per call, so it is pulled exactly as far as demand reaches (§1.1).
    A queue-backed source may instead expose its ``collections.deque`` as ``queue``: the drain
    pops it directly, in rounds of at most ``until_replenish``, reports each with
    ``consumed(n)`` (queue fusion, as in Reactor) and calls ``want(n)`` when it ran dry with
    demand left; ``poll`` still serves the terminal check. A queue holds elements only:
    the source refuses ``None`` on the way in (§2.13), and the drain delivers it unchecked.
    """

    __slots__ = ()

    queue: deque[T] | None = None
    in_memory: bool = False
    """True when ``values()`` iterates elements already in memory (a list, a range): pulling
    never blocks, so the drain may copy a chunk of them into a fused sink at once."""

    @property
    def until_replenish(self) -> int:
        """A fused source's next round: elements to pop before reporting them (0: no limit)."""
        return 0

    def consumed(self, n: int) -> None:
        """A fused source's ``n`` elements were delivered (only called when ``queue`` is set)."""

    def want(self, n: int) -> None:
        """A fused source's queue ran dry with ``n`` elements of demand unmet (only called
        when ``queue`` is set): a pull source may fetch up to ``n`` more, then ``wake()``."""

    def bind(self, wake: Callable[[], None]) -> None:
        """Receive the drain's ``wake`` callable; a push source calls it when it has news."""

    def poll(self) -> T | _Marker:
        """Return the next element, ``EMPTY`` (nothing yet) or ``END``; raise to fail (§1.4)."""
        raise NotImplementedError

    def values(self) -> Iterator[T | _Marker]:
        """``poll()`` as an iterator that stops at ``END`` (the drain stops early at ``EMPTY``).

        A source backed by a plain iterator may return that iterator itself (C speed); the
        drain slices it at the demand. ``END`` is found by identity: ``iter(poll, END)`` would
        compare elements with ``==``, which a numpy array answers with an array, or an error.
        """
        return takewhile(partial(is_not, END), starmap(self.poll, repeat(())))

    def at_end(self) -> bool:
        """True when ``poll`` would return ``END`` or raise without producing an element.

        Lets the drain signal a terminal event without demand (an empty or failed queue,
        §1.2, §2.9, §2.10). A pull source that cannot know without pulling returns False.
        """
        return False

    def interrupt(self) -> None:
        """Cancel arrived while the drain (or a lease's producer) is busy: stop producing now
        if that can be done from any thread (dispose an upstream). Called on the cancelling
        thread, concurrently with the drain, so thread-safe; ``close()`` still follows."""

    def close(self) -> None:
        """Release what the source holds (close a generator, cancel upstream). Called once."""

    # -- diagnostics (reactive_streams.snapshot): any thread, read without locks ------------

    def buffered(self) -> int:
        """Elements held, not yet delivered (a snapshot)."""
        queue = self.queue
        return len(queue) if queue is not None else 0

    def asked(self) -> int | None:
        """Demand asked of an upstream in all; None for a source with no upstream."""
        return None

    def in_flight(self) -> int | None:
        """Asked of the upstream and not yet arrived; None when not known."""
        return None

    def upstream(self) -> object | None:
        """The next stage up (a Subscription), or None at the source."""
        return None


class QueueSink(Generic[T]):
    """A subscriber of this project's own that the drain may fill directly (fusion).

    Its ``sink`` deque receives what the drain would pass to ``on_next``; ``sink_filled()`` is
    called each time it goes from empty to non-empty. Terminal signals still go through
    ``on_error`` / ``on_complete``; §1.1 is the drain's accounting. A sink cancels *before* it
    clears ``sink`` on close: the drain clears it again after an append that raced the close
    (§3.13), so a closed sink never yields an element.
    """

    __slots__ = ()

    sink: deque[T]

    def sink_filled(self) -> None:
        """The drain appended to an empty ``sink``: wake whoever consumes it."""


CHUNK: Final = 1024
"""The most in-memory elements the drain copies into a sink in one go."""


def pull_chunk(values: Iterator[Any], size: int) -> tuple[list[Any], Exception | None]:
    """Up to ``size`` values in a list (C speed), and what ended them early: the iterator's
    error (§1.4) or ``TypeError`` at a ``None`` (§2.13), which is cut off with what follows."""
    chunk: list[Any] = []
    error: Exception | None = None
    try:  # list.extend keeps what came before an exception
        chunk.extend(islice(values, size))
    except Exception as exc:  # §1.4
        error = exc
    if any(map(is_, chunk, repeat(None))):  # §2.13; `is`, never an element's __eq__
        del chunk[[value is None for value in chunk].index(True) :]
        error = TypeError("§2.13: a source produced None")
    return chunk, error


def poll_queued(done: bool, queue: deque[T], error: Exception | None) -> T | _Marker:
    """``poll`` for a source whose elements wait in ``queue`` and whose end (``done``, with
    ``error`` or not) follows them (§1.4, §1.5). Pass ``done`` first: read before the queue,
    every append happened before it was set, and ``error`` before ``done``."""
    if queue:
        return queue.popleft()
    if done:
        if error is not None:
            raise error
        return END
    return EMPTY


def appender(sink: QueueSink[T]) -> Callable[[T], None]:
    """``on_next`` for a fused sink fed element-wise: append, and wake its consumer when the
    sink goes from empty to non-empty, so a slow source's first element is not held back."""
    filled = sink.sink
    filled_up = sink.sink_filled

    def append(value: T) -> None:
        filled.append(value)
        if len(filled) == 1:
            filled_up()

    return append
