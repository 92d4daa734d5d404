"""The client of the live runner's control socket: one JSON request, one reply, blocking
(a command line's `list`, `status`, `add`… need no event loop; `runtime/control.py` serves)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchrun.config.model import Config

__all__ = ["ANSWER_S", "CHANGES", "CHANGE_MARGIN_S", "LOCK_NAME", "READS", "NoReply",
           "NotListening", "Unreachable", "held", "holders", "is_live", "request",
           "unix_address", "wait_s"]

_SUN_PATH = 107  # bytes of an AF_UNIX path, without the terminating NUL
_NOBODY = {errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR, errno.ELOOP}
"""No runner listens there: no such file, refused, or the dir is a file or a symlink loop."""
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
SETTLE_S = 1.0
"""How long a client waits for the socket of a runner that holds `control.lock` (starting or
ending) before it says the runner cannot be reached."""
SETTLE_POLL_S = 0.02
READS = frozenset({"list", "status"})
"""Requests that change nothing: one with no reply leaves nothing to be carried out later."""
CHANGES = frozenset({"add", "start", "restart", "stop", "clear"})
"""The requests that take the runner's one lock for changes in turn (docs/control.md)."""
ANSWER_S = 30.0
"""How long a request waits for the runner's answer (`watchrun status`, `agent send/stop`); a
change at least as long."""
CHANGE_MARGIN_S = 15.0
"""How much longer a change waits than the stops it may wait for (`wait_s`)."""
LOCK_NAME = "control.lock"
"""Beside the socket: locked by the live runner of the output dir (`runtime/control.py`)."""


class NotListening(ConnectionError):
    """Nothing listens on the control socket (no such file, or connection refused, or not a
    socket) and no process holds the output dir's `control.lock`: no live runner."""


class NoReply(OSError):
    """A runner was there, but no complete reply came back (reset, closed, timed out)."""


class Unreachable(NoReply):
    """A runner holds the output dir's `control.lock`, but the control socket does not reach it
    (the socket is gone, not a socket, a symlink, or another process answers on it): nothing
    was sent, and it is never taken for "no runner"."""


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


def held(path: Path) -> bool:
    """Whether a process holds the `control.lock` beside the control socket `path`, as the
    kernel says (`flocks.held`: a runner in any pid namespace); OSError when it cannot tell
    (the lock cannot be opened)."""
    from watchrun.output import flocks  # (only here: importing the client loads no layer)

    return flocks.held(path.with_name(LOCK_NAME))


def holders(path: Path) -> list[int]:
    """The pids, as /proc/locks shows them, holding the `control.lock` beside the control
    socket `path` ([]: none, or none visible from this pid namespace); OSError when it
    cannot tell."""
    from watchrun.output import flocks

    return flocks.holders(path.with_name(LOCK_NAME))


def wait_s(cmd: object, config: Config | None) -> float:
    """How long a `cmd` request waits for its answer: the one rule of `watchrun`, `top` and
    `mcp`. A change may stop a command, which has `limits.stopTimeout` to end after SIGTERM (a
    `clear` stops its watchers together), and waits its turn behind a change ahead of it that
    may do the same: it waits twice that long plus CHANGE_MARGIN_S (ANSWER_S at least). The
    config's stopTimeout; without one (`--output-dir`, `mcp` with no config file), the most it
    may be (60 s)."""
    if cmd not in CHANGES:
        return ANSWER_S
    if config is None:
        from watchrun.config.clamp import LIMIT_RULES  # (only here: the client loads no layer)

        most = LIMIT_RULES["stopTimeout"][1]
        assert most is not None  # (a duration's range)
        stop_ms = most.hi
    else:
        stop_ms = config.limits.stop_timeout_ms
    return max(ANSWER_S, 2 * stop_ms / 1000 + CHANGE_MARGIN_S)


