"""The TCK over ``reactive_streams.log``: an identity Processor, unicast.

Skips expected, and only these (a skip anywhere else fails ``test_skips_only_where_expected``):
the TCK's own untested rules; the two processor tests that need two subscribers at once
(``max_supported_subscribers() == 1``); and the five optional §1.11 multi-subscriber tests,
which a unicast stage answers with ``on_error`` for the second subscriber (§1.9/§1.11)."""

from __future__ import annotations

import unittest
from collections.abc import Iterator
from typing import Any, Final

import pytest

from reactive_streams import Processor, Publisher, log, pipe
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.tck import IdentityProcessorVerification


class _FailingIterable:
    """An iterable whose ``__iter__`` raises: the error must pass the stage (§1.4)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable cannot be iterated")


class LogProcessorVerification(IdentityProcessorVerification[Any]):
    """``log("tck")``: every signal passes through; one subscriber."""

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return log("tck")

    def create_element(self, i: int) -> Any:
        return i

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return pipe(from_iterable(_FailingIterable()), log("tck-failed"))

    def max_supported_subscribers(self) -> int:
        return 1


class TestLog(LogProcessorVerification):
    pass


TESTS: Final = sorted(name for name in dir(LogProcessorVerification) if name.startswith("test_"))
TWO_SUBSCRIBERS: Final = {
    "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago",
    "test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error",  # noqa: E501
}
MULTI_SUBSCRIBER: Final = {name for name in TESTS if "spec111" in name}


def _expected(name: str, reason: str) -> bool:
    if reason.startswith("untested:"):  # the TCK verifies these for no one
        return True
    if name in TWO_SUBSCRIBERS:
        return reason.startswith("needs 2 subscribers at once")
    if name in MULTI_SUBSCRIBER:
        return reason.startswith("optional requirement not met: §1.11") and "unicast" in reason
    return False


@pytest.mark.parametrize("name", TESTS)
def test_skips_only_where_expected(name: str) -> None:
    """Each TCK test passes, or skips for the reason this file expects of it."""
    assert len(MULTI_SUBSCRIBER) == 5
    try:
        getattr(LogProcessorVerification(), name)()
    except unittest.SkipTest as skip:
        if not _expected(name, str(skip)):
            pytest.fail(f"{name} skipped unexpectedly: {skip}")
