"""The TCK over ``reactive_streams.map_async`` (identity fn, concurrency=4): unicast.

Skips expected, and only these (a skip anywhere else fails ``test_skips_only_where_expected``):
the TCK's own untested rules; the two processor tests that need two subscribers at once
(``max_supported_subscribers() == 1``); and the five optional §1.11 multi-subscriber tests,
which a unicast stage answers with ``on_error`` for the second subscriber (§1.9/§1.11)."""

from __future__ import annotations

import unittest
from typing import Final

import pytest

from compat_matrix.cases.map_async import (
    MapAsyncProcessorVerification,
    MapAsyncPublisherVerification,
)


class TestMapAsyncPublisher(MapAsyncPublisherVerification):
    pass


class TestMapAsync(MapAsyncProcessorVerification):
    pass


TESTS: Final = sorted(
    name for name in dir(MapAsyncProcessorVerification) if name.startswith("test_")
)
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
        getattr(MapAsyncProcessorVerification(), name)()
    except unittest.SkipTest as skip:
        if not _expected(name, str(skip)):
            pytest.fail(f"{name} skipped unexpectedly: {skip}")
