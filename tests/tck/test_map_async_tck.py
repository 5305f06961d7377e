"""The TCK over ``reactive_streams.map_async`` (identity fn, concurrency=4): unicast.

Skips expected, and only these (a skip anywhere else fails ``test_skips_only_where_expected``):
the TCK's own untested rules; the two processor tests that need two subscribers at once
(``max_supported_subscribers() == 1``); and the five optional §1.11 multi-subscriber tests,
which a unicast stage answers with ``on_error`` for the second subscriber (§1.9/§1.11)."""

from __future__ import annotations

from typing import Final

import pytest
from tck_helpers import assert_skips_only_where_expected

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


@pytest.mark.parametrize("name", TESTS)
def test_skips_only_where_expected(name: str) -> None:
    """Each TCK test passes, or skips for a reason a unicast processor may have."""
    assert_skips_only_where_expected(MapAsyncProcessorVerification, name)
