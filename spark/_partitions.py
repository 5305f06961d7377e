"""Readers that stream a DataFrame to the driver one partition at a time, without leaking.

A reader is opened, pulled and closed by one thread (the subscription's own thread); only
``interrupt`` is called from elsewhere, and it never blocks.

Classic sessions: ``PythonRDD.toLocalIteratorAndServe`` over ``javaToPython()`` (rows, the
pickled ``Row`` objects ``toLocalIterator`` yields) or over ``toArrowBatchRdd(...)`` (Arrow IPC
record batches). The JVM collects one partition per job, only when the reader asks for it
(plus the next one with ``prefetch_partitions``), and serves it over a local socket that the
reader drains as the subscriber's demand reaches it.

Why not ``DataFrame.toLocalIterator()``: in pyspark 4.3 it wraps that same server in
``SQLExecution.withNewExecutionId``. The execution ends (and ``DAGScheduler.cleanupQueryJobs``
runs) as soon as the server is created; the per-partition jobs the server submits later still
carry the execution id, so the DAGScheduler files them in ``activeQueryToJobs`` after the
cleanup and never removes them. Each retained ``ActiveJob`` keeps its ``JobWaiter`` whose result
handler holds the collected partition: every call leaves all its partitions on the driver heap
(measured: +52 MiB per 1M rows, +117 MiB per 2M rows with a string column, until
``OutOfMemoryError``). Serving ``javaToPython().rdd()`` directly submits the same jobs without an
execution id, and the heap stays flat (see docs/spark.md).

Spark Connect sessions: ``DataFrame.toLocalIterator()`` (rows) and the client's Arrow batch
iterator (arrow), both lazy gRPC streams; the server runs the whole query and the reader pulls
the stream as demand reaches it. Cancel interrupts the operations by tag.
"""

from __future__ import annotations

import atexit
import queue
import re
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, Final, Literal

import pyarrow as pa
import pyspark.serializers

from reactive_streams._subscription import start_daemon

_ser: Any = pyspark.serializers  # untyped module: the framing helpers of the py4j sockets

__all__ = [
    "DaemonThread",
    "Mode",
    "Reader",
    "cancel_later",
    "check_dataframe",
    "check_job_tag",
    "is_connect",
    "make_reader",
    "new_tag",
    "session_stopped",
    "spark_error",
    "stopped_session",
]

Mode = Literal["rows", "arrow"]

_TAG_PREFIX: Final = "rs-spark-"
_RECANCEL_EVERY: Final = 0.05
"""Seconds between two cancels of an interrupt while Spark may still start a reader's work."""

# Cancel calls waiting for the canceller thread. A SimpleQueue, because the finalizer of an
# abandoned reader puts into it, and a finalizer may run on any thread at any allocation, even
# one that holds a lock cancel_later or an executor would take: put() takes none that matter.
_cancels: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]] = queue.SimpleQueue()
_canceller = False  # started
_canceller_lock = threading.Lock()


class DaemonThread(Executor):
    """One daemon thread that runs the tasks submitted to it in order: a subscription's own
    thread. Not a ``ThreadPoolExecutor``, whose workers the interpreter joins at exit: a
    program that ends (a consumer's exception, a ``return``) while its read is blocked on a
    partition Spark is still computing would not exit until Spark finished it. A daemon
    thread ends with the process (the JVM's jobs end with it, or are cancelled by the exit
    hook of the canceller). The thread is named ``name`` (``join_reads`` finds it); it holds
    only the task queue, so an abandoned subscription is collected, and its thread then
    ends, as a ``ThreadPoolExecutor``'s would."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: _Tasks = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._shut = False
        weakref.finalize(self, self._tasks.put, None)  # collected: the thread ends

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._tasks.put((future, lambda: fn(*args, **kwargs)))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_work, args=(self._tasks,), name=self._name, daemon=True
                )
                self._thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more tasks; the thread ends after those already queued (``cancel_futures``
        cancels them instead, as ``ThreadPoolExecutor`` does)."""
        dropped: list[Future[Any]] = []
        with self._lock:
            self._shut = True
            thread = self._thread
            if cancel_futures:
                while True:
                    try:
                        task = self._tasks.get_nowait()
                    except queue.Empty:
                        break
                    if task is not None:
                        dropped.append(task[0])
            self._tasks.put(None)
        for future in dropped:  # outside the lock: cancel() runs the futures' callbacks
            future.cancel()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()


