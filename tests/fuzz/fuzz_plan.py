"""What one fuzz schedule does, drawn from a seed: the stream's length, who requests how much
and when, who cancels and when, and whether threads switch at every chance.

A schedule is a pure function of ``(kind, sink, seed)``; the threads' timing is not, so a
failing seed is rerun many times (``RS_FUZZ_REPLAY``). The environment variables:

- ``RS_FUZZ_SEED``: the base seed of a run (default: a fresh one, printed on failure);
- ``RS_FUZZ_COUNT``: schedules per kind (default: 300; the stress variant: 3000);
- ``RS_FUZZ_REPLAY``: ``kind:sink:seed`` runs that one schedule ``RS_FUZZ_REPEAT`` times
  (default 200) in the test of its kind, and nothing else;
- ``RS_FUZZ_MAX_REPORTED``: a kind stops after this many broken schedules (default 3);
- ``RS_FUZZ_TALLY``: a file each kind's figures are appended to, a JSON line each.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Final

from reactive_streams import UNBOUNDED

__all__ = [
    "Cancel",
    "Plan",
    "base_seed",
    "count",
    "draw",
    "replay",
    "schedule_seeds",
]

SINKS: Final = (
    "recorder",  # the suite's RecordingSubscriber, driven by the plan
    "base",  # a BaseSubscriber driven by the plan
    "iterator",  # to_iterator, consumed on the test's thread
    "async_iterator",  # to_async_iterator, consumed on the harness loop
    "observable",  # to_observable, an Rx observer
    "async_observable",  # to_async_observable, an aioreactive observer on the harness loop
)
SINK_WEIGHTS: Final = (5, 3, 3, 2, 2, 2)
"""The plan-driven sinks exercise the most request patterns: they run most often."""

DEFAULT_COUNT: Final = 300
STRESS_COUNT: Final = 3000


@dataclass(frozen=True)
class Cancel:
    """Who cancels, and when.

    ``where``: ``on_subscribe`` (inside it); ``on_next`` (inside the ``at``-th delivery, on
    the delivering thread); ``other`` (another thread, once ``at`` elements arrived);
    ``held`` (another thread, while the ``at``-th delivery is held inside ``on_next``);
    for the iterators also ``consumer`` (the consuming thread or task, after ``at``
    elements), ``task`` (the consuming task is cancelled) and ``drop`` (the iterator's last
    reference goes).
    """

    where: str
    at: int


@dataclass(frozen=True)
class Plan:
    """One schedule. Sizes are request sizes; ``n`` the elements the source holds."""

    kind: str
    sink: str
    seed: int
    n: int
    fail_at: int | None  # the source raises after this many elements (None: it does not)
    initial: int  # requested in on_subscribe (0: nothing); the prefetch of a to_... sink
    every: int  # request `size` from every `every`-th on_next (0: never)
    size: int
    others: tuple[int, ...]  # requested from another thread, one after the other
    others_after: int  # ... once this many elements arrived
    cancel: Cancel | None
    switching: bool  # run at sys.setswitchinterval(1e-6)
    spy: bool  # a protocol spy between the publisher and a sink that checks nothing itself
    coin: bool  # the sink's own choice (to_observable: subscribe on a thread of Rx's)
    pair: bool  # two threads at once: the other thread's requests split in two, two cancels
    options: dict[str, int] = field(default_factory=dict)  # the kind's own draws

    def describe(self) -> str:
        parts = [f"n={self.n}"]
        if self.fail_at is not None:
            parts.append(f"fail_at={self.fail_at}")
        parts.append(f"initial={_size(self.initial)}")
        if self.every:
            parts.append(f"request {_size(self.size)} every {self.every} on_next")
        if self.others:
            sizes = ",".join(_size(s) for s in self.others)
            parts.append(f"other thread requests [{sizes}] after {self.others_after}")
        if self.cancel is not None:
            parts.append(f"cancel {self.cancel.where} at {self.cancel.at}")
        if self.switching:
            parts.append("switchinterval 1e-6")
        if self.spy:
            parts.append("spy")
        if self.coin:
            parts.append("coin")
        if self.pair:
            parts.append("pair")
        parts.extend(f"{k}={v}" for k, v in sorted(self.options.items()))
        return ", ".join(parts)


def _size(n: int) -> str:
    return "UNBOUNDED" if n == UNBOUNDED else ("2**70" if n == 2**70 else str(n))


def draw_size(rng: random.Random) -> int:
    """A request size: 1, small, large, UNBOUNDED, or beyond it (§3.17)."""
    pick = rng.random()
    if pick < 0.3:
        return 1
    if pick < 0.6:
        return rng.randint(2, 8)
    if pick < 0.75:
        return rng.randint(9, 5000)
    if pick < 0.9:
        return UNBOUNDED
    if pick < 0.95:
        return 2**62  # two of them add up past UNBOUNDED: demand saturates
    return 2**70


_PLAN_CANCELS: Final = ("on_subscribe", "on_next", "other", "held")
_ITERATOR_CANCELS: Final = ("consumer", "other", "held", "drop")
_ASYNC_ITERATOR_CANCELS: Final = ("consumer", "other", "held", "task")
_OBSERVER_CANCELS: Final = ("on_next", "other", "held")


def draw(
    kind: str,
    seed: int,
    *,
    pull: bool,
    sink: str | None = None,
    options: dict[str, int] | None = None,
) -> Plan:
    """The schedule of ``seed`` for a publisher of ``kind``; ``pull`` if its source may fail
    (a generator the plan can make raise). ``sink`` fixed, or drawn from the seed."""
    rng = random.Random(f"{kind}:{seed}")
    drawn = rng.choices(SINKS, SINK_WEIGHTS)[0]  # drawn always: a given sink shifts nothing
    chosen = drawn if sink is None else sink
    n = rng.choice((0, 1, 2, rng.randint(3, 12), rng.randint(13, 60)))
    if rng.random() < 0.03:
        n = rng.randint(1000, 2100)  # past the batches of 1024 a drain task delivers
    fail_at = rng.randint(0, n) if pull and rng.random() < 0.15 else None
    cancel: Cancel | None = None
    if rng.random() < 0.45:
        where = rng.choice(
            {
                "recorder": _PLAN_CANCELS,
                "base": _PLAN_CANCELS,
                "iterator": _ITERATOR_CANCELS,
                "async_iterator": _ASYNC_ITERATOR_CANCELS,
                "observable": _OBSERVER_CANCELS,
                "async_observable": _OBSERVER_CANCELS,
            }[chosen]
        )
        cancel = Cancel(where, rng.randint(0, max(n - 1, 0)))
    plan_driven = chosen in ("recorder", "base")
    initial = draw_size(rng) if rng.random() < 0.7 else 0
    if not plan_driven:
        initial = rng.choice((1, 2, rng.randint(3, 16), 256))  # the prefetch
    every = rng.choice((0, 1, 1, 2, rng.randint(3, 10))) if plan_driven else 0
    others: tuple[int, ...] = ()
    if plan_driven and rng.random() < 0.5:
        others = tuple(draw_size(rng) for _ in range(rng.randint(1, 4)))
    return Plan(
        kind=kind,
        sink=chosen,
        seed=seed,
        n=n,
        fail_at=fail_at,
        initial=initial,
        every=every,
        size=draw_size(rng),
        others=others,
        others_after=rng.randint(0, max(n // 2, 0)),
        cancel=cancel,
        switching=rng.random() < 0.25,
        spy=chosen != "recorder" and rng.random() < 0.5,
        coin=rng.random() < 0.5,
        pair=rng.random() < 0.3,
        options=dict(options or {}),
    )


def options_rng(kind: str, seed: int) -> random.Random:
    """A generator for a kind's own draws (buffer sizes, workers), apart from the plan's."""
    return random.Random(f"{kind}:{seed}:options")


def base_seed() -> int:
    """``RS_FUZZ_SEED``, or a fresh seed (each run explores new schedules)."""
    given = os.environ.get("RS_FUZZ_SEED")
    return int(given) if given else random.SystemRandom().randrange(2**32)


def count(stress: bool) -> int:
    """Schedules per kind: ``RS_FUZZ_COUNT``, or the default of the variant."""
    given = os.environ.get("RS_FUZZ_COUNT")
    if given:
        return int(given)
    return STRESS_COUNT if stress else DEFAULT_COUNT


def replay() -> tuple[str, str, int, int] | None:
    """``RS_FUZZ_REPLAY=kind:sink:seed`` (and ``RS_FUZZ_REPEAT``), or None."""
    given = os.environ.get("RS_FUZZ_REPLAY")
    if not given:
        return None
    kind, sink, seed = given.rsplit(":", 2)
    return kind, sink, int(seed), int(os.environ.get("RS_FUZZ_REPEAT", "200"))


def schedule_seeds(base: int, n: int) -> range:
    """The seeds of one run: consecutive from the base, so each is printed as one number."""
    return range(base, base + n)
