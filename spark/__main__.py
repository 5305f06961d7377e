"""``python -m reactive_streams.spark``: Spark events -> RxPY -> a slow asyncio consumer.

A DataFrame of synthetic events is streamed with ``from_dataframe`` through ``rx_processor``
(parse, filter, a ten-second tumbling event-time window aggregate), across ``publish_on``, into a
coroutine that sleeps after every window. A progress bar follows the consumer (a line every
five seconds when stderr is no terminal); the summary shows rows, seconds, rows/s, the
most rows in flight against the bound the stages promise (the proof that backpressure held)
and the Spark jobs run. Exit status: 0 when the bound held, 1 when it did not, 2 on a bad
flag or when Spark could not start, 130 on Ctrl-C (the read is cancelled, and Spark stopped,
before the exit). Spark runs on the job's own thread: the main thread only waits for it.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, Final, NoReturn
from urllib.parse import urlparse

from reactive_streams.spark import _py4j
from reactive_streams.spark._progress import PROGRESS_EVERY, progress
from reactive_streams.spark.local import SparkStartError, java_problem, local_session

if TYPE_CHECKING:  # the pipeline needs the rx and spark extras: imported by main() only
    from reactive_streams.spark._enrich import Enrich
    from reactive_streams.spark.pipeline import Config, Stop, Summary

_INTERRUPTED: Final = 130  # the shell's status for a process ended by Ctrl-C (128 + SIGINT)
_WAKE_EVERY: Final = 0.2
"""Seconds between two wake-ups of the main thread's wait: a SIGINT the system hands to
another thread interrupts no wait, and Python runs its handler once the main thread wakes."""
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


def _concurrency(text: str) -> int:
    return _positive_int(text, 10_000)


def _master(text: str) -> str:
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark master URL: use {_MASTER_FORMS}")
    return text


_DESCRIPTION: Final = (
    "The main job: synthetic events read once from Spark with from_dataframe and shared "
    "(reactive_streams.share) by two consumers: RxPY operators (parse, filter, a window "
    "aggregate) to a slow asyncio consumer, and running statistics on a thread of their own. "
    "Backpressure end to end: the slower consumer's pace sets Spark's. With --enrich, each "
    "event first gets a user segment from a local service, called inside the Spark executors "
    "(reactive_streams.spark.map_partitions with map_async), at most --concurrency calls per "
    "task."
)
_EPILOG: Final = (
    "A window is ten seconds of event time (1,000 events) folded into one aggregate; the "
    "consumer sleeps --delay seconds after each. The summary compares the most rows in flight "
    "with the bound the stages promise. Exit status: 0 when that bound held, 1 when not, 2 on "
    "a bad flag or when Spark cannot start, 130 on Ctrl-C. kill -USR1 <pid> prints a snapshot "
    "of the pipeline's stages (reactive_streams.snapshot) while it runs; Ctrl-C prints one "
    "before it stops. --enrich starts the service (10 ms an answer) on 127.0.0.1 in this "
    "process, so it needs a local master (local, local[N], local[*], local-cluster[...]): "
    "with --remote or another master it is refused. Its summary compares the most calls the "
    "service saw at once with --concurrency x the master's task slots (local[N]: N; local[*]: "
    "the CPUs; local-cluster[E,C,M]: E x C), and counts the rows per segment; a call bound "
    "exceeded exits 1 too. Enriching is I/O bound: use fewer --rows (e.g. 100000)."
)


def _parser() -> argparse.ArgumentParser:
    """The flags; help and description are plain text (argparse shows no reST)."""
    parser = argparse.ArgumentParser(
        prog="python -m reactive_streams.spark", description=_DESCRIPTION, epilog=_EPILOG
    )
    parser.add_argument("--rows", type=_rows, default=2_000_000, help="events (default 2M)")
    parser.add_argument(
        "--mode",
        choices=("rows", "arrow"),
        default="rows",
        help="what from_dataframe emits: a Row per event, or Arrow record batches",
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
        "--delay",
        type=_delay,
        default=0.02,
        help="seconds the consumer sleeps after each window (default 0.02)",
    )
    parser.add_argument(
        "--partitions",
        type=_partitions,
        help=f"DataFrame partitions (default: one per {_ROWS_PER_PARTITION:,} rows, 8 at least)",
    )
    parser.add_argument(
        "--enrich",
        action="store_true",
        help="add a user segment to each event in the executors, from a local service",
    )
    parser.add_argument(
        "--concurrency",
        type=_concurrency,
        metavar="N",
        help="with --enrich: the most calls in flight per Spark task (default 16)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (nor, when stderr is no terminal, progress lines)",
    )
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The flags, and the rules between them: a bad combination exits 2, naming the flag."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.concurrency is not None and not args.enrich:
        parser.error("--concurrency: only with --enrich (it bounds the enrich calls per task)")
    if args.enrich:
        from reactive_streams.spark._enrich import task_slots

        if args.remote or task_slots(args.master) is None:
            where = f"--remote {args.remote}" if args.remote else f"--master {args.master}"
            parser.error(
                f"--enrich: needs a local master (local[N], local[*], local-cluster[...]), "
                f"not {where}: its service listens on 127.0.0.1 in this process, which "
                "executors on other machines cannot reach"
            )
        args.concurrency = args.concurrency or 16
    return args


def _check_reachable(url: str) -> None:
    """Fail fast on a Connect address that cannot work: the client would retry for minutes,
    silently, on a closed port or on a server that does not speak gRPC.

    A socket and the HTTP/2 preface, not ``grpc.channel_ready_future``: that one waits out
    its whole timeout and then says only "not ready", the same for a closed port, an unknown
    host and a web server; the socket names each at once."""
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


def _session(args: argparse.Namespace) -> Any:
    """The session of the run, started on the job's thread: pyspark installs its Ctrl-C
    handler only on the main thread, which never calls into Spark here."""
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
    from reactive_streams.spark._map_partitions import FLUSH_CONF

    flush = {FLUSH_CONF: "true"} if args.enrich else None  # a cancel stops the calls at once
    session = local_session(args.master, app_name="reactive-streams-main-job", conf=flush)
    _quiet_serving_abort(session)
    return session


def _quiet_serving_abort(session: Any) -> None:
    """A Ctrl-C cancels the read in the middle of a partition, and the JVM's partition server
    then logs ``ERROR Utils: Aborting task`` with a stack (docs/spark.md, "Cancel"): expected
    here, so this job's own session keeps that logger for fatal errors."""
    try:
        log4j = _py4j.jvm(session.sparkContext).org.apache.logging.log4j
        log4j.core.config.Configurator.setLevel("org.apache.spark.util.Utils", log4j.Level.FATAL)
    except Exception:  # another logging back end: the stack shows, nothing else changes
        pass


