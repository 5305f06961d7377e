"""Run one schedule and judge it: the rules its logs noted, order and loss against what the
source holds, the cancel bound, the source let go, no thread or task left behind, and no
error the library had to report as dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Final

from fuzz_driven import TIMEOUT, Harness
from fuzz_log import SignalLog
from fuzz_plan import Plan, draw, options_rng
from fuzz_sinks import SINK_RUNNERS
from fuzz_sources import PULL, Boom, Made, make

from reactive_streams.testing import switch_interval

__all__ = ["KNOWN", "LoopHarness", "Result", "run_plan", "run_schedule"]


class LoopHarness(Harness):
    """An event loop (debug mode) on a thread of its own, for every schedule of one test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_debug(True)
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop", daemon=True)
        self.thread.start()

    def tasks(self) -> list[asyncio.Task[object]]:
        """The loop's tasks but the one asking, once those running have ended (or TIMEOUT)."""

        async def settle() -> list[asyncio.Task[object]]:
            deadline = time.monotonic() + TIMEOUT
            while True:
                for _ in range(3):  # callbacks already scheduled, and those they schedule
                    await asyncio.sleep(0)
                left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                if not left or time.monotonic() > deadline:
                    return left
                await asyncio.wait(left, timeout=deadline - time.monotonic())

        left: list[asyncio.Task[object]] = self.run(settle()).result(2 * TIMEOUT)
        return left

    def close(self) -> None:
        async def shutdown() -> None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            await asyncio.get_running_loop().shutdown_asyncgens()

        self.run(shutdown()).result(TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)
        self.loop.close()


@dataclass
class Result:
    """What one schedule did, and what it broke."""

    plan: Plan
    violations: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)  # see KNOWN
    outcome: str = ""

    def report(self) -> str:
        plan = self.plan
        lines = [
            f"schedule {plan.kind}:{plan.sink}:{plan.seed} ({plan.describe()})",
            f"  outcome: {self.outcome}",
            *(f"  violation: {v}" for v in self.violations),
            f"  rerun: RS_FUZZ_REPLAY={plan.kind}:{plan.sink}:{plan.seed} "
            f".venv/bin/python -m pytest -p no:cacheprovider --runxfail tests/fuzz -k {plan.kind}",
        ]
        return "\n".join(lines)


class _Errors(logging.Handler):
    """Collects the ERROR records of the library (``report_dropped``) and of asyncio."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.name}: {record.getMessage()}")


@contextmanager
def _errors_logged() -> Iterator[_Errors]:
    handler = _Errors()
    loggers = [logging.getLogger("reactive_streams"), logging.getLogger("asyncio")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def run_schedule(harness: LoopHarness, kind: str, seed: int, sink: str | None = None) -> Result:
    """Draw the schedule of ``seed`` for ``kind`` and run it (the sink drawn too, unless given)."""
    plan = draw(kind, seed, pull=kind in PULL, sink=sink)
    rng = options_rng(kind, seed)
    return run_plan(
        harness, plan, lambda: make(kind, plan.n, plan.fail_at, rng, plan.options, harness.loop)
    )


def run_plan(harness: LoopHarness, plan: Plan, source: Callable[[], Made]) -> Result:
    """Run ``plan`` over the publisher ``source()`` makes, and judge what happened."""
    result = Result(plan)
    before = set(threading.enumerate())
    with _errors_logged() as errors:
        with switch_interval(1e-6) if plan.switching else nullcontext():
            made = source()
            logs = SINK_RUNNERS[plan.sink](made, plan, harness)
        _settle(made, harness, result)
        _leftovers(before, harness, result)
        _let_go(made, logs[0], result)
    for log in logs:
        result.violations.extend(log.violations)
    result.violations.extend(_judge(made, logs[0]))
    result.violations.extend(f"reported: {record}" for record in errors.records)
    result.violations, result.known = _sort_known(result.violations, logs[0])
    result.outcome = logs[0].summary() + (
        f", cancel returned after {logs[0].cancel_returned_at}"
        if logs[0].cancel_returned_at is not None
        else ""
    )
    return result


def _settle(made: Made, harness: LoopHarness, result: Result) -> None:
    """Wait for the source's own producers (hot threads, loop tasks) and shut its executor."""
    for task in made.tasks:
        if isinstance(task, threading.Thread):
            task.join(TIMEOUT)
            if task.is_alive():
                result.violations.append("leftover: a hot producer is still emitting")
        elif isinstance(task, concurrent.futures.Future):  # a coroutine run on the loop
            try:
                task.result(TIMEOUT)
            except Exception as exc:
                result.violations.append(f"the source's producer failed: {exc!r}")
    if made.executor is not None:
        made.executor.shutdown(wait=False)


