"""The user-process side of ``to_stream``: a Subscriber that buffers a Publisher's elements
by sequence number and serves them to Spark's readers over a loopback connection.

One thread accepts connections on 127.0.0.1 and does no I/O on them; each connection is
served on a thread of its own, after the handshake of ``_stream_source`` (HMAC with the
feed's secret, ``HANDSHAKE_TIMEOUT`` a step: a silent peer holds up only its own thread); a
watcher thread ends the feed when its session stops, and stops the queries reading it once
the publisher completed and Spark asked past the last element.
"""

from __future__ import annotations

import atexit
import hmac
import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
import uuid
from collections import deque
from collections.abc import Callable
from itertools import islice
from multiprocessing.connection import Connection, Listener
from typing import Any, Final, final

from reactive_streams._demand import add_cap
from reactive_streams._scan import Scan
from reactive_streams._subscription import (
    CANCELLED,
    cancel_quietly,
    require_element,
    require_subscription,
)
from reactive_streams._upstream import Upstream
from reactive_streams.api import Subscription
from reactive_streams.errors import OverflowViolation
from reactive_streams.spark._partitions import session_stopped
from reactive_streams.spark._sinks import TerminalSignals
from reactive_streams.spark._stream_source import (
    HANDSHAKE_TIMEOUT,
    HELLO,
    NONCE,
    REFUSED,
    proof,
    recv_step,
)

__all__ = ["Feed", "live_feeds"]

_POLL: Final = 0.5  # seconds between the watcher's looks (session alive, queries to stop)
_LINGER: Final = 0.1  # seconds a read with nothing to serve waits for a first element
_LOG = logging.getLogger("reactive_streams.spark")

_LIVE: dict[str, Feed] = {}  # feed id -> feed, until it ends; under _LIVE_LOCK
_LIVE_LOCK = threading.Lock()


def live_feeds() -> list[Feed]:
    """The feeds not yet ended, oldest first (for diagnostics and tests)."""
    with _LIVE_LOCK:
        return list(_LIVE.values())


@atexit.register
def _close_all() -> None:
    """At exit, delete every feed's secret (daemon threads never see the session stop)."""
    for feed in live_feeds():
        shutil.rmtree(feed.secret_dir, ignore_errors=True)


class _Refused(Exception):
    """A request the feed cannot serve (rows already released, another feed's offsets)."""


