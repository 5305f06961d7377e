"""python -m compat_matrix: the TCK runner, the grid, and the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

from compat_matrix.__main__ import main
from compat_matrix._tck_run import run_case
from compat_matrix.grid import run_grid
from rs_core import Publisher, Subscriber, Subscription
from rs_core.tck import PublisherVerification, TestEnvironment


def test_matrix_for_iterables_passes_and_writes_markdown_and_json(tmp_path: Path) -> None:
    """The iterables column passes, and both output files name every official test."""
    assert main(["--only", "iterables", "--no-grid", "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "compat-matrix.json").read_text())
    columns = {case["column"] for case in payload["tck"]}
    assert "from_iterable" in columns and "publish_on" in columns
    markdown = (tmp_path / "compat-matrix.md").read_text()
    assert "spec317_must_not_signal_on_error_when_pending_above_long_max_value" in markdown


class _TwoForOne:
    """Emits two elements for every one requested (§1.1 broken), then completes."""

    def __init__(self, subscriber: Subscriber[int], n: int) -> None:
        self.subscriber, self.left, self.done = subscriber, n, False

    def request(self, k: int) -> None:
        for _ in range(2 * k):
            if self.done:
                return
            if self.left == 0:
                self.done = True
                self.subscriber.on_complete()
                return
            self.left -= 1
            self.subscriber.on_next(self.left)

    def cancel(self) -> None:
        self.done = True


class _Overproducer:
    def __init__(self, n: int) -> None:
        self.n = n

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        sub: Subscription = _TwoForOne(subscriber, self.n)
        subscriber.on_subscribe(sub)


class _Overproducing(PublisherVerification[int]):
    def env(self) -> TestEnvironment:
        return TestEnvironment(default_timeout_ms=200, no_signals_timeout_ms=20)

    def max_elements_from_publisher(self) -> int:
        return 100

    def create_publisher(self, elements: int) -> Publisher[int]:
        return _Overproducer(elements)


def test_runner_reports_a_required_failure_with_its_rule() -> None:
    """A broken publisher's column carries a required failure naming §1.1."""
    result = run_case("teeth", "broken", _Overproducing)
    failures = result.required_failures()
    assert any(o.rule == "1.1" and o.detail.startswith("§1.1") for o in failures)


def test_grid_cells_that_can_run_all_pass() -> None:
    """Every available source feeds every available sink, in order, within the bound."""
    cells = run_grid(n=60, delay=0.0)
    ran = [c for c in cells if c.status != "unavailable"]
    assert ran, "no grid cell could run"
    assert [c for c in ran if c.status != "pass"] == []
    assert all(c.max_in_flight <= c.bound for c in ran)
