"""The main job: bad flags and unusable servers are refused at once, naming what is
wrong; Ctrl-C stops Spark (before or during the run) and leaves no JVM behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_helpers import ROOT, wait_until  # noqa: E402

from reactive_streams.spark.__main__ import (  # noqa: E402
    _check_master,
    _check_reachable,
    _parse,
    _parser,
    main,
    summary_lines,
)
from reactive_streams.spark.local import SparkStartError  # noqa: E402
from reactive_streams.spark.pipeline import Config, Summary, Window, _new_jobs  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (
            ["--rows", "0"],
            "--rows: must be a positive integer up to 9,223,372,036,854,775,807",
        ),
        (["--rows", "abc"], "--rows: must be a positive integer up to"),
        (["--rows", str(2**63)], "--rows: must be a positive integer up to"),
        (["--partitions", "-1"], "--partitions: must be a positive integer up to 2,147,483,647"),
        (["--delay", "-1"], "--delay: must be a number of seconds >= 0, got '-1'"),
        (["--delay", "nan"], "--delay: must be a number of seconds >= 0, got 'nan'"),
        (["--delay", "inf"], "--delay: must be a number of seconds >= 0, got 'inf'"),
        (["--master", "local[0]"], "--master: 'local[0]' is not a Spark master URL"),
        (["--master", "garbage"], "--master: 'garbage' is not a Spark master URL"),
        (["--enrich", "--remote", "sc://127.0.0.1:1"], "--enrich: needs a local master"),
        (["--enrich", "--master", "yarn"], "--enrich: needs a local master"),
        (["--enrich", "--master", "spark://h:7077"], "not --master spark://h:7077"),
        (["--concurrency", "4"], "--concurrency: only with --enrich"),
        (["--enrich", "--concurrency", "0"], "--concurrency: must be a positive integer up to"),
    ],
)
def test_a_bad_flag_exits_2_naming_it(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(flags)
    assert exited.value.code == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("sc://127.0.0.1:99999", "--remote 'sc://127.0.0.1:99999': Port out of range"),
        ("sc://[::1", "--remote 'sc://[::1': Invalid IPv6 URL"),
        ("http://127.0.0.1:15002", "--remote needs an address like sc://host:15002"),
    ],
)
def test_a_malformed_remote_address_exits_2_naming_it(
    url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--remote", url]) == 2
    assert said in capsys.readouterr().err


@contextmanager
def _answering(answer: bytes) -> Iterator[int]:
    """A local server that reads what a client sends and answers ``answer`` (then hangs up),
    for as many connections as come; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            with connection:
                connection.recv(1024)
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        except OSError:
            pass
        listener.close()
        thread.join(5)
        assert not thread.is_alive()


@pytest.fixture
def http1_server() -> Iterator[int]:
    """A server that answers like a web server, as a wrong port (the Spark UI's) would."""
    with _answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n") as port:
        yield port