@final
class Feed(TerminalSignals):
    """Buffers a Publisher by sequence number for Spark's readers; see the module docstring.

    Demand: ``read(start)`` tops the publisher's demand up to ``start + max_rows`` and never
    beyond, so at most ``max_rows`` are held or in flight (admission control: a simple
    reader gets no read limit from Spark). Elements stay until Spark moves past them:
    ``commit(end)``, or ``read(start)``, which Spark makes only once every batch before
    ``start`` is in the sink's commit log (micro-batches run one at a time).
    Rules: §2.5 (a second subscription is cancelled), §2.13 (``None`` arguments raise),
    §1.1 (an element beyond demand fails the stream), §3.13 (ending cancels and drops all).
    Signals may come on any thread; one lock (``_cond``) guards all shared state.
    """

    def __init__(self, session: Any, max_rows: int) -> None:
        self.id = uuid.uuid4().hex
        self._session = session
        self._max_rows = max_rows
        self._cond = threading.Condition(threading.Lock())
        self._buffer: deque[Any] = deque()  # elements first.. ; under _cond
        self._first = 0  # seq of _buffer[0]; under _cond
        self._asked = 0  # requested in all (the seq demand reaches); under _cond
        self._delivered = 0  # the highest end served; under _cond
        self._waiting = 0  # readers waiting for a first element; under _cond
        self.replays = 0  # batches served again (``between``); under _cond
        self._done = False  # a terminal signal came (or we failed); under _cond
        self._error: Exception | None = None  # under _cond
        self._cancelled = False  # one-way: cancelled by us
        self._ended = False  # Spark asked past the last element: stop its queries
        self._closed = False  # one-way: the feed ended
        self._upstream = Upstream()
        self._wake = threading.Event()
        self._dir = tempfile.mkdtemp(prefix="rs-to-stream-")  # 0700
        self.secret_file = os.path.join(self._dir, "secret")
        secret = secrets.token_bytes(32)
        fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(secret)
        self._secret = secret
        self.handshake_timeout = HANDSHAKE_TIMEOUT  # seconds a step may take (tests change it)
        self._listener = Listener(("127.0.0.1", 0))  # no authkey: accept() does no I/O
        self.port: int = self._listener.address[1]
        with _LIVE_LOCK:
            _LIVE[self.id] = self  # under _LIVE_LOCK
        for target, name in ((self._accept, "accept"), (self._watch, "watch")):
            threading.Thread(target=target, name=f"rs-to-stream-{name}", daemon=True).start()

    @property
    def options(self) -> dict[str, str]:
        """What a reader needs to reach this feed: no secret, only the file holding it."""
        return {"feed": self.id, "port": str(self.port), "secret_file": self.secret_file}

    # -- Subscriber (any thread) ---------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_subscription(subscription)  # §2.13
        self._upstream.set_once(subscription)  # §2.5: a second one is cancelled

    def on_next(self, element: Any) -> None:
        self._require(require_element, element)  # §2.13
        with self._cond:
            if self._done:
                return  # §2.8: after cancel or a failure of ours
            overflow = self._asked <= self._first + len(self._buffer)  # §1.1
            if not overflow:
                self._buffer.append(element)
                if self._waiting:
                    self._cond.notify_all()
        if overflow:
            self._fail(OverflowViolation("§1.1: an element arrived that was not requested"))

    # -- serving Spark (a connection's thread) ------------------------------------------------

    def read(self, start: int) -> tuple[list[Any], int]:
        """Rows from ``start`` (at most ``max_rows``) and the end offset; asks the publisher
        for what is missing up to ``start + max_rows``. Raises the publisher's error once
        every element before it was served."""
        self._release(start)  # Spark asks for start once all before it is committed
        with self._cond:
            want = 0 if self._done else start + self._max_rows - self._asked
            if want > 0:
                self._asked = add_cap(self._asked, want)  # under _cond
        if want > 0:
            self._upstream.request(want)  # §2.7: serial, whichever thread asks
        with self._cond:
            received = self._first + len(self._buffer)
            if received == start and not self._done:  # nothing yet: wait a little
                self._waiting += 1
                self._cond.wait_for(lambda: self._received() > start or self._done, _LINGER)
                self._waiting -= 1
                received = self._first + len(self._buffer)
            end = min(received, start + self._max_rows)
            rows = list(islice(self._buffer, start - self._first, end - self._first))
            self._delivered = max(self._delivered, end)  # under _cond
            at_end = end == received and self._done
            error = self._error if at_end and not rows else None
        if at_end and not rows:
            self._ended = True
            self._wake.set()  # the watcher stops the queries reading this feed
            if error is not None:
                raise error
        return rows, end

    def between(self, start: int, end: int) -> list[Any]:
        """The rows ``[start, end)`` again (a replay after a restart), from the buffer."""
        with self._cond:
            first, received = self._first, self._first + len(self._buffer)
            if first <= start <= end <= received:
                self.replays += 1  # under _cond
                return list(islice(self._buffer, start - first, end - first))
        raise _Refused(
            f"to_stream cannot replay rows [{start}, {end}): the feed holds [{first}, "
            f"{received}) (rows before {first} were committed and released; a later end was "
            "never read from this feed)"
        )

    def _received(self) -> int:
        return self._first + len(self._buffer)  # under _cond (the caller holds it)

    def commit(self, end: int) -> None:
        """Spark committed every row before ``end``: release them."""
        self._release(end)

    def _release(self, end: int) -> None:
        with self._cond:
            received = self._first + len(self._buffer)
            if end < self._first:
                raise _Refused(
                    f"to_stream cannot serve offset {end}: rows before {self._first} were "
                    "committed and released (a new checkpoint needs a new to_stream DataFrame)"
                )
            if end > received:
                raise _Refused(
                    f"to_stream: offset {end} is beyond the {received} elements this feed "
                    "received (the checkpoint is another feed's)"
                )
            for _ in range(min(end - self._first, len(self._buffer))):
                self._buffer.popleft()  # under _cond
            self._first = max(self._first, end)  # under _cond

    # -- threads -----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()  # no handshake here: on the serving thread
            except OSError as exc:
                if not self._closed:
                    _LOG.warning("to_stream: accepting on port %s failed: %s", self.port, exc)
                continue
            if self.closed:  # the wake-up connection of close() (a property: mypy narrows)
                conn.close()
                break
            threading.Thread(
                target=self._serve, args=(conn,), name="rs-to-stream-serve", daemon=True
            ).start()
        self._listener.close()

    def _serve(self, conn: Connection) -> None:
        handlers: dict[str, Callable[..., Any]] = {
            "read": self.read,
            "between": self.between,
            "commit": self.commit,
        }
        try:
            if not self._authenticated(conn):
                return
            while not self._closed:
                if not conn.poll(_POLL):
                    continue
                kind, feed, *args = conn.recv()
                try:
                    if feed != self.id:
                        raise _Refused(f"to_stream: this connection is feed {self.id}'s")
                    reply: tuple[Any, ...] = ("ok", handlers[kind](*args))
                except Exception as exc:  # to the reader, whose query fails with it
                    reply = ("error", type(exc).__name__, str(exc))
                conn.send(reply)
        except (EOFError, OSError):
            pass  # the reader's process closed the connection (its query stopped)
        finally:
            conn.close()

    def _authenticated(self, conn: Connection) -> bool:
        """The feed's side of the handshake (``_stream_source``), on the connection's thread:
        raw bytes only, nothing is unpickled before the peer proved the secret. A peer that
        fails or takes longer than ``handshake_timeout`` a step is logged at debug (the
        caller closes it)."""
        ours = secrets.token_bytes(NONCE)
        try:
            conn.send_bytes(HELLO + ours)
            answer = recv_step(conn, self.handshake_timeout, 2 * NONCE)
            theirs = answer[NONCE:]
            if len(theirs) == NONCE and hmac.compare_digest(
                answer[:NONCE], proof(self._secret, b"reader", ours)
            ):
                conn.send_bytes(proof(self._secret, b"feed", ours, theirs))
                return True
            conn.send_bytes(REFUSED)
            why = "a wrong proof of the secret"
        except (OSError, EOFError) as exc:  # TimeoutError is an OSError
            why = f"{type(exc).__name__}: {exc}"
        _LOG.debug(
            "to_stream: closing an unauthenticated connection to port %s (%s)", self.port, why
        )
        return False

    def _watch(self) -> None:
        while not self._closed:
            self._wake.wait(_POLL)
            self._wake.clear()
            stopped = session_stopped(self._session)
            if stopped is not None or (self._ended and self._error is not None):
                self.close()  # a failed stream: its query failed with the error
            elif self._ended and self._stop_queries():
                self.close()

    def _stop_queries(self) -> bool:
        """Stop the active queries whose last progress shows this feed's offsets: public
        API only (``streams.active``, ``lastProgress``). ``True`` when one was stopped."""
        found = False
        try:
            for query in self._session.streams.active:
                progress = query.lastProgress
                sources = progress["sources"] if progress else []
                if any(self.id in str(source.get("endOffset")) for source in sources):
                    query.stop()
                    found = True
        except Exception as exc:  # a session going away: the next look decides
            _LOG.debug("to_stream: looking for queries to stop failed: %s", exc)
        return found

    def close(self) -> None:
        """End the feed: cancel upstream, drop the buffer (§3.13), stop listening, delete the
        secret. Idempotent; any thread."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            was_done, self._done = self._done, True
            self._cancelled = self._cancelled or not was_done
            self._buffer.clear()
            self._cond.notify_all()
        upstream = self._upstream.take()
        if upstream is not None and upstream is not CANCELLED and not was_done:
            cancel_quietly(upstream)  # §3.12, §3.15
        with _LIVE_LOCK:
            _LIVE.pop(self.id, None)  # under _LIVE_LOCK
        shutil.rmtree(self._dir, ignore_errors=True)
        self._session = None
        try:  # wake the accept thread, which then closes the listener
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            pass

    @property
    def secret_dir(self) -> str:
        return self._dir

    @property
    def address(self) -> tuple[str, int]:
        """Where the feed listens: always 127.0.0.1."""
        host, port = self._listener.address
        return str(host), int(port)

    @property
    def closed(self) -> bool:
        return self._closed

    def scan(self) -> Scan:
        """This sink's state (any thread, no lock): buffered = held, asked = requested in
        all, in flight = requested and not arrived, delivered = served to Spark once."""
        done, cancelled = self._done, self._cancelled
        asked, first, held = self._asked, self._first, len(self._buffer)
        return Scan(
            "to_stream",
            asked=asked,
            in_flight=None if done else max(0, asked - first - held),
            buffered=held,
            delivered=self._delivered,
            cancelled=cancelled,
            terminated=done and not cancelled,
            subscribed=self._upstream.subscription is not None,
            upstream=self._upstream.linked,
        )
