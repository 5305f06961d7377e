"""checked() and CheckedPublisher: its arguments, subscribe (§1.9), what each on_violation mode
does, and correct publishers passing through unchanged. The checks themselves: test_checker.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from checked_helpers import MODES, HandPublisher, offend, wire

from reactive_streams import (
    IllegalRequestError,
    OverflowViolation,
    ProtocolViolation,
    Subscription,
    checked,
    publish_on,
    snapshot,
)
from reactive_streams.adapters.iterables import from_iterable, to_iterator
from reactive_streams.testing import RecordingSubscriber

# -- arguments and subscribe (§1.9) -------------------------------------------------------------


def test_subscribe_none_raises_type_error() -> None:
    """§1.9: subscribe(None) on a checked publisher raises TypeError."""
    with pytest.raises(TypeError, match="§1.9"):
        checked(from_iterable([1])).subscribe(None)  # type: ignore[arg-type]


def test_bad_arguments_to_checked_raise_type_error() -> None:
    """checked(None) and an unknown on_violation raise TypeError at once."""
    with pytest.raises(TypeError):
        checked(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        checked(from_iterable([1]), on_violation="ignore")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_spec109_subscribe_raising_is_reported(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """§1.9: a subscribe() that raises is reported; in raise mode the Subscriber still gets
    on_subscribe then on_error."""
    boom = RuntimeError("boom")
    publisher = HandPublisher(send_on_subscribe=False, fail_subscribe=boom)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    wrapped = checked(publisher, on_violation=mode)  # type: ignore[arg-type]
    if mode == "raise":
        violation = offend(mode, "1.9", caplog, lambda: wrapped.subscribe(subscriber))
        assert violation.__cause__ is boom
        assert subscriber.subscribe_count == 1
        assert subscriber.error is violation
        subscriber.assert_no_violations()
    else:
        offend(mode, "1.9", caplog, lambda: wrapped.subscribe(subscriber), passes=RuntimeError)


def test_checked_subscription_is_what_the_subscriber_sees() -> None:
    """The Subscriber is given the checker (a Subscription), not the upstream's subscription."""
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber()
    checked(publisher).subscribe(subscriber)  # type: ignore[arg-type]
    assert subscriber.subscription is not publisher.upstream
    assert isinstance(subscriber.subscription, Subscription)


# -- what each on_violation mode does -----------------------------------------------------------


def test_raise_mode_reports_a_later_on_error_instead_of_losing_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Raise mode: an upstream on_error after the violation is dropped but logged, not lost."""
    publisher, subscriber = wire("raise")
    with pytest.raises(OverflowViolation):
        publisher.down.on_next(1)
    late = RuntimeError("late failure")
    with caplog.at_level(logging.ERROR, logger="reactive_streams"):
        publisher.down.on_error(late)
    assert any(r.exc_info and r.exc_info[1] is late for r in caplog.records)
    assert subscriber.error is not late


def test_callable_receives_each_violation_and_signals_pass_on() -> None:
    """A callable on_violation is called with each violation; the signals pass on unchanged."""
    found: list[ProtocolViolation] = []
    publisher = HandPublisher()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(1)
    checked(publisher, on_violation=found.append).subscribe(subscriber)  # type: ignore[arg-type]
    publisher.down.on_next(1)
    publisher.down.on_next(2)
    publisher.down.on_complete()
    publisher.down.on_complete()
    assert [v.rule for v in found] == ["1.1", "1.7"]
    assert subscriber.elements == [1, 2]


def test_a_violation_callable_that_raises_leaves_the_checker_usable() -> None:
    """on_violation raising (it propagates to the offender) must not leave the checker
    believing a signal is still in progress: a later, legal on_next from another thread
    is delivered, not reported as §1.3 and dropped."""
    found: list[str] = []

    def strict(violation: ProtocolViolation) -> None:
        found.append(str(violation))
        raise violation

    publisher = HandPublisher()
    subscriber: RecordingSubscriber[str] = RecordingSubscriber()
    checked(publisher, on_violation=strict).subscribe(subscriber)  # type: ignore[arg-type]
    with pytest.raises(OverflowViolation):
        publisher.down.on_next("unrequested")
    subscriber.request(1)
    other = threading.Thread(target=publisher.down.on_next, args=("legal",))
    other.start()
    other.join(5)
    assert subscriber.elements == ["legal"]
    assert len(found) == 1 and found[0].startswith("§1.1")


# -- correct publishers pass through unchanged --------------------------------------------------


@pytest.fixture
def found() -> Iterator[list[ProtocolViolation]]:
    """Violations collected by a callable; the test fails if any was found."""
    violations: list[ProtocolViolation] = []
    yield violations
    assert violations == []


@pytest.mark.parametrize("mode", ["raise", "collect"])
def test_from_iterable_with_reentrant_request_passes(
    mode: str, found: list[ProtocolViolation]
) -> None:
    """from_iterable with request(1) from each on_next: every element, completion, no violation,
    and no recursion added by the checker."""
    on_violation: Any = "raise" if mode == "raise" else found.append
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
    checked(from_iterable(range(20_000)), on_violation=on_violation).subscribe(subscriber)
    assert subscriber.elements == list(range(20_000))
    assert subscriber.completed
    assert subscriber.error is None
    subscriber.assert_no_violations()


def test_from_iterable_error_and_cancel_pass(found: list[ProtocolViolation]) -> None:
    """A failing iterator's error passes after its elements; cancel closes the generator."""
    boom = ValueError("boom")

    def failing() -> Iterator[int]:
        yield 1
        raise boom

    subscriber: RecordingSubscriber[int] = RecordingSubscriber(5)
    checked(from_iterable(failing()), on_violation=found.append).subscribe(subscriber)
    assert subscriber.elements == [1]
    assert subscriber.error is boom

    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    other: RecordingSubscriber[int] = RecordingSubscriber(3)
    generator = endless()  # held here, so only the cancel can close it
    checked(from_iterable(generator), on_violation=found.append).subscribe(other)
    other.cancel()
    assert closed.is_set()
    assert generator.gi_frame is None
    assert other.elements == [0, 1, 2]


