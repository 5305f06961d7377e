"""``python -m reactive_streams.spark``: Spark events -> RxPY -> a slow asyncio consumer.

A DataFrame of synthetic events is streamed with ``from_dataframe`` through ``rx_processor``
(parse, filter, a ten-second tumbling event-time window aggregate), across ``publish_on``, into a
coroutine that sleeps after every window. A progress bar follows the consumer; the summary
shows rows, seconds, rows/s, the most rows in flight against the bound the stages promise
(the proof that backpressure held) and the Spark jobs run. Exit status: 0 when the bound
held, 1 when it did not, 2 on a bad flag or when Spark could not start, 130 on Ctrl-C (the
read is cancelled, and Spark stopped, before the exit).
"""

from __future__ import annotations

import argparse
import math
import re
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlparse

from reactive_streams.spark import _py4j
from reactive_streams.spark.local import SparkStartError, java_problem, local_session

if TYPE_CHECKING:  # the pipeline needs the rx and spark extras: imported by main() only
    from reactive_streams.spark.pipeline import Config, Summary

_INTERRUPTED: Final = 130  # the shell's status for a process ended by Ctrl-C (128 + SIGINT)
_MASTER: Final = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|yarn|(spark|k8s|mesos)://.+"
)
_MASTER_FORMS: Final = "local, local[N] (N >= 1), local[*], spark://host:port, yarn or k8s://..."
_HTTP2_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(3) + b"\x04" + bytes(5)
"""The client preface of HTTP/2 (which gRPC, and so Spark Connect, speaks), then an empty
SETTINGS frame: a server of HTTP/2 answers with a SETTINGS frame of its own (type 4)."""


_ROWS_PER_PARTITION: Final = 250_000
"""Without ``--partitions``: one partition per this many rows (8 at least). A read holds one
partition in the driver at a time (Spark collects it there to serve it), so its size, not
the run's, sets the driver's memory."""


