"""to_stream: a Publisher as a streaming source paced by Spark's triggers: exactly once across
a restart, a bounded buffer under a slow query, errors, the loopback connection and its secret."""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from collections.abc import Iterator
from multiprocessing.connection import Client, Listener
from typing import Any

import pytest

pytest.importorskip("pyspark")

from spark_helpers import wait_until  # noqa: E402

from reactive_streams.adapters.iterables import from_iterable  # noqa: E402
from reactive_streams.spark import to_stream  # noqa: E402
from reactive_streams.spark._feed import Feed, live_feeds  # noqa: E402
from reactive_streams.spark._stream_source import HELLO, NONCE, FeedClient  # noqa: E402

pytestmark = pytest.mark.spark

WAIT = 120  # seconds: generous, for a loaded machine


def feed_of(make: Any) -> tuple[Any, Feed]:
    """Call ``make()`` (a to_stream call); return its DataFrame and the feed it started."""
    before = {f.id for f in live_feeds()}
    frame = make()
    (feed,) = [f for f in live_feeds() if f.id not in before]
    return frame, feed


def collect(frame: Any) -> tuple[Any, list[Any]]:
    """Start ``frame`` with a foreachBatch that gathers the rows; return the query, rows."""
    rows: list[Any] = []
    lock = threading.Lock()

    def gather(batch: Any, _batch_id: int) -> None:
        got = batch.collect()
        with lock:
            rows.extend(got)

    return frame.writeStream.foreachBatch(gather).start(), rows


def failure_text(query: Any) -> str:
    """The error the query failed with (it must fail within WAIT seconds)."""
    from pyspark.errors import StreamingQueryException

    try:
        query.awaitTermination(WAIT)
    except StreamingQueryException:
        pass
    exception = query.exception()
    assert exception is not None, "the query ended without an error"
    return str(exception)


def test_every_element_exactly_once_across_a_restart(spark: Any, tmp_path: Any) -> None:
    """1,000,000 elements into parquet with a checkpoint; the query is stopped midway and
    started again from the checkpoint; it stops by itself at the end; each element is there
    exactly once."""
    total, per_batch = 1_000_000, 50_000
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    frame, feed = feed_of(
        lambda: to_stream(
            from_iterable((i,) for i in range(total)),
            spark,
            schema="id long",
            max_rows_per_batch=per_batch,
        )
    )
    assert frame.isStreaming

    def start() -> Any:
        return (
            frame.writeStream.format("parquet").option("checkpointLocation", checkpoint).start(out)
        )

    query = start()

    def inside_a_batch() -> bool:
        return feed.scan().delivered >= 6 * per_batch and (
            query.status["message"] == "Processing new data"
        )

    wait_until(inside_a_batch, WAIT, "a few batches, then one being processed")
    query.stop()  # most likely inside a batch: it is replayed from the feed's buffer
    assert not feed.closed  # a stopped query keeps the feed and its uncommitted rows
    logged = {log: _batch_ids(tmp_path / "checkpoint" / log) for log in ("offsets", "commits")}
    query = start()
    assert query.awaitTermination(WAIT), "the query did not stop at the end of the stream"
    assert query.exception() is None
    written = spark.read.parquet(out)
    assert written.count() == total
    assert written.distinct().count() == total
    assert written.selectExpr("min(id)", "max(id)").first() == (0, total - 1)
    wait_until(lambda: feed.closed, 30, "the feed to end")
    if logged["offsets"] - logged["commits"]:  # a batch was planned, not committed
        assert feed.replays >= 1  # so it was read again (readBetweenOffsets), not lost


def _batch_ids(folder: Any) -> set[int]:
    """The batch ids in a checkpoint log folder (offsets/ or commits/)."""
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


