"""`--metrics HOST:PORT`: prometheus_client metrics, `/healthz`, `/livez`; on the loop, capped."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
)
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from watchrun import __version__
from watchrun.runtime.accepting import Acceptor

Snapshot = Callable[[], dict[str, Any]]
MAX_CONNECTIONS = 16
"""Connections served at once; more are closed at once (a scraper needs one)."""
BACKLOG = 100
MAX_HEAD_BYTES = 8192
"""Request line and headers together; a larger request gets 431."""
REQUEST_TIMEOUT_S = 10.0
"""Time to send the whole request head, and to take the whole response: then the connection
is closed (a slow or idle client cannot hold one of the MAX_CONNECTIONS)."""

WATCHER_COUNTERS = (
    ("lines", "watchrun_lines", "Lines read."),
    ("bytes", "watchrun_bytes", "Bytes read."),
    ("matches", "watchrun_matches", "Matched lines recorded."),
    ("truncated", "watchrun_truncated", "Matched lines cut at maxLineBytes."),
    ("linesCut", "watchrun_lines_cut",
     "Lines cut at maxLineBytes, matched or not (only their first maxLineBytes were matched)."),
    ("errors", "watchrun_errors", "Error records written."),
    ("skippedDuplicates", "watchrun_skipped_duplicates",
     "Lines not read again after a crash: their records were in the JSONL already."),
    ("restarts", "watchrun_restarts", "Restarts of a command watcher's command."),
    ("rotations", "watchrun_rotations", "Rotations, truncations and replacements of a file."),
    ("gaps", "watchrun_gaps", "Gaps: data that could not be read (see the gap records)."),
    ("redactions", "watchrun_redactions", "Secrets redacted from records."),
)


def parse_address(text: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `[::1]:9464` or `:9464` (loopback). ValueError with a clear message."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--metrics {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


class RunnerCollector(Collector):
    """The runner's own metrics, read from the supervisor's snapshot at each scrape.

    The snapshot: `up` (bool), `watchers` (live watchers: id → {"up": bool}), `totals` (every
    watcher seen: `Tally.watchers()`), `agents` (the hub's snapshot: live agents), `agentTotals`
    (`Tally.agents()`), `actions` (`ActionHub.counts()`) and, when the loop monitor runs,
    `loop_lag_max_s`."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def describe(self) -> Iterable[Metric]:
        """Every family this collector yields: the registry indexes them by name (`name[]`)."""
        return list(_families({"loop_lag_max_s": 0.0}))

    def collect(self) -> Iterable[Metric]:
        return _families(self.snapshot())


def _families(snap: dict[str, Any]) -> Iterable[Metric]:
    info = InfoMetricFamily("watchrun", "The running watchrun.")
    info.add_metric([], {"version": __version__})
    yield info
    yield GaugeMetricFamily("watchrun_up", "1 while the runner is running (not starting, "
                            "reloading or stopping).", value=1.0 if snap.get("up") else 0.0)
    lag = snap.get("loop_lag_max_s")
    if lag is not None:
        yield GaugeMetricFamily("watchrun_loop_lag_max_seconds", "The longest the event "
                                "loop was late to run a task, recently.", value=float(lag))
    yield from _watchers(snap.get("watchers", {}), snap.get("totals", {}))
    yield from _agents(snap.get("agents", []), snap.get("agentTotals", {}))
    yield from _actions(snap.get("actions", {}))


ACTION_RESULTS = ("ok", "failed", "timeout", "cancelled")


def _actions(counts: dict[str, dict[str, dict[str, int]]]) -> Iterable[Metric]:
    """Per watcher and action (`actions/hub.py` counts them for the runner's life)."""
    labels = ["watcher", "action"]
    fired = CounterMetricFamily("watchrun_action_firings", "Action firings that went out.",
                                labels=labels)
    suppressed = CounterMetricFamily("watchrun_action_suppressed", "Action firings the "
                                     "throttle held back (sent later as one).", labels=labels)
    dropped = CounterMetricFamily("watchrun_action_dropped", "Action firings dropped: the "
                                  "queue was full, or the runner stopped first.", labels=labels)
    results = CounterMetricFamily("watchrun_action_results", "Action firings ended, by status.",
                                  labels=[*labels, "status"])
    for wid in sorted(counts):
        for name in sorted(counts[wid]):
            c = counts[wid][name]
            fired.add_metric([wid, name], float(c.get("fired", 0)))
            suppressed.add_metric([wid, name], float(c.get("suppressed", 0)))
            dropped.add_metric([wid, name], float(c.get("dropped", 0)))
            for status in ACTION_RESULTS:
                results.add_metric([wid, name, status], float(c.get(status, 0)))
    yield from (fired, suppressed, dropped, results)


def _watchers(live: dict[str, dict[str, Any]],
              totals: dict[str, dict[str, Any]]) -> Iterable[Metric]:
    ids = sorted(set(live) | set(totals))
    up = GaugeMetricFamily("watchrun_watcher_up", "1 while the watcher runs and can look at "
                           "its source (0: stopped, failed, backing off).", labels=["watcher"])
    last = GaugeMetricFamily("watchrun_last_match_timestamp_seconds", "When the last match was "
                             "recorded (Unix time; 0 before the first).", labels=["watcher"])
    for wid in ids:
        up.add_metric([wid], 1.0 if live.get(wid, {}).get("up") else 0.0)
        last.add_metric([wid], float(totals.get(wid, {}).get("lastMatchAt") or 0.0))
    yield up
    yield last
    for key, name, help_ in WATCHER_COUNTERS:
        family = CounterMetricFamily(name, help_, labels=["watcher"])
        for wid in ids:
            family.add_metric([wid], float(totals.get(wid, {}).get(key, 0)))
        yield family


def _agents(live: list[dict[str, Any]], totals: dict[str, dict[str, Any]]) -> Iterable[Metric]:
    names = sorted({str(a.get("name")) for a in live} | set(totals))
    turns = CounterMetricFamily("watchrun_agent_turns", "Agent turns started.", labels=["agent"])
    failures = CounterMetricFamily("watchrun_agent_failures", "Agent turns that failed.",
                                   labels=["agent"])
    tokens = CounterMetricFamily("watchrun_agent_tokens", "Tokens used by agent turns, by kind "
                                 "(`cached` is the cache-read part of `input`).",
                                 labels=["agent", "kind"])
    for name in names:
        t = totals.get(name, {})
        turns.add_metric([name], float(t.get("turns", 0)))
        failures.add_metric([name], float(t.get("failures", 0)))
        for kind, value in sorted(t.get("tokens", {"input": 0, "cached": 0, "output": 0}).items()):
            tokens.add_metric([name, kind], float(value))
    yield from (turns, failures, tokens)


def build_registry(snapshot: Snapshot) -> CollectorRegistry:
    """A registry of its own: the runner's metrics, `process_*`, `python_gc_*`, `python_info`."""
    registry = CollectorRegistry(auto_describe=False)
    for standard in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(standard)
    registry.register(RunnerCollector(snapshot))
    return registry


Response = tuple[str, list[tuple[str, str]], bytes]
"""Status line, headers, body."""


class MetricsServer:
    """GET/HEAD /metrics (Prometheus or OpenMetrics text, gzip when asked, `name[]` filters)
    /healthz and /livez; 405 for other methods, 404 for other paths. One request per connection.
    Accepted by `accepting.Acceptor`: out of descriptors, a scraper is closed at once and one
    warning a minute (`warn`) says so."""

    def __init__(self, host: str, port: int, snapshot: Snapshot, *,
                 timeout_s: float = REQUEST_TIMEOUT_S,
                 warn: Callable[[str], None] | None = None) -> None:
        self.host, self.port = host, port
        self.snapshot = snapshot
        self.timeout_s = timeout_s
        self.registry = build_registry(snapshot)
        self._accept = Acceptor(f"--metrics {host}:{port}", warn)
        self._socks: list[socket.socket] = []
        self._serving: list[asyncio.Task[None]] = []
        self._clients: dict[asyncio.Task[Any], asyncio.StreamWriter | socket.socket] = {}
        """Each connection's task, and its writer (its socket until it has one)."""

    async def start(self) -> None:
        """Listen (every address `host` resolves to, as asyncio's servers do); OSError naming
        the address when it cannot (in use, not local, ...)."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            for info in dict.fromkeys(infos):
                self._socks.append(_listen(*info))
        except OSError as exc:  # the caller names the address
            self._close_listening()
            raise OSError(exc.errno, f"cannot listen: {exc.strerror or exc}") from exc
        self.port = self._socks[0].getsockname()[1]
        self._serving = [asyncio.ensure_future(self._accept.serve(sock, self._connected))
                         for sock in self._socks]

    def _connected(self, conn: socket.socket) -> None:
        """Past MAX_CONNECTIONS, closed at once; else served by a task the server owns (close()
        ends its connection and awaits it)."""
        if len(self._clients) >= MAX_CONNECTIONS:
            conn.close()
            return
        self._clients[asyncio.ensure_future(self._client(conn))] = conn

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
                await writer.drain()
                # Lingering close: read what the client still sends (a head past the cap) until
                # it closes, so the close is a FIN after the response, not a reset before it.
                writer.write_eof()
                while await reader.read(MAX_HEAD_BYTES):
                    pass
        except (TimeoutError, OSError):  # (ENOTCONN from the half-close: a client gone)
            writer.transport.abort()
        finally:
            self._clients.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[str, Response]:
        """The request's method and the response to it."""
        try:
            head = await _read_head(reader)
        except ValueError:
            return "", _plain("431 Request Header Fields Too Large", "request head too large\n")
        parts = head[0].split(" ") if head else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return "", _plain("400 Bad Request", "expected METHOD TARGET HTTP/1.x\n")
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            status, headers, body = _plain("405 Method Not Allowed", "use GET or HEAD\n")
            return method, (status, [*headers, ("Allow", "GET, HEAD")], body)
        url = urlsplit(target)
        if url.path == "/metrics":
            try:
                return method, self._metrics(_headers(head[1:]), parse_qs(url.query))
            except Exception as exc:  # a bug in a collector: say so, keep serving
                return method, _plain("500 Internal Server Error", f"cannot collect: {exc!r}\n")
        if url.path == "/healthz":
            if self.snapshot().get("up"):
                return method, _plain("200 OK", "ok\n")
            return method, _plain("503 Service Unavailable", "not running\n")
        if url.path == "/livez":  # (answered by the loop: it runs, whatever the runner does)
            return method, _plain("200 OK", "alive\n")
        if url.path == "/":
            return method, _plain("200 OK", "watchrun: /metrics /healthz /livez\n")
        return method, _plain("404 Not Found", "not found: try /metrics, /healthz or /livez\n")

    def _metrics(self, fields: dict[str, str], query: dict[str, list[str]]) -> Response:
        encoder, content_type = choose_encoder(fields.get("accept", ""))
        names = query.get("name[]")
        source = self.registry.restricted_registry(names) if names else self.registry
        body = encoder(source)
        headers = [("Content-Type", content_type)]
        if gzip_accepted(fields.get("accept-encoding", "")):
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
        return "200 OK", headers, body

    async def close(self) -> None:
        for serving in self._serving:
            serving.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)
        self._serving = []
        self._close_listening()
        for task, held in self._clients.items():
            if isinstance(held, socket.socket):  # (a task not yet run never closes it)
                task.cancel()
                held.close()
            else:
                held.transport.abort()  # the handler sees the connection end and returns
        await asyncio.gather(*self._clients, return_exceptions=True)
        self._accept.close()

    def _close_listening(self) -> None:
        for sock in self._socks:
            sock.close()
        self._socks = []


def _listen(family: int, kind: int, proto: int, _name: str, address: Any) -> socket.socket:
    """A non-blocking socket listening on `address` (SO_REUSEADDR; an IPv6 one only IPv6)."""
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
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


def _plain(status: str, text: str) -> Response:
    return status, [("Content-Type", "text/plain; charset=utf-8")], text.encode()
