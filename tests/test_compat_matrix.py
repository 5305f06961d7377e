"""python -m compat_matrix: the TCK runner, the grid, and the files it writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from compat_matrix import grid
from compat_matrix.__main__ import (
    failures,
    grid_markdown,
    main,
    markdown,
    render_json,
    versions_line,
)
from compat_matrix._envs import SecondRun, interleave, merge, parse_payload, run_second, tag
from compat_matrix._tck_run import CaseResult, run_case
from compat_matrix._tck_run import TestOutcome as Outcome  # not "Test…": pytest would collect it
from compat_matrix.grid import Cell, Sink, Source, run_cell, run_grid
from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams._subscription import EMPTY_SUBSCRIPTION
from reactive_streams.tck import PublisherVerification, TestEnvironment
from reactive_streams.testing import RecordingSubscriber


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


def test_runner_records_pytest_skip_and_fail_in_a_case_as_skip_and_fail() -> None:
    """A user's case may call pytest.skip() or pytest.fail() (BaseExceptions): the runner
    records them as skip and fail, instead of stopping the whole matrix."""

    class Scripted(_Overproducing):
        def create_publisher(self, elements: int) -> Publisher[int]:
            if elements == 0:
                pytest.skip("no empty publisher here")
            pytest.fail("cannot build one")

    try:
        result = run_case("teeth", "scripted", Scripted)
    except BaseException as exc:  # noqa: BLE001 - pytest's outcomes are what must not escape
        raise AssertionError(f"the runner let {type(exc).__name__} out: {exc}") from None
    statuses = {o.status for o in result.outcomes}
    assert "fail" in statuses and "error" not in statuses
    assert any(o.status == "skip" and "no empty publisher" in o.detail for o in result.outcomes)


def test_grid_cells_that_can_run_all_pass() -> None:
    """Every available source feeds every available sink, in order, within the bound."""
    cells = run_grid(n=120, delay=0.0)
    ran = [c for c in cells if c.status != "unavailable"]
    assert ran, "no grid cell could run"
    assert [c for c in ran if c.status != "pass"] == []
    assert all(c.max_in_flight <= c.bound for c in ran)


def _eager(n: int, taken: grid.Taken) -> Publisher[int]:
    """A broken adapter: takes its whole source at subscribe, then emits with demand."""
    from reactive_streams.adapters.iterables import from_iterable

    def whole() -> list[int]:
        out = []
        for i in range(n):
            taken()
            out.append(i)
        return out

    class Eager:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            from_iterable(whole()).subscribe(subscriber)

    return Eager()


def _greedy_sink(publisher: Publisher[Any], consume: Any, delay: float) -> None:
    """A broken sink: asks for unbounded demand, consuming on the signalling thread (as an
    Rx observer does), so nothing piles up."""
    greedy: RecordingSubscriber[Any] = RecordingSubscriber(2**62)
    greedy.on_next_hook = consume
    publisher.subscribe(greedy)
    greedy.await_terminal(60)


def _ordinary_source() -> Source:
    source = next(s for s in grid.sources() if isinstance(s, Source))
    assert source.name == "from_iterable(generator)"
    return source


def _ordinary_sink() -> Sink:
    sink = next(s for s in grid.sinks() if isinstance(s, Sink))
    assert sink.name == "to_iterator"
    return sink


def test_a_grid_cell_fails_an_adapter_that_buffers_its_source() -> None:
    """In flight is counted from where elements leave the foreign source, so an adapter that
    takes everything at once fails, though it emits only with demand."""
    cell = run_cell(Source("eager", _eager), _ordinary_sink(), "direct", 300, 0.0)
    assert cell.status == "fail" and "in flight" in cell.detail and cell.max_in_flight == 300


def test_a_grid_cell_fails_a_sink_that_requests_without_bound() -> None:
    """The sink's outstanding demand is checked against its prefetch: a sink asking for
    unbounded demand fails even where it consumes as elements come (nothing piles up)."""
    cell = run_cell(_ordinary_source(), Sink("greedy", _greedy_sink), "direct", 300, 0.0)
    assert cell.status == "fail" and "requested ahead" in cell.detail
    assert cell.max_in_flight <= cell.bound  # only the demand check could catch it


def test_a_grid_cell_that_hangs_fails_instead_of_stopping_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A source that never completes fails its cell after CELL_TIMEOUT; the run goes on
    (the cell's blocked sink thread is a daemon, left behind)."""

    class Silent:
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            subscriber.on_subscribe(EMPTY_SUBSCRIPTION)  # and never a signal more

    monkeypatch.setattr(grid, "CELL_TIMEOUT", 0.5)
    silent = Source("silent", lambda n, taken: Silent())
    cell = run_cell(silent, _ordinary_sink(), "direct", 300, 0.0)
    assert cell.status == "fail" and "still running" in cell.detail