def test_the_buffer_stays_bounded_while_a_slow_query_holds_the_pusher(spark: Any) -> None:
    """A hot Subject (overflow="block") pushed from a thread: while the query holds its
    batch, the feed never holds more than max_rows_per_batch and the pusher is blocked."""
    from reactivex.subject import Subject

    from reactive_streams.adapters.rx import from_observable

    per_batch, total = 500, 3_000
    subject: Subject[Any] = Subject()
    frame, feed = feed_of(
        lambda: to_stream(
            from_observable(subject, overflow="block", buffer_size=16),
            spark,
            schema="id long",
            max_rows_per_batch=per_batch,
        )
    )
    release = threading.Event()
    seen: list[int] = []
    samples: list[tuple[int, int, int | None]] = []
    pushed = [0]

    def hold(batch: Any, _batch_id: int) -> None:
        seen.extend(r.id for r in batch.collect())
        release.wait(WAIT)

    def push() -> None:
        for i in range(total):
            subject.on_next((i,))
            pushed[0] = i + 1  # owned: this thread writes, the test reads
            s = feed.scan()
            samples.append((s.buffered, s.asked or 0, s.in_flight))
        subject.on_completed()

    query = frame.writeStream.foreachBatch(hold).start()
    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    wait_until(lambda: feed.scan().in_flight == 0 and seen, WAIT, "the demand to run out")
    stalled = pushed[0]
    assert stalled < total and pusher.is_alive()
    wait_until(lambda: len(samples) >= stalled, 5, "the last sample")
    release.set()
    assert query.awaitTermination(WAIT)
    pusher.join(WAIT)
    assert sorted(seen) == list(range(total))
    assert samples
    assert all(buffered <= per_batch for buffered, _, _ in samples), max(samples)
    assert all(flight is None or b + flight <= per_batch for b, _, flight in samples)