def _positive_int(text: str, most: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 0 < value <= most:
        raise argparse.ArgumentTypeError(f"must be a positive integer up to {most:,}, got {text!r}")
    return value


def _rows(text: str) -> int:
    return _positive_int(text, 2**63 - 1)  # a Spark range's end is a Java long


def _partitions(text: str) -> int:
    return _positive_int(text, 2**31 - 1)  # a Java int


def _delay(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def _master(text: str) -> str:
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark master URL: use {_MASTER_FORMS}")
    return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reactive_streams.spark",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--rows", type=_rows, default=2_000_000, help="events (default 2M)")
    parser.add_argument(
        "--mode", choices=("rows", "arrow"), default="rows", help="from_dataframe mode"
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--master",
        type=_master,
        default="local[2]",
        help="Spark master URL (default local[2], embedded)",
    )
    target.add_argument("--remote", metavar="sc://host:port", help="a Spark Connect server")
    parser.add_argument(
        "--delay", type=_delay, default=0.02, help="consumer seconds per window (default 0.02)"
    )
    parser.add_argument(
        "--partitions",
        type=_partitions,
        help=f"DataFrame partitions (default: one per {_ROWS_PER_PARTITION:,} rows, 8 at least)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _check_reachable(url: str) -> None:
    """Fail fast on a Connect address that cannot work: the client would retry for minutes,
    silently, on a closed port or on a server that does not speak gRPC."""
    try:
        parsed = urlparse(url)
        port = parsed.port or 15002
    except ValueError as exc:  # "sc://host:99999", "sc://[::1"
        raise SparkStartError(f"--remote {url!r}: {exc}") from exc
    host = parsed.hostname
    if parsed.scheme != "sc" or not host:
        raise SparkStartError(f"--remote needs an address like sc://host:15002, got {url!r}")
    try:
        connection = socket.create_connection((host, port), timeout=10)
    except OSError as exc:
        raise SparkStartError(
            f"cannot reach the Spark Connect server at {host}:{port} ({exc}); "
            "start one with $SPARK_HOME/sbin/start-connect-server.sh"
        ) from exc
    with connection:
        if "use_ssl=true" in url.lower():
            return  # TLS first: the client's own handshake will tell
        try:
            connection.sendall(_HTTP2_PREFACE)
            answer = connection.recv(9)
        except OSError:  # silent (a timeout), or hung up on the preface: reachable all the same
            answer = b""
    if len(answer) < 4 or answer[3] != 4:  # no SETTINGS frame: not HTTP/2, so not gRPC
        raise SparkStartError(
            f"{host}:{port} does not answer as a Spark Connect server (gRPC over HTTP/2); "
            "check the port (the Connect default is 15002)"
        )


def _check_master(master: str) -> None:
    """Fail fast on a standalone master nobody listens at (Spark retries for a minute)."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host or address, int(port or 7077)), timeout=10).close()
            return
        except (OSError, ValueError) as exc:
            problems.append(f"{address}: {exc}")
    raise SparkStartError(f"cannot reach the Spark master {master} ({'; '.join(problems)})")


@contextmanager
def _interrupt_deferred() -> Iterator[list[bool]]:
    """Hold a Ctrl-C back while the JVM starts: pyspark starts it with Ctrl-C ignored, and a
    KeyboardInterrupt before the session exists would leave it running with nobody to stop
    it. The first Ctrl-C is kept (the caller stops Spark once started); a second quits now."""
    pressed: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed  # signals reach the main thread only: nothing to hold back
        return

    def hold(signum: int, frame: Any) -> None:
        if pressed:
            raise KeyboardInterrupt
        pressed.append(True)
        print(
            "\nCtrl-C: stopping as soon as Spark has started "
            "(Ctrl-C again quits now, and may leave Spark's JVM running)",
            file=sys.stderr,
        )

    signal.signal(signal.SIGINT, hold)
    try:
        yield pressed
    finally:
        # Not pyspark's handler: it calls into the JVM from inside whatever call to it the
        # main thread was making. A plain KeyboardInterrupt lets asyncio.run cancel the
        # consumer, which cancels the read (and its Spark jobs) through the subscriptions.
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
    _check_master(args.master)
    with _interrupt_deferred() as pressed:
        try:
            session = local_session(args.master, app_name="reactive-streams-main-job")
        except KeyboardInterrupt:  # pyspark's own handler, installed once its context exists
            _stop_started_context()
            raise
    if pressed:
        session.stop()
        raise KeyboardInterrupt
    _quiet_serving_abort(session)
    return session


def _stop_started_context() -> None:
    """Stop the SparkContext a start that was interrupted late had already created."""
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        if context is not None:
            context.stop()
    except Exception:  # stopping what may be half made: nothing more to do
        pass


def _quiet_serving_abort(session: Any) -> None:
    """A Ctrl-C cancels the read in the middle of a partition, and the JVM's partition server
    then logs ``ERROR Utils: Aborting task`` with a stack (docs/spark.md, "Cancel"): expected
    here, so this job's own session keeps that logger for fatal errors."""
    try:
        log4j = _py4j.jvm(session.sparkContext).org.apache.logging.log4j
        log4j.core.config.Configurator.setLevel("org.apache.spark.util.Utils", log4j.Level.FATAL)
    except Exception:  # another logging back end: the stack shows, nothing else changes
        pass


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # a bad flag: exit 2, naming it
    try:
        from reactive_streams.spark.pipeline import Config, Meter, Window, run
    except ImportError as exc:
        print(f"the main job needs the rx and spark extras: {exc}", file=sys.stderr)
        return 2
    try:
        spark = _session(args)
    except SparkStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted while Spark was starting", file=sys.stderr)
        return _INTERRUPTED

    partitions = args.partitions or max(8, -(-args.rows // _ROWS_PER_PARTITION))
    config = Config(
        rows=args.rows, mode=args.mode, partitions=partitions, consumer_delay=args.delay
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
    done = 0  # rows the consumer finished, as of its last window

    def on_window(window: Window, meter: Meter) -> None:
        nonlocal done
        finished = meter.finished
        if bar is not None:
            bar.update(finished - done)
            # refresh=False: the bar's own rate limit decides when to redraw
            bar.set_postfix(in_flight=meter.emitted - finished, window=window.window, refresh=False)
        done = finished

    try:
        summary = run(spark, config, on_window=on_window)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        from reactive_streams.spark._partitions import join_reads

        released = join_reads(timeout=5.0)  # the cancel is under way: let the read end
        print(
            f"interrupted after {done:,} rows: the read was cancelled, "
            + ("its Spark jobs stopped" if released else "Spark is still stopping its jobs"),
            file=sys.stderr,
        )
        return _INTERRUPTED
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
    print("\n".join(summary_lines(summary, config)))
    return 0 if summary.max_in_flight <= summary.bound else 1


def summary_lines(summary: Summary, config: Config) -> list[str]:
    """The summary a run prints: a pipeline ``Summary`` and its ``Config``."""
    held = summary.max_in_flight <= summary.bound
    totals = summary.totals
    if summary.spark_jobs is None:
        jobs = "n/a (Spark Connect)"
    elif summary.spark_jobs_capped:
        jobs = f"at least {summary.spark_jobs} (Spark keeps the last spark.ui.retainedJobs)"
    else:
        jobs = f"{summary.spark_jobs}"
    slept = summary.windows * config.consumer_delay
    pace = ""
    if slept:
        pace = f" (the consumer slept {slept:.1f} of {summary.seconds:.1f} s"
        pace += ": it sets the pace)" if slept >= summary.seconds / 2 else ")"
    return [
        f"rows          {summary.rows:,}",
        f"seconds       {summary.seconds:.1f}",
        f"rows/s        {summary.rows_per_second:,.0f}{pace}",
        f"windows       {summary.windows} ({totals.events:,} events kept, {totals.buys:,} buys, "
        f"revenue {totals.revenue:,.2f})",
        f"in flight     max {summary.max_in_flight:,} rows, bound {summary.bound:,} rows "
        "(the windows the stages promise, added up): "
        + ("backpressure held" if held else "BOUND EXCEEDED"),
        f"source demand max outstanding {summary.max_outstanding_demand:,} "
        f"({'rows' if config.mode == 'rows' else 'batches'}; rx buffer {config.rx_buffer})",
        f"spark jobs    {jobs}",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
