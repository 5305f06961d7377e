"""to_stream benchmark: a Publisher feeding a Structured Streaming query, against
``spark.readStream`` over files holding the same rows.

Both queries write to Spark's ``noop`` sink on local[2] with micro-batches of ``batch`` rows:
ours is ``to_stream(from_iterable(rows), spark, schema=..., max_rows_per_batch=batch)``; the
baseline reads the same rows from parquet files of ``batch`` rows each, one file a trigger
(``maxFilesPerTrigger=1``). Each is timed from ``start()`` until the query's progress has
counted every row (its ``numInputRows``, summed), best of ``repeats`` alternating runs after
a warm-up; the files are written before the clock starts. Rates are rows/s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from typing import Any

from benchmarks.spark_bench import _result

__all__ = ["QUICK", "run"]

QUICK: dict[str, Any] = {"rows": 40_000, "batch": 10_000, "repeats": 1}

_SCHEMA = "id long, v double"
_TIMEOUT = 900.0


def _consumed(query: Any, rows: int) -> None:
    """Waits until ``query``'s progress reports ``rows`` input rows in all, then stops it."""
    deadline = time.monotonic() + _TIMEOUT
    seen: set[str] = set()
    total = 0
    try:
        while total < rows:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the query read {total:,} of {rows:,} rows")
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            for progress in query.recentProgress:
                if progress["batchId"] is not None and str(progress["batchId"]) not in seen:
                    seen.add(str(progress["batchId"]))
                    total += int(progress["numInputRows"])
            time.sleep(0.02)  # polling Spark's progress (a benchmark: not a test)
    finally:
        query.stop()


def _ours(spark: Any, rows: int, batch: int) -> float:
    from reactive_streams.adapters.iterables import from_iterable
    from reactive_streams.spark import to_stream

    source = from_iterable((i, float(i)) for i in range(rows))
    stream = to_stream(source, spark, schema=_SCHEMA, max_rows_per_batch=batch)
    started = time.perf_counter()
    _consumed(stream.writeStream.format("noop").start(), rows)
    return rows / (time.perf_counter() - started)


def _files(spark: Any, folder: str, rows: int, batch: int) -> float:
    stream = spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", 1).parquet(folder)
    started = time.perf_counter()
    _consumed(stream.writeStream.format("noop").start(), rows)
    return rows / (time.perf_counter() - started)


def run(rows: int = 1_000_000, batch: int = 100_000, repeats: int = 2) -> list[dict[str, Any]]:
    """Measure and return the to_stream line (see the module docstring)."""
    from reactive_streams.spark.local import local_session

    spark = local_session("local[2]", app_name="rs-to-stream-bench")
    folder = tempfile.mkdtemp(prefix="rs-to-stream-bench-")
    try:
        files = max(1, rows // batch)
        data = spark.range(0, rows, 1, files).selectExpr("id", "CAST(id AS DOUBLE) AS v")
        data.write.mode("overwrite").parquet(folder)
        _ours(spark, min(rows, batch), batch)  # warm-up: the planner process, the JIT
        _files(spark, folder, rows, batch)
        ours, files_rate = 0.0, 0.0
        for _ in range(repeats):
            ours = max(ours, _ours(spark, rows, batch))
            files_rate = max(files_rate, _files(spark, folder, rows, batch))
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return [
        _result(
            f"spark to_stream(from_iterable) -> noop sink vs readStream over parquet files "
            f"({rows:,} rows, {batch:,} a micro-batch)",
            ours,
            files_rate,
            "rows/s",
            None,
            f"{files} files of {batch:,} rows, maxFilesPerTrigger=1",
            "spark.readStream.parquet(folder), the same rows",
        )
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for line in run(**(QUICK if args.quick else {})):
        print(json.dumps(line))
