"""``map_partitions``: pipelines inside Spark tasks, on local[2], local-cluster and Connect.

A local asyncio HTTP/1.1 service on 127.0.0.1 (``reactive_streams.spark._service``) stands
for the remote API.
The scenarios are plain functions of (session, service port). local[2] and Connect run them
in this process; local-cluster runs them in a child process of its own (:class:`Cluster`),
since a process holds one SparkContext and the session-wide ``spark`` fixture is local[2].
Run as ``python tests/spark/test_map_partitions.py MASTER``, this file is that child.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from reactivex import operators as ops

from reactive_streams import log, map_async
from reactive_streams.adapters.rx import rx_processor
from reactive_streams.spark import map_partitions
from reactive_streams.spark._map_partitions import FLUSH_CONF, _batches, _rows, _slices, _Task
from reactive_streams.spark._service import Service, fetch

if __name__ != "__main__":  # the workers cannot import this file: ship its functions by value
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])

TIMEOUT = 180.0


# --- the service and its client ----------------------------------------------------------


def fetch_now(port: int, path: str) -> bytes:
    """The blocking form, for stages that exist today (a thread with no running loop)."""
    return asyncio.run(fetch(port, path))


def stats(port: int) -> dict[str, int]:
    return dict(json.loads(fetch_now(port, "/stats")))


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


# --- the scenarios (session, port) -> JSON ------------------------------------------------


def roundtrip(session: Any, port: int) -> Any:
    """Rows in, Rows by name through an rx stage, tuples and dicts out."""
    df = session.range(0, 100, 1, 4).selectExpr("id", "concat('x', id) AS s")
    out = map_partitions(
        df,
        lambda: [
            rx_processor(ops.map(lambda r: (r.id * 2, r.s) if r.id % 2 else {"s": r.s, "d": 0}))
        ],
        "d long, s string",
        max_rows_per_batch=7,
    )
    return sorted((row.d, row.s) for row in out.collect())


def arrow_mode(session: Any, port: int) -> Any:
    """RecordBatches in and out."""
    df = session.range(0, 50, 1, 2)
    out = map_partitions(
        df,
        lambda: [rx_processor(ops.map(lambda b: pa.record_batch([[b.num_rows]], names=["n"])))],
        "n long",
        mode="arrow",
    )
    return sum(row.n for row in out.collect())


def failing(session: Any, port: int) -> Any:
    """A stage raises: the driver's error carries the original type and message."""

    def boom(row: Any) -> Any:
        if row.id == 7:
            raise LookupError("no such row: boom-7f3a")
        return (row.id,)

    out = map_partitions(
        session.range(0, 20, 1, 2), lambda: [rx_processor(ops.map(boom))], "id long"
    )
    try:
        out.collect()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def echo(session: Any, port: int) -> Any:
    """map_async over 4 partitions against the service; the bodies come back."""

    async def call(row: Any) -> Any:
        return ((await fetch(port, f"/echo?{row.id}")).decode(),)

    out = map_partitions(
        session.range(0, 200, 1, 4),
        lambda: [map_async(call, concurrency=4)],
        "body string",
    )
    return sorted(int(row.body) for row in out.collect())


def cancel(session: Any, port: int) -> Any:
    """A job whose stage hangs on the service is cancelled by its job group."""
    sc = session.sparkContext
    out = map_partitions(
        session.range(0, 8, 1, 2),
        lambda: [rx_processor(ops.map(lambda r: (fetch_now(port, "/hang").decode(),)))],
        "body string",
    )
    errors: list[str] = []

    def run() -> None:
        sc.setJobGroup("rs-map-partitions-cancel", "cancel test", interruptOnCancel=True)
        try:
            out.collect()
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: stats(port)["hanging"] >= 1, "a request in flight")
    sc.cancelJobGroup("rs-map-partitions-cancel")
    thread.join(TIMEOUT)
    return errors[0][:3000] if errors else None


