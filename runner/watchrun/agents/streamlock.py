"""One writer per agent stream: an exclusive advisory lock held while its recorder is open."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from watchrun.output import flocks, safefs

__all__ = ["StreamBusyError", "StreamLock", "held_by", "lock_path"]

_MODE = 0o640


class StreamBusyError(OSError):
    """Another live process holds the agent's lock (errno EWOULDBLOCK); `strerror` says who:
    `pid` as this process sees it, None when it cannot (another pid namespace's)."""

    def __init__(self, name: str, stream: Path, pid: int | None) -> None:
        super().__init__(errno.EWOULDBLOCK, f"agent {name}'s records ({stream}) are being "
                         f"written by another process ({flocks.pid_said(pid)}); only one "
                         f"process may run agent {name} at a time: wait for it to end, or "
                         "stop it", str(stream))
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
    so no agent process inherits it), which then holds this process's pid (for a person: a
    holder in another pid namespace wrote its pid there). The kernel releases it when the
    holder dies: a lock obtained means no other writer is alive."""

    def __init__(self, stream: Path, name: str) -> None:
        self.path = lock_path(stream)
        safefs.make_dir(self.path.parent)
        fd = safefs.open_write(self.path, os.O_RDWR | os.O_CREAT, _MODE)
        try:
            try:
                flocks.take(fd)  # (a probe, `held_by`'s, is waited out)
            except BlockingIOError:
                raise StreamBusyError(name, stream, flocks.holder(os.fstat(fd))) from None
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
    as the kernel says (`flocks.probe`: an `agent run` in another pid namespace too; a
    `StreamLock` starting in that instant waits it out), naming its pid where /proc/locks
    shows it."""
    try:
        fd = safefs.open_read(lock_path(stream))
    except OSError:  # (none yet: nobody has written the agent's records)
        return None
    try:
        if not flocks.probe(fd):
            return None
        return StreamBusyError(name, stream, flocks.holder(os.fstat(fd)))
    finally:
        os.close(fd)
