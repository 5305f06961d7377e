"""Shared pytest configuration: the TCK runs live in tests/tck, adapters in tests/adapters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactive_streams.testing import switch_interval


@pytest.fixture(params=[None, 1e-6], ids=["default-switching", "switching-every-1us"])
def switching(request: pytest.FixtureRequest) -> Iterator[float | None]:
    """Run a race at the default switch interval, and again at 1e-6 s (restored after)."""
    if request.param is None:
        yield None
        return
    with switch_interval(request.param):
        yield request.param
