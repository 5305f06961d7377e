"""The ``to_...`` adapters as the fuzzer's receiving ends, each run by one function
``(made, plan, harness) -> [its SignalLog, the spy's if any]``, and the table of all sinks.

The consumer records what it received in a ``SignalLog`` and, when it cancels (``close``,
``aclose``, ``dispose``, dropping the iterator, cancelling the consuming task), how many
elements had arrived when the cancel returned and how many more may follow (as for the
plan-driven subscribers in ``fuzz_driven``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, Final

import aioreactive
from fuzz_driven import TIMEOUT, Harness, run_base, run_recorder, subscribe_with, with_spy
from fuzz_log import SignalLog
from fuzz_plan import Plan
from fuzz_sources import Made
from reactivex import operators as ops
from reactivex.abc import DisposableBase, ObserverBase
from reactivex.scheduler import NewThreadScheduler

from reactive_streams.adapters.aioreactive import to_async_observable
from reactive_streams.adapters.async_iterables import to_async_iterator
from reactive_streams.adapters.iterables import to_iterator
from reactive_streams.adapters.rx import to_observable

__all__ = ["SINK_RUNNERS"]


# -- to_iterator ---------------------------------------------------------------------------------


def run_iterator(made: Made, plan: Plan, harness: Harness) -> list[SignalLog]:
    source, spied = with_spy(made, plan)
    log = SignalLog(count_demand=False)  # demand is the iterator's own: the spy counts it
    cancel = plan.cancel
    held, closed_by_other = threading.Event(), threading.Event()
    box: list[Any] = [
        subscribe_with(made, harness, lambda: to_iterator(source, prefetch=plan.initial))
    ]

    def close(bound: int) -> None:
        box[0].close()
        log.cancelled(bound)

    def consume() -> None:
        index = 0
        while True:
            try:
                value = next(box[0])
            except StopIteration:
                if log.cancel_returned_at is None:
                    log.end(None)
                return
            except Exception as exc:
                log.end(exc)
                return
            log.element(value)
            if cancel is not None and index == cancel.at:
                if cancel.where == "consumer":
                    close(0)
                elif cancel.where == "held":
                    held.set()
                    closed_by_other.wait(TIMEOUT)
                elif cancel.where == "drop":
                    box.clear()  # the iterator's last reference: it cancels (§3.13)
                    log.cancelled(0)
                    return
            index += 1

    def other() -> None:
        assert cancel is not None
        if cancel.where == "held":
            log.wait(lambda: held.is_set() or log.terminated, TIMEOUT)
            if held.is_set():
                close(0)
            closed_by_other.set()
        else:
            log.wait(lambda: len(log.elements) >= cancel.at or log.terminated, TIMEOUT)
            if not log.terminated:
                close(1)

    threads = [threading.Thread(target=consume, daemon=True)]
    if cancel is not None and cancel.where in ("other", "held"):
        threads.append(threading.Thread(target=other, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    if any(thread.is_alive() for thread in threads):
        log.violations.append(f"hang: the iterator's consumer did not end in {TIMEOUT}s")
        if box:
            box[0].close()  # wakes the consumer
        closed_by_other.set()
    box.clear()
    return [log] + ([spied] if spied else [])


# -- to_async_iterator ---------------------------------------------------------------------------


def run_async_iterator(made: Made, plan: Plan, harness: Harness) -> list[SignalLog]:
    source, spied = with_spy(made, plan)
    log = SignalLog(count_demand=False)
    cancel = plan.cancel

    async def main() -> None:
        progress = asyncio.Event()  # set at every element, at the end and when held
        held = asyncio.Event()
        released = asyncio.Event()
        iterator = to_async_iterator(source, prefetch=plan.initial)
        await iterator.__aenter__()
        if made.first is not None:
            await made.first()

        async def consume() -> None:
            index = 0
            try:
                while True:
                    try:
                        value = await iterator.__anext__()
                    except StopAsyncIteration:
                        if log.cancel_returned_at is None:
                            log.end(None)
                        return
                    except Exception as exc:
                        log.end(exc)
                        return
                    log.element(value)
                    progress.set()
                    if cancel is not None and index == cancel.at:
                        if cancel.where == "consumer":
                            await iterator.aclose()
                            log.cancelled(0)
                        elif cancel.where == "held":
                            held.set()
                            progress.set()
                            await released.wait()
                    index += 1
            finally:
                progress.set()

        consumer = asyncio.get_running_loop().create_task(consume())
        if cancel is not None and cancel.where in ("other", "held", "task"):
            while not (
                consumer.done()
                or held.is_set()
                or (cancel.where != "held" and log.count() >= cancel.at)
            ):
                progress.clear()
                await progress.wait()
            if not consumer.done():
                if cancel.where == "task":
                    consumer.cancel()
                else:
                    await iterator.aclose()
                log.cancelled(0 if cancel.where == "held" else 1)
            released.set()
        try:
            await consumer
        except asyncio.CancelledError:
            if not (cancel is not None and cancel.where == "task"):
                raise
        finally:
            await iterator.aclose()

    try:
        harness.run(main()).result(TIMEOUT)
    except concurrent.futures.TimeoutError:
        log.violations.append(f"hang: the async iterator's consumer did not end in {TIMEOUT}s")
    return [log] + ([spied] if spied else [])


# -- to_observable -------------------------------------------------------------------------------


class _Observer(ObserverBase[Any]):
    """An Rx observer noting its calls in a ``SignalLog`` (Rx's grammar is §1.3 and §1.7's)."""

    def __init__(self, plan: Plan, log: SignalLog) -> None:
        self.plan = plan
        self.log = log
        self.held = threading.Event()
        self.release = threading.Event()
        self.took = False  # the plan's "on_next" cancel is ops.take: it completes the observer

    def on_next(self, value: Any) -> None:
        self.log.enter("on_next")
        try:
            index = self.log.element(value)
            cancel = self.plan.cancel
            if cancel is not None and cancel.where == "held" and index == cancel.at:
                self.held.set()
                self.release.wait(TIMEOUT)
        finally:
            self.log.leave()

    def on_error(self, error: Exception) -> None:
        self.log.enter("on_error")
        try:
            self.log.end(error)
        finally:
            self.log.leave()

    def on_completed(self) -> None:
        self.log.enter("on_completed")
        try:
            cancel = self.plan.cancel
            if (
                cancel is not None
                and cancel.where == "on_next"
                and self.log.count() == cancel.at + 1
            ):
                self.took = True  # ops.take's completion: it disposed upstream first
                self.log.cancelled(0)
            else:
                self.log.end(None)
        finally:
            self.log.leave()


def run_observable(made: Made, plan: Plan, harness: Harness) -> list[SignalLog]:
    source, spied = with_spy(made, plan)
    log = SignalLog(count_demand=False)
    observer = _Observer(plan, log)
    cancel = plan.cancel
    observable = to_observable(source, prefetch=plan.initial)
    if cancel is not None and cancel.where == "on_next":
        observable = observable.pipe(ops.take(cancel.at + 1))  # disposes from inside on_next
    # A canceller needs the disposable while elements flow: subscribe on a thread of Rx's.
    threaded = made.first is None and (
        plan.coin or (cancel is not None and cancel.where in ("other", "held"))
    )
    scheduler = NewThreadScheduler() if threaded else None
    got: list[DisposableBase] = []
    subscribed = threading.Event()

    def subscribe() -> DisposableBase:
        disposable = observable.subscribe(observer, scheduler=scheduler)
        got.append(disposable)
        subscribed.set()
        return disposable

    def other() -> None:
        assert cancel is not None
        subscribed.wait(TIMEOUT)
        if cancel.where == "held":
            log.wait(lambda: observer.held.is_set() or log.terminated, TIMEOUT)
            if observer.held.is_set():
                got[0].dispose()
                log.cancelled(0)
            observer.release.set()
        else:
            log.wait(lambda: len(log.elements) >= cancel.at or log.terminated, TIMEOUT)
            if not log.terminated:
                got[0].dispose()
                log.cancelled(1)

    canceller = None
    if cancel is not None and cancel.where in ("other", "held"):
        canceller = threading.Thread(target=other, daemon=True)
        canceller.start()
    subscribe_with(made, harness, subscribe)
    if not log.wait(lambda: log.terminated or log.cancel_returned_at is not None, TIMEOUT):
        log.violations.append(f"hang: the observer heard no end in {TIMEOUT}s")
    if canceller is not None:
        canceller.join(TIMEOUT)
    observer.release.set()
    if got and log.cancel_returned_at is None and not log.terminated:
        got[0].dispose()
    return [log] + ([spied] if spied else [])


# -- to_async_observable -------------------------------------------------------------------------


def run_async_observable(made: Made, plan: Plan, harness: Harness) -> list[SignalLog]:
    source, spied = with_spy(made, plan)
    log = SignalLog(count_demand=False)
    cancel = plan.cancel

    async def main() -> None:
        progress = asyncio.Event()  # set at every element, at the end and when held
        held = asyncio.Event()
        released = asyncio.Event()
        busy = False
        box: list[Any] = []

        async def asend(value: Any) -> None:
            nonlocal busy
            if busy:
                log.violations.append("§1.3: asend while the previous asend was running")
            busy = True
            try:
                index = log.element(value)
                progress.set()
                if cancel is not None and index == cancel.at:
                    if cancel.where == "on_next":
                        await box[0].dispose_async()
                        log.cancelled(0)
                    elif cancel.where == "held":
                        held.set()
                        await released.wait()
            finally:
                busy = False

        async def athrow(error: Exception) -> None:
            log.end(error)
            progress.set()

        async def aclose() -> None:
            log.end(None)
            progress.set()

        observer = aioreactive.AsyncAnonymousObserver(asend, athrow, aclose)
        observable = to_async_observable(source, prefetch=plan.initial)
        box.append(await observable.subscribe_async(observer))
        if made.first is not None:
            await made.first()
        if cancel is not None and cancel.where in ("other", "held"):
            while not (
                log.terminated
                or held.is_set()
                or (cancel.where == "other" and log.count() >= cancel.at)
            ):
                progress.clear()
                await progress.wait()
            if not log.terminated:
                await box[0].dispose_async()
                log.cancelled(0 if cancel.where == "held" else 1)
            released.set()
        while not (log.terminated or log.cancel_returned_at is not None):
            progress.clear()
            await progress.wait()
        if log.cancel_returned_at is None:
            await box[0].dispose_async()

    try:
        harness.run(main()).result(TIMEOUT)
    except concurrent.futures.TimeoutError:
        log.violations.append(f"hang: the async observer heard no end in {TIMEOUT}s")
    return [log] + ([spied] if spied else [])


SINK_RUNNERS: Final[dict[str, Callable[[Made, Plan, Harness], list[SignalLog]]]] = {
    "recorder": run_recorder,
    "base": run_base,
    "iterator": run_iterator,
    "async_iterator": run_async_iterator,
    "observable": run_observable,
    "async_observable": run_async_observable,
}
