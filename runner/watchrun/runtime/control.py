"""The live runner's control socket (`control.sock`, mode 0600): one JSON request per line.

One runner per output dir: the server holds an exclusive lock on `control.lock` beside the
socket for the runner's life (the kernel drops it when the runner dies, SIGKILLed or not), and
touches the socket only once it holds it, so a second runner is refused even when the live one's
socket was removed, or looked at in the instant before it listened.
Bounded on every side: only the runner's own user (or root) is served (SO_PEERCRED); at most
MAX_CLIENTS at once (the next is told `busy` once its request is read: a reply, never a reset); a
request is at most MAX_REQUEST bytes and MAX_DEPTH levels of JSON (`control_request.py`), and
must arrive within IDLE_S; running out of descriptors is logged once a minute, not per
attempt (`accepting.py`). A stop waits for no client but those whose request is being carried
out (`close`).
An output dir whose socket path is longer than AF_UNIX allows is reached through
/proc/self/fd, for binding and connecting alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import json
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchrun import offload
from watchrun.output import flocks, safefs
from watchrun.process.tree import short_of_files
from watchrun.runtime.accepting import PRESSURE_LOG_S, Acceptor
from watchrun.runtime.client import LOCK_NAME, is_live, unix_address
from watchrun.runtime.control_request import Refused, parse

if TYPE_CHECKING:
    from watchrun.output.runlog import RunLog

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_REQUEST = 256 * 1024
MAX_CLIENTS = 16
IDLE_S = 10.0
"""A client has this long to send its request, and to take the reply."""
DRAIN_S = 30.0
"""At shutdown, requests being carried out (a `stop` waits for its watcher) get this long to
finish, and no longer than the runner's stop allows (`offload.stop_left`)."""
NO_SOCKET = frozenset({errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP})
"""What bind says on a file system that cannot hold a Unix socket: sshfs and other FUSE ones
(EPERM, ENOSYS), SMB/CIFS (EOPNOTSUPP)."""
BUSY_READ_S = 1.0
"""A client past MAX_CLIENTS has this long to send its request before it is told `busy`."""
_PEERCRED = struct.Struct("3i")
PEER_PID: contextvars.ContextVar[int | None] = contextvars.ContextVar("PEER_PID", default=None)
"""While a handler runs: the pid of the process that sent the request (SO_PEERCRED)."""