def test_a_remote_that_is_not_spark_connect_exits_2_at_once(
    http1_server: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Connect client would retry against it for minutes, silently: the probe refuses
    the port before any client is made."""
    from pyspark.sql.session import SparkSession

    def no_client(*args: Any) -> Any:
        raise AssertionError("a Connect client was made for a port the probe should refuse")

    monkeypatch.setattr(SparkSession.Builder, "remote", no_client)
    assert main(["--remote", f"sc://127.0.0.1:{http1_server}", "--rows", "10"]) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{http1_server} does not answer as a Spark Connect server" in err


def test_an_unreachable_standalone_master_exits_2_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Spark would retry for a minute, then fail with 'a stopped SparkContext'."""
    assert main(["--master", "spark://127.0.0.1:1", "--rows", "10"]) == 2
    assert "cannot reach the Spark master spark://127.0.0.1:1" in capsys.readouterr().err


def test_partitions_follow_the_rows_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark collects a partition in the driver to serve it: a bigger run gets more
    partitions of the same size, not bigger ones (the driver's memory)."""
    import reactive_streams.spark.__main__ as job
    import reactive_streams.spark.pipeline as pipeline

    seen: list[int] = []

    def run(spark: Any, config: Config, **kwargs: Any) -> Summary:
        seen.append(config.partitions)
        raise KeyboardInterrupt  # stop there: as a Ctrl-C would

    monkeypatch.setattr(job, "_session", lambda args: object())
    monkeypatch.setattr(pipeline, "run", run)
    for flags in (["--rows", "2000000"], ["--rows", "50000000"], ["--partitions", "3"]):
        assert job.main(["--remote", "sc://127.0.0.1:1", *flags]) == 130
    assert seen == [8, 200, 3]


def _summary(windows: int, seconds: float, jobs: int | None, capped: bool = False) -> Summary:
    return Summary(
        rows=1000,
        windows=windows,
        seconds=seconds,
        max_in_flight=10,
        bound=100,
        max_outstanding_demand=32,
        spark_jobs=jobs,
        totals=Window(0, 0, 0, 0, 0, 0.0, 0.0),
        spark_jobs_capped=capped,
    )


def test_the_summary_says_the_consumer_sets_the_pace_only_when_it_does() -> None:
    config = Config(consumer_delay=0.02)
    paced = summary_lines(_summary(windows=100, seconds=3.0, jobs=8), config)[2]
    assert "the consumer slept 2.0 of 3.0 s: it sets the pace" in paced
    fast = summary_lines(_summary(windows=10, seconds=3.0, jobs=8), config)[2]
    assert "the consumer slept 0.2 of 3.0 s)" in fast and "pace" not in fast
    none = summary_lines(_summary(windows=0, seconds=0.5, jobs=8), config)[2]
    assert "slept" not in none


def test_the_summary_says_when_spark_forgot_some_jobs() -> None:
    config = Config()
    assert summary_lines(_summary(1, 1.0, 8), config)[-1].endswith(" 8")
    capped = summary_lines(_summary(1, 1.0, 950, capped=True), config)[-1]
    assert "at least 950" in capped
    assert "n/a (Spark Connect)" in summary_lines(_summary(1, 1.0, None), config)[-1]


class _Conf:
    def __init__(self, retained: str) -> None:
        self.retained = retained

    def get(self, key: str, default: str) -> str:
        assert key == "spark.ui.retainedJobs"
        return self.retained


class _Session:
    def __init__(self, retained: str = "1000") -> None:
        self.conf = _Conf(retained)


def test_new_jobs_counts_only_this_runs_and_flags_a_full_tracker() -> None:
    """Ids only grow; a tracker at its bound has dropped its oldest tenth, maybe ours."""
    assert _new_jobs(_Session(), [0, 1, 2], [0, 1, 2, 3, 4]) == (2, False)
    assert _new_jobs(_Session(), [], [0, 1]) == (2, False)
    assert _new_jobs(_Session("10"), [], list(range(100, 109))) == (9, True)
    assert _new_jobs(_Session("10"), [], list(range(100, 108))) == (8, False)
    assert _new_jobs(_Session(), None, [1]) == (None, False)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _interrupt(args: list[str], when: str) -> tuple[int, str, list[int]]:
    """Run the main job with ``args`` in a session of its own, send its group SIGINT (as a
    terminal's Ctrl-C does) as soon as a line of its stderr matches ``when`` (a regular
    expression, searched); return the exit
    status, stderr and the children it had then. Stderr is a pipe: progress comes as lines."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams.spark", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if re.search(when, line):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert seen.wait(300), "".join(lines)
    children = _children(process.pid)
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    reader.join(10)
    assert process.stderr is not None
    process.stderr.close()
    return process.returncode, "".join(lines), children


def _no_jvm_left(children: list[int]) -> None:
    deadline = time.monotonic() + 10
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [c for c in children if _alive(c)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the JVM outlived the job"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and pgrep")
def test_ctrl_c_while_spark_starts_stops_its_jvm() -> None:
    """pyspark starts the JVM with Ctrl-C ignored; an interrupt before the session existed
    used to leave it running, its parent gone. Sent at the JVM's first line of output."""
    status, err, children = _interrupt(["--rows", "1000"], "Using Spark's default log4j")
    assert status == 130, err
    assert children, "no JVM had started yet: the test did not test the start"
    assert "Ctrl-C: stopping as soon as Spark has started" in err
    assert "interrupted while Spark was starting" in err
    assert "Traceback" not in err
    _no_jvm_left(children)


_ROWS_FLOWING = r"^rows done: [1-9]"
"""A progress line (one every 5 s, stderr being a pipe) once some rows are done."""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and pgrep")
@pytest.mark.parametrize(
    ("mode", "when"),
    [
        ("rows", "events from Spark"),  # the run's first calls into Spark
        ("rows", _ROWS_FLOWING),
        ("arrow", _ROWS_FLOWING),
    ],
)
def test_ctrl_c_during_the_run_cancels_quietly(mode: str, when: str) -> None:
    """Quiet wherever it lands: py4j logged a traceback for a Ctrl-C inside one of its calls
    (the run's first ones, on a loaded machine), which the main thread never makes now."""
    status, err, children = _interrupt(["--rows", "2000000", "--mode", mode], when)
    assert status == 130, err
    assert "interrupted after" in err and "the read was cancelled" in err
    assert "Traceback" not in err and "Exception" not in err, err
    assert "Aborting task" not in err  # the partition server's stack, expected here
    _no_jvm_left(children)


def test_ctrl_c_during_a_connect_run_cancels_quietly(connect_server: Any) -> None:
    """The Connect read's iterators are released before the exit, not collected after
    pyspark's threads stopped (which printed 'cannot schedule new futures after shutdown')."""
    status, err, _ = _interrupt(
        ["--remote", connect_server.url, "--rows", "2000000"], _ROWS_FLOWING
    )  # rows stream, while the query still runs on the server
    assert status == 130, err
    assert "interrupted after" in err
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--delay", "0"],
        ["--master", "local"],
        ["--master", "local[*]"],
        ["--master", "local[4,2]"],
        ["--master", "local-cluster[2,1,1024]"],
        ["--master", "spark://host:7077"],
        ["--master", "yarn"],
        ["--master", "k8s://https://host:443"],
        ["--master", "mesos://host:5050"],
    ],
)
def test_valid_flags_are_accepted(flags: list[str]) -> None:
    """The checks refuse bad values only: every documented master form, and no delay."""
    args = _parser().parse_args(flags)
    assert vars(args)[flags[0].lstrip("-")] == (0.0 if flags[0] == "--delay" else flags[1])


