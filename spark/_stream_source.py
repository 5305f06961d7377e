"""The Spark side of ``to_stream``: a Python data source whose reader asks a feed for rows.

Spark pickles :class:`PublisherDataSource` into the Python process that plans the stream (the
"planner", which the driver spawns) and, on a replay after a restart, into an executor's
Python worker. Either one reaches the feed in the user's process with :class:`FeedClient`,
over a loopback connection authenticated by the secret in the file the options name. Every
call waits at most ``_TIMEOUT`` seconds for its answer; a closed or refused connection, or a
wrong secret, is a ``ConnectionError`` naming 127.0.0.1 and the port (the query fails).

The handshake (both sides; raw bytes only, nothing is unpickled before it succeeds): the feed
sends ``HELLO`` + a nonce; the reader answers ``proof(secret, b"reader", feed's nonce)`` + a
nonce of its own; the feed checks it (``hmac.compare_digest``) and answers
``proof(secret, b"feed", both nonces)``, or ``REFUSED`` and closes. The reader checks that
proof too, so a process that took the port after the feed ended cannot serve it rows.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import secrets
from collections.abc import Iterator, Mapping
from multiprocessing.connection import Client, Connection
from typing import Any, Final, final

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import Row, StructType

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "HELLO",
    "NONCE",
    "REFUSED",
    "SOURCE_NAME",
    "FeedClient",
    "PublisherDataSource",
    "proof",
    "recv_step",
    "rows_of",
]

SOURCE_NAME: Final = "reactive_streams_publisher"
_TIMEOUT: Final = 120.0  # seconds a call waits for the feed's answer
_SHOWN: Final = 200  # characters of an element shown in an error
HANDSHAKE_TIMEOUT: Final = 10.0  # seconds either side waits for each step of the other's
HELLO: Final = b"rs-to-stream/1 "  # the feed's first message: this, then its nonce
NONCE: Final = 32  # bytes of a nonce; a proof is 32 bytes too (SHA-256)
REFUSED: Final = b"refused"  # the feed's answer to a wrong proof, before it closes


def proof(secret: bytes, role: bytes, *nonces: bytes) -> bytes:
    """HMAC-SHA256 over ``role`` and ``nonces``: the role keeps a proof from being replayed
    the other way."""
    return hmac.new(secret, role + b"".join(nonces), hashlib.sha256).digest()


def recv_step(conn: Connection, timeout: float, most: int) -> bytes:
    """One handshake message, raw bytes (never unpickled): ``TimeoutError`` when none comes
    in ``timeout`` seconds, ``OSError`` when it is longer than ``most``, ``EOFError`` when the
    peer closed."""
    if not conn.poll(timeout):
        raise TimeoutError(f"no answer in {timeout} s")
    return conn.recv_bytes(most)


@final
class FeedClient:
    """One connection to a feed, made at the first call; calls are serial (one reader)."""

    __slots__ = ("_address", "_conn", "_feed", "_secret_file")

    def __init__(self, options: Mapping[str, str]) -> None:
        self._address = ("127.0.0.1", int(options["port"]))
        self._secret_file = options["secret_file"]
        self._feed = options["feed"]
        self._conn: Connection | None = None

    @property
    def feed(self) -> str:
        return self._feed

    def _where(self) -> str:
        return f"the to_stream feed at 127.0.0.1:{self._address[1]}"

    def _connect(self) -> Connection:
        try:
            with open(self._secret_file, "rb") as file:
                secret = file.read()
        except OSError as exc:
            raise ConnectionError(
                f"{self._where()} is gone: its secret file {self._secret_file} cannot be read "
                f"({exc}); the feed ended (its session stopped, or the stream finished)"
            ) from exc
        try:
            conn = Client(self._address)  # no authkey: our handshake below, on raw bytes
        except OSError as exc:
            raise ConnectionError(
                f"cannot connect to {self._where()} ({exc}): the feed ended, or its "
                "process is gone (executors on other machines cannot reach it)"
            ) from exc
        try:
            self._handshake(conn, secret)
        except BaseException:
            conn.close()
            raise
        return conn

    def _handshake(self, conn: Connection, secret: bytes) -> None:
        """Prove the secret to the feed and check the feed's proof (module docstring)."""
        refused = f"{self._where()} refused the connection: authentication failed"
        ours = secrets.token_bytes(NONCE)
        try:
            hello = recv_step(conn, HANDSHAKE_TIMEOUT, len(HELLO) + NONCE)
            theirs = hello[len(HELLO) :]
            if len(theirs) == NONCE and hello.startswith(HELLO):
                conn.send_bytes(proof(secret, b"reader", theirs) + ours)
                answer = recv_step(conn, HANDSHAKE_TIMEOUT, NONCE)
            else:
                answer = b""  # not our handshake: refused below
        except (OSError, EOFError) as exc:  # TimeoutError is an OSError
            raise ConnectionError(
                f"{refused} ({type(exc).__name__}: {exc}); the feed ended, or it is busy"
            ) from exc
        if answer == REFUSED:
            raise ConnectionError(
                f"{refused} (the feed refused our proof); the secret in {self._secret_file} "
                "is not this feed's"
            )
        if not answer or not hmac.compare_digest(answer, proof(secret, b"feed", theirs, ours)):
            raise ConnectionError(
                f"{refused} (the peer does not know the secret in {self._secret_file}): "
                "another process listens on the port the feed had"
            )

    def call(self, *request: Any) -> Any:
        """Send ``request``; return the answer's payload, or raise the error it carries."""
        conn = self._conn
        if conn is None:
            conn = self._conn = self._connect()
        try:
            conn.send((request[0], self._feed, *request[1:]))
            if not conn.poll(_TIMEOUT):
                raise TimeoutError(f"{self._where()} did not answer {request[0]} in {_TIMEOUT} s")
            reply = conn.recv()
        except (OSError, EOFError) as exc:
            self.close()
            raise ConnectionError(
                f"the connection to {self._where()} broke ({type(exc).__name__}: {exc}): "
                "the feed ended or its process is gone"
            ) from exc
        except TimeoutError:
            self.close()
            raise
        if reply[0] == "ok":
            return reply[1]
        raise _rebuild(reply[1], reply[2])

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass


