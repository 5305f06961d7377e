"""A local HTTP/1.1 service and its tiny client: the "remote API" that the main job's
``--enrich``, the ``map_partitions`` benchmark and its tests call from Spark's executors.

The service listens on 127.0.0.1 only, and refuses any peer that is not loopback.
``/echo?q`` answers ``q`` after ``latency`` seconds, ``/hang`` never answers (it counts its
open connections until the client goes), and ``/stats`` gives the counters as JSON, among
them ``max_in_flight``: the most ``/echo`` calls it served at once. The client opens one
connection per request (asyncio streams, no dependency).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import threading

__all__ = ["Service", "fetch"]


class Service:
    """HTTP/1.1 on 127.0.0.1 in a thread of its own: ``/echo?q`` answers ``q`` after
    ``latency`` seconds; ``/hang`` answers never and counts its open connections until the client
    goes; ``/stats`` gives the counters. Anything but a loopback peer is refused. The
    counters change on the service's loop thread, under ``_lock`` (read by any thread)."""

    def __init__(self, latency: float = 0.02) -> None:
        self.latency = latency
        self._lock = threading.Lock()
        self.counts = {"in_flight": 0, "max_in_flight": 0, "echo": 0, "hang": 0, "hanging": 0}
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rs-local-service", daemon=True
        )
        self._server: asyncio.Server | None = None

    def start(self) -> Service:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        )
        self._server = future.result(30)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def _add(self, key: str, n: int) -> None:
        with self._lock:
            self.counts[key] += n
            if key == "in_flight":
                self.counts["max_in_flight"] = max(self.counts["max_in_flight"], self.counts[key])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if not ipaddress.ip_address(writer.get_extra_info("peername")[0]).is_loopback:
                return
            words = (await reader.readline()).split()
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            if len(words) < 2:  # a client gone before its request line (a killed worker)
                return
            path, _, query = words[1].decode().partition("?")
            if path == "/echo":
                self._add("echo", 1)
                self._add("in_flight", 1)
                try:
                    await asyncio.sleep(self.latency)
                finally:
                    self._add("in_flight", -1)
                body = query.encode()
            elif path == "/hang":
                self._add("hang", 1)
                self._add("hanging", 1)
                try:
                    await reader.read()  # until the client's side is closed
                finally:
                    self._add("hanging", -1)
                return
            elif path == "/stats":
                body = json.dumps(self.stats()).encode()
            else:
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body))
            writer.write(b"Connection: close\r\n\r\n" + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def fetch(port: int, path: str) -> bytes:
    """GET ``path`` from the service: the tiny client (one connection per request)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        head, _, body = (await reader.read()).partition(b"\r\n\r\n")
    finally:
        writer.close()
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(f"GET {path}: no answer ({head[:40]!r})")
    return body