def test_a_remote_that_answers_as_http2_is_accepted() -> None:
    """The probe's positive side: a SETTINGS frame (type 4) back is a gRPC server."""
    with _answering(bytes(3) + b"\x04" + bytes(5)) as port:
        _check_reachable(f"sc://127.0.0.1:{port}")


def test_a_remote_that_hangs_up_without_answering_is_refused_naming_it() -> None:
    """The preface read, then the connection closed with no bytes back: refused as not
    Spark Connect, not an IndexError."""
    with _answering(b"") as port:
        with pytest.raises(SparkStartError, match="does not answer as a Spark Connect"):
            _check_reachable(f"sc://127.0.0.1:{port}")


def test_a_remote_that_never_answers_is_refused_as_not_spark_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that accepts and stays silent is reachable, just not Connect: the probe's
    timeout is not reported as 'cannot reach' (the probe's 10 s shortened here)."""
    connect = socket.create_connection
    monkeypatch.setattr(
        socket, "create_connection", lambda address, timeout=None: connect(address, 0.3)
    )
    with socket.create_server(("127.0.0.1", 0)) as listener:  # never accepts, never answers
        port = listener.getsockname()[1]
        with pytest.raises(SparkStartError, match="does not answer as a Spark Connect"):
            _check_reachable(f"sc://127.0.0.1:{port}")


def test_a_remote_with_tls_is_not_probed_in_plain_text(http1_server: int) -> None:
    """use_ssl=true (any case): the server expects a TLS handshake first; the probe only
    checks that the port is open."""
    _check_reachable(f"sc://127.0.0.1:{http1_server}/;use_ssl=True")


def test_a_reachable_standalone_master_passes_the_check() -> None:
    """Only spark:// URLs are probed; any one listening address of an HA list will do."""
    _check_master("local[2]")
    _check_master("yarn")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        _check_master(f"spark://127.0.0.1:{port}")
        _check_master(f"spark://127.0.0.1:1,127.0.0.1:{port}")


class _Stopped:
    """A stand-in session: records its stop."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()


def _press_ctrl_c() -> None:
    """A Ctrl-C: SIGINT to this process, which Linux hands to the main thread."""
    os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_ctrl_c_never_lands_inside_a_call_into_spark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark runs on the job's thread and the main thread only waits: a Ctrl-C during a call
    into Spark (a stand-in lasting until the stop is asked for) interrupts the wait, not the
    call, which returns normally; the run then ends quietly and Spark is stopped."""
    import reactive_streams.spark.__main__ as command
    import reactive_streams.spark.pipeline as pipeline

    in_call = threading.Event()
    calls: list[tuple[str, bool]] = []
    session = _Stopped()

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any) -> Summary:
        in_call.set()
        wait_until(lambda: stop.requested, 30, "the stop the Ctrl-C asks for")
        calls.append((threading.current_thread().name, stop.requested))
        return _summary(windows=0, seconds=1.0, jobs=0)

    monkeypatch.setattr(command, "_session", lambda args: session)
    monkeypatch.setattr(pipeline, "run", run)
    threading.Thread(target=lambda: in_call.wait(30) and _press_ctrl_c(), daemon=True).start()
    assert main(["--no-progress", "--rows", "10"]) == 130
    assert calls == [("rs-main-job", True)]  # the call ran to its end, off the main thread
    err = capsys.readouterr().err
    assert "Ctrl-C: stopping the run" in err and "interrupted after 0 rows" in err
    assert session.stopped.is_set()


