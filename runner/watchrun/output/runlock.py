"""A runner's run lock, `state/runner-<id>.lock`: whether the runner that wrote a status snapshot
still runs, whatever pid it had and from any pid namespace.

The runner makes the file under the random run id its snapshots carry (`runnerId`) and holds a
`flock` on it for its life; the kernel lets go when the runner dies, SIGKILLed or not. A pid
cannot tell runners apart (a container's runner is PID 1 at every start, so the previous one's
snapshots looked live), nor be seen from a sibling pid namespace; a flock is the kernel's, and a
reader tests it with `flocks.probe`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
from pathlib import Path

from watchrun.output import flocks, safefs

__all__ = ["RunLock", "alive", "new_id"]

_ID = re.compile(r"[0-9a-f]{16}")
_PREFIX, _SUFFIX = "runner-", ".lock"


def new_id() -> str:
    """A fresh run id: 16 hex digits (64 random bits)."""
    return secrets.token_hex(8)


def _path(state: Path, rid: str) -> Path:
    return state / f"{_PREFIX}{rid}{_SUFFIX}"


def alive(state: Path, rid: object) -> bool | None:
    """Whether the runner of run id `rid` still runs: its run lock in `state` is there and a
    process holds it. None when this cannot tell: `rid` is no run id (a snapshot of a watchrun
    that wrote none), or the file cannot be opened (no permission)."""
    if not isinstance(rid, str) or not _ID.fullmatch(rid):
        return None
    try:
        fd = safefs.open_read(_path(state, rid))
    except (FileNotFoundError, NotADirectoryError, safefs.UnsafePathError):
        return False  # (a symlink or a FIFO in its place is no runner's lock)
    except OSError:
        return None
    try:
        return flocks.probe(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


class RunLock:
    """One runner's run lock: `hold` makes it (tried again after a failure), `release` removes
    it at the runner's end. It is made under a temporary name, locked, then renamed into place,
    so nobody sees it there unheld."""

    def __init__(self, state: Path, rid: str) -> None:
        self.path = _path(state, rid)
        self._fd = -1
        self._released = False

    def hold(self) -> None:
        """Make and lock the file (unless held, or released), then remove the run locks no
        process holds (runners that ended: a SIGKILLed one leaves its file). OSError when it
        cannot be made."""
        if self._fd >= 0 or self._released:
            return
        path = self.path
        tmp = path.with_name(f".{path.name}.tmp")
        fd = safefs.create_exclusive(tmp, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            safefs.replace(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                safefs.unlink(tmp)
            raise
        self._fd = fd
        _sweep(path.parent, path.name)

    def release(self) -> None:
        """The runner ends: the file is removed and let go of; never made again."""
        self._released = True
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            safefs.unlink(self.path)
        os.close(self._fd)
        self._fd = -1


def _sweep(state: Path, own: str) -> None:
    """Remove the run locks in `state` that no process holds, but `own`: each is tried with an
    exclusive lock that does not wait (its runner, or a reader testing it, keeps it there)."""
    try:
        names = os.listdir(state)
    except OSError:
        return
    for name in names:
        if name == own or not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
            continue
        try:
            fd = safefs.open_read(state / name)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            st, there = os.fstat(fd), os.lstat(state / name)
            if (st.st_dev, st.st_ino) == (there.st_dev, there.st_ino):
                safefs.unlink(state / name)
        except OSError:
            pass  # held, or gone meanwhile
        finally:
            os.close(fd)