def streaming(session: Any, port: int) -> Any:
    """A file stream through map_partitions into a memory sink, until the files are read."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="rs-map-partitions-")
    for n in range(3):
        with open(f"{folder}/part-{n}.json", "w") as file:
            file.writelines(json.dumps({"id": n * 10 + i}) + "\n" for i in range(10))
    stream = session.readStream.schema("id long").json(folder)
    out = map_partitions(stream, lambda: [rx_processor(ops.map(lambda r: (-r.id,)))], "neg long")
    name = f"rs_map_partitions_{time.monotonic_ns()}"
    query = (
        out.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="rs-map-partitions-cp-"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(TIMEOUT)
    finally:
        query.stop()
    return sorted(row.neg for row in session.table(name).collect())


def present(port: int) -> list[Any]:
    """Opens a ``/hang`` connection held for the life of the worker process that calls it: the
    service's ``hanging`` count then says how many such workers are still alive."""
    import socket

    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(b"GET /hang HTTP/1.1\r\n\r\n")
    sys.__dict__.setdefault("rs_test_presence", []).append(connection)  # kept: process's life
    return []


def busy(session: Any, port: int) -> Any:
    """Two tasks whose stage calls the service as fast as it answers, with small windows."""
    return _busy_over(session.range(0, 10**8, 1, 2), port)


def _busy_over(df: Any, port: int) -> Any:
    async def call(row: Any) -> Any:
        return ((await fetch(port, f"/echo?{row.id}")).decode(),)

    return map_partitions(
        df,
        lambda: present(port) + [map_async(call, concurrency=4)],
        "body string",
        max_rows_per_batch=16,
        prefetch=8,
    )


def cancel_busy(session: Any, port: int) -> Any:
    """The busy job, cancelled by its job group; the calls the service saw when it ended."""
    sc = session.sparkContext

    def run() -> None:
        sc.setJobGroup("rs-map-partitions-busy", "cancel test", interruptOnCancel=True)
        busy(session, port).count()

    return _cut_short(port, run, lambda: sc.cancelJobGroup("rs-map-partitions-busy"))


def interrupt_busy(session: Any, port: int) -> Any:
    """The busy job on Spark Connect, interrupted by its tag; the calls when it ended."""

    def run() -> None:
        session.addTag("rs-map-partitions-busy")
        busy(session, port).count()

    return _cut_short(port, run, lambda: session.interruptTag("rs-map-partitions-busy"))


def _cut_short(port: int, job: Callable[[], None], cut: Callable[[], Any]) -> int:
    """Runs ``job`` on a thread, ``cut()`` once the stage called the service, waits for the
    job to end (with Spark's error), and returns the calls the service saw by then."""

    def run() -> None:
        with contextlib.suppress(Exception):
            job()

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: stats(port)["echo"] >= 50, "the stage to call the service")
    cut()
    thread.join(TIMEOUT)
    return stats(port)["echo"]


def stop_busy_stream(session: Any, port: int) -> Any:
    """Micro-batches of 10M rows through the busy stage into a noop sink, stopped mid-batch;
    the calls the service saw once ``stop()`` returned."""
    stream = session.readStream.format("rate-micro-batch").option("rowsPerBatch", 10**7).load()
    out = _busy_over(stream.selectExpr("value AS id"), port)
    started = out.writeStream.format("noop").start()
    try:
        wait_until(lambda: stats(port)["echo"] >= 50, "the stage to call the service")
    finally:
        started.stop()
    return stats(port)["echo"]


def limit_busy(session: Any, port: int) -> Any:
    """``limit(5)`` of the busy job: Spark ends its task after five rows; the calls then."""
    assert len(busy(session, port).limit(5).collect()) == 5
    return stats(port)["echo"]


SCENARIOS: dict[str, Callable[[Any, int], Any]] = {
    f.__name__: f
    for f in (roundtrip, arrow_mode, failing, echo, cancel, streaming)
    + (cancel_busy, interrupt_busy, stop_busy_stream, limit_busy)
}