_Tasks = queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None]


def _work(tasks: _Tasks) -> None:
    """A DaemonThread's loop, until ``None``: shutdown, or its executor collected."""
    while (task := tasks.get()) is not None:
        _run_task(*task)
        # Not kept while waiting for the next: the drain it ran holds the subscription,
        # which an abandoned subscriber's collection (and its reader's finalizer) needs.
        del task


def _run_task(future: Future[Any], call: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = call()
    except BaseException as exc:  # as a ThreadPoolExecutor worker: into the future
        future.set_exception(exc)
    else:
        future.set_result(result)


def join_reads(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the threads of this process's reads (each named
    after its tag) to end; True if none is left. For a process about to exit after a cancel:
    a read still blocked in Spark when the interpreter shuts down leaves its iterators to be
    collected after pyspark's own threads have gone (Connect then prints a traceback)."""
    deadline = time.monotonic() + timeout
    owned = re.compile(re.escape(_TAG_PREFIX) + r"[0-9a-f]{12}_\d+")
    for thread in threading.enumerate():
        if owned.fullmatch(thread.name):
            thread.join(max(0.0, deadline - time.monotonic()))
    return not any(owned.fullmatch(t.name) for t in threading.enumerate())


def new_tag() -> str:
    """A job tag unique to one subscription."""
    return f"{_TAG_PREFIX}{uuid.uuid4().hex[:12]}"


def is_connect(obj: object) -> bool:
    """True for a Spark Connect DataFrame or SparkSession (decided by type, without a call)."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def stopped_session(df: Any) -> str | None:
    """Why ``df``'s session cannot serve it, read from Python-side state only (no call into
    Spark, so it is safe on any thread): ``None`` while the session looks alive."""
    try:
        return session_stopped(df.sparkSession, "of this DataFrame ")
    except Exception:  # an unexpected shape: let the first pull report the real error
        return None


def session_stopped(session: Any, whose: str = "") -> str | None:
    """Why ``session`` cannot run anything (stopped), from Python-side state only; ``None``
    while it looks alive, or when that cannot be told."""
    try:
        if is_connect(session):
            if session.is_stopped:
                return f"the Spark Connect session {whose}was stopped"
            return None
        if session.sparkContext._jsc is None:
            return f"the SparkContext {whose}was stopped"
    except Exception:
        return None
    return None


def check_dataframe(df: object, who: str) -> None:
    """Refuse anything but a pyspark DataFrame (classic or Connect) at the call: a list or a
    pandas DataFrame failed only at the first request, deep inside Spark."""
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        raise TypeError(f"{who} requires a pyspark DataFrame, got {type(df).__name__}")


def check_job_tag(job_tag: object) -> None:
    """Spark's rule for a job tag (a non-empty string without a comma), at the call: a bad
    one failed at the first request with a Py4JError or a Java IllegalArgumentException."""
    if job_tag is None:
        return
    if not isinstance(job_tag, str):
        raise TypeError(f"job_tag must be a str or None, got {type(job_tag).__name__}")
    if not job_tag or "," in job_tag:
        raise ValueError(
            f"job_tag must be non-empty and hold no comma (Spark's rule), got {job_tag!r}"
        )


def check_read_options(mode: str, max_rows_per_batch: int | None) -> None:
    """Refuse a bad ``mode`` or ``max_rows_per_batch`` at once (``from_dataframe``,
    ``from_stream``), with the parameter's name: a bad one would otherwise drop every row
    (a negative step) or fail the job much later.

    Raises:
        ValueError: ``mode`` is not ``"rows"`` or ``"arrow"``; ``max_rows_per_batch`` is
            given for rows mode, or is not a positive int.
    """
    if mode not in ("rows", "arrow"):
        raise ValueError(f"mode must be 'rows' or 'arrow', got {mode!r}")
    if max_rows_per_batch is not None:
        if mode != "arrow":
            raise ValueError("max_rows_per_batch applies to mode='arrow' only")
        if type(max_rows_per_batch) is not int or max_rows_per_batch <= 0:
            raise ValueError(
                f"max_rows_per_batch must be a positive int, got {max_rows_per_batch!r}"
            )


def cancel_later(fn: Callable[..., object], *args: Any) -> None:
    """Run a Spark cancel call off the caller's thread: ``cancel()`` never blocks (§3.5).

    A classic (py4j) call goes to the module's one long-lived canceller thread: these are
    short calls into the local JVM, and a thread per cancel would cost a JVM thread per cancel
    in py4j's pinned-thread mode. A Spark Connect call (a bound method of a Connect object)
    gets a daemon thread of its own: its RPC retries for minutes against an unreachable
    server, and must not hold up the cancels of every other subscription meanwhile. From a
    finalizer at interpreter exit no thread starts (``start_daemon``): the call is dropped
    with the process, whose local JVM ends with it.
    """
    if is_connect(getattr(fn, "__self__", None)):
        start_daemon(_run, fn, args, name="rs-spark-cancel-connect")
        return
    start_canceller()
    _cancels.put((fn, args))


def start_canceller() -> None:
    """Start the canceller thread once (it is a daemon: calls still queued at exit run then)."""
    global _canceller
    with _canceller_lock:
        if not _canceller:
            _canceller = start_daemon(_cancel_forever, name="rs-spark-cancel")


def _cancel_forever() -> None:
    while True:
        _run(*_cancels.get())


@atexit.register
def _cancel_pending() -> None:
    """At exit, run the cancel calls the daemon thread has not reached yet."""
    while True:
        try:
            call = _cancels.get_nowait()
        except queue.Empty:
            return
        _run(*call)


def _run(fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except Exception:  # the session may be gone: nothing left to cancel
        pass


class Reader:
    """The pull side of one subscription: ``open`` starts Spark, ``close`` releases it.

    Cancel is by tag, and a tag cancels only what Spark runs at that moment. A job or an
    operation may start after a cancel call and would then run to its end: while the reader
    is *opening* (planning a query runs its earlier stages as jobs, one after another; a
    Connect operation may not be registered on the server yet), and, on a classic session,
    while the JVM's serving thread may still submit the job of a partition asked for just
    before the cancel. So an ``interrupt`` cancels on a thread of its own, and again every
    ``_RECANCEL_EVERY`` seconds while :meth:`_may_start_work` says Spark still may (every end
    of a read interrupts: ``close`` too). Its own thread, not the shared canceller: a Connect
    cancel is an RPC that may retry for minutes against an unreachable server.
    """

    def __init__(self, tags: tuple[str, ...]) -> None:
        self.tags = tags
        self._lock = threading.Lock()
        self._interrupted = False
        self._started = False
        self._opening = False
        self.finished = False

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def open(self) -> Iterator[Any]:
        """Start the Spark work and return the element iterator (subscription thread)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release sockets and iterators, cancel unfinished jobs (subscription thread)."""
        raise NotImplementedError

    def _cancel_tag(self) -> None:
        """Cancel the Spark work carrying this reader's tag, now (a blocking call)."""
        raise NotImplementedError

    def _break_read(self) -> None:
        """Wake a read blocked in this reader (any thread, non-blocking); none by default."""

    def _begin_opening(self) -> None:
        """Spark is about to start: raise ``_Interrupted`` if cancelled already (decided under
        the lock, so an ``interrupt`` either comes first and stops this, or sees the opening
        and cancels until it is over)."""
        with self._lock:
            if self._interrupted:
                raise _Interrupted()
            self._started = True
            self._opening = True

    def _end_opening(self) -> bool:
        """The opening is over; True if the reader was interrupted meanwhile."""
        with self._lock:
            self._opening = False
            return self._interrupted

    def interrupt(self) -> None:
        """Stop Spark work now, from any thread, without blocking (§3.5)."""
        with self._lock:
            if self._interrupted:
                return
            self._interrupted = True
            running = self._started and not self.finished
        self._break_read()
        if not running:
            return
        # From a finalizer at interpreter exit (an iterator never closed) no thread starts:
        # the process, and a local JVM's jobs with it, are ending; a Connect operation ends
        # with its channel. A system out of threads still gets one cancel call.
        if not start_daemon(self._cancel_until_quiet, name=f"{self.tags[0]}-cancel"):
            cancel_later(self._cancel_tag)

    def _may_start_work(self) -> bool:
        """True while Spark may still start work for this reader that a cancel call made now
        would miss: while opening; a subclass adds its own cases."""
        with self._lock:
            return self._opening

    def _cancel_until_quiet(self) -> None:
        while True:  # §3.12: what starts after a cancel call must stop too
            busy = self._may_start_work()  # asked before the cancel: the last cancel comes
            _run(self._cancel_tag, ())  # after Spark was seen unable to start more (a
            if not busy:  # prefetched job the handler submitted just before returning)
                return
            time.sleep(_RECANCEL_EVERY)