def test_a_grid_too_short_to_show_the_bound_is_refused() -> None:
    """With fewer elements than twice the bound, an unbounded buffer could pass: refused."""
    with pytest.raises(ValueError, match="twice the bound"):
        run_cell(_ordinary_source(), _ordinary_sink(), "direct", 20, 0.0)


# -- the second environment (another reactivex), merged into one matrix ----------------------

_MAIN = {"python": "3.11.7", "reactivex": "4.1.0", "aioreactive": "0.20.0"}
_RX6 = {"python": "3.11.7", "reactivex": "6.1.0", "aioreactive": "not installed"}


def _result(column: str, module: str, *statuses: str) -> CaseResult:
    """A PublisherVerification column whose required tests had ``statuses``."""
    outcomes = [
        Outcome(f"required_spec10{i}_x", f"1.{i}", "required", status, "")
        for i, status in enumerate(statuses, 1)
    ]
    return CaseResult(column, "PublisherVerification", module, outcomes)


def _cell(source: str, sink: str, status: str = "pass") -> Cell:
    """A grid cell; one touching an Observable bridges reactivex."""
    libraries = ["reactivex"] if "observable" in source + sink else []
    return Cell(source, sink, "direct", status, 3, 1, 17, "", libraries)


def _second(*statuses: str, cell: str = "pass") -> SecondRun:
    """What ``.venv-rx6`` sends back: one rx column and one rx cell, as JSON."""
    results, cells = tag(
        [_result("from_observable(block)", "rx", *statuses)],
        [_cell("from_observable(block)", "to_iterator", cell)],
        "reactivex 6.1.0",
    )
    payload = json.loads(
        json.dumps(
            {
                "versions": _RX6,
                "tck": [r.to_json() for r in results],
                "grid": [c.to_json() for c in cells],
            }
        )
    )
    return parse_payload(payload, ".venv-rx6/bin/python")


def _main_run() -> tuple[list[CaseResult], list[Cell]]:
    """The main interpreter's results: one rx column, one iterables column, two cells."""
    return tag(
        [
            _result("from_observable(block)", "rx", "pass", "pass"),
            _result("from_iterable", "iterables", "pass", "pass"),
        ],
        [_cell("from_observable(block)", "to_iterator"), _cell("from_iterable", "to_iterator")],
        "reactivex 4.1.0",
    )


def test_merge_puts_each_reactivex_version_beside_the_other() -> None:
    """Each rx column and cell is labelled with its reactivex; 6.x follows its 4.x twin."""
    results, cells = merge(*_main_run(), _second("pass", "skip"))
    assert [r.label for r in results] == [
        "from_observable(block) [reactivex 4.1.0]",
        "from_observable(block) [reactivex 6.1.0]",
        "from_iterable",
    ]
    assert [r.counts()["skip"] for r in results] == [0, 1, 0]
    assert [(c.source, c.env) for c in cells] == [
        ("from_observable(block)", "reactivex 4.1.0"),
        ("from_observable(block)", "reactivex 6.1.0"),
        ("from_iterable", ""),
    ]