# --- where the scenarios run ----------------------------------------------------------------


class Cluster:
    """This file as a child process holding a local-cluster session: one JSON line in
    (scenario, port), one JSON line out ({"result": ...} or {"error": ...})."""

    def __init__(self, master: str, conf: dict[str, str] | None = None) -> None:
        started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, __file__, master, json.dumps(conf or {})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        ready = json.loads(self.process.stdout.readline() or '{"error": "child died"}')
        if "error" in ready:
            self.stop()
            pytest.fail(f"{master} did not start: {ready['error']}")
        self.start_seconds = time.monotonic() - started
        self.first_job_seconds = ready["first_job"]

    def run(self, scenario: str, port: int) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([scenario, port]) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline() or '{"error": "child died"}')
        if "error" in answer:
            pytest.fail(f"{scenario} in the child session: {answer['error']}")
        return answer["result"]

    def stop(self) -> None:
        with self.process:  # closes the pipes; waits for the child, which stops Spark
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(TIMEOUT)


def _child(master: str, conf: dict[str, str]) -> None:
    from reactive_streams.spark.local import local_session

    try:
        session = local_session(
            master,
            app_name="rs-map-partitions-tests",
            conf={"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"} | conf,
        )
        started = time.monotonic()
        session.range(0, 4, 1, 4).count()
        ready = {"first_job": time.monotonic() - started}
    except Exception as exc:
        ready = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(ready), flush=True)
    if "error" in ready:
        return
    for line in sys.stdin:
        scenario, port = json.loads(line)
        try:
            answer = {"result": SCENARIOS[scenario](session, port)}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    session.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One local-cluster[2,1,1024] child for the module (two executor JVMs, 1 core each)."""
    child = Cluster("local-cluster[2,1,1024]")
    up, first = child.start_seconds, child.first_job_seconds
    print(f"local-cluster: up in {up:.1f} s, first job {first:.1f} s")
    yield child
    child.stop()


PIPELINED = {FLUSH_CONF: "true"}


@pytest.fixture(scope="module")
def pipelined() -> Iterator[Cluster]:
    """A local[2] child whose Python workers flush every output batch (``PIPELINED``)."""
    child = Cluster("local[2]", PIPELINED)
    yield child
    child.stop()


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service().start()
    yield running
    running.stop()


@pytest.fixture(params=["local[2]", "local-cluster", "connect"])
def runner(request: pytest.FixtureRequest) -> Callable[[str, int], Any]:
    """Runs a scenario on local[2] or Spark Connect (in process) or on local-cluster."""
    if request.param == "local-cluster":
        return request.getfixturevalue("cluster").run  # type: ignore[no-any-return]
    session = request.getfixturevalue("spark" if request.param == "local[2]" else "connect")
    return lambda scenario, port: SCENARIOS[scenario](session, port)


@pytest.fixture(params=["local[2]", "local-cluster"])
def classic(request: pytest.FixtureRequest) -> Callable[[str, int], Any]:
    """Like ``runner``, classic sessions only (job groups)."""
    if request.param == "local-cluster":
        return request.getfixturevalue("cluster").run  # type: ignore[no-any-return]
    session = request.getfixturevalue("spark")
    return lambda scenario, port: SCENARIOS[scenario](session, port)


# --- the tests -----------------------------------------------------------------------------


def test_rows_go_through_the_stages_and_back(runner: Any, service: Service) -> None:
    """Rows reach the stage by field name; tuples and dicts come back in the schema."""
    expected = sorted((i * 2, f"x{i}") if i % 2 else (0, f"x{i}") for i in range(100))
    assert [tuple(row) for row in runner("roundtrip", service.port)] == expected


def test_arrow_mode_passes_record_batches(runner: Any, service: Service) -> None:
    """mode="arrow": the stages get the partition's RecordBatches and emit RecordBatches."""
    assert runner("arrow_mode", service.port) == 50


