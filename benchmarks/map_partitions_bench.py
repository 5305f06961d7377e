"""map_partitions benchmarks: async calls inside Spark tasks, against a local service with
20 ms latency (``reactive_streams.spark._service.Service``, on 127.0.0.1, one per line so
each line's ``max_in_flight`` is its own).

Throughput (rows/s, local[2], 4 partitions, best of ``repeats`` alternating runs after a
warm-up): ``map_partitions(df, lambda: [map_async(call, concurrency=16)], schema)`` against
the ways people do it today inside ``mapInPandas``: ``asyncio.run`` per batch with an
``asyncio.Semaphore(16)``, a ``ThreadPoolExecutor(16)`` per task (blocking ``http.client``),
and sequential calls (one at a time per task, on fewer rows: rates are compared).

Peak worker RSS: the growth of the Python worker's peak RSS over a task (``VmHWM`` read in
the task, after resetting it through ``/proc/self/clear_refs`` at the task's start, minus the
RSS then), for a partition of rows with a 20 KB payload, streamed by map_partitions or
gathered first (``pd.concat`` of the partition, then the calls). It runs in a child process
whose session has ``spark.python.worker.reuse=false`` (a fresh worker per task: no memory
kept from an earlier task). "Flat" is expressed as small / large >= 0.67 (large <= 1.5x small).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import importlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.spark_bench import _result

__all__ = ["QUICK", "run"]

QUICK: dict[str, Any] = {"rows": 400, "seq_rows": 40, "repeats": 1, "rss_rows": (100, 400)}

_CONCURRENCY = 16
_LATENCY = 0.02
_PARTITIONS = 4
_RSS_PARTITIONS = 2  # one task per core of local[2]
_RSS_BATCH = 100  # rows per Arrow batch sent to the worker in the RSS lines
_PAYLOAD = 20_000  # characters of payload per row in the RSS lines
_SCHEMA = "id long, v long"


# --- on the worker -------------------------------------------------------------------------


def _status_kib(key: str) -> int:
    """``VmRSS`` or ``VmHWM`` of this process (the Python worker), in KiB."""
    with open("/proc/self/status") as f:
        found = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.MULTILINE)
    assert found is not None, key
    return int(found.group(1))


def _reset_peak() -> int:
    """Reset this process's ``VmHWM`` to its RSS now (Linux >= 4.0); return that RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not resettable: the fresh worker's peak is still the task's own
        pass
    return _status_kib("VmRSS")


def _pandas() -> Any:
    """pandas, on the worker (no stubs: typed Any)."""
    return importlib.import_module("pandas")


def _get(port: int, path: str) -> bytes:
    """A blocking GET (``http.client``, one connection per call), for the thread baselines."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise ConnectionError(f"GET {path}: status {response.status}")
    return body


def _ours(port: int, memory: bool = False) -> Callable[[], list[Any]]:
    """The ``stages`` factory: one ``map_async`` stage calling ``/echo`` per row; ``v`` is
    the body's length, or (``memory``) the task's peak RSS growth so far in KiB."""

    def stages() -> list[Any]:
        from reactive_streams import map_async
        from reactive_streams.spark._service import fetch

        base = _reset_peak() if memory else 0

        async def call(row: Any) -> tuple[int, int]:
            body = await fetch(port, f"/echo?{row.id}")
            return (row.id, _status_kib("VmHWM") - base if memory else len(body))

        return [map_async(call, concurrency=_CONCURRENCY)]

    return stages


async def _gather(port: int, ids: list[int]) -> list[int]:
    """All of ``ids`` as tasks at once, ``_CONCURRENCY`` calls at a time (a semaphore)."""
    from reactive_streams.spark._service import fetch

    semaphore = asyncio.Semaphore(_CONCURRENCY)

    async def one(i: int) -> int:
        async with semaphore:
            return len(await fetch(port, f"/echo?{i}"))

    return list(await asyncio.gather(*(one(i) for i in ids)))


def _asyncio_per_batch(port: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def task(frames: Iterator[Any]) -> Iterator[Any]:
        pd = _pandas()
        for frame in frames:
            ids = frame["id"].tolist()
            yield pd.DataFrame({"id": ids, "v": asyncio.run(_gather(port, ids))})

    return task


def _threads_per_task(port: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def task(frames: Iterator[Any]) -> Iterator[Any]:
        from concurrent.futures import ThreadPoolExecutor

        pd = _pandas()
        with ThreadPoolExecutor(_CONCURRENCY) as pool:
            for frame in frames:
                ids = frame["id"].tolist()
                bodies = pool.map(lambda i: len(_get(port, f"/echo?{i}")), ids)
                yield pd.DataFrame({"id": ids, "v": list(bodies)})

    return task


def _sequential(port: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def task(frames: Iterator[Any]) -> Iterator[Any]:
        pd = _pandas()
        for frame in frames:
            ids = frame["id"].tolist()
            yield pd.DataFrame({"id": ids, "v": [len(_get(port, f"/echo?{i}")) for i in ids]})

    return task


def _gathered_first(port: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The whole partition in one pandas frame, then the calls; ``v``: peak growth, KiB."""

    def task(frames: Iterator[Any]) -> Iterator[Any]:
        pd = _pandas()
        base = _reset_peak()
        frame = pd.concat(list(frames), ignore_index=True)
        ids = frame["id"].tolist()
        asyncio.run(_gather(port, ids))
        yield pd.DataFrame({"id": ids, "v": _status_kib("VmHWM") - base})

    return task


