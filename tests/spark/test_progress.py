"""The main job's progress: a tqdm bar on a terminal, a line every few seconds in a log; the
reporter thread ends with the run (its end, an error, Ctrl-C) and never delays it. No Spark:
the session and the run are stand-ins; the interval is ``main``'s ``progress_every``."""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import ROOT, wait_until  # noqa: E402

import reactive_streams.spark.__main__ as command  # noqa: E402
import reactive_streams.spark.pipeline as pipeline  # noqa: E402
from reactive_streams.spark._progress import ProgressLines, progress  # noqa: E402
from reactive_streams.spark.pipeline import Summary, Window  # noqa: E402

_LINE = re.compile(r"^rows done: ([\d,]+) of ([\d,]+) \((\d+)%\), ([\d,]+) rows/s$")


class _Stream(io.StringIO):
    """Stands for stderr: a terminal or not; writes are serialised, lines read any time."""

    def __init__(self, tty: bool = False) -> None:
        super().__init__()
        self._tty = tty
        self._lock = threading.Lock()

    def isatty(self) -> bool:
        return self._tty

    def write(self, text: str) -> int:
        with self._lock:
            return super().write(text)  # under _lock: the job's and the reporter's threads

    def text(self) -> str:
        with self._lock:
            return self.getvalue()

    def progress_lines(self) -> list[str]:
        return [line for line in self.text().splitlines() if _LINE.match(line)]


class _Session:
    def stop(self) -> None:
        pass


class _Meter:
    def __init__(self, finished: int) -> None:
        self.finished = finished
        self.emitted = finished + 10


def _summary(rows: int) -> Summary:
    return Summary(rows, 1, 1.0, 10, 100, 8, 1, Window(0, 0, 0, 0, 0, 0.0, 0.0))


_EARLIER: set[threading.Thread] = set()  # owned: the test thread


@pytest.fixture(autouse=True)
def _own_reporters_only() -> None:
    """A test sees only the reporters it started (one a failed test left does not count)."""
    _EARLIER.clear()
    _EARLIER.update(threading.enumerate())


def _reporters() -> list[threading.Thread]:
    """The progress reporter threads this test started that are still running."""
    return [t for t in threading.enumerate() if t.name == "rs-main-progress" and t not in _EARLIER]


def _reporter_ends() -> None:
    """The reporter thread ends (waited on: a thread ends a moment after it is woken)."""
    wait_until(lambda: not _reporters(), 30, "the progress reporter's end")


def _stderr(monkeypatch: pytest.MonkeyPatch, tty: bool = False) -> _Stream:
    """A stderr that is a terminal or not (a log file, a pipe), and a stand-in Spark session.
    Set in the test itself: pytest's capture puts its own stderr back after a fixture's."""
    stream = _Stream(tty)
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(command, "_session", lambda args: _Session())
    return stream


