"""One writer per agent stream: an exclusive advisory lock held while its recorder is open."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from watchrun.output import flocks, safefs

__all__ = ["StreamBusyError", "StreamLock", "held_by", "lock_path"]

_MODE = 0o640


class StreamBusyError(OSError):
    """Another live process holds the agent's lock (errno EWOULDBLOCK); `strerror` says who."""

    def __init__(self, name: str, stream: Path, pid: int | None) -> None:
        who = "another process" if pid is None else f"another process (pid {pid})"
        super().__init__(errno.EWOULDBLOCK, f"agent {name}'s records ({stream}) are being "
                         f"written by {who}; only one process may run agent {name} at a "
                         "time: wait for it to end, or stop it", str(stream))
        self.name, self.pid = name, pid

    def __str__(self) -> str:
        return str(self.strerror)


def lock_path(stream: Path) -> Path:
    """`state/agents-<name>.lock` beside the output dir's `agents/` (a stream elsewhere: a
    hidden `.<file>.lock` beside it)."""
    if stream.parent.name == "agents":
        return stream.parent.parent / "state" / f"agents-{stream.stem}.lock"
    return stream.with_name(f".{stream.name}.lock")


class StreamLock:
    """`flock(LOCK_EX)` on the agent's lock file (opened with no symlink followed, close-on-exec
    so no agent process inherits it), which then holds this process's pid. The kernel releases
    it when the holder dies: a lock obtained means no other writer is alive."""

    def __init__(self, stream: Path, name: str) -> None:
        self.path = lock_path(stream)
        safefs.make_dir(self.path.parent)
        fd = safefs.open_write(self.path, os.O_RDWR | os.O_CREAT, _MODE)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StreamBusyError(name, stream, _holder(fd)) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Unlock (closing the file releases the lock); idempotent."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def held_by(stream: Path, name: str) -> StreamBusyError | None:
    """Whether a live process writes the agent's records (`agent run`, when no runner answers),
    as /proc/locks says: no lock is taken to find out. A shared lock tried and let go kept an
    `agent run` starting in that instant out (`StreamBusyError`); it remains only where
    /proc/locks cannot be read."""
    try:
        fd = safefs.open_read(lock_path(stream))
    except OSError:  # (none yet: nobody has written the agent's records)
        return None
    try:
        try:
            pids = flocks.holders_of(os.fstat(fd))
        except OSError:
            return _tried(fd, stream, name)
        written = _holder(fd)  # (an entry matched by inode alone may be another file's)
        busy = bool(pids) and (written is None or written in pids)
        return StreamBusyError(name, stream, written or pids[0]) if busy else None
    finally:
        os.close(fd)


def _tried(fd: int, stream: Path, name: str) -> StreamBusyError | None:
    """A shared lock on `fd` tried and let go at once: refused, another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return StreamBusyError(name, stream, _holder(fd))
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None


def _holder(fd: int) -> int | None:
    """The pid the holder wrote in the lock file (None when it has not yet, or is unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip())
    return None
