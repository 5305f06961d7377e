"""The main job's second consumer: running statistics of the events' amounts, row by row.

It shares the read with the window pipeline (``share(..., min_subscribers=2)``) and does more
per row (exact moments per kind, streaming quantiles, distinct users, a sample), so it is the
slower one and paces the read. It runs on a thread of its own over ``to_iterator``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, final

__all__ = ["AmountStats", "P2Quantile", "StatsResult", "consume"]

_END: Final[Any] = object()
PROFILE: Final = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
"""The quantiles of the amount profile kept overall and per kind: deciles, p95, p99."""
_REPORT_EVERY: Final = 256
"""Rows between two reports of the consumer's count to the meter (never per row)."""


@final
class P2Quantile:
    """The P² streaming estimate of one quantile (Jain and Chlamtac, 1985): five markers,
    constant memory, no sample kept. Owned by one thread."""

    __slots__ = ("_count", "_desired", "_heights", "_increments", "_positions", "p")

    def __init__(self, p: float) -> None:
        if not 0 < p < 1:
            raise ValueError(f"p must be in (0, 1), got {p!r}")
        self.p = p
        self._count = 0
        self._heights: list[float] = []
        self._positions = [1.0, 2.0, 3.0, 4.0, 5.0]
        self._desired = [1.0, 1 + 2 * p, 1 + 4 * p, 3 + 2 * p, 5.0]
        self._increments = [0.0, p / 2, p, (1 + p) / 2, 1.0]

    def add(self, x: float) -> None:
        self._count += 1
        q = self._heights
        if self._count <= 5:
            q.append(x)
            if self._count == 5:
                q.sort()
            return
        if x < q[0]:
            q[0] = x
            k = 0
        elif x >= q[4]:
            q[4] = max(q[4], x)
            k = 3
        else:
            k = 0
            while x >= q[k + 1]:
                k += 1
        n, want = self._positions, self._desired
        for i in range(k + 1, 5):
            n[i] += 1
        for i, step in enumerate(self._increments):
            want[i] += step
        for i in (1, 2, 3):
            d = want[i] - n[i]
            if (d >= 1 and n[i + 1] - n[i] > 1) or (d <= -1 and n[i - 1] - n[i] < -1):
                s = 1 if d > 0 else -1
                h = q[i] + s / (n[i + 1] - n[i - 1]) * (
                    (n[i] - n[i - 1] + s) * (q[i + 1] - q[i]) / (n[i + 1] - n[i])
                    + (n[i + 1] - n[i] - s) * (q[i] - q[i - 1]) / (n[i] - n[i - 1])
                )
                if not q[i - 1] < h < q[i + 1]:  # the parabola overshoots: linear
                    h = q[i] + s * (q[i + s] - q[i]) / (n[i + s] - n[i])
                q[i] = h
                n[i] += s

    def value(self) -> float:
        """The estimate (exact for five values or fewer); NaN before any."""
        q = self._heights
        if not q:
            return math.nan
        if self._count < 5:
            ordered = sorted(q)
            return ordered[min(len(ordered) - 1, int(self.p * len(ordered)))]
        return q[2]


@final
class AmountStats:
    """Per kind of event: count, mean, standard deviation, min and max of the amount
    (Welford's update, exact) and its quantile profile (:data:`PROFILE`, by P²), and the
    profile of all amounts; distinct users; a uniform sample of ``sample_size`` events
    (reservoir, seeded). About 25 P² updates a row: the main job's slower consumer.
    Owned by the consumer's thread."""

    def __init__(self, sample_size: int = 10, seed: int = 7) -> None:
        self.rows = 0
        self.moments: dict[str, list[float]] = {}  # kind -> [n, mean, m2, min, max]
        self.quantiles = tuple(P2Quantile(p) for p in PROFILE)
        self.by_kind: dict[str, tuple[P2Quantile, ...]] = {}
        self.users: set[int] = set()
        self.sample: list[tuple[int, str, float]] = []
        self._sample_size = sample_size
        self._random = random.Random(seed)

    def add(self, event_id: int, user: int, payload: str) -> None:
        """One event: ``payload`` is ``"<kind>:<amount>"`` (the amount may hold commas)."""
        kind, _, text = payload.partition(":")
        amount = float(text.replace(",", ""))
        self.rows += 1
        m = self.moments.get(kind)
        if m is None:
            self.moments[kind] = [1.0, amount, 0.0, amount, amount]
        else:
            m[0] += 1
            delta = amount - m[1]
            m[1] += delta / m[0]
            m[2] += delta * (amount - m[1])
            if amount < m[3]:
                m[3] = amount
            elif amount > m[4]:
                m[4] = amount
        for quantile in self.quantiles:
            quantile.add(amount)
        profile = self.by_kind.get(kind)
        if profile is None:
            profile = self.by_kind[kind] = tuple(P2Quantile(p) for p in PROFILE)
        for quantile in profile:
            quantile.add(amount)
        self.users.add(user)
        if len(self.sample) < self._sample_size:
            self.sample.append((event_id, kind, amount))
        else:
            slot = self._random.randrange(self.rows)
            if slot < self._sample_size:
                self.sample[slot] = (event_id, kind, amount)

    def add_batch(self, batch: Any) -> None:
        """The rows of an Arrow record batch (``id``, ``user``, ``payload`` columns)."""
        add = self.add
        columns = (batch.column(name).to_pylist() for name in ("id", "user", "payload"))
        for event_id, user, payload in zip(*columns, strict=True):
            add(event_id, user, payload)

    def describe(self) -> str:
        """One line: the quantiles, distinct users and the buy amounts' mean and deviation."""
        value = {q.p: q.value() for q in self.quantiles}
        p50, p90, p99 = value[0.5], value[0.9], value[0.99]
        buys = self.moments.get("buy")
        buy = "no buys"
        if buys is not None and buys[0] > 1:
            std = math.sqrt(buys[2] / (buys[0] - 1))
            buy = f"buy amount mean {buys[1]:.2f} sd {std:.2f}"
        return (
            f"amount p50 {p50:.2f} p90 {p90:.2f} p99 {p99:.2f}, {buy}, "
            f"{len(self.users):,} distinct users"
        )


@dataclass(frozen=True)
class StatsResult:
    """What the statistics consumer did: rows taken, seconds spent waiting for them."""

    rows: int
    waited: float
    stats: AmountStats


def consume(
    elements: Iterator[Any], mode: str, report: Any, stats: AmountStats | None = None
) -> StatsResult:
    """Take every element of ``elements`` (rows, or Arrow batches) into ``stats``, timing
    the waits for input; ``report(rows)`` gets the running count every few hundred rows
    (per batch in arrow mode). Runs on the consumer's own thread."""
    stats = stats if stats is not None else AmountStats()
    clock = time.perf_counter
    waited = 0.0
    rows = reported = 0
    add, add_batch = stats.add, stats.add_batch
    while True:
        start = clock()
        element = next(elements, _END)
        waited += clock() - start
        if element is _END:
            break
        if mode == "rows":
            add(element.id, element.user, element.payload)
            rows += 1
        else:
            add_batch(element)
            rows += element.num_rows
        if rows - reported >= _REPORT_EVERY:
            report(rows)
            reported = rows
    report(rows)
    return StatsResult(rows, waited, stats)