def test_interleave_appends_what_has_no_twin() -> None:
    """An extra item with no primary twin goes at the end; twins keep their order."""
    assert interleave([1, 2, 3], [12, 22, 9], key=lambda x: x % 10) == [1, 2, 12, 22, 3, 9]


def test_markdown_shows_both_versions_in_summary_rule_tables_and_versions_line() -> None:
    """Summary rows, rule-table columns and the Versions line name 4.1.0 and 6.1.0."""
    second = _second("pass", "fail")
    results, cells = merge(*_main_run(), second)
    text = markdown(results, cells, _MAIN, second)
    assert "Versions: python 3.11.7, reactivex 4.1.0 and 6.1.0, aioreactive 0.20.0." in text
    assert "| from_observable(block) [reactivex 4.1.0] | PublisherVerification | 2 | 0 |" in text
    assert "| from_observable(block) [reactivex 6.1.0] | PublisherVerification | 1 | 1 |" in text
    header = (
        "| from_observable(block) [reactivex 4.1.0] | from_observable(block) [reactivex 6.1.0] |"
    )
    assert header in text
    assert "| `required_spec102_x` | ✅ | ❌ | ✅ |" in text
    assert (
        "| from_observable(block) | ✅ 1/17 (reactivex 4.1.0)<br>✅ 1/17 (reactivex 6.1.0) |"
        in text
    )
    assert versions_line(_MAIN, SecondRun("x", "absent")).startswith(
        "Versions: python 3.11.7, reactivex 4.1.0, "
    )


def test_a_required_failure_under_the_second_version_fails_the_run() -> None:
    """A §1.2 failure only under reactivex 6.1.0 is a reason to exit 1; all green is not."""
    assert failures(*merge(*_main_run(), _second("pass", "pass")), _second()) == []
    results, cells = merge(*_main_run(), _second("pass", "fail"))
    assert failures(results, cells, _second()) == [
        "REQUIRED FAILURE: from_observable(block) [reactivex 6.1.0]: required_spec102_x"
    ]
    results, cells = merge(*_main_run(), _second("pass", cell="fail"))
    assert len(failures(results, cells, _second())) == 1


def test_a_missing_second_interpreter_is_reported_and_not_an_error(tmp_path: Path) -> None:
    """No interpreter at the path: status "absent", said in the matrix, exit status 0."""
    second = run_second(tmp_path / "nowhere" / "python", ["rx"], None)
    assert second.status == "absent" and second.results == []
    results, cells = merge(*_main_run(), second)
    assert failures(results, cells, second) == []
    text = markdown(results, cells, _MAIN, second)
    assert "nowhere/python` not found" in text
    assert "reactivex 4.1.0 and" not in text


