"""Test doubles for the checked() tests: a deliberately broken publisher driven by hand, a
recorder of its subscription, and helpers that make an offending call and find its violation."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from reactive_streams import ProtocolViolation, Subscriber, Subscription, checked
from reactive_streams.testing import RecordingSubscriber

MODES = ["raise", "log"]


class Upstream:
    """A Subscription that records what it is asked, and can be told to raise."""

    def __init__(
        self, fail_request: Exception | None = None, fail_cancel: Exception | None = None
    ) -> None:
        self.requests: list[Any] = []
        self.cancels = 0
        self.fail_request = fail_request
        self.fail_cancel = fail_cancel

    def request(self, n: int) -> None:
        self.requests.append(n)
        if self.fail_request is not None:
            raise self.fail_request

    def cancel(self) -> None:
        self.cancels += 1
        if self.fail_cancel is not None:
            raise self.fail_cancel


class HandPublisher:
    """A publisher that signals only what the test tells it to, through ``self.down``."""

    def __init__(
        self,
        upstream: Upstream | None = None,
        *,
        send_on_subscribe: bool = True,
        fail_subscribe: Exception | None = None,
    ) -> None:
        self.upstream = upstream if upstream is not None else Upstream()
        self.send_on_subscribe = send_on_subscribe
        self.fail_subscribe = fail_subscribe
        self.down: Any = None

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.down = subscriber
        if self.send_on_subscribe:
            subscriber.on_subscribe(self.upstream)
        if self.fail_subscribe is not None:
            raise self.fail_subscribe


def wire(
    mode: str, request: int = 0, **kwargs: Any
) -> tuple[HandPublisher, RecordingSubscriber[Any]]:
    """A HandPublisher behind ``checked(..., on_violation=mode)``, subscribed by a recorder."""
    publisher = HandPublisher(**kwargs)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(request)
    checked(publisher, on_violation=mode).subscribe(subscriber)  # type: ignore[arg-type]
    return publisher, subscriber


def offend(
    mode: str,
    rule: str,
    caplog: pytest.LogCaptureFixture,
    call: Callable[[], object],
    passes: type[Exception] | None = None,
) -> ProtocolViolation:
    """Make the offending ``call``; return the violation raised ("raise") or logged ("log").
    In "log" mode, ``passes`` is the exception the call still raises (the offending signal
    is passed on as it came): it is expected, and the log is checked after it."""
    if mode == "raise":
        with pytest.raises(ProtocolViolation) as info:
            call()
        violation = info.value
    else:
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="reactive_streams"):
            if passes is None:
                call()
            else:
                with pytest.raises(passes):
                    call()
        logged = [
            r.exc_info[1]
            for r in caplog.records
            if r.name == "reactive_streams" and r.levelno == logging.ERROR and r.exc_info
        ]
        assert len(logged) == 1, caplog.text
        assert isinstance(logged[0], ProtocolViolation)
        violation = logged[0]
        assert caplog.records[0].getMessage().startswith(f"§{rule}: ")
    assert violation.rule == rule
    assert str(violation).startswith(f"§{rule}: ")
    return violation


def assert_torn_down(
    publisher: HandPublisher, subscriber: RecordingSubscriber[Any], violation: ProtocolViolation
) -> None:
    """Raise mode: the Subscriber got on_error(violation) once and the upstream was cancelled;
    later upstream signals are dropped."""
    assert subscriber.error is violation
    assert publisher.upstream.cancels == 1
    before = list(subscriber.elements)
    publisher.down.on_next("late")
    publisher.down.on_complete()
    assert subscriber.elements == before
    assert not subscriber.completed
    subscriber.assert_no_violations()  # the checker's own signals are protocol-correct


class Gated:
    """A Subscriber whose ``on_next(x)`` waits inside until the test opens ``x``: a test
    scripts which signals overlap."""

    def __init__(self) -> None:
        self.subscription: Subscription | None = None
        self._inside: dict[Any, threading.Event] = {}
        self._gates: dict[Any, threading.Event] = {}

    def _event(self, events: dict[Any, threading.Event], x: Any) -> threading.Event:
        return events.setdefault(x, threading.Event())

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, element: Any) -> None:
        self._event(self._inside, element).set()
        assert self._event(self._gates, element).wait(5)

    def on_error(self, error: Exception) -> None:
        pass

    def on_complete(self) -> None:
        pass

    def send(self, publisher: HandPublisher, x: Any) -> threading.Thread:
        """``on_next(x)`` on a thread of its own; returns once it is inside."""
        thread = threading.Thread(target=publisher.down.on_next, args=(x,))
        thread.start()
        assert self._event(self._inside, x).wait(5)
        return thread

    def open(self, x: Any) -> None:
        self._event(self._gates, x).set()