# --- on the driver -------------------------------------------------------------------------


def _ship_by_value() -> None:
    """The workers cannot import ``benchmarks`` (not installed): ship this module by value."""
    from pyspark import cloudpickle

    if __name__ != "__main__":  # __main__ (the RSS child) is shipped by value anyway
        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


def _job(df: Any, kind: str, port: int, memory: bool = False) -> Any:
    if kind == "ours":
        from reactive_streams.spark import map_partitions

        return map_partitions(df, _ours(port, memory), _SCHEMA)
    make = {
        "asyncio": _asyncio_per_batch,
        "threads": _threads_per_task,
        "sequential": _sequential,
        "gathered": _gathered_first,
    }[kind]
    return df.mapInPandas(make(port), _SCHEMA)


def _collect(df: Any, kind: str, port: int, rows: int) -> int:
    got = len(_job(df, kind, port).collect())
    assert got == rows, (kind, got, rows)
    return got


def _rates(spark: Any, rows: int, seq_rows: int, repeats: int) -> dict[str, tuple[float, int]]:
    """Rows/s (best of ``repeats``) and the service's ``max_in_flight``, by way."""
    from reactive_streams.spark._service import Service

    sizes = {"ours": rows, "asyncio": rows, "threads": rows, "sequential": seq_rows}
    frames = {n: spark.range(0, n, 1, _PARTITIONS) for n in set(sizes.values())}
    warm = spark.range(0, 4 * _PARTITIONS, 1, _PARTITIONS)
    services = {kind: Service(latency=_LATENCY).start() for kind in sizes}
    try:
        for kind, service in services.items():  # workers started, imports done
            _collect(warm, kind, service.port, 4 * _PARTITIONS)
        best = dict.fromkeys(sizes, 0.0)
        for _ in range(repeats):
            for kind, n in sizes.items():
                gc.collect()
                start = time.perf_counter()
                _collect(frames[n], kind, services[kind].port, n)
                best[kind] = max(best[kind], n / (time.perf_counter() - start))
        return {k: (best[k], services[k].stats()["max_in_flight"]) for k in sizes}
    finally:
        for service in services.values():
            service.stop()


def _rss_child(small: int, large: int, repeats: int) -> dict[str, int]:
    """In the child process: peak RSS growth (KiB) of each way at each partition size
    (the least of ``repeats`` runs), and each way's ``max_in_flight``."""
    from reactive_streams.spark._service import Service
    from reactive_streams.spark.local import local_session

    _ship_by_value()
    spark = local_session(
        "local[2]",
        app_name="rs-map-partitions-rss",
        conf={
            "spark.python.worker.reuse": "false",
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(_RSS_BATCH),
        },
    )
    services = {kind: Service(latency=_LATENCY).start() for kind in ("ours", "gathered")}
    try:
        out: dict[str, int] = {}
        for _ in range(repeats):
            for rows in (small, large):
                df = spark.range(0, rows * _RSS_PARTITIONS, 1, _RSS_PARTITIONS).selectExpr(
                    "id", f"concat(cast(id AS string), repeat('x', {_PAYLOAD})) AS payload"
                )
                for kind, service in services.items():
                    got = _job(df, kind, service.port, memory=True).collect()
                    assert len(got) == rows * _RSS_PARTITIONS, (kind, len(got))
                    peak = max(row.v for row in got)
                    key = f"{kind}_{rows}"
                    out[key] = min(out.get(key, peak), peak)
        for kind, service in services.items():
            out[f"{kind}_max_in_flight"] = service.stats()["max_in_flight"]
        return out
    finally:
        for service in services.values():
            service.stop()
        spark.stop()