def test_a_second_interpreter_that_gives_no_results_is_an_error(tmp_path: Path) -> None:
    """An interpreter that exits without writing its JSON makes the run fail, saying so."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    broken.chmod(0o755)
    second = run_second(broken, ["rx"], None)
    assert second.status == "error" and "exit 3" in second.detail and "broken" in second.detail
    assert failures([], [], second) == [second.describe()]


def test_the_second_run_entry_point_sends_labelled_rx_results() -> None:
    """``python -m compat_matrix --only rx --json PATH`` in a subprocess gives every rx column."""
    pytest.importorskip("reactivex")
    second = run_second(Path(sys.executable), ["rx"], None)
    assert second.status == "ran", second.detail
    label = f"reactivex {second.versions['reactivex']}"
    assert len(second.results) >= 6
    assert {r.env for r in second.results} == {label}
    assert failures(second.results, second.cells, second) == []


# -- honesty: what the matrix must not pass off as fine ----------------------------------------


def test_only_a_missing_optional_library_makes_a_column_unavailable() -> None:
    """reactivex not installed: unavailable. A broken import of ours (a typo'd name, a module
    of ours missing) is a defect, not a missing library."""
    from compat_matrix._tck_run import optional_missing

    assert optional_missing(ModuleNotFoundError("no reactivex", name="reactivex")) == "reactivex"
    assert optional_missing(ModuleNotFoundError("x", name="pyspark.sql.connect")) == "pyspark"
    typo = ImportError("cannot import name 'PrefetchQueeu'", name="reactive_streams")
    assert optional_missing(typo) == ""
    assert optional_missing(ModuleNotFoundError("no adapters.rxx", name="adapters.rxx")) == ""


def test_a_case_module_with_a_broken_import_fails_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    from compat_matrix import _tck_run

    real = importlib.import_module

    def broken(name: str, *args: Any) -> Any:
        if name == "compat_matrix.cases.iterables":
            raise ImportError(
                "cannot import name 'PrefetchQueeu' from 'reactive_streams._prefetch'"
            )
        return real(name, *args)

    monkeypatch.setattr(_tck_run.importlib, "import_module", broken)
    with pytest.raises(ImportError, match="PrefetchQueeu"):
        list(_tck_run.discover_cases({"iterables"}))


def test_a_grid_side_with_a_broken_import_fails_the_run() -> None:
    with pytest.raises(ImportError, match="Queeu"):
        grid._missing("to_observable", ImportError("cannot import name 'Queeu'"))
    missing = grid._missing("to_observable", ModuleNotFoundError("no", name="reactivex"))
    assert grid._library(missing) == "reactivex"  # kept by --grid-library reactivex


def test_a_case_that_overrides_a_tck_test_is_an_error_not_a_pass() -> None:
    """A column must report the TCK's tests: one replaced by the case cannot pass."""

    class Overriding(_Overproducing):
        def test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements(  # noqa: E501
            self,
        ) -> None:
            pass  # "passes" whatever the publisher does

    result = run_case("teeth", "overriding", Overriding)
    replaced = [o for o in result.outcomes if "replaces the TCK's test" in o.detail]
    assert len(replaced) == 1 and replaced[0].status == "error"
    assert replaced[0] in result.required_failures()


def test_an_optional_requirement_not_met_has_its_own_mark() -> None:
    """The TCK reports an optional test an adapter fails as a skip (as the official one
    does); the page tells it apart from an untested or not applicable one."""
    outcomes = [
        Outcome(
            "optional_spec111_x", "1.11", "optional", "skip", "optional requirement not met: §1.11"
        ),
        Outcome("untested_spec110_x", "1.10", "untested", "skip", "untested by the official TCK"),
    ]
    page = markdown([CaseResult("c", "PublisherVerification", "m", outcomes)], [], _MAIN, _second())
    assert "| 1.11 | optional | `optional_spec111_x` | ⚠️ |" in page
    assert "| 1.10 | untested | `untested_spec110_x` | ➖ |" in page
    assert "⚠️ an optional requirement not met" in page


def test_the_page_says_when_and_from_which_commit_it_was_made(tmp_path: Path) -> None:
    assert main(["--only", "iterables", "--no-grid", "--no-also", "--out", str(tmp_path)]) == 0
    generated = json.loads((tmp_path / "compat-matrix.json").read_text())["generated"]
    assert "UTC" in generated
    assert (
        f"Generated by `python -m compat_matrix` on {generated}"
        in (tmp_path / "compat-matrix.md").read_text()
    )


def test_an_unknown_case_module_or_a_too_short_grid_is_refused_before_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--only", "iterable,rxx", "--no-grid"])
    assert exited.value.code == 2
    assert "--only: no case module iterable, rxx" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--only", "iterables", "--grid-elements", "60"])
    assert "--grid-elements must be >= " in capsys.readouterr().err


