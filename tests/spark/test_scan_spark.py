"""Diagnostics of the Spark stages: from_dataframe and the batch sinks answer scan(), and the
main job prints a snapshot on SIGUSR1 and on Ctrl-C, and says which consumer paced its read."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import ROOT, sample, wait_until  # noqa: E402

from reactive_streams import snapshot  # noqa: E402
from reactive_streams.adapters.iterables import from_iterable, to_iterator  # noqa: E402
from reactive_streams.spark import from_dataframe  # noqa: E402
from reactive_streams.spark._sinks import BatchSubscriber  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("mode", ["rows", "arrow"])
def test_a_snapshot_mid_stream_names_from_dataframe_and_the_sink(spark: Any, mode: str) -> None:
    """Mid-stream, the walk from to_iterator reaches the read, named with its unit; what each
    holds is bounded (the sink by its prefetch, the read by one decoded chunk)."""
    df = sample(spark, rows=20_000, partitions=2)
    publisher = from_dataframe(
        df,
        mode=mode,  # type: ignore[arg-type]
        max_rows_per_batch=100 if mode == "arrow" else None,
    )
    with to_iterator(publisher, prefetch=16) as it:
        next(it)
        wait_until(lambda: snapshot(it)[-1].buffered == 15, 60, "the sink's prefetch")
        read, sink = snapshot(it)
        assert (read.name, sink.name) == (f"from_dataframe({mode})", "to_iterator")
        assert read.delivered == 16 and not read.cancelled and read.requested == 0
        assert read.in_flight == 0  # no partition is asked for while nothing is wanted
        if mode == "rows":  # the pickled chunk the 16th row came from is held on the driver
            assert 0 < read.buffered < 20_000
        else:  # the JVM cuts the batches at 100 rows already: no slice is left over
            assert read.buffered <= 1
        assert sink.asked == 16 and sink.buffered == 15
        assert sum(1 for _ in it) == (20_000 if mode == "rows" else 200) - 1
    assert snapshot(it)[0].buffered == 0


def test_a_batch_sink_answers_scan_as_a_sink() -> None:
    """BatchSubscriber (inside to_dataframe, write_parquet, write_table) reports its name,
    what it asked, holds and handed on per batch, and links to its upstream."""
    sink: BatchSubscriber[int] = BatchSubscriber(5, "write_parquet")
    assert not sink.scan().subscribed
    from_iterable(range(12)).subscribe(sink)
    source, scan = snapshot(sink)
    assert (source.name, scan.name) == ("from_iterable", "write_parquet")
    assert (scan.asked, scan.in_flight, scan.buffered, scan.delivered) == (5, 0, 5, 0)
    assert scan.requested is None and scan.subscribed
    assert sink.next_batch() == [0, 1, 2, 3, 4]
    assert sink.scan().delivered == 5
    sink.cancel()
    after = sink.scan()
    assert after.cancelled and not after.terminated and after.upstream is None


_ROWS_FLOWING = r"^rows done: [1-9]"
_TABLE = re.compile(r"^stage +requested +asked +in flight +buffered +delivered +state$")


class _Job:
    """The main job in a session of its own; stderr lines gathered, waited for by pattern."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reactive_streams.spark", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._out: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out_reader = threading.Thread(target=self._read_out, daemon=True)
        self._out_reader.start()

    def _read_out(self) -> None:
        assert self.process.stdout is not None
        self._out.append(self.process.stdout.read())

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str | re.Pattern[str], after: int = 0) -> int:
        """The index of the first stderr line from ``after`` on that matches ``pattern``."""
        found: list[int] = []

        def seen() -> bool:
            with self._lock:
                for i in range(after, len(self.lines)):
                    if re.search(pattern, self.lines[i]):
                        found.append(i)
                        return True
            return self.process.poll() is not None and not self._reader.is_alive()

        wait_until(seen, 300, f"{pattern!r} in {self.lines[-20:]}")
        assert found, "\n".join(self.lines)
        return found[0]

    def finish(self, timeout: float = 600) -> tuple[int, str, str]:
        try:
            self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
        self._reader.join(10)
        self._out_reader.join(10)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return self.process.returncode, "".join(self._out), "\n".join(self.lines)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigusr1_prints_a_snapshot_and_the_summary_shows_the_slower_consumer_paced() -> None:
    """SIGUSR1 mid-run prints the stages from the statistics' sink up (the run goes on);
    the summary shows one read feeding both consumers, the statistics pacing it, and the
    read never more than the share's buffer (and their prefetch) ahead of them."""
    job = _Job("--rows", "200000")
    job.wait_for(_ROWS_FLOWING)
    os.kill(job.process.pid, signal.SIGUSR1)
    start = job.wait_for(r"^snapshot \(SIGUSR1\):$")
    header = job.wait_for(_TABLE, start)
    job.wait_for(r"^to_iterator ", header)
    status, out, err = job.finish()
    assert status == 0, err
    assert "Traceback" not in err
    assert "consumers     one read of 200,000 rows fed both: windows got 200,000" in out
    assert "statistics got 200,000" in out
    assert "paced by      the statistics, the slower consumer" in out, out
    lead = re.search(r"at most ([\d,]+) rows ahead of the statistics \(bound ([\d,]+)", out)
    assert lead is not None, out
    assert int(lead[1].replace(",", "")) <= int(lead[2].replace(",", ""))
    assert "source demand max outstanding 256 (rows; share buffer 256)" in out
    assert out.rstrip().endswith("spark jobs    8")  # one job per partition: read once


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals to a process group")
def test_ctrl_c_prints_a_snapshot_then_exits_quietly() -> None:
    """The first Ctrl-C prints the snapshot, then the run is cancelled as before: 130, no
    traceback."""
    job = _Job("--rows", "2000000")
    job.wait_for(_ROWS_FLOWING)
    os.killpg(job.process.pid, signal.SIGINT)
    start = job.wait_for(r"^snapshot \(Ctrl-C\):$")
    job.wait_for(_TABLE, start)
    status, _, err = job.finish(120)
    assert status == 130, err
    assert "interrupted after" in err and "the read was cancelled" in err
    assert "Traceback" not in err and "Exception" not in err, err
