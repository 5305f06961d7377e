"""Diagnostics: what each stage of a pipeline holds and asks for, read on demand.

Every stage of the project (a subscription, a sink, a processor, ``share``) answers
``scan()`` with a :class:`Scan`; :func:`snapshot` follows ``Scan.upstream`` from a sink or a
stage back to the source and prints as a table. Reading costs nothing until asked: a scan
reads the counters the stages keep anyway, without their locks (a snapshot, maybe a signal
stale). Reactor's ``Scannable`` is the model. Reading the table: docs/diagnostics.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from reactive_streams._demand import UNBOUNDED

if TYPE_CHECKING:
    from reactive_streams._source import Source

__all__ = ["Scan", "Scannable", "Snapshot", "scan_drain", "snapshot"]

_MOST_STAGES: Final = 1000  # a walk longer than this is a cycle the seen-set missed


@dataclass(frozen=True)
class Scan:
    """One stage's state, as :meth:`Scannable.scan` reads it (a snapshot, not under locks).

    Attributes:
        name: what the stage is (``from_iterable``, ``publish_on``, ``to_iterator``…).
        requested: demand asked of it by downstream and not yet delivered (``UNBOUNDED``
            once unbounded); ``None`` for a sink, which asks rather than is asked.
        asked: demand it asked of its upstream in all; ``None`` for a source.
        in_flight: asked of its upstream and not yet arrived; ``None`` when not known.
        buffered: elements it holds, received and not yet delivered.
        delivered: elements it passed downstream (to its subscriber, or to its consumer).
        cancelled: cancelled by downstream (or by a failure it reported as such).
        terminated: its terminal signal was delivered (or received, for a sink).
        subscribed: ``False`` while it waits for an upstream that never called
            ``on_subscribe``: the stage a forgotten ``subscribe`` leaves hanging.
        foreign: a stage of another library, which this project cannot scan.
        upstream: the next stage up (a :class:`Scannable`, or a foreign Subscription), or
            ``None`` at the source.
    """

    name: str
    requested: int | None = None
    asked: int | None = None
    in_flight: int | None = None
    buffered: int = 0
    delivered: int | None = None
    cancelled: bool = False
    terminated: bool = False
    subscribed: bool = True
    foreign: bool = False
    upstream: object | None = field(default=None, repr=False, compare=False)

    @property
    def state(self) -> str:
        """What the stage is doing, in a few words: the table's last column."""
        if self.foreign:
            return "another library's stage: not scanned"
        if not self.subscribed:
            return "never subscribed: its upstream never called on_subscribe"
        if self.cancelled:
            return "cancelled"
        if self.terminated:
            return f"terminated, holds {self.buffered}" if self.buffered else "terminated"
        if self.buffered and self.requested == 0:
            return f"holds {self.buffered}, no demand from downstream"
        if self.requested == 0:
            return "no demand from downstream"
        if self.in_flight and not self.buffered:
            return "waiting on upstream"
        if self.buffered:
            return f"holds {self.buffered}"
        return "running"


@runtime_checkable
class Scannable(Protocol):
    """A stage that can report its state: every stage of the project is one."""

    def scan(self) -> Scan: ...


@dataclass(frozen=True)
class Snapshot:
    """The stages of a pipeline from its source to the stage :func:`snapshot` started at.

    Iterate it for the :class:`Scan` records; ``str()`` is the table."""

    stages: tuple[Scan, ...]

    def __iter__(self) -> Iterator[Scan]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def __getitem__(self, index: int) -> Scan:
        return self.stages[index]

    def __str__(self) -> str:
        header = ("stage", "requested", "asked", "in flight", "buffered", "delivered", "state")
        rows = [header] + [
            (
                s.name,
                _count(s.requested),
                _count(s.asked),
                _count(s.in_flight),
                str(s.buffered),
                _count(s.delivered),
                s.state,
            )
            for s in self.stages
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
        lines = []
        for row in rows:
            cells = [
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=False))
            ]
            lines.append("  ".join([*cells, row[-1]]))
        return "\n".join(lines)


def _count(value: int | None) -> str:
    if value is None:
        return "-"
    return "unbounded" if value >= UNBOUNDED else str(value)


def snapshot(stage: object) -> Snapshot:
    """Scan ``stage`` and every stage upstream of it, back to the source; a :class:`Snapshot`.

    ``stage`` is a sink (``to_iterator``'s iterator…), a processor, ``share``'s publisher or
    a subscription of ours. Any thread; nothing is locked, so counts are a snapshot. A stage
    of another library ends the walk as a row of its own (``foreign``), as does a stage
    that was never subscribed.

    Raises:
        TypeError: ``stage`` has no state of its own to scan (a cold publisher such as
            ``from_iterable``: its state lives in each subscription, so pass the sink).
    """
    if not isinstance(stage, Scannable):
        raise TypeError(
            f"snapshot(): {type(stage).__name__} has no state to scan; pass the sink (the "
            "iterator, the subscriber) or a stage that subscribed: a cold publisher's state "
            "lives in each of its subscriptions"
        )
    walked: list[Scan] = []
    seen: set[int] = set()
    current: object | None = stage
    while current is not None and id(current) not in seen and len(walked) < _MOST_STAGES:
        seen.add(id(current))
        if not isinstance(current, Scannable):
            walked.append(Scan(type(current).__name__, foreign=True))
            break
        scan = current.scan()
        walked.append(scan)
        current = scan.upstream
    return Snapshot(tuple(reversed(walked)))


def scan_drain(
    name: str, source: Source[Any] | None, requested: int, delivered: int, cancelled: bool
) -> Scan:
    """A drain subscription's record: its own counts, and what its ``source`` holds and asks
    upstream; ``source`` is None once released (§3.13), and so is the upstream link."""
    if source is None:
        return Scan(
            name,
            requested=0 if cancelled else requested,
            delivered=delivered,
            cancelled=cancelled,
            terminated=not cancelled,
        )
    return Scan(
        name,
        requested=requested,
        asked=source.asked(),
        in_flight=source.in_flight(),
        buffered=source.buffered(),
        delivered=delivered,
        cancelled=cancelled,
        upstream=source.upstream(),
    )