def _peak_rss(small: int, large: int, repeats: int) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.map_partitions_bench", "--rss-child"]
        + [str(small), str(large), str(repeats)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the peak-RSS child failed:\n{out.stderr[-4000:]}")
    line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
    result: dict[str, int] = json.loads(line)
    return result


def run(
    rows: int = 4_000,
    seq_rows: int = 200,
    repeats: int = 2,
    rss_rows: tuple[int, int] = (4_000, 16_000),
) -> list[dict[str, Any]]:
    """Measure and return the map_partitions lines (see the module docstring).

    Args:
        rows: rows of the throughput DataFrame (4 partitions) for ours, asyncio and threads.
        seq_rows: rows for the sequential baseline (20 ms a row per task).
        repeats: timed runs of each way (after a warm-up), best kept (the RSS lines: one).
        rss_rows: rows per partition of the small and the large partition (20 KB each).
            Both are past the worker's one-time step of about 40 MiB (an allocator's
            arenas; a 1,000-row task may end before it): measured 12, 54 and 54 MiB for
            1,000, 4,000 and 16,000 rows, so a smaller "small" would measure the step.
    """
    from reactive_streams.spark.local import local_session

    _ship_by_value()
    spark = local_session("local[2]", app_name="rs-map-partitions-bench")
    try:
        rates = _rates(spark, rows, seq_rows, repeats)
    finally:
        spark.stop()
    bound = _CONCURRENCY * 2

    def seen(kind: str) -> str:
        return f"service max_in_flight {rates[kind][1]} (ours: bound {bound} = 16 x 2 tasks)"

    ours, ours_seen = rates["ours"]
    title = f"spark map_partitions + map_async(concurrency=16), 20 ms service ({rows:,} rows)"
    results = [
        _result(
            f"{title} vs asyncio.run per batch + Semaphore(16) in mapInPandas",
            ours,
            rates["asyncio"][0],
            "rows/s",
            1.0,
            f"{seen('ours')}; baseline's {rates['asyncio'][1]}",
            "asyncio.run per Arrow batch, Semaphore(16), mapInPandas",
        ),
        _result(
            f"{title} vs ThreadPoolExecutor(16) per task in mapInPandas",
            ours,
            rates["threads"][0],
            "rows/s",
            None,
            f"{seen('ours')}; baseline's {rates['threads'][1]}",
            "ThreadPoolExecutor(16) per task, blocking http.client, mapInPandas",
        ),
        _result(
            f"{title} vs sequential calls in mapInPandas ({seq_rows:,} rows)",
            ours,
            rates["sequential"][0],
            "rows/s",
            10.0,
            f"{seen('ours')}; baseline's {rates['sequential'][1]}",
            "one call at a time per task (2 tasks at once), blocking http.client",
        ),
    ]
    small, large = rss_rows
    rss = _peak_rss(small, large, 1)
    mib = {key: value / 1024 for key, value in rss.items() if not key.endswith("flight")}
    size = {n: n * _PAYLOAD / 1e6 for n in rss_rows}
    in_flight = (
        f"service max_in_flight: ours {rss['ours_max_in_flight']}, "
        f"gathered {rss['gathered_max_in_flight']}"
    )
    how = f"fresh worker per task, {_RSS_BATCH}-row Arrow batches, {_PAYLOAD // 1000} KB a row; "
    for n in rss_rows:
        results.append(
            _result(
                f"spark map_partitions worker peak RSS growth, {n:,}-row partition "
                f"(~{size[n]:.0f} MB): streaming vs gathering first (lower is better)",
                mib[f"ours_{n}"],
                mib[f"gathered_{n}"],
                "MiB",
                None,
                how + in_flight,
                "pd.concat of the partition in mapInPandas, then asyncio calls",
                lower_is_better=True,
            )
        )
    results.append(
        _result(
            f"spark map_partitions worker peak RSS flat in partition size: "
            f"{small:,}-row / {large:,}-row partition (>= 0.67: large <= 1.5x small)",
            mib[f"ours_{small}"],
            mib[f"ours_{large}"],
            "MiB",
            round(1 / 1.5, 2),
            f"gathering first: {mib[f'gathered_{large}'] / mib[f'gathered_{small}']:.1f}x "
            f"from small to large; {how}{in_flight}",
            "ours at the large partition",
        )
    )
    return results


def _main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.map_partitions_bench",
        description="The map_partitions benchmarks alone, one JSON line per result.",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--rss-child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        print(json.dumps(_rss_child(*args.rss_child)))
        return
    for line in run(**(QUICK if args.quick else {})):
        print(json.dumps(line))


if __name__ == "__main__":
    _main()