def main(argv: list[str] | None = None, *, progress_every: float = PROGRESS_EVERY) -> int:
    """Run the job on a thread of its own; this (main) thread only waits, so a Ctrl-C lands
    here, never inside a call into Spark (py4j logs a traceback for one it interrupts).

    The first Ctrl-C asks the job to stop (:class:`~reactive_streams.spark.pipeline.Stop`): a
    Spark still starting is stopped once started, a run cancels its read; a second one ends
    the process at once. Our SIGINT handler only notes a Ctrl-C, and the wait looks at it
    (see :func:`_wait`). ``progress_every``: seconds between two progress lines when stderr is not
    a terminal (a terminal gets a tqdm bar).

    SIGUSR1 (POSIX) prints a snapshot of the run's stages (``reactive_streams.snapshot``
    from the statistics consumer's sink) to stderr; so does the first Ctrl-C, before the
    stop. The handler only puts into a queue (reentrant-safe); a reporter thread prints.
    """
    held: list[bool] = []  # Ctrl-Cs our handler noted; owned: the main thread (it runs there)
    previous: Any = None  # the SIGINT handler to give back, while ours holds a Ctrl-C
    asked: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # snapshots to print
    usr1: Any = None  # the SIGUSR1 handler to give back at exit
    try:
        args = _parse(argv)  # a bad flag: exit 2, naming it
        from reactive_streams.spark.pipeline import Stop

        stop, started = Stop(), threading.Event()
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT) or signal.default_int_handler
            signal.signal(signal.SIGINT, lambda signum, frame: held.append(True))
            if hasattr(signal, "SIGUSR1"):  # POSIX only
                _start_reporter(stop, asked)
                usr1 = signal.signal(signal.SIGUSR1, lambda signum, frame: asked.put("SIGUSR1"))
    except ImportError as exc:
        print(f"the main job needs the rx and spark extras: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # nothing started yet: nothing to stop
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        return _INTERRUPTED
    try:
        job = _on_thread(_job, args, stop, started, progress_every)  # a Ctrl-C meanwhile is held
        return _wait(job, held, previous, stop, started)
    finally:
        if usr1 is not None:
            signal.signal(signal.SIGUSR1, usr1)
        asked.put(None)  # the reporter thread ends


def _wait(
    job: Future[int], held: list[bool], previous: Any, stop: Stop, started: threading.Event
) -> int:
    """The main thread's wait for ``job``, looking every ``_WAKE_EVERY`` s at the Ctrl-Cs our
    handler noted: the first prints a snapshot and asks the job to stop; a second quits at
    once. A Ctrl-C never raises here: a KeyboardInterrupt landing inside a Condition's wait
    leaves its lock broken (``RuntimeError: release unlocked lock``), seen in a loaded run."""
    pressed = False
    try:
        while True:
            presses = len(held)  # held: appended by our handler, on this thread
            if presses:
                del held[:presses]  # a press noted meanwhile stays for the next look
                if pressed or presses > 1:
                    _quit_now()
                pressed = True
                what = (
                    "stopping the run"
                    if started.is_set()
                    else "stopping as soon as Spark has started"
                )
                print(f"\nCtrl-C: {what} (Ctrl-C again quits at once)", file=sys.stderr)
                if stop.watched is not None:
                    _print_snapshot(stop, "Ctrl-C")
                stop.request()
            if wait([job], _WAKE_EVERY).done:
                break
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    status = job.result()
    return _INTERRUPTED if pressed else status


def _start_reporter(stop: Stop, asked: queue.SimpleQueue[str | None]) -> None:
    """A daemon thread printing a snapshot for each reason put into ``asked``, until None:
    the signal handler only puts (``SimpleQueue.put`` is safe in a handler), never prints."""

    def report() -> None:
        while (why := asked.get()) is not None:
            _print_snapshot(stop, why)

    threading.Thread(target=report, name="rs-main-snapshot", daemon=True).start()


def _print_snapshot(stop: Stop, why: str) -> None:
    """The run's stages, from the statistics consumer's sink up to the read, to stderr:
    read without locks (``snapshot``), so it never waits for the pipeline."""
    from reactive_streams import snapshot

    watched = stop.watched
    table = "no run in progress" if watched is None else str(snapshot(watched))
    sys.stderr.write(f"snapshot ({why}):\n{table}\n")
    sys.stderr.flush()


def _on_thread(fn: Callable[..., int], *args: Any) -> Future[int]:
    """``fn(*args)`` on a daemon thread of its own (a quit at once does not wait for it)."""
    future: Future[int] = Future()

    def work() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # into the future: main() raises it
            future.set_exception(exc)

    threading.Thread(target=work, name="rs-main-job", daemon=True).start()
    return future


def _quit_now() -> NoReturn:
    """End the process at once, waiting for nothing. A local Spark's JVM reads its stdin
    until its parent is gone, then exits."""
    print("Ctrl-C again: quitting at once", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(_INTERRUPTED)


def _job(
    args: argparse.Namespace, stop: Stop, started: threading.Event, progress_every: float
) -> int:
    """Start Spark, run the pipeline, stop Spark; the job's thread. Returns the exit status."""
    try:
        spark = _session(args)
    except SparkStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        started.set()
    try:
        if stop.requested:
            print("interrupted while Spark was starting", file=sys.stderr)
            return _INTERRUPTED
        return _run(spark, args, stop, progress_every)
    finally:
        if not args.remote:
            if stop.requested:
                _let_tasks_end(spark)
            spark.stop()


def _let_tasks_end(spark: Any, timeout: float = 10.0) -> None:
    """After a cancel, wait (up to ``timeout`` s) until no task runs in the local executors:
    a cancelled task still ending when the session stops logs Spark's ``ERROR
    TaskContextImpl: ... Block broadcast_N does not exist`` with a stack (seen after a
    Ctrl-C in arrow mode). ``SparkStatusTracker.getExecutorInfos`` is public Java API."""
    try:
        tracker = _py4j.java_context(spark.sparkContext).sc().statusTracker()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(info.numRunningTasks() for info in tracker.getExecutorInfos()):
                return
            time.sleep(0.1)
    except Exception:  # a session already gone: nothing to wait for
        pass


def _run(spark: Any, args: argparse.Namespace, stop: Stop, progress_every: float) -> int:
    """The pipeline over ``spark``, its progress and its summary (the job's thread)."""
    from reactive_streams.spark.pipeline import Config

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
    enrich = _enrich(args)
    try:
        return _report(spark, args, config, stop, progress_every, enrich)
    finally:
        if enrich is not None:
            enrich.stop()


def _enrich(args: argparse.Namespace) -> Enrich | None:
    """With --enrich, the started service and what goes with it (the job's thread)."""
    if not args.enrich:
        return None
    from reactive_streams.spark._enrich import Enrich, task_slots

    slots = task_slots(args.master)
    assert slots is not None  # _parse refused the others
    enrich = Enrich(args.concurrency, slots, args.mode).start()
    print(
        f"--enrich: a service on 127.0.0.1:{enrich.service.port} adds a segment to each event "
        f"in the executors (map_partitions, map_async at most {args.concurrency} calls a task)",
        file=sys.stderr,
    )
    return enrich


def _report(
    spark: Any,
    args: argparse.Namespace,
    config: Config,
    stop: Stop,
    progress_every: float,
    enrich: Enrich | None,
) -> int:
    """Run the pipeline, following it with the progress; print the summary (job's thread)."""
    from reactive_streams.spark._partitions import join_reads
    from reactive_streams.spark.pipeline import Meter, Window, run

    shown = None if args.no_progress else progress(config.rows, every=progress_every)
    done = 0  # rows the consumer finished, as of its last window

    def on_window(window: Window, meter: Meter) -> None:
        nonlocal done
        done = meter.finished  # owned: the consumer's loop, on this thread
        if shown is not None:
            shown.update(done, meter.emitted - done, window.window)

    summary: Summary | None = None
    failure: Exception | None = None
    try:
        extra = {} if enrich is None else {"enrich": enrich}  # stand-ins take no enrich
        summary = run(spark, config, on_window=on_window, stop=stop, **extra)
    except KeyboardInterrupt:  # a run given no stop (a stand-in), interrupted all the same
        pass
    except Exception as exc:
        failure = exc
    finally:  # the reporter thread stops here, whatever ended the run
        if shown is not None:
            shown.close(completed=summary is not None and not stop.requested)
    if failure is not None:
        print(f"error: the pipeline failed: {type(failure).__name__}: {failure}", file=sys.stderr)
        return 2
    if summary is None or stop.requested:
        released = join_reads(timeout=5.0)  # the cancel is under way: let the read end
        print(
            f"interrupted after {done:,} rows: the read was cancelled, "
            + ("its Spark jobs stopped" if released else "Spark is still stopping its jobs"),
            file=sys.stderr,
        )
        return _INTERRUPTED
    lines = summary_lines(summary, config)
    if enrich is not None:
        lines[-1:-1] = enrich.lines(args.remote or args.master)  # before the spark jobs
    print("\n".join(lines))
    held = summary.max_in_flight <= summary.bound and (enrich is None or enrich.held())
    return 0 if held else 1


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
        f"({'rows' if config.mode == 'rows' else 'batches'}; share buffer {config.share_buffer})",
        *_consumer_lines(summary),
        f"spark jobs    {jobs}",
    ]


def _consumer_lines(summary: Summary) -> list[str]:
    """Who got what from the one read, and which consumer paced it: the one that waited
    less for its input (the other waited for the share, which waited for it)."""
    stats = summary.stats
    if stats is None:
        return []
    slower = "statistics" if stats.waited <= summary.windows_waited else "windows"
    lead = summary.max_stats_lead
    return [
        f"consumers     one read of {summary.rows:,} rows fed both: windows got "
        f"{summary.windows_rows:,} (waited {summary.windows_waited:.1f} s for input), "
        f"statistics got {stats.rows:,} (waited {stats.waited:.1f} s)",
        f"paced by      the {slower}, the slower consumer; the read ran at most {lead:,} rows "
        f"ahead of the statistics (bound {summary.stats_lead_bound:,}: the share's buffer, "
        "their prefetch, the one in hand)",
        f"statistics    {stats.stats.describe()}",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
