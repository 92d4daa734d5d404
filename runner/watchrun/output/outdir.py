"""The output directory: its layout, and creating it (or saying clearly why it cannot be used)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["OutputDirError", "OutputLayout", "layout_for", "prepare_output_dir"]

DIR_MODE = 0o750
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class OutputDirError(Exception):
    """The output directory cannot be created or written. `str()` names the path and errno."""

    def __init__(self, path: Path, errno_name: str, message: str) -> None:
        super().__init__(f"output dir: {path}: {errno_name}: {message}")
        self.path = path
        self.errno_name = errno_name
        self.message = message


@dataclass(frozen=True, slots=True)
class OutputLayout:
    """Where each output lives under `output.dir` (SPEC §4)."""

    root: Path
    watchers: Path
    """`watchers/<id>.jsonl`: one record per event of that watcher."""
    agents: Path
    """`agents/<name>.jsonl`: one record per observation of that agent."""
    state: Path
    """Checkpoints and status snapshots."""
    control_socket: Path
    """The live runner's control socket (mode 0600)."""

    def jsonl(self, kind: Literal["watcher", "agent"], id: str) -> Path:
        """The live JSONL file of one watcher or agent. Rotated copies add `.1`, `.2`, …"""
        if not _ID.fullmatch(id):
            raise ValueError(f"invalid {kind} id {id!r}: must match ^{_ID.pattern}$")
        if kind == "watcher":
            return self.watchers / f"{id}.jsonl"
        if kind == "agent":
            return self.agents / f"{id}.jsonl"
        raise ValueError(f"invalid stream kind {kind!r}: must be 'watcher' or 'agent'")


def layout_for(root: Path) -> OutputLayout:
    """The layout under `root`, without touching the file system (for readers)."""
    return OutputLayout(
        root=root,
        watchers=root / "watchers",
        agents=root / "agents",
        state=root / "state",
        control_socket=root / "control.sock",
    )


def _error(path: Path, exc: OSError, doing: str) -> OutputDirError:
    code = exc.errno if exc.errno is not None else errno.EIO
    name = errno.errorcode.get(code, str(code))
    hints = {
        errno.EACCES: "permission denied; fix the owner or mode, or choose another output.dir",
        errno.EPERM: "operation not permitted; fix the owner or mode, or choose another output.dir",
        errno.EROFS: "the file system is read-only; choose a writable output.dir",
        errno.ENOTDIR: "a path component is a file, not a directory",
        errno.ENOENT: "the parent directory does not exist (only the last component is created)",
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
    }
    return OutputDirError(path, name, f"cannot {doing}: {hints.get(code, os.strerror(code))}")


def _make_dir(path: Path) -> None:
    """Create one directory with mode 0750 (whatever the umask); check an existing one."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            err = OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            raise _error(path, err, "use it as a directory: it exists and is not one") from None
        return
    except OSError as exc:
        raise _error(path, exc, "create the directory") from exc
    try:
        os.chmod(path, DIR_MODE)
    except OSError as exc:
        raise _error(path, exc, "set mode 0750") from exc


def _probe(path: Path) -> None:
    """Create and remove a file, so read-only mounts and permissions show up now, not later.

    As root, permission bits do not stop writes, and this probe passes: the same as the writes
    that follow it.
    """
    probe = path / f".watchrun-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        fd = -1
    except OSError as exc:
        raise _error(path, exc, "write a file in it") from exc
    if fd >= 0:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(probe)


def prepare_output_dir(root: Path) -> OutputLayout:
    """Create `root` and `watchers/`, `agents/`, `state/` under it (0750) and check they can be
    written; raise `OutputDirError` naming the path and errno otherwise.

    `root` itself is created but not its parents: a typo in `output.dir` fails clearly instead
    of growing a tree somewhere unexpected. Existing directories keep their mode.
    """
    layout = layout_for(Path(os.path.abspath(root)))
    for d in (layout.root, layout.watchers, layout.agents, layout.state):
        _make_dir(d)
    for d in (layout.root, layout.watchers, layout.agents, layout.state):
        _probe(d)  # root too: control.sock is created there
    return layout
