"""`--metrics HOST:PORT`: Prometheus text metrics and `/healthz` over a tiny asyncio server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from watchrun.runtime.control import close_quietly

MAX_REQUEST_LINE = 8192


def parse_address(text: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `[::1]:9464` or `:9464` (loopback). ValueError with a clear message."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--metrics {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(snapshot: dict[str, Any]) -> str:
    """Prometheus exposition text from `{"up": bool, "watchers": {id: {...}}, "agents": [...]}`."""
    out: list[str] = []

    def family(name: str, kind: str, help_: str, rows: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in rows:
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{lab}}} {value:g}" if lab else f"{name} {value:g}")

    family("watchrun_up", "gauge", "1 while the runner is running.",
           [({}, 1.0 if snapshot.get("up") else 0.0)])
    watchers: dict[str, dict[str, Any]] = snapshot.get("watchers", {})
    for key, metric, help_ in (
        ("lines", "watchrun_lines_total", "Lines read."),
        ("bytes", "watchrun_bytes_total", "Bytes read."),
        ("matches", "watchrun_matches_total", "Matched lines recorded."),
        ("truncated", "watchrun_truncated_total", "Matched lines cut at maxLineBytes."),
        ("errors", "watchrun_errors_total", "Error records written."),
    ):
        rows = [({"watcher": wid}, float(w.get(key, 0))) for wid, w in sorted(watchers.items())]
        family(metric, "counter", help_, rows)
    agents: list[dict[str, Any]] = snapshot.get("agents", [])
    family("watchrun_agent_turns_total", "counter", "Agent turns started.",
           [({"agent": str(a.get("name"))}, float(a.get("turns", 0))) for a in agents])
    family("watchrun_agent_tokens_total", "counter", "Tokens used by agent turns.",
           [({"agent": str(a.get("name"))}, float(a.get("tokens", 0))) for a in agents])
    return "\n".join(out) + "\n"


class MetricsServer:
    """Serves GET /metrics and GET /healthz; anything else is 404."""

    def __init__(self, host: str, port: int, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.host, self.port = host, port
        self.snapshot = snapshot
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._client, self.host, self.port,
                                                  limit=MAX_REQUEST_LINE)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)).strip():
                pass  # headers are not needed
            parts = line.decode("latin-1").split()
            path = parts[1] if len(parts) >= 2 else ""
            snap = self.snapshot()
            if path == "/metrics":
                status, body, ctype = "200 OK", render(snap), "text/plain; version=0.0.4"
            elif path == "/healthz":
                up = bool(snap.get("up"))
                status = "200 OK" if up else "503 Service Unavailable"
                body, ctype = ("ok\n" if up else "stopping\n"), "text/plain"
            else:
                status, body, ctype = "404 Not Found", "not found\n", "text/plain"
            data = body.encode()
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}"
                    "\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + data)
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            await close_quietly(writer)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
