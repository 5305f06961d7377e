"""The main job: its operators agree with Spark SQL, and a small run keeps its bound."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import jobs_for_tag, owned_threads, run_python  # noqa: E402

from reactive_streams.spark.pipeline import (  # noqa: E402
    EVENTS_PER_WINDOW,
    WINDOW_MS,
    Config,
    Tumbling,
    Window,
    events,
    keep_event,
    keep_table,
    parse_batch,
    parse_row,
    row_partial,
    run,
    table_partials,
)

pytestmark = pytest.mark.spark


def truth(spark: Any, df: Any) -> list[tuple[int, int, int]]:
    """(window, kept events, buys) per window, computed by Spark SQL."""
    rows = spark.sql(
        f"""
        SELECT ts_ms DIV {WINDOW_MS} AS w, count(*) AS n,
               sum(CASE WHEN kind = 'buy' THEN 1 END) AS b
        FROM (SELECT ts_ms, split(payload, ':')[0] AS kind,
                     cast(replace(split(payload, ':')[1], ',', '') AS double) AS amount
              FROM {{df}})
        WHERE kind != 'error' AND amount >= 1.0
        GROUP BY 1 ORDER BY 1
        """,
        df=df,
    ).collect()
    return [(r.w, r.n, r.b) for r in rows]


def fold_rows(df: Any) -> list[Window]:
    out: list[Window] = []
    folder = Tumbling(out.append)
    for row in df.collect():
        event = parse_row(row)
        if keep_event(event):
            folder.push(row_partial(event))
    folder.flush()
    return out


def fold_batches(df: Any) -> list[Window]:
    out: list[Window] = []
    folder = Tumbling(out.append)
    for batch in df.toArrow().to_batches(max_chunksize=1000):
        folder.push(table_partials(keep_table(parse_batch(batch))))
    folder.flush()
    return out


def test_row_and_arrow_operators_agree_with_spark_sql(spark: Any) -> None:
    """Both operator chains produce Spark SQL's per-window counts, and the same windows."""
    df = events(spark, 3 * EVENTS_PER_WINDOW + 123, partitions=3)
    by_rows = fold_rows(df)
    by_batches = fold_batches(df)
    expected = truth(spark, df)
    assert [(w.window, w.events, w.buys) for w in by_rows] == expected
    assert [(w.window, w.events, w.buys) for w in by_batches] == expected
    assert [round(w.revenue, 4) for w in by_rows] == [round(w.revenue, 4) for w in by_batches]


def test_the_bound_counts_every_stage() -> None:
    """The promised bound covers the Rx stage's demand and the windows queued after it."""
    rows = Config(mode="rows", rx_buffer=10, publish_on_prefetch=2, consumer_prefetch=3)
    arrow = Config(mode="arrow", rx_buffer=10, max_rows_per_batch=100)
    assert rows.bound_rows() >= 10 + (2 + 3 + 1) * EVENTS_PER_WINDOW
    assert arrow.bound_rows() >= 10 * 100


@pytest.mark.parametrize("mode", ["rows", "arrow"])
def test_a_small_run_keeps_its_bound_and_counts(spark: Any, mode: str) -> None:
    """The whole pipeline on 40k events: every window arrives, in flight stays in bound."""
    pytest.importorskip("reactivex")
    from reactive_streams.spark.pipeline import run

    config = Config(rows=40_000, mode=mode, partitions=4, consumer_delay=0.0)  # type: ignore[arg-type]
    summary = run(spark, config)
    expected = truth(spark, events(spark, config.rows, config.partitions))
    assert summary.rows == config.rows
    assert summary.windows == len(expected)
    assert summary.totals.events == sum(n for _, n, _ in expected)
    assert summary.max_in_flight <= summary.bound
    assert summary.spark_jobs == config.partitions  # one per partition, this run's only


def test_the_main_command_explains_a_missing_java(tmp_path: Any) -> None:
    """python -m reactive_streams.spark without Java on PATH exits 2 and says what to install."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java here
    result = run_python("-m", "reactive_streams.spark", "--rows", "10", timeout=120, env=env)
    assert result.returncode == 2, result.stderr
    assert "Java" in result.stderr and "install" in result.stderr


def test_the_main_command_explains_an_unreachable_connect_server() -> None:
    """The main job with --remote at a closed port exits 2 at once, naming the address."""
    result = run_python(
        "-m", "reactive_streams.spark", "--remote", "sc://127.0.0.1:1", "--rows", "10", timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "cannot reach the Spark Connect server at 127.0.0.1:1" in result.stderr


def test_the_main_command_enriches_in_the_executors_within_the_call_bound() -> None:
    """--enrich on 10k events: every event was a call to the service, from the executors,
    never more at once than --concurrency x the task slots, and the segment column they
    added reached the driver (counted per segment as Spark's user expression says)."""
    from collections import Counter

    from reactive_streams.spark._enrich import SEGMENTS

    rows, flags = 10_000, ["--delay", "0", "--no-progress", "--master", "local[2]"]
    result = run_python(
        "-m", "reactive_streams.spark", "--enrich", "--concurrency", "64", "--rows", str(rows),
        *flags, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"enrich calls  {rows:,} to the service" in out, out
    assert "bound 128 (--concurrency 64 x 2 task slots of local[2]): call bound held" in out
    users = Counter(SEGMENTS[(i * 7919) % 5000 % 3] for i in range(rows))  # events()' user
    seen = ", ".join(f"{name} {users[name]:,}" for name in SEGMENTS)
    assert f"segments      {seen} (rows read" in out, out


def test_a_config_with_a_bad_value_is_refused() -> None:
    """A typo in mode, or a size that is not a positive int, is a ValueError naming it."""
    with pytest.raises(ValueError, match="mode"):
        Config(mode="row")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rx_buffer"):
        Config(rx_buffer=0)
    with pytest.raises(ValueError, match="consumer_delay"):
        Config(consumer_delay=-1)


def test_run_on_an_event_loop_is_refused_before_anything_starts(spark: Any) -> None:
    """run() blocks, so on a thread running an event loop it raises at once, before it has
    subscribed to Spark: no job runs and no thread is left behind."""
    tag = "rs-pipeline-on-loop"
    config = Config(rows=20_000, partitions=2, job_tag=tag, consumer_delay=0.0)

    async def main() -> None:
        run(spark, config)

    with pytest.raises(RuntimeError, match="event loop"):
        asyncio.run(main())
    assert owned_threads() == [] and jobs_for_tag(spark, tag) == []
