"""The main job's progress: a tqdm bar on a terminal, a line every few seconds elsewhere.

A log file or a pipe (CI, ``| tee``) cannot show a redrawn bar, so there a daemon thread
prints ``rows done: 1,200,000 of 2,000,000 (60%), 310,000 rows/s`` every ``every`` seconds
until :meth:`Progress.close`, which wakes it at once: it never delays the job's end.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Final, TextIO

__all__ = ["PROGRESS_EVERY", "Progress", "ProgressBar", "ProgressLines", "progress"]

PROGRESS_EVERY: Final = 5.0
"""Seconds between two progress lines when stderr is not a terminal."""
_JOIN_AT_MOST: Final = 1.0
"""Seconds :meth:`ProgressLines.close` waits for a line being written (a blocked pipe)."""


class Progress:
    """What the job tells its progress: rows finished, from the consumer's thread only."""

    def update(self, finished: int, in_flight: int, window: int) -> None:
        """``finished`` rows of the run are done; ``in_flight`` are in the stages."""

    def close(self, completed: bool) -> None:
        """The run ended (``completed``: all its rows are done); idempotent."""


def progress(rows: int, *, every: float = PROGRESS_EVERY, stream: TextIO | None = None) -> Progress:
    """A tqdm bar when ``stream`` (default ``sys.stderr``) is a terminal and tqdm is
    installed (the ``spark`` extra brings it); otherwise a line every ``every`` seconds."""
    out = sys.stderr if stream is None else stream
    if out.isatty():
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
        except ImportError:  # installed without the spark extra: lines instead
            pass
        else:
            bar = tqdm(total=rows, unit="row", unit_scale=True, desc="rows done", file=out)
            return ProgressBar(bar, rows)
    return ProgressLines(rows, every=every, stream=out)


class ProgressBar(Progress):
    """A tqdm bar, redrawn at tqdm's own pace; owned by the consumer's thread."""

    def __init__(self, bar: Any, rows: int) -> None:
        self._bar = bar
        self._rows = rows
        self._done = 0  # owned: the consumer's thread
        self._closed = False  # owned: the job's thread, after the consumer ended

    def update(self, finished: int, in_flight: int, window: int) -> None:
        self._bar.update(finished - self._done)
        # refresh=False: the bar's own rate limit decides when to redraw
        self._bar.set_postfix(in_flight=in_flight, window=window, refresh=False)
        self._done = finished  # owned: the consumer's thread

    def close(self, completed: bool) -> None:
        if self._closed:
            return
        self._closed = True  # owned: the job's thread
        if completed:
            self._bar.update(self._rows - self._done)
        self._bar.close()


class ProgressLines(Progress):
    """A line every ``every`` seconds on ``stream``, from a daemon thread of its own.

    ``update`` (the consumer's thread) and the reporter share the count under ``_lock``;
    ``close`` (any thread) wakes the reporter, which then writes nothing more. The rate is
    the one since the previous line.
    """

    def __init__(self, rows: int, *, every: float, stream: TextIO) -> None:
        if not every > 0:
            raise ValueError(f"every must be a number of seconds > 0, got {every!r}")
        self._rows = rows
        self._every = every
        self._stream = stream
        self._lock = threading.Lock()
        self._finished = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._report, name="rs-main-progress", daemon=True)
        self._thread.start()

    def update(self, finished: int, in_flight: int, window: int) -> None:
        with self._lock:
            self._finished = finished  # under _lock: read by the reporter thread

    def close(self, completed: bool) -> None:
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join(_JOIN_AT_MOST)  # at most one line in progress: a blocked pipe

    def _report(self) -> None:
        last_time, last_rows = time.monotonic(), 0
        while not self._closed.wait(self._every):  # close() wakes it at once
            with self._lock:
                finished = self._finished
            now = time.monotonic()
            rate = (finished - last_rows) / (now - last_time) if now > last_time else 0.0
            last_time, last_rows = now, finished  # owned: this thread
            percent = finished * 100 // self._rows if self._rows else 100
            line = f"rows done: {finished:,} of {self._rows:,} ({percent}%), {rate:,.0f} rows/s"
            if self._closed.is_set():
                return  # closed while it computed: the summary may be printing
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):  # the stream closed or broke: report no more
                return