class ControlServer:
    """Serves requests like {"cmd": "stop", "id": "server"} → {"ok": true, ...}."""

    def __init__(self, path: Path, handler: Handler, log: RunLog | None = None) -> None:
        self.path, self.handler, self.log = path, handler, log
        self._sock: socket.socket | None = None
        self._serving: asyncio.Task[None] | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._carrying: set[asyncio.Task[None]] = set()
        """The clients whose request the handler is carrying out (the others are reading a
        request or sending a reply: the client's pace, which a stop does not wait for)."""
        self._closing = False
        self._accept: Acceptor | None = None
        self._lock = -1
        self._short, self._short_said = 0, -PRESSURE_LOG_S
        """Requests failed for want of descriptors, and when that was last logged."""

    async def start(self, *, lock_alone: bool = False) -> OSError | None:
        """Hold the output dir's lock, then bind and listen; OSError (`another runner is live`)
        when another runner holds it or answers on the socket. Nothing is left on failure.
        `lock_alone`: a bind the file system refuses (`NO_SOCKET`) leaves the lock held, no
        socket made, and is returned."""
        self._lock = _hold(self.path.with_name(LOCK_NAME))
        try:
            self._sock = self._bind()
        except OSError as exc:
            if lock_alone and exc.errno in NO_SOCKET:
                return exc
            os.close(self._lock)
            self._lock = -1
            raise
        except BaseException:
            os.close(self._lock)
            self._lock = -1
            raise
        self._accept = Acceptor("control socket", self.log.warning if self.log is not None
                                 else None)
        self._serving = asyncio.ensure_future(self._accept.serve(self._sock, self._connected))
        return None

    def _bind(self) -> socket.socket:
        if self.path.is_symlink():  # never connected through: nothing under the dir is followed
            self.path.unlink()
        elif self.path.exists():
            if is_live(self.path):  # (a runner that takes no lock: an older watchrun)
                raise OSError(f"another runner is live on {self.path}")
            self.path.unlink()  # a crashed runner's: the lock is ours, so nobody serves it
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        bound = False
        try:
            with unix_address(self.path) as addr:
                old = os.umask(0o177)  # the socket is created 0600, never briefly wider
                try:
                    sock.bind(addr)
                    bound = True
                finally:
                    os.umask(old)
            sock.listen(64)
        except OSError:
            sock.close()
            if bound:  # bound but not listening: leave no socket behind (never another's)
                with contextlib.suppress(OSError):
                    self.path.unlink()
            raise
        return sock

    def _connected(self, conn: socket.socket) -> None:
        """Each client is a task the server owns (awaited or cancelled by `close`)."""
        task = asyncio.ensure_future(self._client(conn))
        self._clients.add(task)
        task.add_done_callback(self._clients.discard)
        task.add_done_callback(lambda _: conn.close())  # (also one cancelled before it ran)

    async def _client(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        with conn:
            try:
                PEER_PID.set(_check_peer(conn))
                if len(self._clients) > MAX_CLIENTS:
                    with contextlib.suppress(TimeoutError, Refused):  # the reply, not a reset
                        async with asyncio.timeout(BUSY_READ_S):
                            await _read_request(loop, conn)
                    raise Refused("busy", f"more than {MAX_CLIENTS} clients at once; retry")
                async with asyncio.timeout(IDLE_S):
                    data = await _read_request(loop, conn)
                request = parse(data)
            except Refused as exc:
                reply = _fail(exc.code, str(exc))
            except TimeoutError:
                reply = _fail("timeout", f"no complete request within {IDLE_S:g} s")
            except (OSError, ConnectionError):
                return  # the client is gone: nobody to answer
            else:
                task = asyncio.current_task()
                assert task is not None
                self._carrying.add(task)
                try:
                    reply = await self._answer(request)
                finally:
                    self._carrying.discard(task)
            data = json.dumps(reply).encode() + b"\n"
            with contextlib.suppress(OSError, TimeoutError):
                if self._closing:  # what the socket takes at once, no wait for the client
                    conn.send(data)  # (a reply cut short: the client says it got none whole)
                    return
                async with asyncio.timeout(IDLE_S):
                    await loop.sock_sendall(conn, data)

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The handler's reply; its failure is answered and logged, never a dropped connection
        or a traceback: an OSError (a full disk, a file it could not read) as `os_error`, any
        other exception (a bug) as `internal`."""
        try:
            return await self.handler(request)
        except OSError as exc:  # (a TimeoutError too: its text may be empty)
            said = str(exc) or type(exc).__name__
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # (the file it was opening: no news)
                said = f"{exc.strerror} ({short_of_files(errno.errorcode[exc.errno])})"
                self._short += 1
                if time.monotonic() - self._short_said < PRESSURE_LOG_S:
                    return _fail("os_error", said)  # (said once a minute, as accept's)
                self._short_said = time.monotonic()
                said_here = f"{said}; {self._short} so far" if self._short > 1 else said
            else:
                said_here = said
            if self.log is not None:
                self.log.error(f"control request {request.get('cmd')!r} failed: {said_here}")
            return _fail("os_error", said)
        except Exception as exc:
            if self.log is not None:
                self.log.error(f"control request failed: {exc!r}")
            return _fail("internal", repr(exc))

    async def close(self) -> None:
        """Stop accepting; drop the clients still sending a request or taking a reply at once,
        let the requests being carried out finish (up to DRAIN_S, within the stop's deadline:
        their replies then go out as far as the socket takes them at once); remove the socket.
        A client's pace never holds a stop: one that trickled its request and read no reply
        held it 20 s, past a `stopTimeout: 0s` runner's deadline (exit 3)."""
        if self._serving is not None:
            self._serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._serving
            self._serving = None
        self._closing = True
        for task in self._clients - self._carrying:
            task.cancel()
        if self._carrying:
            await asyncio.wait(set(self._carrying), timeout=offload.stop_left(DRAIN_S))
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        if self._accept is not None:
            self._accept.close()
            self._accept = None
        if self._lock >= 0:  # last: the socket is gone before another runner may start
            os.close(self._lock)
            self._lock = -1


def _hold(path: Path) -> int:
    """The descriptor of `path` (opened with no symlink followed), locked `flock(LOCK_EX)`
    (`flocks.take`: a client's probe of it is waited out); OSError naming the holder's pid
    when another process holds it. Nothing is written to it: a runner starts on a full disk."""
    fd = safefs.open_write(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        flocks.take(fd)
    except BlockingIOError:
        st = os.fstat(fd)
        os.close(fd)
        raise OSError(errno.EWOULDBLOCK, f"another runner is live on {path.parent} ("
                      f"{flocks.pid_said(flocks.holder(st))}, which holds {path.name})") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_peer(conn: socket.socket) -> int:
    """The client's pid. Only the runner's own user, or root, may control it (the socket's mode
    says the same; this holds even if the mode or a parent directory is loosened)."""
    pid, uid, _gid = _PEERCRED.unpack(
        conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if uid not in (0, os.geteuid()):
        raise Refused("permission_denied", f"uid {uid} may not control this runner")
    return int(pid)


async def _read_request(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        part = await loop.sock_recv(conn, 65536)
        if not part:
            break
        data += part
        if len(data) > MAX_REQUEST and b"\n" not in data[:MAX_REQUEST + 1]:
            raise Refused("request_too_large", f"a request is at most {MAX_REQUEST} bytes")
    return data.split(b"\n", 1)[0]


def _fail(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}
