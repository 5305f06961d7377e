"""The fuzzer's plan-driven receiving ends, and what every sink shares.

``PlanSubscriber`` is the fuzzer's own checking Subscriber, ``PlanBaseSubscriber`` a
``BaseSubscriber`` whose hooks follow the same plan: requests from ``on_subscribe``, from
``on_next`` and from other threads, cancels from any of those or while a delivery is held.
Each records what it received in a ``SignalLog`` and notes, when it cancels, how many elements
had arrived when the cancel returned and how many more may follow: none after a cancel made
inside a signal on the delivering thread, or while a delivery is held (the deliverer looks
again after each element), one after a cancel from anywhere else (the element a deliverer may
be handing over as the cancel lands: docs/adapters.md, "Cost of block"). A run that hangs is
noted as such (``SignalLog.violations``) after ``TIMEOUT`` seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from fuzz_log import SignalLog, Spy
from fuzz_plan import Plan
from fuzz_sources import Made

from reactive_streams import UNBOUNDED, BaseSubscriber, Publisher, Subscription

__all__ = [
    "TIMEOUT",
    "Harness",
    "PlanBaseSubscriber",
    "PlanSubscriber",
    "run_base",
    "run_recorder",
    "with_spy",
    "subscribe_with",
]

TIMEOUT = 10.0
"""Seconds a schedule may take to end, or a thread to stop: generous (a busy 2-core machine
at a 1 µs switch interval); reached only by a run that hangs (the fuzzer's own checks lower
it, to see a hang called one)."""


class Harness:
    """What a schedule's sinks share with the runner: the event loop on its own thread."""

    loop: asyncio.AbstractEventLoop

    def run(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)


def with_spy(made: Made, plan: Plan) -> tuple[Publisher[Any], SignalLog | None]:
    """The publisher a sink subscribes to (behind a ``Spy`` when the plan says), and the
    spy's log."""
    if plan.spy:
        spy = Spy(made.publisher)
        return spy, spy.log
    return made.publisher, None


def subscribe_with(made: Made, harness: Harness, subscribe: Callable[[], Any]) -> Any:
    """Subscribe; for an eager source, on the loop, which then sends its first signal at once,
    before it yields (what a coroutine does right after ``subscribe``)."""
    if made.first is None:
        return subscribe()
    got: list[Any] = []  # not a Future's result: dropping the iterator must free it
    subscribed = threading.Event()
    first = made.first

    async def go() -> None:
        got.append(subscribe())
        subscribed.set()
        await first()

    made.tasks.append(harness.run(go()))
    if not subscribed.wait(TIMEOUT):
        raise AssertionError(f"subscribe() on the loop did not return in {TIMEOUT}s")
    return got.pop()


# -- the plan-driven subscribers -----------------------------------------------------------------


class _Driven:
    """What the plan's requests and cancels do, whichever subscriber receives the signals."""

    early = False
    """Other threads may request and cancel before ``on_subscribe`` (``BaseSubscriber``)."""

    def __init__(self, plan: Plan, log: SignalLog) -> None:
        self.plan = plan
        self.log = log
        self.on_subscribed = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()
        self.cancelled = False  # one-way

    def request(self, n: int) -> None:
        raise NotImplementedError

    def cancel_now(self) -> None:
        raise NotImplementedError

    def cancel(self, bound: int) -> None:
        self.cancelled = True
        self.cancel_now()
        self.log.cancelled(bound)

    def subscribed(self) -> None:
        self.on_subscribed.set()
        if self.plan.initial:
            self.request(self.plan.initial)
        if self.plan.cancel is not None and self.plan.cancel.where == "on_subscribe":
            self.cancel(0)

    def delivered(self, index: int) -> None:
        plan = self.plan
        cancel = plan.cancel
        if cancel is not None and index == cancel.at:
            if cancel.where == "on_next":
                self.cancel(0)
            elif cancel.where == "held":
                self.held.set()
                self.release.wait(TIMEOUT)
        if plan.every and (index + 1) % plan.every == 0:
            self.request(plan.size)  # after a cancel too: a no-op (§3.6)

    def stalled(self) -> bool:
        """Every element requested has arrived (under the log's lock)."""
        return len(self.log.elements) >= self.log.requested

    def drive(self, subscribe: Callable[[], object]) -> None:
        """Start the plan's other threads, subscribe, top demand up when it runs dry, and
        wait for the end (or, after a cancel, for the other threads). With ``plan.pair``,
        two threads request at once (the sizes split between them), and two cancel at once."""
        log = self.log
        plan = self.plan
        threads = []
        done: list[threading.Event] = []
        if plan.others:
            split = plan.pair and len(plan.others) > 1
            parts = [plan.others[0::2], plan.others[1::2]] if split else [plan.others]
            barrier = threading.Barrier(len(parts))
            for sizes in parts:
                done.append(threading.Event())
                target = self._requester
                threads.append(threading.Thread(target=target, args=(sizes, barrier, done[-1])))
        if plan.cancel is not None and plan.cancel.where in ("other", "held"):
            pair = plan.pair and plan.cancel.where == "other"
            barrier = threading.Barrier(2 if pair else 1)
            threads.extend(
                threading.Thread(target=self._canceller, args=(barrier,))
                for _ in range(barrier.parties)
            )
        for thread in threads:
            thread.daemon = True
            thread.start()
        subscribe()

        def quiet() -> bool:
            return log.terminated or self.cancelled

        def dry() -> bool:
            return quiet() or (all(e.is_set() for e in done) and self.stalled())

        if log.wait(dry, TIMEOUT) and not quiet():
            self.request(UNBOUNDED)  # the plan's demand ran dry: let the stream end
        if not log.wait(quiet, TIMEOUT):
            log.violations.append(f"hang: neither a terminal signal nor a cancel in {TIMEOUT}s")
        for thread in threads:
            thread.join(TIMEOUT)
            if thread.is_alive():
                log.violations.append("hang: a requesting or cancelling thread never returned")
        self.release.set()

    def _requester(
        self, sizes: tuple[int, ...], barrier: threading.Barrier, done: threading.Event
    ) -> None:
        log = self.log
        after = self.plan.others_after
        try:
            if not self.early:
                self.on_subscribed.wait(TIMEOUT)
            log.wait(
                lambda: (
                    len(log.elements) >= after or log.terminated or self.cancelled or self.stalled()
                ),
                TIMEOUT,
            )
            barrier.wait(TIMEOUT)  # with a pair, both threads request at once
            for size in sizes:
                self.request(size)
        finally:
            done.set()
            self.log.poke()

    def _canceller(self, barrier: threading.Barrier) -> None:
        log = self.log
        cancel = self.plan.cancel
        assert cancel is not None
        if not self.early:
            self.on_subscribed.wait(TIMEOUT)
        if cancel.where == "held":
            log.wait(lambda: self.held.is_set() or log.terminated, TIMEOUT)
            if self.held.is_set():
                self.cancel(0)
            self.release.set()
            return
        log.wait(lambda: len(log.elements) >= cancel.at or log.terminated, TIMEOUT)
        barrier.wait(TIMEOUT)  # with a pair, both threads cancel at once (§3.5)
        if not log.terminated:
            self.cancel(1)


