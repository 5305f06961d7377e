"""Local Spark for the main job, the tests and the benchmarks: Java check, sessions, Connect.

- :func:`java_problem` says what is wrong with the Java installation (or ``None``).
- :func:`local_session` builds an embedded classic session (UI and console progress off).
- :class:`LocalConnectServer` runs the Spark Connect server that ships inside pyspark on
  127.0.0.1 and a free port, as a child process the object owns and stops.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LocalConnectServer", "SparkStartError", "java_problem", "local_session"]

_MIN_JAVA: Final = 17
_INSTALL: Final = (
    "install a Java 17 or 21 runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
    "macOS: brew install openjdk@17) and put it on PATH or set JAVA_HOME"
)


class SparkStartError(RuntimeError):
    """Spark could not start (no Java, a JVM that failed, a Connect server that died)."""


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if candidate.exists() else None
    return shutil.which("java")


def java_problem() -> str | None:
    """Return why Spark cannot find a usable Java (what to install), or ``None`` if it can."""
    java = _java_binary()
    if java is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "no `java` on PATH and JAVA_HOME is not set"
        )
        return f"Spark needs Java: {where}; {_INSTALL}"
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark needs Java, and {java} -version failed ({exc}); {_INSTALL}"
    text = out.stderr + out.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if match is None:
        return f"could not read the Java version from `{java} -version`: {text.strip()[:200]}"
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    if major < _MIN_JAVA:
        return f"Spark 4 needs Java {_MIN_JAVA}+, found Java {major} at {java}; {_INSTALL}"
    return None


def local_session(
    master: str = "local[2]",
    *,
    app_name: str = "reactive-streams-py",
    shuffle_partitions: int = 4,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """An embedded classic session with the UI and console progress bars off, whose Python
    workers run this interpreter (unless ``PYSPARK_PYTHON`` says otherwise).

    Raises:
        SparkStartError: when Java is missing or the JVM does not start.
    """
    problem = java_problem()
    if problem is not None:
        raise SparkStartError(problem)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:
        raise SparkStartError(f"Spark could not start with master {master!r}: {exc}") from exc
    session.sparkContext.setLogLevel("ERROR")
    if "PYSPARK_PYTHON" not in os.environ:  # Python workers (UDFs) run this interpreter,
        session.sparkContext.pythonExec = sys.executable  # not whatever `python3` is
    return session


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@final
class LocalConnectServer:
    """The Spark Connect server bundled with pyspark, on 127.0.0.1 and a free port.

    Runs ``sbin/start-connect-server.sh --wait`` as a child process in its own process
    group, with its pid and log files in a private temporary folder; :meth:`stop` ends that
    process group (and only it). Use as a context manager, from one thread: ``start`` and
    ``stop`` are not for concurrent callers.

    Args:
        master: the server's Spark master.
        conf: extra ``--conf`` settings for the server.
        timeout: seconds to wait for the server to accept connections.
    """

    def __init__(
        self,
        master: str = "local[2]",
        *,
        conf: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.master = master
        self.conf = dict(conf or {})
        self.timeout = timeout
        self.port = 0
        self.pid: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

    @property
    def url(self) -> str:
        """The ``sc://`` address to give ``SparkSession.builder.remote``."""
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> str | None:
        return None if self._dir is None else os.path.join(self._dir, "server.log")

    def start(self) -> LocalConnectServer:
        """Start the server and wait until it accepts connections."""
        problem = java_problem()
        if problem is not None:
            raise SparkStartError(problem)
        import pyspark

        home = os.path.dirname(pyspark.__file__)
        script = os.path.join(home, "sbin", "start-connect-server.sh")
        self._dir = tempfile.mkdtemp(prefix="rs-spark-connect-")
        self.port = _free_port()
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            **self.conf,
        }
        args = ["bash", script, "--wait", "--master", self.master]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        env = dict(
            os.environ,
            SPARK_HOME=home,
            SPARK_PID_DIR=self._dir,
            SPARK_LOG_DIR=self._dir,
            PYSPARK_PYTHON=sys.executable,  # server-side Python workers (UDFs)
        )
        with open(os.path.join(self._dir, "server.log"), "wb") as log:
            self._process = subprocess.Popen(
                args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.pid = self._process.pid
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return self
            except OSError:
                pass
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = self._log_tail()
                self.stop()
                raise SparkStartError(f"the Spark Connect server did not start:\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server's process group and remove its folder; idempotent."""
        process, self._process = self._process, None  # owned: the thread using the server
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)  # our own child's group only
                process.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(10)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _log_tail(self) -> str:
        path = self.log_path
        if path is None or not os.path.exists(path):
            return "(no log)"
        with open(path, errors="replace") as log:
            return "".join(log.readlines()[-20:])

    def __enter__(self) -> LocalConnectServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
