"""``python -m spark`` (``make demo``): Spark events -> RxPY -> a slow asyncio consumer.

A DataFrame of synthetic events is streamed with ``from_dataframe`` through ``rx_processor``
(parse, filter, a ten-second tumbling event-time window aggregate), across ``publish_on``, into a
coroutine that sleeps after every window. A progress bar follows the consumer; the summary
shows rows, seconds, rows/s, the most rows in flight against the bound the stages promise
(the proof that backpressure held) and the Spark jobs run. Exit status: 0 when the bound
held, 1 when it did not, 2 when Spark could not start.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any
from urllib.parse import urlparse

from spark.local import SparkStartError, java_problem, local_session


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--rows", type=int, default=2_000_000, help="events (default 2M)")
    parser.add_argument(
        "--mode", choices=("rows", "arrow"), default="rows", help="from_dataframe mode"
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--master", default="local[2]", help="Spark master URL (default local[2], embedded)"
    )
    target.add_argument("--remote", metavar="sc://host:port", help="a Spark Connect server")
    parser.add_argument(
        "--delay", type=float, default=0.02, help="consumer seconds per window (default 0.02)"
    )
    parser.add_argument("--partitions", type=int, default=8, help="DataFrame partitions")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _check_reachable(url: str) -> None:
    """Fail fast on an unreachable server (the Connect client would retry for minutes)."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise SparkStartError(f"--remote needs an address like sc://host:15002, got {url!r}")
    port = parsed.port or 15002
    try:
        socket.create_connection((parsed.hostname, port), timeout=10).close()
    except OSError as exc:
        raise SparkStartError(
            f"cannot reach the Spark Connect server at {parsed.hostname}:{port} ({exc}); "
            "start one with $SPARK_HOME/sbin/start-connect-server.sh"
        ) from exc


def _session(args: argparse.Namespace) -> Any:
    if args.remote:
        from pyspark.sql import SparkSession

        _check_reachable(args.remote)
        try:
            session = SparkSession.builder.remote(args.remote).getOrCreate()
            session.range(1).collect()  # reach the server now, so failures are clear
        except Exception as exc:
            raise SparkStartError(
                f"cannot use the Spark Connect server at {args.remote}: {exc}"
            ) from exc
        return session
    problem = java_problem()
    if problem is not None:
        raise SparkStartError(problem)
    return local_session(args.master, app_name="reactive-streams-main-job")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.rows <= 0 or args.partitions <= 0 or args.delay < 0:
        print("--rows and --partitions must be positive, --delay not negative", file=sys.stderr)
        return 2
    try:
        from spark.pipeline import Config, Meter, Window, run
    except ImportError as exc:
        print(f"the main job needs the rx and spark extras: {exc}", file=sys.stderr)
        return 2
    try:
        spark = _session(args)
    except SparkStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    config = Config(
        rows=args.rows, mode=args.mode, partitions=args.partitions, consumer_delay=args.delay
    )
    where = args.remote or args.master
    print(
        f"{config.rows:,} events from Spark ({where}), mode {config.mode} -> rx_processor "
        f"(parse, filter, 10-second windows) -> publish_on -> slow asyncio consumer "
        f"({config.consumer_delay:g} s per window)",
        file=sys.stderr,
    )
    bar = None
    if not args.no_progress and sys.stderr.isatty():  # a log file gets no redrawn bar
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
        except ImportError:  # the bar is a nicety of the dev extra: run without it
            tqdm = None
        if tqdm is not None:
            bar = tqdm(
                total=config.rows, unit="row", unit_scale=True, desc="rows done", file=sys.stderr
            )
    done = 0

    def on_window(window: Window, meter: Meter) -> None:
        nonlocal done
        if bar is not None:
            finished = meter.finished
            bar.update(finished - done)
            done = finished
            # refresh=False: the bar's own rate limit decides when to redraw
            bar.set_postfix(in_flight=meter.emitted - finished, window=window.window, refresh=False)

    try:
        summary = run(spark, config, on_window=on_window)
    except Exception as exc:
        if bar is not None:
            bar.close()
        print(f"error: the pipeline failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.remote:
            spark.stop()
    if bar is not None:
        bar.update(config.rows - done)
        bar.close()

    held = summary.max_in_flight <= summary.bound
    totals = summary.totals
    jobs = "n/a (Spark Connect)" if summary.spark_jobs is None else f"{summary.spark_jobs}"
    paced = (
        f" (paced by the consumer: it sleeps {config.consumer_delay:g} s a window)"
        if config.consumer_delay
        else ""
    )
    lines = [
        f"rows          {summary.rows:,}",
        f"seconds       {summary.seconds:.1f}",
        f"rows/s        {summary.rows_per_second:,.0f}{paced}",
        f"windows       {summary.windows} ({totals.events:,} events kept, {totals.buys:,} buys, "
        f"revenue {totals.revenue:,.2f})",
        f"in flight     max {summary.max_in_flight:,} rows, bound {summary.bound:,} rows "
        "(the windows the stages promise, added up): "
        + ("backpressure held" if held else "BOUND EXCEEDED"),
        f"source demand max outstanding {summary.max_outstanding_demand:,} "
        f"({'rows' if config.mode == 'rows' else 'batches'}; rx buffer {config.rx_buffer})",
        f"spark jobs    {jobs}",
    ]
    print("\n".join(lines))
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
