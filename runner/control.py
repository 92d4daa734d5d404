"""The live runner's control socket (`control.sock`, mode 0600): one JSON request per line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchrun.supervisor import Supervisor

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_REQUEST = 1 << 20


class ControlServer:
    """Serves requests like {"cmd": "stop", "id": "server"} → {"ok": true, ...}."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        if self.path.exists() or self.path.is_symlink():
            if _alive(self.path):
                raise OSError(f"another runner is live on {self.path}")
            self.path.unlink()
        old = os.umask(0o177)  # the socket is created 0600, never briefly wider
        try:
            self._server = await asyncio.start_unix_server(
                self._client, path=str(self.path), limit=MAX_REQUEST
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                reply = await self.handler(request)
            except (ValueError, KeyError, TypeError) as exc:
                reply = {"ok": False, "error": {"code": "bad_request", "message": str(exc)}}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            await close_quietly(writer)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


async def close_quietly(writer: asyncio.StreamWriter) -> None:
    """Close a client connection; a peer that already went away is not an error."""
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


def _alive(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def request(path: Path, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request to a live runner. Raises ConnectionError when none is listening."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
        except OSError as exc:
            raise ConnectionError(f"no live runner on {path} ({exc.strerror})") from exc
        s.sendall(json.dumps(payload).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            part = s.recv(65536)
            if not part:
                break
            buf += part
    reply = json.loads(buf or b"{}")
    return reply if isinstance(reply, dict) else {"ok": False}


async def dispatch(sup: Supervisor, req: dict[str, Any]) -> dict[str, Any]:
    """Requests from `watchrun stop/clear/agent send/agent stop` on control.sock."""
    cmd = req.get("cmd")
    if cmd == "stop":
        wid = str(req.get("id"))
        if wid not in sup.watchers:
            return _fail("not_found", f"no running watcher {wid!r}")
        await sup.stop_watcher(wid, reason="requested")
        return {"ok": True, "message": f"stopped {wid}"}
    if cmd == "clear":
        if req.get("all"):
            for wid in list(sup.watchers):
                await sup.stop_watcher(wid, reason="requested")
        cleared = sup.board.forget_stopped()
        return {"ok": True, "cleared": cleared, "message": f"cleared {cleared} watchers"}
    if cmd in ("agent-send", "agent-stop"):
        if sup.hub is None:
            return _fail("not_found", "this runner has no agents")
        name = str(req.get("name"))
        if cmd == "agent-send":
            return sup.hub.send(name, str(req.get("text", "")))
        stopped = await sup.hub.stop_agent(name)
        return {"ok": stopped, "message": f"stopped the running turn of {name}"} if stopped \
            else _fail("not_found", f"{name} has no running turn")
    if cmd == "status":
        return {"ok": True, "state": str(sup.state), "watchers": sorted(sup.watchers)}
    return _fail("bad_request", f"unknown command {cmd!r}")


def _fail(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}
