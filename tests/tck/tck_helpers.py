"""Helpers for the TCK's own tests: fast environments, a check that a TCK test fails naming
its rule, and an iterable that cannot be iterated (for failed publishers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reactive_streams.tck import TCKFailure, TestEnvironment

FAST = TestEnvironment(
    default_timeout_ms=300, no_signals_timeout_ms=30, gc_timeout_ms=100, poll_timeout_ms=5
)


LATE = 0.01  # a late signal comes this many seconds after the test saw what it waited for


QUIET = TestEnvironment(  # a no-signals window that a LATE signal surely falls into
    default_timeout_ms=300, no_signals_timeout_ms=150, gc_timeout_ms=100, poll_timeout_ms=5
)


def fails(run: Callable[[], None], rule: str) -> None:
    """``run`` fails with a TCKFailure whose message starts with ``rule`` (e.g. ``"§1.1"``)."""
    with pytest.raises(TCKFailure) as failure:
        run()
    assert str(failure.value).startswith(rule + ":"), str(failure.value)


class Unusable:
    """An iterable whose ``__iter__`` raises: ``from_iterable`` of it is a failed publisher."""

    def __iter__(self) -> Any:
        raise RuntimeError("cannot iterate")