def test_the_publishers_error_fails_the_query_with_its_message(spark: Any) -> None:
    """Rows before the error reach Spark; then the query fails with the error's text."""

    def rows() -> Iterator[tuple[int]]:
        yield from ((i,) for i in range(5))
        raise KeyError("the source broke")

    query, got = collect(to_stream(from_iterable(rows()), spark, schema="id long"))
    text = failure_text(query)
    assert "KeyError" in text and "the source broke" in text
    assert sorted(r.id for r in got) == list(range(5))


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"publisher": None}, TypeError, "publisher"),
        ({"publisher": [1, 2]}, TypeError, "publisher"),
        ({"spark_session": "spark"}, TypeError, "spark_session"),
        ({"schema": 3}, TypeError, "schema"),
        ({"schema": "id lung"}, ValueError, "schema"),
        ({"max_rows_per_batch": 0}, ValueError, "max_rows_per_batch"),
        ({"max_rows_per_batch": 2.5}, TypeError, "max_rows_per_batch"),
        ({"max_rows_per_batch": True}, TypeError, "max_rows_per_batch"),
    ],
)
def test_bad_arguments_raise_naming_the_parameter(
    spark: Any, kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    """Each argument is checked at the call; the error names it; no feed is left behind."""
    before = len(live_feeds())
    call: dict[str, Any] = {
        "publisher": from_iterable([(1,)]),
        "spark_session": spark,
        "schema": "id long",
        **kwargs,
    }
    publisher, session = call.pop("publisher"), call.pop("spark_session")
    with pytest.raises(error, match=names):
        to_stream(publisher, session, **call)
    assert len(live_feeds()) == before


def test_rows_may_be_tuples_rows_or_dicts(spark: Any) -> None:
    """Tuples by position; Rows and dicts by field name, whatever their order."""
    from pyspark.sql import Row

    elements = [(1, "a"), Row(s="b", id=2), {"s": "c", "id": 3}, [4, "d"]]
    query, got = collect(to_stream(from_iterable(elements), spark, schema="id long, s string"))
    assert query.awaitTermination(WAIT)
    assert sorted((r.id, r.s) for r in got) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


@pytest.mark.parametrize(
    ("bad", "says"),
    [(7, "is a int"), ((1, 2, 3), "has 3 values"), ({"id": 1}, "lacks the fields ['s']")],
)
def test_a_wrong_shaped_element_fails_the_query_naming_it(spark: Any, bad: Any, says: str) -> None:
    """The query's error names the element (its number and value) and the schema."""
    query, _ = collect(
        to_stream(from_iterable([(0, "ok"), bad]), spark, schema="id long, s string")
    )
    text = failure_text(query)
    assert f"element 1 ({bad!r})" in text and says in text
    assert "struct<id:bigint,s:string>" in text


@pytest.mark.parametrize("secret_kept", [False, True])
def test_a_closed_feed_fails_the_query_with_a_connection_error(
    spark: Any, tmp_path: Any, secret_kept: bool
) -> None:
    """Nothing listens once the feed ended (its secret file gone, or kept as when its
    process died): the query fails naming 127.0.0.1 and the port, and does not hang."""
    frame, feed = feed_of(lambda: to_stream(from_iterable([(1,)]), spark, schema="id long"))
    with open(feed.secret_file, "rb") as file:
        secret = file.read()
    feed.close()
    if secret_kept:
        os.makedirs(os.path.dirname(feed.secret_file))
        with open(feed.secret_file, "wb") as file:
            file.write(secret)
    query, _ = collect(frame)
    text = failure_text(query)
    assert "ConnectionError" in text and f"127.0.0.1:{feed.port}" in text
    assert ("cannot connect" in text) is secret_kept


def test_a_connection_broken_mid_stream_fails_the_query(spark: Any) -> None:
    """The feed going away while a query reads an endless publisher fails the query with a
    ConnectionError (no hang); the publisher is cancelled."""
    cancelled = threading.Event()

    def endless() -> Iterator[tuple[int]]:
        try:
            yield from ((i,) for i in itertools.count())
        finally:
            cancelled.set()

    frame, feed = feed_of(
        lambda: to_stream(from_iterable(endless()), spark, schema="id long", max_rows_per_batch=100)
    )
    query, _ = collect(frame)
    wait_until(lambda: feed.scan().delivered >= 300, WAIT, "a few batches")
    feed.close()
    text = failure_text(query)
    assert "ConnectionError" in text and f"127.0.0.1:{feed.port}" in text
    assert cancelled.wait(WAIT)


def test_a_wrong_secret_fails_the_query_with_an_authentication_error(spark: Any) -> None:
    """A reader whose secret file holds another secret is refused; the query says so."""
    frame, feed = feed_of(lambda: to_stream(from_iterable([(1,)]), spark, schema="id long"))
    with open(feed.secret_file, "wb") as file:
        file.write(b"not the secret")
    query, _ = collect(frame)
    text = failure_text(query)
    assert "authentication failed" in text and f"127.0.0.1:{feed.port}" in text
    feed.close()


def test_the_listener_binds_loopback_and_refuses_a_wrong_secret(spark: Any, tmp_path: Any) -> None:
    """The feed listens on 127.0.0.1 only; a client with the right secret is served, one
    with a wrong secret is refused, and the secret file is private (0600)."""
    import stat

    frame, feed = feed_of(lambda: to_stream(from_iterable([(1,)]), spark, schema="id long"))
    assert feed.address == ("127.0.0.1", feed.port)
    assert feed.options["port"] == str(feed.port)
    assert "secret" not in {k for k, v in feed.options.items() if k != "secret_file"}
    assert stat.S_IMODE(os.stat(feed.secret_file).st_mode) == 0o600
    with open(feed.secret_file, "rb") as file:
        secret = file.read()
    assert secret not in str(feed.options).encode()
    with pytest.raises(ConnectionError, match="authentication failed.*refused our proof"):
        FeedClient(_with_secret(feed, b"wrong", tmp_path)).call("read", 0)
    client = FeedClient(feed.options)
    assert client.call("read", 0) == ([(1,)], 1)
    client.close()
    for host in _other_addresses():
        with pytest.raises(OSError):
            socket.create_connection((host, feed.port), timeout=10).close()
    feed.close()
    wait_until(lambda: not _accepts(feed.port), 10, "the listener to close")


def _with_secret(feed: Feed, secret: bytes, folder: Any) -> dict[str, str]:
    """``feed``'s options with a secret file of our own holding ``secret``."""
    path = folder / "other-secret"
    path.write_bytes(secret)
    return {**feed.options, "secret_file": str(path)}


class _Unpickled:
    """Makes the folder ``path`` when unpickled: proof that a peer's pickle was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (self.path,)


def _feed_of_one(spark: Any) -> Feed:
    feed = Feed(spark, 10)
    from_iterable([(1,)]).subscribe(feed)
    return feed


def test_a_silent_peer_does_not_hold_up_a_reader(spark: Any) -> None:
    """A local process that connects and never answers the handshake holds up only its own
    connection: a reader that connects after it is served while it still hangs."""
    feed = _feed_of_one(spark)
    feed.handshake_timeout = 3 * WAIT  # the silent peer outlives the test's wait
    silent = socket.create_connection(("127.0.0.1", feed.port), timeout=WAIT)
    served, got = threading.Event(), []

    def read() -> None:
        got.append(FeedClient(feed.options).call("read", 0))
        served.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert served.wait(WAIT), "the reader was not served while a silent peer connected"
        assert got == [([(1,)], 1)]
    finally:
        silent.close()
        feed.close()


def test_a_peer_silent_past_the_timeout_is_closed_and_logged(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The feed closes a connection whose peer does not answer its challenge within the
    handshake timeout, and logs it at debug."""
    feed = _feed_of_one(spark)
    feed.handshake_timeout = 0.2
    caplog.set_level(logging.DEBUG, logger="reactive_streams.spark")
    try:
        with socket.create_connection(("127.0.0.1", feed.port), timeout=WAIT) as silent:
            while silent.recv(4096):  # the challenge, then the end once the feed gave up
                pass
        assert any("unauthenticated" in r.getMessage() for r in caplog.records)
    finally:
        feed.close()


def test_a_peer_sending_a_pickle_first_is_closed_without_loading_it(
    spark: Any, tmp_path: Any
) -> None:
    """Nothing an unauthenticated peer sends is unpickled: a pickle in place of the proof
    is refused, the connection closed, and the object never built."""
    feed = _feed_of_one(spark)
    marker = tmp_path / "unpickled"
    conn = Client(("127.0.0.1", feed.port))  # no authkey: a raw connection
    try:
        conn.send(_Unpickled(str(marker)))
        conn.send(("read", feed.id, 0))
        assert conn.recv_bytes().startswith(HELLO)
        with pytest.raises((EOFError, OSError)):
            while conn.poll(WAIT):
                assert conn.recv_bytes() == b"refused"
            raise AssertionError("the feed did not close the connection")
        assert not marker.exists()
    finally:
        conn.close()
        feed.close()


def test_a_reader_refuses_a_peer_that_does_not_know_the_secret(tmp_path: Any) -> None:
    """A process listening on the feed's port without its secret (the feed ended) cannot
    serve rows: the reader refuses its proof with a ConnectionError and unpickles nothing."""
    marker = tmp_path / "unpickled"
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(os.urandom(32))
    listener = Listener(("127.0.0.1", 0))
    done = threading.Event()

    def impostor() -> None:
        with listener.accept() as conn:
            conn.send_bytes(HELLO + os.urandom(NONCE))
            conn.recv_bytes()  # the reader's proof: an impostor cannot check it
            conn.send_bytes(os.urandom(NONCE))  # not a proof of the secret
            conn.send(("ok", _Unpickled(str(marker))))  # rows it would serve
            conn.poll(WAIT)  # until the reader hangs up
        done.set()

    threading.Thread(target=impostor, daemon=True).start()
    options = {"feed": "f", "port": str(listener.address[1]), "secret_file": str(secret_file)}
    client = FeedClient(options)
    try:
        with pytest.raises(ConnectionError, match="authentication failed.*does not know"):
            client.call("read", 0)
        assert done.wait(WAIT)
        assert not marker.exists()
    finally:
        client.close()
        listener.close()


def _other_addresses() -> list[str]:
    """This machine's outward address, if it has one (the feed must not listen there)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: only a route is chosen
        except OSError:
            return []
        host = str(probe.getsockname()[0])
    return [] if host.startswith("127.") else [host]


def _accepts(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_spark_connect_reads_a_feed_on_this_machine(connect: Any) -> None:
    """On a Connect session whose server runs here, the stream works the same way (a
    memory sink: foreachBatch runs on the server there)."""
    frame = to_stream(from_iterable((i,) for i in range(50)), connect, schema="id long")
    query = frame.writeStream.format("memory").queryName("rs_to_stream_connect").start()
    assert query.awaitTermination(WAIT), "the query did not stop at the end of the stream"
    got = connect.sql("SELECT id FROM rs_to_stream_connect").collect()
    assert sorted(r.id for r in got) == list(range(50))


def test_spec101_an_element_beyond_demand_fails_the_stream(spark: Any) -> None:
    """More elements than requested cancel upstream; the next read raises the §1.1 error
    after the elements that were asked for."""
    from reactive_streams.errors import OverflowViolation
    from reactive_streams.testing import RecordingSubscription

    feed = Feed(spark, 2)
    subscription = RecordingSubscription()
    feed.on_subscribe(subscription)
    try:
        assert feed.read(0) == ([], 0)  # asks for 2, none came yet
        assert subscription.total == 2
        for i in range(3):
            feed.on_next((i,))
        assert subscription.cancelled.is_set()
        assert feed.read(0) == ([(0,), (1,)], 2)
        with pytest.raises(OverflowViolation, match="§1.1"):
            feed.read(2)
    finally:
        feed.close()


_SESSION_STOPS = """
import itertools, json, os, threading, time
from reactive_streams.adapters.iterables import from_iterable
from reactive_streams.spark import to_stream
from reactive_streams.spark._feed import live_feeds
from reactive_streams.spark.local import local_session

closed = threading.Event()

def endless():
    try:
        yield from ((i,) for i in itertools.count())
    finally:
        closed.set()

spark = local_session("local[1]", app_name="rs-to-stream-session-stops")
frame = to_stream(from_iterable(endless()), spark, schema="id long", max_rows_per_batch=100)
(feed,) = live_feeds()
query = frame.writeStream.format("noop").start()
deadline = time.monotonic() + 120
while (feed.scan().delivered or 0) < 300:  # a few batches read (a condition, polled)
    assert time.monotonic() < deadline and query.exception() is None, query.exception()
    time.sleep(0.05)
secret_dir = os.path.dirname(feed.secret_file)
spark.stop()
cancelled = closed.wait(60)
print(json.dumps({"cancelled": cancelled, "closed": feed.closed,
                  "secret_kept": os.path.exists(secret_dir)}))
"""


def test_stopping_the_session_ends_the_feed_and_cancels_the_publisher() -> None:
    """In a process of its own (the suite's session is shared): ``spark.stop()`` while a query
    reads an endless publisher ends the feed: the publisher is cancelled (its generator
    closed, §3.13), the feed closed, its secret deleted."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _SESSION_STOPS], capture_output=True, text=True, timeout=600
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    assert json.loads(lines[-1]) == {"cancelled": True, "closed": True, "secret_kept": False}


def test_spec213_a_none_error_fails_the_feed_and_cancels_upstream(spark: Any) -> None:
    """``on_error(None)`` raises ``TypeError`` (§2.13) and, as the publisher must stop
    signalling then, the feed fails with it and cancels its subscription."""

    class Subscription:
        cancelled = threading.Event()

        def request(self, n: int) -> None:
            pass

        def cancel(self) -> None:
            self.cancelled.set()

    feed = Feed(spark, 10)
    try:
        subscription = Subscription()
        feed.on_subscribe(subscription)
        with pytest.raises(TypeError):
            feed.on_error(None)  # type: ignore[arg-type]
        assert subscription.cancelled.is_set()
        assert feed.scan().cancelled
    finally:
        feed.close()