def _nobody(path: Path, why: str, listening: bool = True) -> OSError:
    """What to raise when `path` reaches no runner (`why`): Unreachable when a process holds
    `control.lock` (a runner whose socket was removed or replaced), as the kernel says, named
    by its pid where /proc/locks shows it; else NotListening. A lock this process cannot open
    (another user's) is asked of /proc/locks alone; when neither can tell: NotListening if
    nothing `listening` there, else NoReply (a symlink or a file there is no proof that no
    runner lives)."""
    from watchrun.output import flocks

    lock = path.with_name(LOCK_NAME)
    try:
        busy: bool | None = held(path)
    except OSError:
        busy = None
    pids: list[int] = []
    if busy is not False:
        try:
            pids = holders(path)
        except OSError:
            if busy is None and not listening:
                return NoReply(f"cannot reach a runner on {path}: {why}; cannot tell whether "
                               f"one holds {LOCK_NAME}")
    if not (busy or pids):
        return NotListening(f"no live runner on {path} ({why})")
    return Unreachable(f"a runner ({flocks.pid_said(pids[0] if pids else None)}) holds {lock} "
                       f"but cannot be reached on {path}: {why}; nothing was sent to it (a "
                       "runner makes its socket when it starts: stop it and start it again; a "
                       "`run --once` whose output dir cannot hold one has none, as its log "
                       "says)")


def _check_path(path: Path) -> None:
    """Connect only to a socket: a symlink at `path` is never connected through, and a
    missing or other file reaches no runner (`_nobody`)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise _nobody(path, "there is no socket") from None
    except OSError:
        return  # (the connect says why)
    if stat.S_ISLNK(mode):
        raise _nobody(path, "it is a symlink, never connected through", listening=False)
    if not stat.S_ISSOCK(mode):
        raise _nobody(path, "it is not a socket", listening=False)


def _check_peer(s: socket.socket, path: Path) -> None:
    """The process that answers must hold `control.lock` when one does (a socket put in the
    runner's place must not be trusted). Skipped when it cannot tell: /proc/locks unreadable,
    no holder (a runner of a watchrun that took no lock), a peer in another pid namespace (its
    pid 0), or a /proc of another pid namespace than this process's."""
    pid = _PEERCRED.unpack(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        _PEERCRED.size))[0]
    try:
        if pid <= 0 or os.readlink("/proc/self") != str(os.getpid()):
            return
        held = holders(path)
    except OSError:
        return
    if held and pid not in held:
        raise Unreachable(f"process {pid} answers on {path}, not the runner that holds "
                          f"{path.with_name(LOCK_NAME)} (pid {held[0]}): not trusted, nothing "
                          "was sent to it")


def _connect(path: Path, timeout: float) -> socket.socket:
    """A socket connected to `path`. A runner takes `control.lock`, then binds the socket, and
    at its end removes the socket, then lets go of the lock: while one holds the lock and the
    socket is not there (or refuses), this tries again for up to SETTLE_S (within `timeout`)
    before it says Unreachable."""
    until = time.monotonic() + min(SETTLE_S, timeout)
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            _check_path(path)
            with unix_address(path) as addr:
                s.connect(addr)
            return s
        except (NoReply, NotListening) as exc:  # `_check_path`'s
            s.close()
            if not isinstance(exc, Unreachable) or time.monotonic() >= until:
                raise
        except OSError as exc:
            s.close()
            if exc.errno not in _NOBODY:
                raise NoReply(f"cannot connect to {path}: {exc.strerror or exc}") from exc
            failed = _nobody(path, str(exc.strerror))
            if not isinstance(failed, Unreachable) or time.monotonic() >= until:
                raise failed from exc
        time.sleep(SETTLE_POLL_S)


def request(path: Path, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request to a live runner. Raises NotListening (a ConnectionError) when nothing
    listens on `path` and no process holds `control.lock`; Unreachable (a NoReply) when one
    holds it but `path` does not reach it (gone, a symlink, not a socket, another process
    answers); NoReply (an OSError, not a ConnectionError) when one was connected but no
    complete reply came back (`timeout` bounds the whole exchange); ValueError when the reply
    is not JSON."""
    deadline = time.monotonic() + timeout
    with _connect(path, timeout) as s:
        _check_peer(s, path)
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