def _recording_stop(pipeline: Any, requested: threading.Event) -> Any:
    """The pipeline's Stop, setting ``requested`` when a stop is asked for."""

    class Stop(pipeline.Stop):  # type: ignore[misc, name-defined]
        def request(self) -> None:
            super().request()
            requested.set()

    return Stop


def _slow_start(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event, Any]:
    """A Spark start that lasts until released; returns (starting, release, session)."""
    import reactive_streams.spark.__main__ as command

    starting, release, session = threading.Event(), threading.Event(), _Stopped()

    def start(args: Any) -> Any:
        starting.set()
        assert release.wait(30)
        return session

    monkeypatch.setattr(command, "_session", start)
    return starting, release, session


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_ctrl_c_while_spark_starts_stops_spark_once_started(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The start is not interrupted (pyspark starts the JVM with Ctrl-C ignored, and a
    session cut short would be left running): Spark is stopped as soon as it exists."""
    import reactive_streams.spark.pipeline as pipeline

    starting, release, session = _slow_start(monkeypatch)
    monkeypatch.setattr(pipeline, "run", lambda *args, **kwargs: pytest.fail("ran anyway"))
    monkeypatch.setattr(pipeline, "Stop", _recording_stop(pipeline, release))

    def press_then_release() -> None:  # the stop it asks for releases the start
        assert starting.wait(30)
        _press_ctrl_c()

    pressed = threading.Thread(target=press_then_release, daemon=True)
    pressed.start()
    assert main(["--no-progress", "--rows", "10"]) == 130
    pressed.join(30)
    err = capsys.readouterr().err
    assert "Ctrl-C: stopping as soon as Spark has started" in err
    assert "interrupted while Spark was starting" in err
    assert session.stopped.is_set()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_quits_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first Ctrl-C waits for Spark to start (and stop); a second one does not wait."""
    import reactive_streams.spark.__main__ as command
    import reactive_streams.spark.pipeline as pipeline

    starting, release, _ = _slow_start(monkeypatch)
    requested = threading.Event()

    class Quit(Exception):
        """Stands for the process ending (os._exit) in this test."""

    def quit_now() -> None:
        raise Quit

    monkeypatch.setattr(command, "_quit_now", quit_now)
    monkeypatch.setattr(pipeline, "Stop", _recording_stop(pipeline, requested))

    def press_twice() -> None:
        assert starting.wait(30)
        _press_ctrl_c()
        assert requested.wait(30)
        _press_ctrl_c()

    threading.Thread(target=press_twice, daemon=True).start()
    try:
        with pytest.raises(Quit):
            main(["--no-progress", "--rows", "10"])
    finally:
        release.set()
    assert "Ctrl-C: stopping as soon as Spark has started" in capsys.readouterr().err


class _Meter:
    finished = 1234
    emitted = 1300


class _Window:
    window = 7


def test_ctrl_c_during_the_run_reports_the_rows_done_without_a_bar(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--no-progress: the count comes from the last window all the same (no Spark here)."""
    import reactive_streams.spark.__main__ as command
    import reactive_streams.spark.pipeline

    def run(spark: Any, config: Any, on_window: Any, stop: Any = None) -> Any:
        on_window(_Window(), _Meter())
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "_session", lambda args: _Stopped())
    monkeypatch.setattr(reactive_streams.spark.pipeline, "run", run)
    assert main(["--no-progress", "--rows", "10"]) == 130
    assert "interrupted after 1,234 rows" in capsys.readouterr().err


def test_help_is_plain_text_and_says_what_a_window_is() -> None:
    """--help shows no reST markup (no double backticks, no :func: or :class: roles), and
    the window the consumer sleeps after is explained where the word appears."""
    text = _parser().format_help()
    assert "``" not in text
    assert not re.search(r":(func|class|meth|mod|attr|data|exc):", text), text
    flat = " ".join(text.split())  # argparse wraps lines
    assert "seconds the consumer sleeps after each window" in flat
    assert "A window is ten seconds of event time (1,000 events) folded into one aggregate" in flat
    assert "--concurrency x the master's task slots (local[N]: N;" in flat


def test_a_remote_where_nothing_listens_is_refused_naming_the_address() -> None:
    """A closed port fails at once as 'cannot reach', with the system's reason and how to
    start a server (grpc's channel_ready_future would wait out its timeout, saying nothing)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]  # free once closed: nothing listens there
    with pytest.raises(SparkStartError) as refused:
        _check_reachable(f"sc://127.0.0.1:{port}")
    message = str(refused.value)
    assert f"cannot reach the Spark Connect server at 127.0.0.1:{port}" in message
    assert "refused" in message.lower() and "start-connect-server.sh" in message


def test_a_remote_host_that_does_not_resolve_is_refused_naming_it() -> None:
    """An unknown host name (.invalid never resolves, RFC 6761): 'cannot reach', naming it."""
    with pytest.raises(
        SparkStartError,
        match="cannot reach the Spark Connect server at "
        r"no-such-host\.invalid:15002 \(",
    ):
        _check_reachable("sc://no-such-host.invalid:15002")


def test_a_real_grpc_server_passes_the_probe() -> None:
    """The probe's positive side against grpc's own server (grpcio comes with the spark
    extra), not only against a hand-made SETTINGS frame."""
    grpc = pytest.importorskip("grpc")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        server = grpc.server(pool)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            _check_reachable(f"sc://127.0.0.1:{port}")
        finally:
            server.stop(None).wait(30)


def test_enrich_counts_the_task_slots_of_a_local_master_only() -> None:
    """The call bound is concurrency x the tasks Spark runs at once; a master whose
    workers may be elsewhere has none (its executors cannot reach 127.0.0.1 here)."""
    from reactive_streams.spark._enrich import task_slots

    assert task_slots("local") == 1
    assert task_slots("local[3]") == 3
    assert task_slots("local[4,2]") == 4
    assert task_slots("local[*]") == (os.cpu_count() or 1)
    assert task_slots("local-cluster[2,3,1024]") == 6
    for master in ("yarn", "spark://h:7077", "k8s://https://h:443"):
        assert task_slots(master) is None
    assert _parse(["--enrich"]).concurrency == 16  # the default, with --enrich only
    assert _parse(["--enrich", "--concurrency", "8", "--master", "local[*]"]).concurrency == 8


def test_an_exceeded_call_bound_exits_1_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The in-flight bound held, the call bound did not (a stand-in run and service
    counters): the summary says CALL BOUND EXCEEDED and the job exits 1; the service the
    job started is stopped at its end."""
    import reactive_streams.spark.__main__ as command
    import reactive_streams.spark.pipeline as pipeline

    services: list[Any] = []

    def run(spark: Any, config: Any, *, on_window: Any, stop: Any, enrich: Any) -> Summary:
        services.append(enrich.service)
        stats = dict(enrich.service.stats(), echo=10, max_in_flight=enrich.bound + 1)
        monkeypatch.setattr(enrich.service, "stats", lambda: stats)
        return _summary(windows=1, seconds=1.0, jobs=1)

    monkeypatch.setattr(command, "_session", lambda args: _Stopped())
    monkeypatch.setattr(pipeline, "run", run)
    flags = "--no-progress --rows 10 --enrich --concurrency 3 --master local[2]".split()
    assert main(flags) == 1
    out = capsys.readouterr().out
    assert "max 7 at once, bound 6 (--concurrency 3 x 2 task slots of local[2])" in out
    assert "CALL BOUND EXCEEDED" in out
    assert services and services[0]._loop.is_closed()  # stopped