class _ClassicReader(Reader):
    """Partition-at-a-time reader on a classic (py4j) session."""

    def __init__(
        self,
        df: Any,
        mode: Mode,
        prefetch: bool,
        max_rows: int | None,
        tags: tuple[str, ...],
    ) -> None:
        super().__init__(tags)
        self._df = df
        self._mode = mode
        self._prefetch = prefetch
        self._max_rows = max_rows
        self._sc: Any = None
        self._server: Any = None  # the JVM's serving handler, once open() started it
        self._added: tuple[str, ...] = ()  # the job tags open() put on this thread
        self._sock: socket.socket | None = None
        self._iterator: Iterator[Any] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def open(self) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.util import _create_local_socket

        df = self._df
        session = df.sparkSession
        sc = self._sc = session.sparkContext
        if sc._jsc is None:
            raise RuntimeError("the SparkContext behind this DataFrame was stopped")
        # Jobs started from this thread, and from the JVM server thread it creates below
        # (local properties are inherited), carry the tags: cancel finds them by tag.
        # The session's own tag too, which SQL executions carry: spark.interruptAll() stops
        # these jobs as it stops toLocalIterator()'s.
        tags = (*self.tags, session._jsparkSession.sessionJobTag())
        for tag in tags:
            sc.addJobTag(tag)
        self._added = tags
        sc.setInterruptOnCancel(True)
        self._begin_opening()  # planning may run jobs (earlier stages) on this thread
        try:
            schema: Any = None
            if self._mode == "rows":
                jrdd = df._jdf.javaToPython().rdd()
                serializer: Any = _ser.BatchedSerializer(_ser.CPickleSerializer())
            else:
                large = session.conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true"
                schema = to_arrow_schema(
                    df.schema,
                    error_on_duplicated_field_names_in_struct=True,
                    timezone="UTC",
                    prefers_large_types=large,
                )
                max_rows = self._max_rows
                if max_rows is None:
                    max_rows = int(session.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
                jrdd = df._jdf.toArrowBatchRdd(max_rows, "UTC", True, large)
                serializer = _ser.NoOpSerializer()
            server_info = sc._jvm.PythonRDD.toLocalIteratorAndServe(jrdd, self._prefetch)
        finally:
            interrupted = self._end_opening()
        if interrupted:  # close() cancels the first partition's job the server started
            raise _Interrupted()
        port, secret, server = server_info
        self._server = server
        sockfile, sock = _create_local_socket((port, secret))
        with self._lock:
            interrupted = self._interrupted
            if not interrupted:
                self._sock = sock
        if interrupted:
            sockfile.close()
            sock.close()
            raise _Interrupted()
        # A subscription abandoned without cancel is collected with its reader: close the
        # socket then (the finalizer holds it), not whenever the collector reaches it, and
        # stop the job a prefetch (or a read in progress) may still be running.
        start_canceller()  # now: the finalizer must only put into the queue
        self._finalizer = weakref.finalize(self, _abandoned, sockfile, sock, sc, self.tags[0])
        stream = _serve(self, sockfile, sock, server, serializer)
        if schema is not None:
            stream = _decode(stream, schema, self._max_rows)
        self._iterator = stream
        return stream

    def _cancel_tag(self) -> None:
        sc = self._sc
        if sc is not None:
            sc.cancelJobsWithTag(self.tags[0])

    def _may_start_work(self) -> bool:
        """Also while the JVM's serving handler runs: it submits a partition's job when it
        reads our request, so a request sent just before the cancel may start a job after
        the cancel call (4 of 20 cancels left a job running, in a review's reproducer). The
        handler returns once that job ends: cancelled, it ends at once."""
        return super()._may_start_work() or not _handler_done(self._server)

    def _break_read(self) -> None:
        sock = self._sock  # set under the lock, before which interrupt() had no read to break
        if sock is not None:
            try:  # "no more partitions": a server waiting for a request stops cleanly ...
                sock.send(b"\x00\x00\x00\x00", socket.MSG_DONTWAIT)
            except OSError:
                pass
            try:  # ... and the subscription's thread wakes from recv()
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        # A prefetched or running partition job, or one the handler is about to start, must
        # not outlive the subscription: interrupt cancels it, and again while the handler
        # may start one (after a cancel that interrupted already, or the end, a no-op).
        self.interrupt()
        iterator, self._iterator = self._iterator, None
        sc = self._sc
        if iterator is not None:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # the generator's finally closes the socket
        detached = self._finalizer.detach() if self._finalizer is not None else None
        if detached is not None:  # closes the socket even if the generator never started
            _close_quietly(*detached[2][:2])  # (the jobs are cancelled by the interrupt)
        if sc is not None:
            for tag in self._added:
                try:
                    sc.removeJobTag(tag)
                except Exception:
                    pass
        self._df = None  # (_sc and _server stay: an interrupt's cancel loop may need them)


def _serve(
    reader: _ClassicReader, sockfile: Any, sock: socket.socket, server: Any, serializer: Any
) -> Iterator[Any]:
    """The client side of ``toLocalIteratorAndServe``: ask for a partition, read it, repeat."""
    read_int, write_int = _ser.read_int, _ser.write_int

    try:
        while True:
            write_int(1, sockfile)  # "send me the next partition": one job, only now
            sockfile.flush()
            status = read_int(sockfile)
            if status == 1:
                yield from serializer.load_stream(sockfile)
            elif status == 0:
                reader.finished = True
                return
            else:  # -1: the partition's job failed; getResult() raises Spark's error
                reader.finished = True
                try:
                    server.getResult()
                except Exception as exc:
                    error = spark_error(exc)
                    if error is exc:
                        raise
                    raise error from exc
                raise RuntimeError("Spark reported a failure while serving a partition")
    finally:
        if not reader.finished and not reader.interrupted:
            try:  # closed early by the subscription: tell the server to stop cleanly
                write_int(0, sockfile)
                sockfile.flush()
            except (OSError, ValueError):  # ValueError: already closed by the finalizer
                pass
        sockfile.close()
        sock.close()


def _handler_done(server: Any) -> bool:
    """Whether the serving handler of ``toLocalIteratorAndServe`` returned (its result
    promise is complete); True when that cannot be asked (no server, the JVM gone)."""
    if server is None:
        return True
    try:  # SocketAuthServer's private promise: pyspark's own getResult() waits on it
        return bool(
            getattr(server, "org$apache$spark$security$SocketAuthServer$$promise")().isCompleted()
        )
    except Exception:
        return True


def spark_error(exc: Exception) -> Exception:
    """The pyspark exception behind a ``Py4JJavaError`` (e.g. ``PythonException`` for a failing
    UDF, ``SparkRuntimeException``), found along the Java cause chain; else ``exc`` itself."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return exc
    try:
        from pyspark.errors.exceptions.captured import UnknownException, convert_exception

        for _ in range(8):
            if java is None:
                break
            converted = convert_exception(java)
            if not isinstance(converted, UnknownException):
                return converted
            java = java.getCause()
    except Exception:  # the JVM may be gone: keep the original error
        pass
    return exc


def _abandoned(sockfile: Any, sock: socket.socket, sc: Any, tag: str) -> None:
    """A reader collected without ``close()``: release its socket and stop its jobs.

    Runs on whichever thread the collector interrupts, maybe inside a lock of ours or of an
    executor: it takes none, only hands the py4j call (which may block) to the canceller.
    """
    _close_quietly(sockfile, sock)
    _cancels.put((sc.cancelJobsWithTag, (tag,)))


def _close_quietly(sockfile: Any, sock: socket.socket) -> None:
    """Close a reader's socket, first waking a read blocked in it on another thread: closing
    the buffered file waits for the lock that read holds (at interpreter exit, the
    finalizer of a reader whose thread was still reading waited for the partition)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    for closable in (sockfile, sock):
        try:
            closable.close()
        except OSError:
            pass


def _decode(stream: Iterator[bytes], schema: Any, max_rows: int | None) -> Iterator[Any]:
    """Arrow IPC record-batch messages to ``pyarrow.RecordBatch`` (zero-copy), re-chunked."""
    read = pa.ipc.read_record_batch
    wrap = pa.py_buffer
    for message in stream:
        batch = read(wrap(message), schema)
        yield from _chunks(batch, max_rows)


def _chunks(batch: Any, max_rows: int | None) -> Iterator[Any]:
    rows = batch.num_rows
    if rows == 0:
        return
    if max_rows is None or rows <= max_rows:
        yield batch
        return
    for offset in range(0, rows, max_rows):
        yield batch.slice(offset, max_rows)  # zero-copy


class _ConnectReader(Reader):
    """Reader on a Spark Connect session: the client's lazy gRPC result stream."""

    def __init__(self, df: Any, mode: Mode, max_rows: int | None, tags: tuple[str, ...]) -> None:
        super().__init__(tags)
        self._df = df
        self._mode = mode
        self._max_rows = max_rows
        self._session: Any = None
        self._iterator: Iterator[Any] | None = None

    def open(self) -> Iterator[Any]:
        df = self._df
        session = self._session = df.sparkSession
        for tag in self.tags:
            session.addTag(tag)  # thread-local on the client: sent with this thread's requests
        # Opening lasts until the first result: before the server registered the operation,
        # an interruptTag finds nothing to interrupt.
        self._begin_opening()
        try:
            if self._mode == "rows":
                iterator: Iterator[Any] = df.toLocalIterator()
            else:
                iterator = _connect_batches(df, self._max_rows)
        except BaseException:
            self._end_opening()
            raise
        self._iterator = _track_end(self, iterator)
        return self._iterator

    def _cancel_tag(self) -> None:
        session = self._session
        if session is not None:
            session.interruptTag(self.tags[0])

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None
        session = self._session
        if session is not None and self._started and not self.finished:
            try:
                session.interruptTag(self.tags[0])
            except Exception:
                pass
        if iterator is not None:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()  # releases the gRPC stream (ReleaseExecute)
                except Exception:
                    pass
        if session is not None:
            for tag in self.tags:
                try:
                    session.removeTag(tag)
                except Exception:
                    pass
        self._df = None
        self._session = None


def _track_end(reader: Reader, iterator: Iterator[Any]) -> Iterator[Any]:
    """``iterator``, ending the reader's opening at its first item (or its end, or error)
    and marking the reader finished at its end."""
    try:
        for item in iterator:
            reader._end_opening()
            yield item
            break
        yield from iterator
        reader.finished = True
    finally:
        reader._end_opening()
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _connect_batches(df: Any, max_rows: int | None) -> Iterator[Any]:
    """Arrow batches of a Connect DataFrame as the server streams them.

    Uses the client's batch iterator (what ``toLocalIterator`` is built on); if a future
    pyspark removes it, falls back to ``toArrow()``, which collects the result first.
    """
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    schema = to_arrow_schema(
        df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC"
    )
    client = getattr(df.sparkSession, "client", None)
    to_iter = getattr(client, "to_table_as_iterator", None)
    plan = getattr(df, "_plan", None)
    if to_iter is None or plan is None:  # pragma: no cover - fallback for other pyspark versions
        for batch in df.toArrow().to_batches():
            yield from _chunks(batch, max_rows)
        return
    for item in to_iter(plan.to_proto(client), plan.observations):
        if isinstance(item, StructType):
            continue
        for batch in item.to_batches():
            if batch.num_rows and batch.schema != schema:
                batch = batch.cast(schema)
            yield from _chunks(batch, max_rows)


class _Interrupted(Exception):
    """Raised by ``open`` when the subscription was cancelled before Spark started."""


def make_reader(
    df: Any,
    mode: Mode,
    *,
    prefetch_partitions: bool,
    max_rows_per_batch: int | None,
    job_tag: str | None,
) -> Reader:
    """A reader for ``df`` (no Spark call happens here: the reader is lazy)."""
    tags = (new_tag(),) if job_tag is None else (new_tag(), job_tag)
    if is_connect(df):
        return _ConnectReader(df, mode, max_rows_per_batch, tags)
    return _ClassicReader(df, mode, prefetch_partitions, max_rows_per_batch, tags)