def _let_go(made: Made, log: SignalLog, result: Result) -> None:
    """The source was released, after a cancel that took effect and at the end, once nothing
    runs any more (no thread, no task: see ``_leftovers``)."""
    if made.released is None or not made.started():
        return
    cancelled = log.cancel_returned_at is not None and not log.ended_before_cancel
    if (cancelled or (log.terminated and made.released_on_end)) and not made.released():
        what = "after cancel" if cancelled else "at the end"
        result.violations.append(f"§3.13: the source was not released {what}")


def _leftovers(before: set[threading.Thread], harness: LoopHarness, result: Result) -> None:
    """Every thread the schedule started has ended, then every task it left on the loop (a
    thread's last act may be to schedule one there), then again every thread."""
    _threads_end(before, result)
    tasks = harness.tasks()
    if tasks:
        result.violations.append(f"leftover: {len(tasks)} tasks on the loop: {tasks[:3]}")
    _threads_end(before, result)


def _threads_end(before: set[threading.Thread], result: Result) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            names = sorted(t.name for t in extra)
            result.violations.append(f"leftover: threads {names}")
            return
        extra[0].join(left)


KNOWN: Final = {
    # An on_error racing a cancel (§1.8, §2.8), reported naming §1.8: no violation.
    "reported: reactive_streams: §1.8:": "error_racing_cancel",
}
"""Findings that are legitimate, or known and tracked by an xfail test, by the start of the
violation text, with a name for the tally; they count only after a cancel that took effect."""


def _sort_known(violations: list[str], log: SignalLog) -> tuple[list[str], list[str]]:
    """Split off the known findings (only a cancelled run may have them), by their names."""
    if log.cancel_returned_at is None or log.ended_before_cancel:
        return violations, []
    left, known = [], []
    for violation in violations:
        name = next((n for start, n in KNOWN.items() if violation.startswith(start)), None)
        if name is None:
            left.append(violation)
        else:
            known.append(name)
    return left, known


def _judge(made: Made, log: SignalLog) -> list[str]:
    """Order, loss, the end, and the cancel bound, against what the source holds."""
    found: list[str] = []
    got = log.elements
    expected = made.expected
    cancelled = log.cancel_returned_at is not None
    if made.mode == "subsequence":
        position = {value: i for i, value in enumerate(expected)}
        indices = [position.get(value, -1) for value in got]
        if -1 in indices or any(a >= b for a, b in zip(indices, indices[1:], strict=False)):
            found.append(f"order: {got[:30]} is no ordered subsequence of the source")
    elif got != expected[: len(got)]:
        found.append(f"order: {got[:30]} is no prefix of the source's {expected[:30]}")
    if log.completed and not cancelled:
        if made.failure_after is not None:
            found.append(f"loss: completed, but the source failed after {made.failure_after}")
        elif made.mode == "subsequence":
            dropped = made.dropped()
            if len(got) + dropped != len(expected):
                found.append(f"loss: {len(got)} delivered + {dropped} dropped of {len(expected)}")
        elif len(got) != len(expected):
            found.append(f"loss: completed after {len(got)} of {len(expected)} elements")
    if log.error is not None:
        error = log.error
        if isinstance(error, Boom) and made.failure_after is not None:
            if made.mode != "subsequence" and not cancelled and len(got) != made.failure_after:
                found.append(
                    f"loss: failed after {len(got)} elements, the source after {made.failure_after}"
                )
        elif not isinstance(error, made.may_fail_with):
            found.append(f"unexpected on_error({error!r})")
    if not log.terminated and not cancelled:
        found.append("hang: the stream neither ended nor was cancelled")
    if cancelled and log.cancel_returned_at is not None:
        beyond = len(got) - log.cancel_returned_at
        if beyond > log.cancel_bound:
            found.append(
                f"§3.12: {beyond} elements after cancel returned (bound {log.cancel_bound})"
            )
    return found
