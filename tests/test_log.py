"""reactive_streams.log: a pass-through stage that logs request(n), cancel and its end."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactive_streams import UNBOUNDED, log, pipe, publish_on, snapshot
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.testing import (
    RecordingSubscriber,
    RecordingSubscription,
    race,
    switch_interval,
)

LOGGER = "reactive_streams.log"


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


class TestLines:
    """What the stage writes, and at which level."""

    def test_request_and_complete(self, caplog: pytest.LogCaptureFixture) -> None:
        """Each request(n) and on_complete is a line naming the stage; elements are not."""
        caplog.set_level(logging.INFO, logger=LOGGER)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        pipe(from_iterable(range(5)), log("nums")).subscribe(sub)
        sub.request(2)
        sub.request(10)
        assert sub.elements == [0, 1, 2, 3, 4] and sub.completed
        assert lines(caplog) == [
            "log nums: request(2)",
            "log nums: request(10)",
            "log nums: on_complete",
        ]
        assert {r.levelno for r in caplog.records if r.name == LOGGER} == {logging.INFO}

    def test_cancel(self, caplog: pytest.LogCaptureFixture) -> None:
        """cancel is a line; the upstream is cancelled; no terminal line follows."""
        caplog.set_level(logging.INFO, logger=LOGGER)
        upstream = RecordingSubscription()
        stage = log("c")
        sub: RecordingSubscriber[int] = RecordingSubscriber(3)
        stage.subscribe(sub)
        stage.on_subscribe(upstream)
        sub.cancel()
        assert upstream.requests == [3] and upstream.cancelled.is_set()
        assert lines(caplog) == ["log c: request(3)", "log c: cancel"]

    def test_error(self, caplog: pytest.LogCaptureFixture) -> None:
        """on_error: a line with the error; the subscriber gets the same error."""
        caplog.set_level(logging.INFO, logger=LOGGER)
        stage = log("e")
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        stage.subscribe(sub)
        stage.on_subscribe(RecordingSubscription())
        error = ValueError("boom")
        stage.on_error(error)
        assert sub.error is error
        assert lines(caplog)[-1] == "log e: on_error(ValueError('boom'))"

    def test_level_and_logger(self, caplog: pytest.LogCaptureFixture) -> None:
        """level= and logger= are honoured; below the level nothing is written."""
        mine = logging.getLogger("test_log.mine")
        caplog.set_level(logging.DEBUG, logger="test_log.mine")
        sub: RecordingSubscriber[int] = RecordingSubscriber(UNBOUNDED)
        pipe(from_iterable(range(2)), log("x", level=logging.DEBUG, logger=mine)).subscribe(sub)
        records = [r for r in caplog.records if r.name == "test_log.mine"]
        assert [r.levelno for r in records] == [logging.DEBUG, logging.DEBUG]
        assert records[0].getMessage() == f"log x: request({UNBOUNDED})"
        caplog.clear()
        caplog.set_level(logging.WARNING, logger=LOGGER)
        pipe(from_iterable(range(2)), log("quiet")).subscribe(RecordingSubscriber(UNBOUNDED))
        assert lines(caplog) == []

    def test_arguments_are_checked(self) -> None:
        """A name that is no str, a level that is no int, a logger that is no Logger."""
        with pytest.raises(TypeError, match="name"):
            log(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="level"):
            log("a", level="INFO")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="logger"):
            log("a", logger="reactive_streams")  # type: ignore[arg-type]


class TestPassThrough:
    """Elements, demand and the end go through unchanged."""

    def test_elements_and_demand(self) -> None:
        """Demand reaches the upstream exactly as asked; elements arrive in order."""
        upstream = RecordingSubscription()
        stage = log("p")
        sub: RecordingSubscriber[str] = RecordingSubscriber(2)
        stage.subscribe(sub)
        stage.on_subscribe(upstream)
        stage.on_next("a")
        stage.on_next("b")
        sub.request(5)
        assert upstream.requests == [2, 5]
        assert sub.elements == ["a", "b"]
        sub.assert_no_violations()

    def test_through_an_executor(self) -> None:
        """Across an async boundary the stream arrives whole, and in order."""
        with ThreadPoolExecutor(2) as executor:
            stage = pipe(publish_on(from_iterable(range(5000)), executor), log("far"))
            assert list(to_iterator(stage, prefetch=32)) == list(range(5000))

    def test_spec309_an_invalid_request_reaches_the_upstream(self) -> None:
        """§3.9: request(0) is passed on as it came; the upstream answers with on_error."""
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        pipe(from_iterable(range(3)), log("z")).subscribe(sub)
        sub.request(0)
        assert isinstance(sub.error, ValueError) and "3.9" in str(sub.error)

    def test_spec303_reentrant_request_from_on_next(self) -> None:
        """request(1) from each on_next: every element, no recursion error, nothing
        beyond demand."""
        sub: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
        pipe(from_iterable(range(5000)), log("r")).subscribe(sub)
        assert sub.elements == list(range(5000)) and sub.completed
        sub.assert_no_violations()

    def test_spec213_none_is_refused(self) -> None:
        """§2.13: on_next(None) raises TypeError, cancels the upstream, and the subscriber
        hears why."""
        upstream = RecordingSubscription()
        stage = log("n")
        sub: RecordingSubscriber[int] = RecordingSubscriber(1)
        stage.subscribe(sub)
        stage.on_subscribe(upstream)
        with pytest.raises(TypeError):
            stage.on_next(None)  # type: ignore[arg-type]
        assert upstream.cancelled.is_set() and isinstance(sub.error, TypeError)

    def test_spec205_a_second_upstream_is_cancelled(self) -> None:
        """§2.5: the first on_subscribe is kept, a second one cancelled."""
        first, second = RecordingSubscription(), RecordingSubscription()
        stage = log("s")
        stage.on_subscribe(first)
        stage.on_subscribe(second)
        assert second.cancelled.is_set() and not first.cancelled.is_set()


class TestOrder:
    """Either side may come first."""

    def test_unicast(self) -> None:
        """A second subscriber gets on_subscribe then on_error naming the rule."""
        stage = pipe(from_iterable(range(3)), log("u"))
        first: RecordingSubscriber[int] = RecordingSubscriber()
        second: RecordingSubscriber[int] = RecordingSubscriber()
        stage.subscribe(first)
        stage.subscribe(second)
        assert second.subscription is not None and isinstance(second.error, RuntimeError)
        assert "§1.9" in str(second.error) and "unicast" in str(second.error)
        first.request(UNBOUNDED)
        assert first.elements == [0, 1, 2] and first.completed

    def test_downstream_first(self) -> None:
        """The subscriber subscribes, and requests, before the stage has an upstream: the
        demand is passed on when the upstream subscribes (§2.7)."""
        stage = log("d")
        sub: RecordingSubscriber[int] = RecordingSubscriber(2)
        stage.subscribe(sub)
        assert sub.elements == []
        from_iterable(range(5)).subscribe(stage)
        assert sub.elements == [0, 1]
        sub.request(UNBOUNDED)
        assert sub.elements == list(range(5)) and sub.completed
        sub.assert_no_violations()

    @pytest.mark.parametrize("error", [None, ValueError("early")], ids=["complete", "error"])
    def test_terminal_before_the_subscriber(self, error: Exception | None) -> None:
        """The upstream ends before anyone subscribed: the subscriber gets on_subscribe,
        then that end."""
        stage = log("t")
        stage.on_subscribe(RecordingSubscription())
        if error is None:
            stage.on_complete()
        else:
            stage.on_error(error)
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        stage.subscribe(sub)
        assert sub.subscription is not None
        assert sub.completed if error is None else sub.error is error
        sub.assert_no_violations()

    def test_empty_source_through_pipe(self) -> None:
        """pipe(from_iterable([]), log) completes before the sink subscribes; the sink
        still ends."""
        assert list(to_iterator(pipe(from_iterable([]), log("empty")))) == []

    def test_no_on_next_overlaps_on_subscribe(self) -> None:
        """A request made inside on_subscribe is passed on after it returns (§1.3): an
        upstream on an executor cannot deliver while on_subscribe still runs."""
        returned = threading.Event()
        early: list[int] = []

        class Slow(RecordingSubscriber[int]):
            def on_subscribe(self, subscription: object) -> None:
                super().on_subscribe(subscription)  # type: ignore[arg-type]
                self.request(10)
                returned.wait(0.2)  # an upstream that ignored the rule would deliver now
                returned.set()

            def on_next(self, element: int) -> None:
                if not returned.is_set():
                    early.append(element)
                super().on_next(element)

        with ThreadPoolExecutor(1) as executor:
            stage = pipe(publish_on(from_iterable(range(10)), executor), log("slow"))
            sub = Slow()
            stage.subscribe(sub)
            sub.await_terminal(10)
        assert early == [] and sub.elements == list(range(10))
        sub.assert_no_violations()


class _CountingCancels(RecordingSubscription):
    def __init__(self) -> None:
        super().__init__()
        self.cancels = 0
        self._count_lock = threading.Lock()

    def cancel(self) -> None:
        with self._count_lock:
            self.cancels += 1
        super().cancel()


class TestCancel:
    """cancel: once, from any thread, before or after the upstream came."""

    def test_cancel_from_many_threads(
        self, caplog: pytest.LogCaptureFixture, switching: float | None
    ) -> None:
        """§3.5/§3.7: cancel from eight threads at once: the upstream is cancelled, and the
        line written, once."""
        caplog.set_level(logging.INFO, logger=LOGGER)
        for _ in range(20):
            caplog.clear()
            upstream = _CountingCancels()
            stage = log("many")
            sub: RecordingSubscriber[int] = RecordingSubscriber()
            stage.subscribe(sub)
            stage.on_subscribe(upstream)
            subscription = sub.subscription
            assert subscription is not None
            race(*[subscription.cancel] * 8)
            assert upstream.cancels == 1
            assert lines(caplog).count("log many: cancel") == 1

    def test_cancel_before_the_upstream(self) -> None:
        """Cancelled before the upstream came: that upstream is cancelled at once (§2.5)."""
        stage = log("early")
        sub: RecordingSubscriber[int] = RecordingSubscriber()
        stage.subscribe(sub)
        sub.cancel()
        upstream = RecordingSubscription()
        stage.on_subscribe(upstream)
        assert upstream.cancelled.is_set() and upstream.requests == []


def test_spec208_nothing_reaches_a_subscriber_that_cancelled_in_on_subscribe() -> None:
    """Cancelled from inside on_subscribe: an element the upstream sends anyway is dropped
    (§2.8, §3.13: the subscriber was let go)."""

    class Cancelling(RecordingSubscriber[int]):
        def on_subscribe(self, subscription: object) -> None:
            super().on_subscribe(subscription)  # type: ignore[arg-type]
            self.cancel()

    upstream = RecordingSubscription()
    stage = log("gone")
    stage.on_subscribe(upstream)
    sub = Cancelling()
    stage.subscribe(sub)
    stage.on_next(1)
    assert sub.elements == [] and upstream.cancelled.is_set()


class TestScan:
    """scan(): 'log <name>', linked to its upstream."""

    def test_never_subscribed_middle_stage(self) -> None:
        """A log stage whose upstream never subscribed it: snapshot(sink) names it and says
        'never subscribed'."""
        stage = log("a")
        source = from_iterable(range(3))  # never subscribed to the stage: the bug to find
        assert source is not None
        it = to_iterator(stage)
        stages = snapshot(it)
        assert [s.name for s in stages] == ["log a", "to_iterator"]
        assert not stages[0].subscribed
        text = str(stages)
        assert "log a" in text and "never subscribed" in text.splitlines()[1]
        it.close()

    def test_scan_through_the_stage(self) -> None:
        """Wired: the walk goes through the stage to the source; asked counts what the
        stage passed upstream; cancelled and terminated as they happen."""
        stage = log("mid")
        sub: RecordingSubscriber[int] = RecordingSubscriber(3)
        pipe(from_iterable(range(10)), stage).subscribe(sub)
        rows = snapshot(sub.subscription)
        assert [s.name for s in rows] == ["from_iterable", "log mid"]
        assert rows[1].asked == 3 and rows[1].subscribed and rows[0].delivered == 3
        sub.request(UNBOUNDED)
        row = snapshot(sub.subscription)[-1]
        assert row.terminated and not row.cancelled
        other = log("other")
        sub2: RecordingSubscriber[int] = RecordingSubscriber(1)
        pipe(from_iterable(range(10)), other).subscribe(sub2)
        sub2.cancel()
        row = snapshot(other)[-1]
        assert row.cancelled and row.state == "cancelled"

    def test_snapshot_while_it_runs(self) -> None:
        """Snapshots from another thread while elements pass never raise."""
        done = threading.Event()
        problems: list[BaseException] = []
        with switch_interval(1e-6), ThreadPoolExecutor(2) as executor:
            it = to_iterator(
                pipe(publish_on(from_iterable(range(5000)), executor), log("live")), prefetch=8
            )

            def watch() -> None:
                try:
                    while not done.is_set():
                        assert snapshot(it)[-1].name == "to_iterator"
                        str(snapshot(it))
                except BaseException as exc:
                    problems.append(exc)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                assert sum(1 for _ in it) == 5000
            finally:
                done.set()
                watcher.join(30)
        if problems:
            raise problems[0]
