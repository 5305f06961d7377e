"""Helpers for the Spark tests: waiting on conditions, owned threads, job status, heap,
and the DataFrames the read tests share."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

_OWNED = re.compile(r"^rs-spark-[0-9a-f]{12}_\d+$")

SLOW = 4 * 10**11  # rows of a partition that would take many minutes to compute

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(
    *args: str, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python *args`` in a process of its own (its own JVM), from the repo root."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll ``predicate`` until true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.02)


def owned_threads() -> list[threading.Thread]:
    """The threads ``from_dataframe`` subscriptions own (named after their job tag)."""
    return [t for t in threading.enumerate() if _OWNED.match(t.name)]


def no_owned_threads() -> bool:
    return not owned_threads()


def sample(session: Any, rows: int = 10_000, partitions: int = 4) -> Any:
    """Three columns (long, long, string) over ``partitions`` partitions."""
    return session.range(0, rows, 1, partitions).selectExpr(
        "id", "id * 2 AS b", "concat('x', cast(id AS string)) AS c"
    )


def fast_then_stuck(session: Any) -> Any:
    """Partition 0 has 5 rows at once; partitions 1 and 2 keep a job busy for many minutes.

    (The children differ in partition count: Spark 4 merges the partitions of a union of
    equally partitioned children.)
    """
    stuck = session.range(0, SLOW, 1, 2).filter("id % 1000000007 = 3")
    return session.range(0, 5, 1, 1).union(stuck)


def tracker(spark: Any) -> Any:
    return spark.sparkContext._jsc.sc().statusTracker()


def jobs_for_tag(spark: Any, tag: str) -> list[int]:
    return sorted(int(j) for j in tracker(spark).getJobIdsForTag(tag))


def active_jobs_for_tag(spark: Any, tag: str) -> list[int]:
    active = {int(j) for j in tracker(spark).getActiveJobIds()}
    return [j for j in jobs_for_tag(spark, tag) if j in active]


def job_status(spark: Any, job_id: int) -> str:
    info = tracker(spark).getJobInfo(job_id)
    return str(info.get().status()) if info.isDefined() else "UNKNOWN"


def heap_mib(spark: Any) -> float:
    """Driver JVM heap in use after two full GCs."""
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    for _ in range(2):
        jvm.java.lang.System.gc()
        time.sleep(0.1)
    return float(runtime.totalMemory() - runtime.freeMemory()) / 2**20


def functions_for(session: Any) -> Any:
    """``pyspark.sql.functions`` for a classic session, the Connect flavour for Connect."""
    from reactive_streams.spark._partitions import is_connect

    if is_connect(session):
        from pyspark.sql.connect import functions
    else:
        from pyspark.sql import functions  # type: ignore[no-redef]
    return functions