def test_a_stage_error_fails_the_task_with_its_type_and_message(
    runner: Any, service: Service
) -> None:
    """The driver's error text names the stage's exception type and message."""
    error = runner("failing", service.port)
    assert error is not None
    assert "LookupError" in error and "no such row: boom-7f3a" in error


def test_streaming_dataframe(classic: Any, service: Service) -> None:
    """A file stream runs through map_partitions into a memory sink."""
    assert classic("streaming", service.port) == sorted(-i for i in range(30))


def test_calls_in_flight_stay_within_concurrency_per_task(classic: Any, service: Service) -> None:
    """map_async(concurrency=4) over 4 partitions, 2 task slots: at most 8 calls at once."""
    assert classic("echo", service.port) == list(range(200))
    seen = service.stats()
    assert seen["echo"] == 200
    assert 1 <= seen["max_in_flight"] <= 4 * 2


def test_cancelling_the_job_closes_the_calls_in_flight(classic: Any, service: Service) -> None:
    """Cancel the job group while the stage waits on the service: the service sees its
    connections closed, and no request after that (checked after another job ran)."""
    error = classic("cancel", service.port)
    assert error is not None and "cancel" in error.lower()
    wait_until(lambda: service.stats()["hanging"] == 0, "the hanging calls to be closed")
    hangs = service.stats()["hang"]
    assert hangs >= 1
    classic("arrow_mode", service.port)  # one more job on the same executors
    assert service.stats()["hang"] == hangs


AFTER_THE_END = 400
"""Calls the busy job's two tasks may start once Spark ended them: per task 4 in flight, 8
outputs prefetched, 4 results waiting, 16 rows held, two 16-row batches written before a
write fails (64), and what the tasks still read while the cancel reaches them (on a loaded
machine, about a second: 80 calls a task). Without per-batch flushes a worker goes on until
64 KB of output (thousands of these rows) is buffered."""


@pytest.mark.parametrize(
    "scenario", ["cancel_busy", "stop_busy_stream", "limit_busy", "interrupt_busy"]
)
def test_a_worker_whose_task_spark_ended_stops_calling(
    request: pytest.FixtureRequest, scenario: str
) -> None:
    """A cancelled job, a stopped streaming query, a ``limit`` that ends the task after five
    rows, an interrupted Spark Connect operation: the worker's next output batch write fails
    and it exits, so the service sees few calls after the job ended and, at last, every
    worker that ran the stage gone."""
    slow = Service(latency=0.05).start()
    try:
        if scenario == "interrupt_busy":  # the Connect server is started with PIPELINED
            at_end = interrupt_busy(request.getfixturevalue("connect"), slow.port)
        else:
            at_end = request.getfixturevalue("pipelined").run(scenario, slow.port)

        def settled() -> bool:
            seen = slow.stats()
            return seen["hanging"] == 0 or seen["echo"] - at_end > AFTER_THE_END

        wait_until(settled, "the workers that ran the stage to exit")
        seen = slow.stats()
        assert seen["echo"] - at_end <= AFTER_THE_END, (seen, at_end)
        assert seen["hanging"] == 0
    finally:
        slow.stop()


# --- without Spark: the task function itself -----------------------------------------------


def _schema() -> pa.Schema:
    return pa.schema([("id", pa.int64()), ("s", pa.string())])


def test_rows_are_converted_a_bounded_slice_at_a_time() -> None:
    """Input rows are Rows by name, and at most max_rows Python rows exist per slice."""
    batch = pa.record_batch([list(range(10)), [str(i) for i in range(10)]], schema=_schema())
    assert [s.num_rows for s in _slices(iter([batch]), 3)] == [3, 3, 3, 1]
    rows = list(_rows(iter([batch]), 3))
    assert [(r.id, r.s) for r in rows] == [(i, str(i)) for i in range(10)]
    assert rows[4].asDict() == {"id": 4, "s": "4"}


