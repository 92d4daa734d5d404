"""The live runner's control socket (`control.sock`, mode 0600): one JSON request per line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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
