"""The reader of a classic (py4j) session: partition by partition, without leaking.

``PythonRDD.toLocalIteratorAndServe`` over ``javaToPython()`` (rows: the pickled ``Row``
objects ``toLocalIterator`` yields) or ``toArrowBatchRdd(...)`` (Arrow IPC batches). The JVM
runs one job per partition, when the reader asks for it (plus the next one with
``prefetch_partitions``), and serves it over a local socket. Not ``DataFrame.toLocalIterator``,
which keeps every partition it served on the driver heap (docs/spark.md, "The toLocalIterator
memory finding"). Everything runs on the subscription's thread but ``_break_read``.
"""

from __future__ import annotations

import socket
import weakref
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from reactive_streams.spark import _py4j
from reactive_streams.spark._partitions._cancel import (
    Interrupted,
    Reader,
    queue_cancel,
    start_canceller,
)
from reactive_streams.spark._partitions._common import Mode, chunks, spark_error

__all__ = ["ClassicReader"]

_ser: Any = _py4j.serializers  # the framing helpers of the py4j sockets


class ClassicReader(Reader):
    """Partition-at-a-time reader on a classic (py4j) session.

    Its jobs carry the subscription's tags and the session's own (``spark.interruptAll()``
    stops them). ``_sock`` is set under ``_lock``: ``_break_read`` (any thread) wakes a read
    blocked on it; ``_sc`` and ``_server`` are set by ``open`` and read by the cancel loop.
    """

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

        df = self._df
        session = df.sparkSession
        sc = self._sc = session.sparkContext
        if _py4j.java_context(sc) is None:
            raise RuntimeError("the SparkContext behind this DataFrame was stopped")
        # Jobs started from this thread, and from the JVM server thread it creates below
        # (local properties are inherited), carry the tags: cancel finds them by tag.
        tags = (*self.tags, _py4j.session_job_tag(session))
        for tag in tags:
            sc.addJobTag(tag)
        self._added = tags
        sc.setInterruptOnCancel(True)
        self._begin_opening()  # planning may run jobs (earlier stages) on this thread
        try:
            schema: Any = None
            max_rows = 0
            large = False
            if self._mode == "rows":  # each pickled item is a chunk (a list) of rows
                serializer: Any = _ser.CPickleSerializer()
            else:
                large = session.conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true"
                schema = to_arrow_schema(
                    df.schema,
                    error_on_duplicated_field_names_in_struct=True,
                    timezone="UTC",
                    prefers_large_types=large,
                )
                max_rows = self._max_rows or int(
                    session.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
                )
                serializer = _ser.NoOpSerializer()
            server_info = _py4j.serve(df, self._mode, self._prefetch, max_rows, large)
        finally:
            interrupted = self._end_opening()
        if interrupted:  # close() cancels the first partition's job the server started
            raise Interrupted()
        port, secret, server = server_info
        self._server = server
        sockfile, sock = _py4j.local_socket(port, secret)
        with self._lock:
            interrupted = self._interrupted
            if not interrupted:
                self._sock = sock
        if interrupted:
            sockfile.close()
            sock.close()
            raise Interrupted()
        # A subscription abandoned without cancel is collected with its reader: close the
        # socket then (the finalizer holds it), not whenever the collector reaches it, and
        # stop the job a prefetch (or a read in progress) may still be running.
        start_canceller()  # now: the finalizer must only put into the queue
        self._finalizer = weakref.finalize(self, _abandoned, sockfile, sock, sc, self.tags[0])
        stream = _serve(self, sockfile, sock, server, serializer)
        if schema is None:
            stream = _rows(self, stream)
        else:
            stream = _decode(self, stream, schema, self._max_rows)
        self._iterator = stream
        return stream

    def in_flight(self) -> int | None:
        return 1 if self.fetching else 0

    def _cancel_tag(self) -> None:
        sc = self._sc
        if sc is not None:
            sc.cancelJobsWithTag(self.tags[0])

    def _may_start_work(self) -> bool:
        """Also while the JVM's serving handler runs: it submits a partition's job when it
        reads our request, so a request sent just before the cancel may start a job after
        the cancel call (4 of 20 cancels left a job running, in a review's reproducer). The
        handler returns once that job ends: cancelled, it ends at once."""
        return super()._may_start_work() or not _py4j.handler_done(self._server)

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
        iterator, self._iterator = self._iterator, None  # owned: the subscription's thread
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
    reader: ClassicReader, sockfile: Any, sock: socket.socket, server: Any, serializer: Any
) -> Iterator[Any]:
    """The client side of ``toLocalIteratorAndServe``: ask for a partition, read it, repeat."""
    read_int, write_int = _ser.read_int, _ser.write_int

    try:
        while True:
            reader.fetching = True  # owned: the subscription's thread (a scan reads it)
            write_int(1, sockfile)  # "send me the next partition": one job, only now
            sockfile.flush()
            status = read_int(sockfile)
            reader.fetching = False
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
                    error = spark_error(exc, "Spark failed the read")
                    if error is exc:
                        raise
                    raise error from exc
                raise RuntimeError("Spark reported a failure while serving a partition")
    finally:
        reader.fetching = False
        if not reader.finished and not reader.interrupted:
            try:  # closed early by the subscription: tell the server to stop cleanly
                write_int(0, sockfile)
                sockfile.flush()
            except (OSError, ValueError):  # ValueError: already closed by the finalizer
                pass
        sockfile.close()
        sock.close()


def _abandoned(sockfile: Any, sock: socket.socket, sc: Any, tag: str) -> None:
    """A reader collected without ``close()``: release its socket and stop its jobs.

    Runs on whichever thread the collector interrupts, maybe inside a lock of ours or of an
    executor: it takes none, only hands the py4j call (which may block) to the canceller.
    """
    _close_quietly(sockfile, sock)
    queue_cancel(sc.cancelJobsWithTag, tag)


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


def _rows(reader: Reader, stream: Iterator[list[Any]]) -> Iterator[Any]:
    """The rows of each pickled chunk, one at a time; the chunk being handed out is the
    reader's ``held`` (what a scan counts as buffered), set once per chunk."""
    for chunk in stream:
        held = reader.held = iter(chunk)  # owned: the subscription's thread
        yield from held
    reader.held = None


def _decode(
    reader: Reader, stream: Iterator[bytes], schema: Any, max_rows: int | None
) -> Iterator[Any]:
    """Arrow IPC record-batch messages to ``pyarrow.RecordBatch`` (zero-copy), re-chunked;
    the slices of the message being handed out are the reader's ``held``."""
    read = pa.ipc.read_record_batch
    wrap = pa.py_buffer
    for message in stream:
        batch = read(wrap(message), schema)
        held = reader.held = iter(list(chunks(batch, max_rows)))  # owned: as in _rows
        yield from held
    reader.held = None