def test_outputs_are_gathered_into_batches_of_at_most_max_rows() -> None:
    """Tuples, Rows and dicts become RecordBatches of at most max_rows, in the schema."""
    outputs = [(i, str(i)) if i % 2 else {"s": str(i), "id": i} for i in range(10)]
    batches = list(_batches(iter(outputs), _schema(), 4, linger=float("inf")))
    assert [b.num_rows for b in batches] == [4, 4, 2]
    assert pa.Table.from_batches(batches).to_pylist()[3] == {"id": 3, "s": "3"}
    with pytest.raises(ValueError, match="an output has 1 fields"):
        list(_batches(iter([(1,)]), _schema(), 4))


def test_a_batch_goes_out_once_its_first_row_has_lingered() -> None:
    """With ``linger`` 0 every output goes out as it comes: a batch waits for no later row."""
    batches = list(_batches(iter([(i, str(i)) for i in range(5)]), _schema(), 4, linger=0.0))
    assert [b.num_rows for b in batches] == [1, 1, 1, 1, 1]


def test_a_row_with_named_fields_is_gathered_by_name() -> None:
    """A Row whose fields come in another order than the schema's goes by name, not position;
    one with other fields is refused, naming both."""
    from pyspark.sql import Row

    batches = list(_batches(iter([Row(s="7", id=7), (8, "8")]), _schema(), 4))
    assert pa.Table.from_batches(batches).to_pylist() == [{"id": 7, "s": "7"}, {"id": 8, "s": "8"}]
    with pytest.raises(ValueError, match="fields id, name, the schema id, s"):
        list(_batches(iter([Row(id=1, name="x")]), _schema(), 4))


def test_closing_the_task_generator_cancels_the_pipeline(caplog: Any) -> None:
    """Spark closing the generator cancels every stage (§3.12), and the input stops."""
    pulled: list[int] = []

    def source() -> Iterator[pa.RecordBatch]:
        for i in range(1000):
            pulled.append(i)
            yield pa.record_batch([[i], [str(i)]], schema=_schema())

    task = _Task(lambda: [log("in-task")], "rows", _schema(), 4, 2)
    output = task(source())
    assert next(output).num_rows == 4
    with caplog.at_level("INFO", logger="reactive_streams.log"):
        output.close()
    lines = [record.getMessage() for record in caplog.records]
    assert any("in-task" in line and "cancel" in line for line in lines), lines
    assert not any("complete" in line for line in lines), lines
    assert len(pulled) < 1000


def test_stages_must_be_callable(spark: Any) -> None:
    """The driver checks the type of ``stages`` before anything runs, naming it."""
    with pytest.raises(TypeError, match="stages must be a zero-argument callable"):
        map_partitions(spark.range(3), [rx_processor(ops.map(str))], "id long")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be"):
        map_partitions(spark.range(3), list, "id long", mode="pandas")  # type: ignore[arg-type]


def test_a_session_without_per_batch_flushes_is_warned_about_once(
    monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """The warning names the conf, comes once per process, and not when the conf is on."""
    from reactive_streams.spark import _map_partitions

    class Conf:
        def __init__(self, value: str) -> None:
            self.value = value

        def get(self, key: str, default: str) -> str:
            assert key == _map_partitions.FLUSH_CONF
            return self.value

    class Session:
        def __init__(self, value: str) -> None:
            self.conf = Conf(value)

    monkeypatch.setattr(_map_partitions, "_noted", threading.Lock())
    with caplog.at_level("WARNING", logger="reactive_streams.spark"):
        _map_partitions._note_flush_conf(Session("true"))
        assert not caplog.records
        _map_partitions._note_flush_conf(Session("false"))
        _map_partitions._note_flush_conf(Session("false"))
    assert [r.getMessage().count(_map_partitions.FLUSH_CONF) for r in caplog.records] == [1]


if __name__ == "__main__":
    _child(sys.argv[1], json.loads(sys.argv[2]))