def test_from_iterable_bad_request_answered_with_on_error(
    found: list[ProtocolViolation],
) -> None:
    """§3.9: from_iterable answers request(0) with on_error(IllegalRequestError)."""
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(2)
    checked(from_iterable(range(10)), on_violation=found.append).subscribe(subscriber)
    subscriber.request(0)
    assert isinstance(subscriber.error, IllegalRequestError)
    assert subscriber.elements == [0, 1]


def test_reentrant_bad_request_before_the_end_is_answered_with_on_error(
    found: list[ProtocolViolation],
) -> None:
    """§3.9: request(0) from the last on_next is answered by on_error, not swallowed by
    on_complete when the source ends in the same drain pass."""
    subscriber: RecordingSubscriber[int] = RecordingSubscriber()
    subscriber.on_next_hook = lambda element: subscriber.request(0)
    checked(from_iterable([1]), on_violation=found.append).subscribe(subscriber)
    subscriber.request(5)
    assert subscriber.elements == [1]
    assert isinstance(subscriber.error, IllegalRequestError)
    assert not subscriber.completed


def test_publish_on_with_requests_from_another_thread_passes(
    found: list[ProtocolViolation],
) -> None:
    """publish_on: signals on the executor, requests one at a time from the test thread."""
    with ThreadPoolExecutor(2) as pool:
        subscriber: RecordingSubscriber[int] = RecordingSubscriber()
        source = publish_on(from_iterable(range(500)), pool, prefetch=8)
        checked(source, on_violation=found.append).subscribe(subscriber)
        for i in range(500):
            subscriber.request(1)
            subscriber.await_count(i + 1)
        subscriber.await_terminal()
    assert subscriber.elements == list(range(500))
    assert subscriber.completed
    subscriber.assert_no_violations()


def test_publish_on_with_reentrant_request_and_to_iterator_passes(
    found: list[ProtocolViolation],
) -> None:
    """publish_on: reentrant request from on_next on the executor, and to_iterator, pass."""
    with ThreadPoolExecutor(2) as pool:
        subscriber: RecordingSubscriber[int] = RecordingSubscriber(1, request_on_next=1)
        source = publish_on(from_iterable(range(3000)), pool, prefetch=16)
        checked(source, on_violation=found.append).subscribe(subscriber)
        subscriber.await_terminal()
        items = list(to_iterator(checked(source, on_violation=found.append), prefetch=4))
    assert subscriber.elements == list(range(3000))
    assert items == list(range(3000))
    subscriber.assert_no_violations()


@pytest.mark.stress
@pytest.mark.parametrize("mode", ["raise", "collect"])
def test_publish_on_with_requests_from_many_threads_at_once_passes(
    mode: str, found: list[ProtocolViolation]
) -> None:
    """publish_on under checked: four threads released by a barrier request concurrently;
    exactly the requested elements arrive, in order, with no violation (bounded: 20 rounds)."""
    on_violation: Any = "raise" if mode == "raise" else found.append
    with ThreadPoolExecutor(2) as pool:
        for _ in range(20):
            subscriber: RecordingSubscriber[int] = RecordingSubscriber()
            source = publish_on(from_iterable(range(400)), pool, prefetch=32)
            checked(source, on_violation=on_violation).subscribe(subscriber)
            barrier = threading.Barrier(4)

            def requester(
                sub: RecordingSubscriber[int] = subscriber, gate: threading.Barrier = barrier
            ) -> None:
                gate.wait(5)
                for _ in range(100):
                    sub.request(1)

            threads = [threading.Thread(target=requester) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            subscriber.await_terminal()
            assert subscriber.elements == list(range(400))
            assert subscriber.completed
            subscriber.assert_no_violations()


def test_a_snapshot_walks_through_checked_to_the_source() -> None:
    """checked answers scan(): a row named 'checked' with the demand it counts (§1.1), between
    the sink and the checked publisher's subscription; at the end it lets go of the link."""
    with to_iterator(checked(from_iterable(range(100))), prefetch=8) as it:
        assert next(it) == 0
        rows = list(snapshot(it))
        assert [row.name for row in rows] == ["from_iterable", "checked", "to_iterator"]
        assert rows[1].requested == rows[0].requested == 0  # the window of 8 was delivered
        assert rows[0].delivered == 8 and rows[1].subscribed and not rows[1].cancelled
        assert list(it) == list(range(1, 100))
    assert [row.name for row in snapshot(it)] == ["to_iterator"]
