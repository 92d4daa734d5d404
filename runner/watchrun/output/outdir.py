"""The output directory: its layout, and creating it (or saying clearly why it cannot be used)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Literal

from msgspec import Struct
from msgspec.structs import replace

from watchrun.output import safefs
from watchrun.output.records import ID_PATTERN, is_id

__all__ = ["OutputDirError", "OutputLayout", "check_readable", "layout_for",
           "prepare_output_dir"]

DIR_MODE = 0o750


class OutputDirError(Exception):
    """The output directory cannot be created or written. `str()` names the path and errno."""

    def __init__(self, path: Path, errno_name: str, message: str) -> None:
        super().__init__(f"output dir: {path}: {errno_name}: {message}")
        self.path = path
        self.errno_name = errno_name
        self.message = message


class OutputLayout(Struct, frozen=True):
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
    fixed: tuple[str, ...] = ()
    """What `prepare_output_dir` corrected (group/other write bits removed), to be logged."""

    def jsonl(self, kind: Literal["watcher", "agent"], id: str) -> Path:
        """The live JSONL file of one watcher or agent. Rotated copies add `.1`, `.2`, …"""
        if not is_id(id):
            raise ValueError(f"invalid {kind} id {id!r}: must match ^{ID_PATTERN}$")
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


def check_readable(root: Path) -> None:
    """For the readers (`list`, `status`, `matches`, `stop`…): `root` is a directory, or does not
    exist (nothing has run with it); OutputDirError when it is anything else (a file, a symlink
    loop, under a file), which no runner can have used and no "no runner" can stand for."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _error(root, exc, "read it") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputDirError(root, "ENOTDIR", "it exists and is not a directory")


def _error(path: Path, exc: OSError, doing: str) -> OutputDirError:
    code = exc.errno if exc.errno is not None else errno.EIO
    name = errno.errorcode.get(code, str(code))
    hints = {
        errno.EACCES: "permission denied; fix the owner or mode, or choose another output.dir",
        errno.EPERM: "operation not permitted; fix the owner or mode, or choose another output.dir",
        errno.EROFS: "the file system is read-only; choose a writable output.dir",
        errno.ENOTDIR: "a path component is a file, not a directory",
        errno.ELOOP: "too many levels of symbolic links (a symlink loop)",
        errno.ENOENT: "the parent directory does not exist (only the last component is created)",
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
    }
    return OutputDirError(path, name, f"cannot {doing}: {hints.get(code, os.strerror(code))}")


def _make_dir(path: Path, fixed: list[str], parent_fd: int | None = None) -> int:
    """Create one directory with mode 0750 (whatever the umask), or check an existing one: it
    must not be a symlink, must be the runner's own, and must not be writable by group or others
    (write bits on the runner's own directory are removed, and said in `fixed`). Returns an fd
    of it; subdirectories are created and opened relative to their parent's fd (`parent_fd`)."""
    name = path.name if parent_fd is not None else str(path)
    created = True
    try:
        os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
    except FileExistsError:
        created = False
    except OSError as exc:
        raise _error(path, exc, "create the directory") from exc
    try:
        fd = safefs.open_dir(path, dir_fd=parent_fd)
    except safefs.UnsafePathError as exc:
        raise OutputDirError(path, "ELOOP", f"{exc.strerror}: give the real directory as "
                             "output.dir (or remove the link)") from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise _error(path, exc, "use it as a directory: it exists and is not one") from None
        raise _error(path, exc, "open the directory") from exc
    try:
        _check_dir(path, fd, created, fixed)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_dir(path: Path, fd: int, created: bool, fixed: list[str]) -> None:
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if created:
            os.fchmod(fd, DIR_MODE)
            return
        me = os.geteuid()
        if st.st_uid != me:
            raise OutputDirError(path, "EPERM", (
                f"it is owned by uid {st.st_uid} (mode {mode:04o}), not by the runner (uid {me}): "
                "its owner could plant links in it; chown it to the runner's user or choose "
                "another output.dir"))
        if mode & 0o002:  # (never changed: /tmp given as the output dir was made 1755)
            shared = "a shared directory, " if mode & stat.S_ISVTX else ""
            raise OutputDirError(path, "EPERM", (
                f"it is writable by others ({shared}mode {mode:04o}): anyone could plant links "
                "in it; choose a directory of the runner's own as output.dir (a new one inside "
                f"it will do), or remove the write bit: chmod o-w {path}"))
        if mode & 0o020:
            os.fchmod(fd, mode & ~0o022)
            fixed.append(f"output dir: {path}: was writable by group or others (mode "
                         f"{mode:04o}); now {mode & ~0o022:04o}")
    except OSError as exc:
        raise _error(path, exc, "check the directory's owner and mode") from exc


def _probe(path: Path, fd: int) -> None:
    """Create and remove a file, so read-only mounts and permissions show up now, not later.

    As root, permission bits do not stop writes, and this probe passes: the same as the writes
    that follow it.
    """
    probe = f".watchrun-probe-{os.getpid()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        pfd = os.open(probe, flags, 0o600, dir_fd=fd)
    except FileExistsError:
        pfd = -1
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # (the directory is open: /proc, /sys, a kernel's own)
            raise OutputDirError(path, "ENOENT", (
                "cannot write a file in it: its file system does not let files be created "
                "(a kernel file system such as /proc or /sys); choose another output.dir")) from exc
        raise _error(path, exc, "write a file in it") from exc
    if pfd >= 0:
        os.close(pfd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(probe, dir_fd=fd)


def _trusted_link(root: Path) -> Path:
    """`root`, or the directory it links to when it is a symlink only root or the runner could
    have made (theirs, in a directory of theirs that no one else may write to): systemd's
    `StateDirectory=` with `DynamicUser=` makes `/var/lib/NAME` such a link to
    `private/NAME`. The directory it resolves to is then checked as any output dir; a link
    anyone else could have made or swapped is refused (`_make_dir`)."""
    try:
        link, parent = os.lstat(root), os.stat(root.parent)
    except OSError:
        return root
    mine = (0, os.geteuid())
    if not stat.S_ISLNK(link.st_mode) or link.st_uid not in mine or parent.st_uid not in mine \
            or stat.S_IMODE(parent.st_mode) & 0o022:
        return root
    return Path(os.path.realpath(root))


def prepare_output_dir(root: Path) -> OutputLayout:
    """Create `root` and `watchers/`, `agents/`, `state/` under it (0750) and check they can be
    written; raise `OutputDirError` naming the path and errno otherwise.

    `root` itself is created but not its parents: a typo in `output.dir` fails clearly instead
    of growing a tree somewhere unexpected. None of them may be a symlink or another user's
    directory; the runner's own directories lose group and other write bits (`layout.fixed`
    says so); other modes are kept.
    """
    layout = layout_for(_trusted_link(Path(os.path.abspath(root))))
    fixed: list[str] = []
    root_fd = _make_dir(layout.root, fixed)
    try:
        _probe(layout.root, root_fd)  # root too: control.sock is created there
        for d in (layout.watchers, layout.agents, layout.state):
            fd = _make_dir(d, fixed, root_fd)
            try:
                _probe(d, fd)
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)
    return replace(layout, fixed=tuple(fixed))