def test_a_second_environment_where_the_rx_columns_could_not_run_failed() -> None:
    """Its whole point is to run them: reactivex missing there, or an rx column that would
    not import, is a failure of the run, not 'ran'."""
    from compat_matrix._envs import _checked_second

    ran = _second("pass")
    assert _checked_second(ran).status == "ran"
    without = SecondRun("py", "ran", {"python": "3.11"}, [], [])
    assert _checked_second(without).status == "error"
    assert "reactivex is not installed there" in _checked_second(without).detail
    unavailable = SecondRun(
        "py", "ran", dict(_RX6), [CaseResult("rx", "", "rx", unavailable="unavailable: x")], []
    )
    checked = _checked_second(unavailable)
    assert checked.status == "error" and failures([], [], checked) == [checked.describe()]
    other = Cell(  # aioreactive is not installed there: that cell is unavailable, as anywhere
        "from_async_observable",
        "to_observable",
        "direct",
        "unavailable",
        0,
        0,
        0,
        "No module named 'aioreactive'",
        ["aioreactive", "reactivex"],
    )
    assert _checked_second(SecondRun("py", "ran", dict(_RX6), [], [other])).status == "ran"


def test_the_grid_is_a_table_per_route_with_sources_as_rows_and_sinks_as_columns() -> None:
    """Sources are rows and sinks columns, one table for direct and one through publish_on;
    a pair that never ran is an empty cell; a detail is a numbered note, given once."""
    why = "No module named 'aioreactive'"
    cells = [
        Cell("a", "x", "direct", "pass", 300, 16, 17),
        Cell("a", "y", "direct", "fail", 120, 40, 17, "40 elements in flight, bound 17"),
        Cell("b", "y", "direct", "unavailable", 0, 0, 0, why, env="reactivex 6.1.0"),
        Cell("a", "x", "publish_on", "pass", 300, 28, 34),
        Cell("b", "x", "publish_on", "unavailable", 0, 0, 0, why),
    ]
    text = "\n".join(grid_markdown(cells))
    direct = text[text.index("### Direct") : text.index("### Through `publish_on`")]
    through = text[text.index("### Through `publish_on`") : text.index("Notes:")]
    assert "| source ↓ sink → | x | y |" in direct
    assert "| a | ✅ 16/17 | ❌ 40/17 [1] |" in direct
    assert "| b |  | ➖ (reactivex 6.1.0) [2] |" in direct
    assert "| a | ✅ 28/34 |  |" in through
    assert "| b | ➖ [2] |  |" in through
    assert text.endswith("1. 40 elements in flight, bound 17\n2. " + why)
    assert "received all 300 elements" in text


def test_render_only_rewrites_the_markdown_from_the_saved_json_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--render-only reads OUT/compat-matrix.json and writes the page markdown() makes of
    it, generation time included; no TCK case or grid cell runs, the JSON is left as it was."""
    from compat_matrix import __main__ as entry

    def ran(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("--render-only ran the matrix")

    monkeypatch.setattr(entry, "discover_cases", ran)
    monkeypatch.setattr(entry, "run_grid", ran)
    second = _second("pass", "skip")
    results, cells = merge(*_main_run(), second)
    payload = {
        "generated": "2026-11-28 14:16 UTC, from commit abc1234",
        "versions": _MAIN,
        "second_environment": second.to_json(),
        "tck": [r.to_json() for r in results],
        "grid": [c.to_json() for c in cells],
    }
    saved = json.dumps(payload, indent=1) + "\n"
    (tmp_path / "compat-matrix.json").write_text(saved)
    assert main(["--render-only", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "compat-matrix.md").read_text()
    assert page == markdown(results, cells, _MAIN, second, payload["generated"])
    assert page == render_json(json.loads(saved))
    assert "on 2026-11-28 14:16 UTC, from commit abc1234; do not edit" in page
    assert (tmp_path / "compat-matrix.json").read_text() == saved
