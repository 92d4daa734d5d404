"""The client of the live runner's control socket: one JSON request, one reply, blocking
(a command line's `list`, `status`, `add`… need no event loop; `runtime/control.py` serves)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["NoReply", "NotListening", "is_live", "request", "unix_address"]

_SUN_PATH = 107  # bytes of an AF_UNIX path, without the terminating NUL
_NOBODY = {errno.ENOENT, errno.ECONNREFUSED}


class NotListening(ConnectionError):
    """Nothing listens on the control socket (no such file, or connection refused): no live
    runner."""


class NoReply(OSError):
    """A runner was there, but no complete reply came back (reset, closed, timed out)."""


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """An address for `path` that fits AF_UNIX: the path itself, or (too long) the same file
    through a descriptor of its directory, /proc/self/fd/N/NAME, valid inside the block."""
    if len(os.fsencode(path)) <= _SUN_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def is_live(path: Path) -> bool:
    """Whether a runner listens on the control socket `path`. The connect never waits: a
    blocking AF_UNIX connect waited for ever while the listener's backlog was full (its loop
    stalled); a non-blocking one says EAGAIN then, and that listener is live."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK) as s:
        try:
            with unix_address(path) as addr:
                s.connect(addr)
        except BlockingIOError:
            return True
        except OSError:
            return False
    return True


def request(path: Path, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request to a live runner. Raises NotListening (a ConnectionError) when nothing
    listens on `path`; NoReply (an OSError, not a ConnectionError) when one was connected but
    no complete reply came back (`timeout` bounds the whole exchange); ValueError when the
    reply is not JSON."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            with unix_address(path) as addr:
                s.connect(addr)
        except OSError as exc:
            if exc.errno in _NOBODY:
                raise NotListening(f"no live runner on {path} ({exc.strerror})") from exc
            raise NoReply(f"cannot connect to {path}: {exc.strerror or exc}") from exc
        buf = b""
        try:
            # refused unread (too large): the send fails, and its reply waits to be read
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                s.sendall(json.dumps(payload).encode() + b"\n")
            while not buf.endswith(b"\n"):
                # (what is left of `timeout`, not all of it again: a socket's timeout holds
                # for each call, and a runner stalled mid-reply that sent a byte now and then
                # held `list` and `stop` forever)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out")
                s.settimeout(left)
                part = s.recv(65536)
                if not part:
                    break
                buf += part
        except OSError as exc:
            raise NoReply(f"{exc.strerror or exc} (on {path})") from exc
    if not buf.endswith(b"\n"):
        raise NoReply(f"the connection was closed before a complete reply (on {path})")
    reply = json.loads(buf)
    return reply if isinstance(reply, dict) else {"ok": False}
