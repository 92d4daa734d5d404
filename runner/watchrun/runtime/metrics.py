"""`--metrics HOST:PORT`: the HTTP endpoint (`/metrics`, `/healthz`, `/livez`), on the loop,
capped; what it serves is `metrics_families.py`'s."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from watchrun.runtime.accepting import Acceptor
from watchrun.runtime.metrics_bodies import Bodies, Response, plain
from watchrun.runtime.metrics_families import Snapshot, build_registry

MAX_CONNECTIONS = 16
"""Connections served at once. One more makes room by closing the oldest already answered,
else cutting off the oldest whose response is written but not taken by its client, else the
oldest that has not sent its request head yet (none of them can keep a probe out); with none
such (every one's response being built), it is closed."""
BACKLOG = 100
MAX_HEAD_BYTES = 8192
"""Request line and headers together; a larger request gets 431."""
REQUEST_TIMEOUT_S = 10.0
"""Time to send the whole request head, and to take the whole response: then the connection
is closed (a slow or idle client cannot hold one of the MAX_CONNECTIONS)."""

def parse_address(text: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `[::1]:9464` or `:9464` (loopback). ValueError with a clear message:
    also for a port of digits other than ASCII ones, and brackets that are not the host's
    own pair."""
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    inner = host[1:-1] if bracketed else host
    if not sep or not (port.isascii() and port.isdigit()) or "[" in inner or "]" in inner or (
            bracketed and not inner):
        raise ValueError(f"--metrics {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
    if not 0 < int(port) < 65536:
        raise ValueError(f"--metrics {text!r}: port {int(port)} is out of range: use 1 to "
                         "65535, e.g. 127.0.0.1:9464")
    return inner or "127.0.0.1", int(port)


class MetricsServer:
    """GET/HEAD /metrics (Prometheus or OpenMetrics text, gzip when asked, `name[]` filters)
    /healthz (`up`: whether the runner runs) and /livez; 405 for other methods, 404 for other
    paths. One request per connection. Bodies are built one at a time, spaced
    (`metrics_bodies.SCRAPE_SHARE`).
    Accepted by `accepting.Acceptor`: out of descriptors, a scraper is closed at once and one
    warning a minute (`warn`) says so."""

    def __init__(self, host: str, port: int, snapshot: Snapshot, *, up: Callable[[], bool],
                 timeout_s: float = REQUEST_TIMEOUT_S,
                 warn: Callable[[str], None] | None = None) -> None:
        self.host, self.port = host, port
        self.up, self.timeout_s = up, timeout_s
        self.bodies = Bodies(build_registry(snapshot))
        self._accept = Acceptor(f"--metrics {host}:{port}", warn)
        self._socks: list[socket.socket] = []
        self._serving: list[asyncio.Task[None]] = []
        self._clients: dict[asyncio.Task[Any], asyncio.StreamWriter | socket.socket] = {}
        """Each connection's task, and its writer (its socket until it has one)."""
        self._heads: dict[asyncio.Task[Any], None] = {}
        """Clients still sending their request head, oldest first."""
        self._answered: dict[asyncio.Task[Any], None] = {}
        """Clients whose response is out, waiting for them to close (oldest first)."""
        self._untaken: dict[asyncio.Task[Any], None] = {}
        """Clients whose whole response is written (into asyncio's buffer), not all taken by
        them yet (oldest first)."""

    async def start(self) -> None:
        """Listen (every address `host` resolves to, as asyncio's servers do); OSError naming
        the address when it cannot (in use, not local, ...)."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            # (`::` alone takes IPv4 too, as Go exporters and Vector do; beside an IPv4
            # socket of its own, from a name that resolves to both, it takes IPv6 only)
            both = not any(info[0] == socket.AF_INET for info in infos)
            for info in dict.fromkeys(infos):
                self._socks.append(_listen(*info, both=both))
        except OSError as exc:  # the caller names the address
            self._close_listening()
            raise OSError(exc.errno, f"cannot listen: {exc.strerror or exc}") from exc
        self.port = self._socks[0].getsockname()[1]
        self._serving = [asyncio.ensure_future(self._accept.serve(sock, self._connected))
                         for sock in self._socks]

    def _connected(self, conn: socket.socket) -> None:
        """Served by a task the server owns (close() ends its connection and awaits it). Past
        MAX_CONNECTIONS, the oldest one answered that has not closed yet is closed to make room
        (16 such kept /livez out for 10 s; its response and FIN are out, so it loses nothing),
        else the oldest client still sending its request head is cut off (16 idle connections,
        reopened as they were closed, kept /livez from answering and a liveness probe restarted
        a healthy runner); with none such, closed at once. Answered ones go first: a scraper
        whose request is on its way may not have been read yet (10 scrapers back to back were
        reset while 8 answered connections lingered). Next, the oldest whose response is
        written but not all taken (a client that reads slowly or not at all loses the rest):
        16 scrapers that read none of a body larger than the kernel buffers (~100 KB over a
        network's MSS) kept /livez out for 10 s at a time."""
        if len(self._clients) >= MAX_CONNECTIONS:
            room = self._answered or self._untaken or self._heads
            if not room:
                conn.close()
                return
            oldest = next(iter(room))
            del room[oldest]
            held = self._clients.pop(oldest)  # (a task not started yet runs no `finally`)
            if isinstance(held, socket.socket):
                held.close()
            elif room is self._answered:  # its response and FIN are out: closed, not reset
                held.transport.close()
            else:
                held.transport.abort()
            oldest.cancel()
        task = asyncio.ensure_future(self._client(conn))
        self._clients[task] = conn
        self._heads[task] = None  # (from its accept: many are accepted before any task runs)

    async def _client(self, conn: socket.socket) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=MAX_HEAD_BYTES)
        except BaseException:
            self._clients.pop(task, None)
            conn.close()
            raise
        self._clients[task] = writer
        try:
            async with asyncio.timeout(self.timeout_s):
                method, (status, headers, body) = await self._respond(reader)
                lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers),
                         f"Content-Length: {len(body)}", "Connection: close", "", ""]
                head = "\r\n".join(lines).encode("latin-1")
                writer.write(head if method == "HEAD" else head + body)
                self._untaken[task] = None  # (cut off to make room while it is not taken)
                await writer.drain()
                self._untaken.pop(task, None)
                # Lingering close: read what the client still sends (a head past the cap) until
                # it closes, so the close is a FIN after the response, not a reset before it.
                writer.write_eof()
                self._answered[task] = None  # (made room for when every slot is held)
                while await reader.read(MAX_HEAD_BYTES):
                    pass
        except (TimeoutError, OSError):  # (ENOTCONN from the half-close: a client gone)
            writer.transport.abort()
        finally:
            self._clients.pop(task, None)
            self._heads.pop(task, None)
            self._untaken.pop(task, None)
            self._answered.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[str, Response]:
        """The request's method and the response to it."""
        try:
            head = await _read_head(reader)
        except ValueError:
            head = None
        finally:  # (its head is in: served, not cut off to make room)
            if (task := asyncio.current_task()) is not None:
                self._heads.pop(task, None)
        if head is None:
            return "", plain("431 Request Header Fields Too Large", "request head too large\n")
        parts = head[0].split(" ") if head else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return "", plain("400 Bad Request", "expected METHOD TARGET HTTP/1.x\n")
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            status, headers, body = plain("405 Method Not Allowed", "use GET or HEAD\n")
            return method, (status, [*headers, ("Allow", "GET, HEAD")], body)
        url = urlsplit(target)
        if url.path == "/metrics":
            return method, await self.bodies.answer(_headers(head[1:]), parse_qs(url.query))
        if url.path == "/healthz":
            if self.up():
                return method, plain("200 OK", "ok\n")
            return method, plain("503 Service Unavailable", "not running\n")
        if url.path == "/livez":  # (answered by the loop: it runs, whatever the runner does)
            return method, plain("200 OK", "alive\n")
        if url.path == "/":
            return method, plain("200 OK", "watchrun: /metrics /healthz /livez\n")
        return method, plain("404 Not Found", "not found: try /metrics, /healthz or /livez\n")

    async def close(self) -> None:
        for serving in self._serving:
            serving.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)
        self._serving = []
        self._close_listening()
        for task, held in self._clients.items():
            if isinstance(held, socket.socket):  # (a task not yet run never closes it)
                held.close()
            else:
                held.transport.abort()
            task.cancel()  # (one waiting for its turn to build a body would build it first)
        await asyncio.gather(*self._clients, return_exceptions=True)
        self._accept.close()

    def _close_listening(self) -> None:
        for sock in self._socks:
            sock.close()
        self._socks = []


def _listen(family: int, kind: int, proto: int, _name: str, address: Any, *,
            both: bool) -> socket.socket:
    """A non-blocking socket listening on `address` (SO_REUSEADDR). An IPv6 one listens on
    IPv6 only, but for the unspecified address `::` when `both`: IPv4 too (dual-stack,
    whatever the host's `net.ipv6.bindv6only`)."""
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            only = not (both and ipaddress.ip_address(address[0]).is_unspecified)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, int(only))
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def _read_head(reader: asyncio.StreamReader) -> list[str]:
    """The request line and header lines (CRLF or LF); ValueError past MAX_HEAD_BYTES."""
    lines: list[str] = []
    size = 0
    while True:
        try:
            raw = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError) as exc:
            raise ValueError("request head too large") from exc
        size += len(raw)
        if size > MAX_HEAD_BYTES:
            raise ValueError("request head too large")
        line = raw.rstrip(b"\r\n").decode("latin-1")
        if not line:
            return lines  # the blank line ends the head (or EOF)
        lines.append(line)


def _headers(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return fields
