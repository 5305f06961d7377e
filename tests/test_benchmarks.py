"""The benchmark report's arithmetic: ratios, costs, and what the plot can show."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.__main__ import _as_result
from benchmarks._harness import Result


def test_a_rate_is_better_above_one_and_a_cost_below_one() -> None:
    """The plot's one scale: a rate's ratio as is, a cost's inverted (memory 4x lower is 4x
    better); the table's ratio stays ours / baseline for both."""
    rate = Result("rate", ours=300.0, baseline=100.0, unit="elements/s")
    cost = Result("memory", ours=2.0, baseline=8.0, unit="MB", lower_is_better=True)
    assert rate.ratio == 3.0 and rate.advantage == 3.0
    assert cost.ratio == 0.25 and cost.advantage == 4.0


def test_figures_the_plot_cannot_show_have_no_advantage() -> None:
    """No baseline, or a figure at or below zero (a heap that shrank), is left out of the
    log-scale plot rather than drawn as a bar of nonsense."""
    assert Result("no baseline", 1.0, None, "x").advantage is None
    assert Result("shrank", -0.5, 2.0, "MiB", lower_is_better=True).advantage is None
    assert Result("zero", 0.0, 2.0, "MiB", lower_is_better=True).advantage is None


def test_a_suite_returning_dicts_keeps_lower_is_better() -> None:
    """spark_bench returns dicts: the flag survives the conversion."""
    result = _as_result(
        {"name": "heap", "ours": 1.0, "baseline": 3.0, "unit": "MiB", "lower_is_better": True}
    )
    assert result.lower_is_better and result.advantage == 3.0
    assert not _as_result({"name": "rate", "ours": 1.0, "baseline": 3.0}).lower_is_better


def test_the_core_and_rx_suites_run_and_state_their_floors() -> None:
    """A smoke run at tiny sizes (every line counts its elements, or asserts): rates are
    positive, and the publish_on lines carry the executor round trip measured in the run."""
    pytest.importorskip("reactivex")
    from benchmarks import core_bench, rx_bench

    results = core_bench.run(n=2_000, repeats=1)
    results += rx_bench.run(n=2_000, repeats=1, mem_items=2_000)
    assert all(r.ours > 0 for r in results)
    hand_offs = [r for r in results if r.name.startswith("publish_on")]
    assert [r.note.count("executor round trip") for r in hand_offs] == [1, 1]
    assert "window of 256 elements" in hand_offs[0].note
    assert "window of 1024 elements" in hand_offs[1].note
    assert any(r.name.startswith("floor:") and r.ratio for r in results)


def test_plot_only_redraws_the_png_from_the_saved_json_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--plot-only`` reads docs/benchmarks.json and writes docs/performance.png; no suite
    runs and neither the JSON nor performance.md is rewritten."""
    pytest.importorskip("matplotlib")
    from benchmarks import __main__ as bench

    def no_suite(name: str, quick: bool) -> list[Result]:
        raise AssertionError(f"--plot-only ran the {name} suite")

    monkeypatch.setattr(bench, "_run_suite", no_suite)
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    rows = [
        Result("met", 3.0, 1.0, "elements/s", target=2.0).to_json(),
        Result("missed", 1.0, 1.0, "elements/s", target=2.0).to_json(),
        Result("reported", 1.0, 4.0, "MB", lower_is_better=True).to_json(),
    ]
    saved = json.dumps({"python": "3.11", "machine": "x", "results": rows})
    (docs / "benchmarks.json").write_text(saved)
    assert bench.main(["--plot-only"]) == 0
    assert (docs / "performance.png").read_bytes().startswith(b"\x89PNG")
    assert (docs / "benchmarks.json").read_text() == saved
    assert not (docs / "performance.md").exists()


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
def test_the_map_partitions_suite_runs_at_quick_sizes_and_reports_the_service() -> None:
    """``--only map_partitions --quick``: the throughput lines (against asyncio per batch,
    a thread pool, sequential calls) and the worker peak-RSS lines exist with figures, and
    each note gives the service's max_in_flight, within 16 calls x 2 tasks for ours."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pandas")
    from reactive_streams.spark.local import java_problem

    problem = java_problem()
    if problem:
        pytest.skip(problem)
    from benchmarks import __main__ as bench

    results = bench._run_suite("map_partitions", quick=True)
    names = [r.name for r in results]
    for baseline in ("asyncio.run per batch", "ThreadPoolExecutor(16)", "sequential calls"):
        assert any("map_async(concurrency=16)" in n and baseline in n for n in names), names
    rates = [r for r in results if r.unit == "rows/s"]
    assert len(rates) == 3 and all(r.ours > 0 and r.baseline for r in rates)
    assert [r.target for r in rates] == [1.0, None, 10.0]
    memory = [r for r in results if "peak RSS" in r.name]
    assert len(memory) == 3 and all(r.unit == "MiB" and r.baseline for r in memory)
    assert memory[-1].target == 0.67 and "flat" in memory[-1].name
    for r in results:
        seen = [int(n) for n in re.findall(r"max_in_flight:? (?:ours )?(\d+)", r.note)]
        assert seen and 0 < seen[0] <= 32, r.note
