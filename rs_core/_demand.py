"""Demand arithmetic: the only place in the project where demand is added, consumed or checked.

Pure functions over ints (locking is the drain's job), modelled on reactor-core's
``Operators.addCap`` / ``produced`` / ``validate``. Python ints never overflow, so
saturation at ``UNBOUNDED`` is explicit (§3.17).

Decision (see docs/spec-mapping.md): ``bool`` and any non-``int`` are rejected like a
non-positive ``n``, with an ``IllegalRequestError`` delivered through ``on_error`` (§3.9).
"""

from __future__ import annotations

from typing import Final

from reactive_streams.errors import IllegalRequestError

__all__ = ["UNBOUNDED", "Replenisher", "add_cap", "check_request", "produced"]

UNBOUNDED: Final = 2**63 - 1
"""Demand of ``Long.MAX_VALUE``: treated as "effectively unbounded" (§3.17)."""


def add_cap(current: int, n: int) -> int:
    """Add ``n`` to ``current`` demand, saturating at ``UNBOUNDED`` (§3.17)."""
    total = current + n
    return UNBOUNDED if total >= UNBOUNDED else total


def produced(current: int, n: int) -> int:
    """Demand left after ``n`` elements were emitted; ``UNBOUNDED`` stays unbounded (§3.17)."""
    if current == UNBOUNDED:
        return UNBOUNDED
    left = current - n
    return left if left > 0 else 0


def check_request(n: object) -> IllegalRequestError | None:
    """Return the §3.9 error for an invalid ``request(n)`` argument, or ``None`` if it is valid."""
    if not isinstance(n, int) or isinstance(n, bool):  # a non-int is a caller bug, like n <= 0
        return IllegalRequestError(
            f"§3.9: request(n) requires a positive int, got {type(n).__name__} {n!r}"
        )
    if n <= 0:
        return IllegalRequestError(
            f"§3.9: request(n) requires n > 0 (non-positive subscription request), got {n}"
        )
    return None


class Replenisher:
    """The consumer side of a prefetch window: request ``prefetch`` up front, then ``limit``
    more each time ``limit`` elements were consumed (Reactor's and RxJava's 75% rule), and
    the rest of the window when the consumer runs dry before any of the last request came
    (``ran_dry``).

    Not thread-safe: one consumer owns it. ``consumed()`` and ``ran_dry()`` return how much
    to request now; the caller requests it, and counts what it really asked for (§1.1).

    Args:
        prefetch: the window, the most ever requested ahead of consumption (> 0).
        limit: the replenish threshold; ``prefetch - prefetch // 4`` by default.
    """

    __slots__ = ("_count", "_queued", "limit", "prefetch")

    def __init__(self, prefetch: int, limit: int | None = None) -> None:
        if type(prefetch) is not int or prefetch <= 0:
            raise ValueError(f"prefetch must be a positive int, got {prefetch!r}")
        if limit is None:
            limit = prefetch - (prefetch >> 2)
        if type(limit) is not int or not 0 < limit <= prefetch:
            raise ValueError(f"limit must be an int in 1..prefetch ({prefetch}), got {limit!r}")
        self.prefetch = prefetch
        self.limit = UNBOUNDED if prefetch == UNBOUNDED else limit
        self._count = 0  # consumed since the last request
        self._queued = 0  # elements still queued when the last request was made (ran_dry)

    def consumed(self, n: int = 1, queued: int = 0) -> int:
        """Record ``n`` consumed elements, with ``queued`` elements still waiting behind them;
        return the demand to request now (0 for none)."""
        if self.prefetch == UNBOUNDED:
            return 0
        self._count += n  # owned: the one consumer (see above)
        if self._count >= self.limit:
            due, self._count = self._count, 0
            self._queued = queued
            return due
        return 0

    @property
    def until_due(self) -> int:
        """How many more elements to consume before ``consumed()`` returns a request (>= 1).

        A consumer that reports in rounds ends each round here, so the request goes out at
        the limit, not up to a round later, when the queue may already have run dry."""
        return self.limit - self._count

    def ran_dry(self) -> int:
        """The consumer found nothing left to consume: return what to request now (0 for none).

        When none of the last request has arrived yet (everything consumed since it was
        made was already queued then), the upstream is not producing alongside its
        consumer: a producer that runs only while its consumer waits (Python code on
        another thread, under the GIL), or one that is slow to answer. What was consumed
        since is then asked for at once, so the upstream can deliver the whole window in
        one go instead of the ``limit`` asked for at the threshold; otherwise each window
        would cost two thread wake-ups per ``limit``. At most one such request follows each
        replenishment, so a slow upstream still gets requests of ``limit``, never one per
        element.
        """
        count = self._count
        if not count or count != self._queued:
            return 0
        self._count = 0  # owned: the one consumer
        self._queued = 0  # the queue is empty: anything consumed from now on arrived after
        return count