def test_the_spark_extra_brings_tqdm() -> None:
    """A plain ``pip install '.[spark]'`` gets the main job's bar."""
    with open(Path(ROOT) / "pyproject.toml", "rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    assert any(re.match(r"tqdm\b", requirement) for requirement in extras["spark"])


def test_a_log_gets_a_progress_line_every_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No terminal: the rows done, of how many, the percentage and a rate, line after line
    while the run goes on (waited on, not timed), and none after the run ended."""
    stderr = _stderr(monkeypatch)

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any) -> Summary:
        on_window(Window(3, 1, 0, 0, 0, 0.0, 0.0), _Meter(1_200))
        wait_until(lambda: len(stderr.progress_lines()) >= 2, 30, "two progress lines")
        return _summary(1_200)

    monkeypatch.setattr(pipeline, "run", run)
    assert command.main(["--rows", "2000"], progress_every=0.01) == 0
    lines = stderr.progress_lines()
    assert lines[-1].startswith("rows done: 1,200 of 2,000 (60%), ")
    _reporter_ends()  # ended with the run: nothing more comes
    assert stderr.progress_lines() == lines


def test_the_reporter_never_delays_the_end_of_the_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An hour between lines: the run's end wakes the reporter, which ends at once instead
    of finishing its wait (the job would last an hour)."""
    stderr = _stderr(monkeypatch)
    monkeypatch.setattr(pipeline, "run", lambda *args, **kwargs: _summary(10))
    ended: list[int] = []
    job = threading.Thread(
        target=lambda: ended.append(command.main(["--rows", "10"], progress_every=3600.0))
    )
    job.start()
    job.join(60)
    assert ended == [0], "the job waited for its progress reporter"
    _reporter_ends()
    assert not stderr.progress_lines()  # none was due


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_ends_the_reporter_before_the_interrupted_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C during the run (lines already coming): the reporter ends with the run, and no
    progress line follows 'interrupted after'."""
    stderr = _stderr(monkeypatch)
    in_call = threading.Event()

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any) -> Summary:
        on_window(Window(0, 1, 0, 0, 0, 0.0, 0.0), _Meter(500))
        wait_until(lambda: bool(stderr.progress_lines()), 30, "a progress line")
        in_call.set()
        wait_until(lambda: stop.requested, 30, "the stop the Ctrl-C asks for")
        return _summary(500)

    monkeypatch.setattr(pipeline, "run", run)
    pressing = threading.Thread(
        target=lambda: in_call.wait(30) and os.kill(os.getpid(), signal.SIGINT), daemon=True
    )
    pressing.start()
    assert command.main(["--rows", "1000"], progress_every=0.01) == 130
    pressing.join(30)
    _reporter_ends()
    text = stderr.text()
    assert "rows done: 500 of 1,000 (50%)" in text
    assert "rows done: " not in text[text.index("interrupted after 500 rows") :]


def test_a_failed_run_ends_the_reporter(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error from the pipeline: exit 2 naming it, and the reporter thread is gone."""
    stderr = _stderr(monkeypatch)

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any) -> Summary:
        wait_until(lambda: bool(stderr.progress_lines()), 30, "a progress line")
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "run", run)
    assert command.main(["--rows", "10"], progress_every=0.01) == 2
    assert "error: the pipeline failed: RuntimeError: boom" in stderr.text()
    _reporter_ends()


def test_no_progress_means_no_lines_and_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--no-progress: no reporter is started at all."""
    stderr = _stderr(monkeypatch)
    threads: list[list[threading.Thread]] = []

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any) -> Summary:
        on_window(Window(0, 1, 0, 0, 0, 0.0, 0.0), _Meter(5))
        threads.append(_reporters())
        return _summary(5)

    monkeypatch.setattr(pipeline, "run", run)
    assert command.main(["--rows", "10", "--no-progress"], progress_every=0.01) == 0
    assert threads == [[]]
    assert not stderr.progress_lines()


def test_a_terminal_gets_the_tqdm_bar_and_no_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal keeps the redrawn bar (tqdm, from the spark extra), filled at the end."""
    pytest.importorskip("tqdm")
    terminal = _stderr(monkeypatch, tty=True)

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any) -> Summary:
        on_window(Window(7, 1, 0, 0, 0, 0.0, 0.0), _Meter(40))
        return _summary(100)

    monkeypatch.setattr(pipeline, "run", run)
    assert command.main(["--rows", "100"], progress_every=0.01) == 0
    text = terminal.text()
    assert "rows done: 100%|" in text  # tqdm's bar, completed
    assert not terminal.progress_lines() and not _reporters()  # none was started


def test_the_reporter_stops_quietly_when_its_stream_breaks() -> None:
    """A closed stderr (the reader of a pipe went away): no traceback, the thread ends."""
    stream = _Stream()
    stream.close()
    shown = progress(10, every=0.01, stream=stream)
    assert isinstance(shown, ProgressLines)
    _reporter_ends()
    shown.close(completed=False)
    shown.close(completed=False)  # idempotent


def test_the_interval_must_be_positive() -> None:
    """A zero interval would print in a busy loop: refused."""
    with pytest.raises(ValueError, match="every must be a number of seconds > 0, got 0"):
        ProgressLines(10, every=0, stream=_Stream())
