"""Spark benchmarks: from_dataframe beside pyspark's own ways of reading a DataFrame.

Ratios are measured in the same run, on the same DataFrame (``rows`` rows, 8 partitions, three
columns: two longs and a string), alternating ours and the baseline and keeping the best of
each; the peak-RSS lines run each side in a fresh Python process (the high-water mark of a
process only goes up). Each result is a dict: ``name, ours, baseline, unit, ratio, target``
(ratio = ours / baseline; ``target`` is the minimum ratio sought, ``None`` for a report).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["QUICK", "run"]

QUICK = {"rows": 200_000, "rss_rows": 500_000}

_PARTITIONS = 8


class _Count:
    """Counts elements (or rows of batches), requesting ``batch`` at a time."""

    def __init__(self, batch: int, rows_of: Callable[[Any], int] | None = None) -> None:
        self.batch = batch
        self.rows_of = rows_of
        self.count = 0
        self.left = 0
        self.done = threading.Event()
        self.error: Exception | None = None
        self.subscription: Any = None

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        self.left = self.batch
        subscription.request(self.batch)

    def on_next(self, element: Any) -> None:
        self.count += 1 if self.rows_of is None else self.rows_of(element)
        self.left -= 1
        if self.left == 0:
            self.left = self.batch
            self.subscription.request(self.batch)

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def _frame(spark: Any, rows: int) -> Any:
    return spark.range(0, rows, 1, _PARTITIONS).selectExpr(
        "id", "id * 2 AS b", "concat('event-', cast(id AS string)) AS c"
    )


def _ours(df: Any, mode: str, expected: int, prefetch: bool = False) -> Callable[[], int]:
    from reactive_streams.spark import from_dataframe

    def go() -> int:
        if mode == "rows":
            counter = _Count(1024)
            from_dataframe(df, prefetch_partitions=prefetch).subscribe(counter)
        else:
            counter = _Count(16, lambda batch: batch.num_rows)
            from_dataframe(df, mode="arrow", prefetch_partitions=prefetch).subscribe(counter)
        counter.done.wait()
        if counter.error is not None:
            raise counter.error
        assert counter.count == expected, (counter.count, expected)
        return counter.count

    return go


def _best(fns: dict[str, Callable[[], int]], repeats: int) -> dict[str, float]:
    """Rows per second, best of ``repeats`` runs of each, run alternately after a warm-up."""
    best = dict.fromkeys(fns, 0.0)
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            count = fn()
            best[name] = max(best[name], count / (time.perf_counter() - start))
    return best


def _result(
    name: str,
    ours: float,
    baseline: float,
    unit: str,
    target: float | None,
    note: str = "",
    baseline_name: str = "",
    *,
    lower_is_better: bool = False,
) -> dict[str, Any]:
    """One line of a Spark benchmark (also map_partitions_bench's), as the harness prints it."""
    line: dict[str, Any] = {
        "name": name,
        "ours": ours,
        "baseline": baseline,
        "unit": unit,
        "ratio": ours / baseline if baseline else None,
        "target": target,
        "lower_is_better": lower_is_better,
    }
    if note or baseline_name:
        line.update(note=note, baseline_name=baseline_name)
    return line


_RSS_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, threading, time
    from reactive_streams.spark.local import local_session
    rows, how = int(sys.argv[1]), sys.argv[2]
    page = os.sysconf("SC_PAGE_SIZE")

    def rss():  # this Python process only (the JVM is another process)
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page / 2**20

    spark = local_session("local[2]", conf={"spark.driver.memory": "2g"})
    df = spark.range(0, rows, 1, 8).selectExpr(
        "id", "id * 2 AS b", "concat('event-', cast(id AS string)) AS c")
    spark.range(10).collect()  # warm: the session's own footprint is the base
    base = peak = rss()
    running = True

    def sample():
        global peak
        while running:
            peak = max(peak, rss())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if how == "collect":
        n = len(df.collect())
    else:
        from reactive_streams.adapters.iterables import to_iterator
        from reactive_streams.spark import from_dataframe
        n = 0
        mode = "arrow" if how == "arrow" else "rows"
        for element in to_iterator(from_dataframe(df, mode=mode), prefetch=16):
            n += element.num_rows if mode == "arrow" else 1
    running = False
    sampler.join()
    peak = max(peak, rss())
    print(json.dumps({"rows": n, "base_mib": base, "peak_mib": peak}))
    spark.stop()
    """
)


def _peak_rss(rows: int, how: str) -> dict[str, float]:
    """Peak RSS of a fresh Python driver that reads ``rows`` rows ``how``."""
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(rows), how],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
    result: dict[str, float] = json.loads(line)
    assert result["rows"] == rows, result
    return result


def _leak_per_call(spark: Any, df: Any, read: Callable[[], int], calls: int) -> float:
    """Driver-JVM heap (MiB, after full GCs) left behind per call of ``read``."""
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()

    def heap() -> float:
        for _ in range(2):
            jvm.java.lang.System.gc()
            time.sleep(0.2)
        return float(runtime.totalMemory() - runtime.freeMemory()) / 2**20

    read()
    before = heap()
    for _ in range(calls):
        read()
    return (heap() - before) / calls


def run(
    rows: int = 2_000_000, repeats: int = 2, rss_rows: int | None = None
) -> list[dict[str, Any]]:
    """Measure and return the Spark benchmark lines (see the module docstring).

    Args:
        rows: rows of the DataFrame for the throughput lines (2M by default).
        repeats: timed runs of each side (after one warm-up), best kept.
        rss_rows: rows for the peak-RSS lines (default ``5 * rows``: 10M for 2M).
    """
    from reactive_streams.spark.local import local_session

    rss_rows = 5 * rows if rss_rows is None else rss_rows
    results: list[dict[str, Any]] = []
    spark = local_session(
        "local[2]",
        app_name="rs-spark-bench",
        conf={"spark.driver.memory": "2g"},  # room for toLocalIterator's retained partitions
    )
    try:
        df = _frame(spark, rows)
        df.count()

        def plain_local_iterator() -> int:
            n = 0
            for _ in df.toLocalIterator():
                n += 1
            return n

        def to_arrow() -> int:
            return int(df.toArrow().num_rows)

        rates = _best(
            {
                "rows": _ours(df, "rows", rows),
                "toLocalIterator": plain_local_iterator,
            },
            repeats,
        )
        results.append(
            _result(
                f"spark from_dataframe rows vs toLocalIterator ({rows:,} rows)",
                rates["rows"],
                rates["toLocalIterator"],
                "rows/s",
                0.9,
            )
        )
        arrow = _best(
            {
                "arrow": _ours(df, "arrow", rows),
                "arrow+prefetch": _ours(df, "arrow", rows, prefetch=True),
                "toArrow": to_arrow,
            },
            repeats + 1,
        )
        results.append(
            _result(
                f"spark from_dataframe arrow vs rows mode ({rows:,} rows)",
                arrow["arrow"],
                rates["rows"],
                "rows/s",
                10.0,
            )
        )
        results.append(
            _result(
                f"spark from_dataframe arrow vs df.toArrow() ({rows:,} rows)",
                arrow["arrow"],
                arrow["toArrow"],
                "rows/s",
                0.5,
            )
        )
        results.append(
            _result(
                f"spark from_dataframe arrow, prefetch_partitions=True vs df.toArrow() "
                f"({rows:,} rows)",
                arrow["arrow+prefetch"],
                arrow["toArrow"],
                "rows/s",
                None,
            )
        )
        leak_rows = min(rows, 1_000_000)
        small = _frame(spark, leak_rows)
        ours_leak = _leak_per_call(spark, small, _ours(small, "rows", leak_rows), 3)
        theirs_leak = _leak_per_call(
            spark, small, lambda: sum(1 for _ in small.toLocalIterator()), 3
        )
        results.append(
            _result(
                f"spark driver-JVM heap kept per read ({leak_rows:,} rows): ours vs "
                "toLocalIterator (lower is better)",
                ours_leak,
                theirs_leak,
                "MiB/call",
                None,
                lower_is_better=True,
            )
        )
    finally:
        spark.stop()

    ours_rss = _peak_rss(rss_rows, "arrow")
    collect_rss = _peak_rss(rss_rows, "collect")
    results.append(
        _result(
            f"spark driver peak RSS growth streaming {rss_rows:,} rows: from_dataframe (arrow) "
            "vs collect() (lower is better)",
            ours_rss["peak_mib"] - ours_rss["base_mib"],
            collect_rss["peak_mib"] - collect_rss["base_mib"],
            "MiB",
            None,
            lower_is_better=True,
        )
    )
    return results


def _main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.spark_bench",
        description="The Spark benchmarks alone, one JSON line per result.",
    )
    parser.add_argument("rows", nargs="?", type=int, help="rows per read (default: run()'s)")
    args = parser.parse_args()
    if args.rows is not None and args.rows <= 0:
        parser.error(f"rows must be a positive number, got {args.rows}")
    for line in run(**({"rows": args.rows} if args.rows is not None else {})):
        print(json.dumps(line))


if __name__ == "__main__":
    _main()