class PlanSubscriber(_Driven):
    """The fuzzer's own checking Subscriber: every signal goes through the ``SignalLog``
    (§1.1, §1.3, §1.7), requests and cancels come from the plan."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan, SignalLog())
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.log.enter("on_subscribe")
        try:
            if self.subscription is not None:
                self.log.violations.append("§2.12: on_subscribe signalled twice")
                subscription.cancel()
                return
            self.subscription = subscription
            self.subscribed()
        finally:
            self.log.leave()

    def on_next(self, element: Any) -> None:
        self.log.enter("on_next")
        try:
            if self.subscription is None:
                self.log.violations.append("§1.9: on_next before on_subscribe")
            self.delivered(self.log.element(element))
        finally:
            self.log.leave()

    def on_error(self, error: Exception) -> None:
        self.log.enter("on_error")
        try:
            self.log.end(error)
        finally:
            self.log.leave()

    def on_complete(self) -> None:
        self.log.enter("on_complete")
        try:
            self.log.end(None)
        finally:
            self.log.leave()

    def request(self, n: int) -> None:
        subscription = self.subscription
        assert subscription is not None, "requests follow on_subscribe"
        self.log.requesting(n)
        subscription.request(n)

    def cancel_now(self) -> None:
        subscription = self.subscription
        assert subscription is not None
        subscription.cancel()


class PlanBaseSubscriber(BaseSubscriber[Any]):
    """A ``BaseSubscriber`` whose hooks follow the plan; ``request``/``cancel`` are its own."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        owner = self

        class Driven(_Driven):
            early = True

            def request(self, n: int) -> None:
                self.log.requesting(n)
                owner.request(n)

            def cancel_now(self) -> None:
                owner.cancel()

        self.driven = Driven(plan, SignalLog())
        self.log = self.driven.log

    def hook_on_subscribe(self, subscription: Subscription) -> None:
        self.log.enter("hook_on_subscribe")
        try:
            self.driven.subscribed()
        finally:
            self.log.leave()

    def hook_on_next(self, element: Any) -> None:
        self.log.enter("hook_on_next")
        try:
            self.driven.delivered(self.log.element(element))
        finally:
            self.log.leave()

    def hook_on_error(self, error: Exception) -> None:
        self.log.enter("hook_on_error")
        try:
            self.log.end(error)
        finally:
            self.log.leave()

    def hook_on_complete(self) -> None:
        self.log.enter("hook_on_complete")
        try:
            self.log.end(None)
        finally:
            self.log.leave()


def run_recorder(made: Made, plan: Plan, harness: Harness) -> list[SignalLog]:
    subscriber = PlanSubscriber(plan)
    subscriber.drive(
        lambda: subscribe_with(made, harness, lambda: made.publisher.subscribe(subscriber))
    )
    return [subscriber.log]


def run_base(made: Made, plan: Plan, harness: Harness) -> list[SignalLog]:
    subscriber = PlanBaseSubscriber(plan)
    source, spied = with_spy(made, plan)
    subscriber.driven.drive(
        lambda: subscribe_with(made, harness, lambda: source.subscribe(subscriber))
    )
    return [subscriber.log] + ([spied] if spied else [])
