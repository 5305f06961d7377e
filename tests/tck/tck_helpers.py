"""Helpers for the TCK's own tests: fast environments, a check that a TCK test fails naming
its rule, and an iterable that cannot be iterated (for failed publishers)."""

from __future__ import annotations

import unittest
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


# A unicast Processor (log, map_async) under IdentityProcessorVerification: the skips allowed.
TWO_SUBSCRIBERS = frozenset(
    {
        "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago",
        "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error",  # noqa: E501
    }
)


def unicast_skip_expected(name: str, reason: str) -> bool:
    """A unicast processor's TCK test ``name`` may skip for ``reason``: the TCK's untested
    rules, the two tests needing two subscribers at once (``max_supported_subscribers() ==
    1``), and the optional §1.11 tests, which the second subscriber's on_error answers."""
    if reason.startswith("untested:"):  # the TCK verifies these for no one
        return True
    if name in TWO_SUBSCRIBERS:
        return reason.startswith("needs 2 subscribers at once")
    if "spec111" in name:
        return reason.startswith("optional requirement not met: §1.11") and "unicast" in reason
    return False


def assert_skips_only_where_expected(verification: type[Any], name: str) -> None:
    """Run TCK test ``name`` of ``verification`` (a unicast processor's): it passes, or it
    skips for a reason :func:`unicast_skip_expected` allows."""
    assert sum("spec111" in n for n in dir(verification) if n.startswith("test_")) == 5
    try:
        getattr(verification(), name)()
    except unittest.SkipTest as skip:
        if not unicast_skip_expected(name, str(skip)):
            pytest.fail(f"{name} skipped unexpectedly: {skip}")
