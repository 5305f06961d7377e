"""The main job's ``--enrich``: each event gets a user ``segment`` from a local service,
called from inside the Spark executors with ``map_partitions`` and ``map_async``.

The driver starts :class:`~reactive_streams.spark._service.Service` on 127.0.0.1 (reachable
from ``local`` and ``local-cluster`` workers on the same machine); every task runs
``map_async(call, concurrency=N)`` over its rows, so at most N calls per task are in flight.
The service's ``max_in_flight`` is checked against N x the task slots of the master. The
rows that reach the driver are counted per segment (:class:`Segments`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any, Final

from reactive_streams.spark._service import Service, fetch

__all__ = ["LATENCY", "SEGMENTS", "Enrich", "Segments", "segment_of", "task_slots"]

SEGMENTS: Final = ("new", "regular", "loyal")
LATENCY: Final = 0.01
"""Seconds the service takes to answer a call (an I/O-bound remote API)."""
_LOCAL: Final = re.compile(r"local(?:\[(\*|\d+)(?:,\d+)?\])?")
_CLUSTER: Final = re.compile(r"local-cluster\[(\d+),(\d+),\d+\]")


def task_slots(master: str) -> int | None:
    """Tasks Spark runs at once under ``master``: ``local`` 1, ``local[n]`` and
    ``local[n,f]`` n, ``local[*]`` the driver's CPUs, ``local-cluster[e,c,m]`` e x c (one CPU
    a task); None for a master whose workers may be on other machines (no loopback there)."""
    if match := _LOCAL.fullmatch(master):
        slots = match.group(1) or "1"
        return (os.cpu_count() or 1) if slots == "*" else int(slots)
    if match := _CLUSTER.fullmatch(master):
        return int(match.group(1)) * int(match.group(2))
    return None


def segment_of(answer: bytes) -> str:
    """The segment the service's answer (the user id, echoed) puts the user in."""
    return SEGMENTS[int(answer) % len(SEGMENTS)]


async def _call(port: int, row: Any) -> tuple[Any, ...]:
    """One event -> the event and its segment (the worker's loop, one call per row)."""
    return (*row, segment_of(await fetch(port, f"/echo?{row.user}")))


def _stages(port: int, concurrency: int) -> list[Any]:
    """Built on the worker for each task: the one stage that calls the service."""
    from reactive_streams import map_async

    return [map_async(functools.partial(_call, port), concurrency=concurrency)]


class Segments:
    """Rows per segment among those the read emitted: a ``size`` function for the job's
    :class:`~reactive_streams.spark._meter.Metered` that counts before it sizes. Its calls
    are the read's serial ``on_next`` (§1.3), so the counts are owned by them."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.counts: dict[str, int] = {}

    def sized(self, size: Callable[[Any], int]) -> Callable[[Any], int]:
        counts = self.counts

        def count_row(row: Any) -> int:
            counts[row.segment] = counts.get(row.segment, 0) + 1  # owned: serial on_next
            return size(row)

        def count_batch(batch: Any) -> int:
            import pyarrow.compute as pc

            for entry in pc.value_counts(batch.column("segment")).to_pylist():
                name, n = entry["values"], entry["counts"]
                counts[name] = counts.get(name, 0) + n  # owned: serial on_next
            return size(batch)

        return count_row if self.mode == "rows" else count_batch


class Enrich:
    """The service, the enriched DataFrame and the summary lines of one ``--enrich`` run.
    :meth:`start` and :meth:`stop` on the job's thread; the service serves on its own."""

    def __init__(self, concurrency: int, slots: int, mode: str, latency: float = LATENCY):
        self.concurrency = concurrency
        self.slots = slots
        self.service = Service(latency=latency)
        self.segments = Segments(mode)

    def start(self) -> Enrich:
        self.service.start()
        return self

    def stop(self) -> None:
        self.service.stop()

    @property
    def bound(self) -> int:
        """The most calls the service may see at once: ``concurrency`` per task, per slot."""
        return self.concurrency * self.slots

    def frame(self, events: Any) -> Any:
        """``events`` with a ``segment`` column, computed in the executors."""
        from pyspark.sql.types import StringType, StructField, StructType

        from reactive_streams.spark import map_partitions

        schema = StructType([*events.schema.fields, StructField("segment", StringType())])
        stages = functools.partial(_stages, self.service.port, self.concurrency)
        return map_partitions(events, stages, schema)

    def held(self) -> bool:
        return self.service.stats()["max_in_flight"] <= self.bound

    def lines(self, master: str) -> list[str]:
        """The summary's lines: the calls against their bound, and the rows per segment."""
        stats = self.service.stats()
        seen = ", ".join(f"{name} {self.segments.counts.get(name, 0):,}" for name in SEGMENTS)
        return [
            f"enrich calls  {stats['echo']:,} to the service ({self.service.latency * 1000:g} ms "
            f"each), max {stats['max_in_flight']:,} at once, bound {self.bound:,} "
            f"(--concurrency {self.concurrency} x {self.slots} task slots of {master}): "
            + ("call bound held" if self.held() else "CALL BOUND EXCEEDED"),
            f"segments      {seen} (rows read, by the column the executors added)",
        ]