def _rebuild(kind: str, message: str) -> Exception:
    """The feed's error as the reader raises it: a builtin exception type is kept; any
    other (the publisher's own class) becomes a RuntimeError whose text names it."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # a builtin whose constructor wants more than a message
            pass
    return RuntimeError(f"{kind}: {message}")


def rows_of(elements: list[Any], first: int, schema: StructType) -> list[tuple[Any, ...]]:
    """Elements as row tuples of ``schema``: tuples and lists by position, ``Row`` objects with
    field names and dicts by name. A wrong shape is a ``TypeError`` or ``ValueError`` that
    names the element (its sequence number and value) and the schema."""
    names = schema.fieldNames()
    width = len(names)
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for seq, element in enumerate(elements, first):
        if type(element) is tuple and len(element) == width:  # the common case
            append(element)
        else:
            append(_row(element, seq, names, schema))
    return rows


def _row(element: Any, seq: int, names: list[str], schema: StructType) -> tuple[Any, ...]:
    def wrong(cls: type[Exception], why: str) -> Exception:
        shown = repr(element)[:_SHOWN]
        return cls(
            f"to_stream: element {seq} ({shown}) {why}; the schema is {schema.simpleString()}"
        )

    if isinstance(element, Row) and hasattr(element, "__fields__"):
        if set(element.__fields__) != set(names):
            raise wrong(ValueError, f"has the fields {list(element.__fields__)}")
        return tuple(element[name] for name in names)
    if isinstance(element, dict):
        missing = [name for name in names if name not in element]
        extra = [key for key in element if key not in names]
        if missing or extra:
            raise wrong(ValueError, f"lacks the fields {missing}, has the others {extra}")
        return tuple(element[name] for name in names)
    if isinstance(element, tuple | list):
        if len(element) != len(names):
            raise wrong(ValueError, f"has {len(element)} values for {len(names)} fields")
        return tuple(element)
    raise wrong(TypeError, f"is a {type(element).__name__}, not a tuple, Row or dict")


@final
class PublisherReader(SimpleDataSourceStreamReader):
    """Reads a feed: offsets are ``{"feed": id, "seq": n}``, the elements' sequence numbers.

    ``read`` asks for up to ``max_rows_per_batch`` from ``start`` (Spark gives a simple
    reader no read limit: this is its admission control); ``readBetweenOffsets`` replays from
    the feed's buffer; ``commit`` releases it. Runs in the planner or an executor's worker.
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._client = FeedClient(options)
        self._schema = schema

    def _seq(self, offset: Mapping[str, Any]) -> int:
        if offset.get("feed") != self._client.feed:
            raise ValueError(
                f"to_stream: the offset {dict(offset)} is another feed's (this one is "
                f"{self._client.feed}): a checkpoint serves only the DataFrame that made it"
            )
        return int(offset["seq"])

    def _offset(self, seq: int) -> dict[str, Any]:
        return {"feed": self._client.feed, "seq": seq}

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        return self._offset(0)

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        first = self._seq(start)
        elements, end = self._client.call("read", first)
        return iter(rows_of(elements, first, self._schema)), self._offset(end)

    def readBetweenOffsets(  # noqa: N802 - Spark's name
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Iterator[tuple[Any, ...]]:
        first = self._seq(start)
        elements = self._client.call("between", first, self._seq(end))
        return iter(rows_of(elements, first, self._schema))

    def commit(self, end: dict[str, Any]) -> None:
        self._client.call("commit", self._seq(end))

    def stop(self) -> None:
        """Close the connection (Spark 4.3's wrapper of a simple reader never calls this:
        the connection then closes with the planner's process)."""
        self._client.close()


class PublisherDataSource(DataSource):
    """The data source ``to_stream`` registers: options ``feed``, ``port``, ``secret_file``
    (a path, never the secret itself: options show in the plan)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        raise ValueError("to_stream: the schema is given with the stream, never inferred")

    def simpleStreamReader(self, schema: StructType) -> PublisherReader:  # noqa: N802
        return PublisherReader(self.options, schema)
