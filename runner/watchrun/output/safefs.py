"""Open, create, rename and remove files under the output dir without following any symlink.

Every operation opens the file's directory with `O_NOFOLLOW | O_DIRECTORY` and then works on the
file's name relative to that directory fd (`dir_fd=`), with `O_NOFOLLOW | O_CLOEXEC` on the file
itself: a symlink in place of a file or of its directory (`watchers/`, `state/`) is refused, never
followed, chmodded or written through. Opens are non-blocking, so a FIFO planted in place of a
file cannot hang the runner, and anything but a regular file is refused. A file the runner writes
must also be its own (same uid) with one link, so a hard link to another file (`/etc/passwd`) is
refused too. The directories above the output dir are trusted (they are the operator's choice).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "DirPin",
    "UnsafePathError",
    "check_regular",
    "create_exclusive",
    "dir_identity",
    "fsync_dir",
    "make_dir",
    "open_dir",
    "open_read",
    "open_write",
    "read_bytes",
    "replace",
    "unlink",
    "write_all",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
NOT_REGULAR = "is not a regular file"
"""Why a FIFO, device, socket or directory is refused where a file is read or written."""


class UnsafePathError(OSError):
    """A path under the output dir that must not be used: a symlink (errno ELOOP), or not a
    regular file, a hard link or another user's file (EPERM). `strerror` says which."""

    def __init__(self, path: Path | str, code: int, problem: str) -> None:
        super().__init__(code, problem, str(path))

    def __str__(self) -> str:  # (said to people: the path and the problem, no errno repr)
        return f"{self.filename} {self.strerror}"


def _symlink_error(path: Path | str, dir_fd: int | None, name: str) -> UnsafePathError:
    try:
        target = os.readlink(name, dir_fd=dir_fd) if dir_fd is not None else os.readlink(path)
        to = f" (to {target})"
    except OSError:
        to = ""
    return UnsafePathError(path, errno.ELOOP, f"is a symlink{to}; symlinks under the output "
                           "dir are never followed")


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir(path: Path | str, *, dir_fd: int | None = None) -> int:
    """A directory fd of `path` (relative to `dir_fd` when given); a symlink is refused."""
    name = str(path) if dir_fd is None else os.path.basename(path)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, dir_fd):
            raise _symlink_error(path, dir_fd, name) from None
        raise


@contextlib.contextmanager
def _parent(path: Path, dfd: int | None = None) -> Iterator[int]:
    """`path`'s directory as a descriptor: `dfd` when the caller holds it open, else opened."""
    fd = open_dir(path.parent) if dfd is None else dfd
    try:
        yield fd
    finally:
        if dfd is None:
            os.close(fd)


def _open(path: Path, dfd: int, flags: int, mode: int) -> int:
    try:
        return os.open(path.name, flags | _FILE_FLAGS, mode, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(path, dfd, path.name) from None
        try:
            st = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if not stat.S_ISREG(st.st_mode):  # e.g. a FIFO without a reader: ENXIO
            raise UnsafePathError(path, errno.EPERM, NOT_REGULAR) from None
        raise


def _check(path: Path, fd: int, *, owned: bool) -> None:
    """Refuse (closing `fd`) what is not a regular file, or, for writing, not ours or linked."""
    try:
        st = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(st.st_mode):
            problem = NOT_REGULAR
        elif owned and st.st_uid != os.geteuid():
            problem = f"is owned by uid {st.st_uid}, not by the runner (uid {os.geteuid()})"
        elif owned and st.st_nlink != 1:
            problem = f"has {st.st_nlink} hard links (a link to another file is never written)"
    except OSError:
        os.close(fd)
        raise
    if problem is not None:
        os.close(fd)
        raise UnsafePathError(path, errno.EPERM, problem)


def check_regular(path: Path) -> None:
    """Refuse (UnsafePathError) what is at `path` unless it is a regular file, as `open_read`
    would refuse it, without opening it (a symlink is never followed)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_error(path, None, path.name)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(path, errno.EPERM, NOT_REGULAR)


def open_read(path: Path, *, owned: bool = False) -> int:
    """Open a regular file for reading (O_RDONLY), never through a symlink; with `owned`, only
    the runner's own file with one link (a file whose content decides what the runner does)."""
    with _parent(path) as dfd:
        fd = _open(path, dfd, os.O_RDONLY, 0)
    _check(path, fd, owned=owned)
    return fd


def open_write(path: Path, flags: int, mode: int, dfd: int | None = None) -> int:
    """Open (maybe create) a file the runner writes: no symlink, a regular file of the runner's
    own with a single link. `flags` are the caller's (`O_WRONLY | O_APPEND | O_CREAT` ...)."""
    with _parent(path, dfd) as dfd:
        fd = _open(path, dfd, flags, mode)
    _check(path, fd, owned=True)
    return fd


def create_exclusive(path: Path, mode: int, dfd: int | None = None) -> int:
    """A fresh file at `path` for writing: whatever was there (a stale temporary file, or a
    planted symlink) is unlinked first, then the file is created with O_EXCL."""
    with _parent(path, dfd) as dfd:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=dfd)
        return _open(path, dfd, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_atomic(path: Path, data: bytes, *, mode: int = 0o640, tmp: Path | None = None,
                 sync: bool = True, sync_dir: bool = False, dfd: int | None = None) -> None:
    """Replace `path` with `data` so a reader sees the old file or the new one, never half:
    written to `tmp` (default `.NAME.tmp` beside it) with no symlink followed, fsynced (unless
    not `sync`), renamed over `path` (and the directory fsynced too with `sync_dir`: the rename
    survives a crash). A write that fails (a full disk) leaves no `tmp` behind. `dfd`: the
    directory, held open by a caller that writes many files in it (`open_dir`)."""
    tmp = tmp if tmp is not None else path.with_name(f".{path.name}.tmp")
    fd = create_exclusive(tmp, mode, dfd)
    try:
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        replace(tmp, path, dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            unlink(tmp, dfd)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def read_bytes(path: Path, limit: int | None = None, *, owned: bool = False) -> bytes:
    """The content of a regular file (at most `limit` bytes), never through a symlink; `owned`
    as for `open_read`."""
    fd = open_read(path, owned=owned)
    try:
        parts: list[bytes] = []
        left = limit if limit is not None else -1
        while left != 0:
            part = os.read(fd, 1 << 16 if left < 0 else min(left, 1 << 16))
            if not part:
                break
            parts.append(part)
            left = left - len(part) if left > 0 else left
        return b"".join(parts)
    finally:
        os.close(fd)


def replace(src: Path, dst: Path, dfd: int | None = None) -> None:
    """`rename(src, dst)` within one directory: a symlink at either name is moved or replaced
    itself, never followed."""
    if src.parent != dst.parent:
        raise ValueError(f"{src} and {dst} are not in the same directory")
    with _parent(src, dfd) as dfd:
        os.rename(src.name, dst.name, src_dir_fd=dfd, dst_dir_fd=dfd)


def unlink(path: Path, dfd: int | None = None) -> None:
    """Remove the name `path` (a symlink is removed itself); FileNotFoundError when absent."""
    with _parent(path, dfd) as dfd:
        os.unlink(path.name, dir_fd=dfd)


def fsync_dir(path: Path) -> None:
    """fsync a directory (after a rename or create in it), opened without following a link."""
    fd = open_dir(path)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: Path, mode: int = 0o750) -> None:
    """`path` as a directory (made if missing, its parent not: a removed output dir is not
    made again, with the umask's mode, under a runner that goes on), not a symlink."""
    path.mkdir(mode, exist_ok=True)
    os.close(open_dir(path))


class DirPin:
    """A directory a writer keeps, known by (device, inode) and held open while the writer
    holds this: its inode is not freed meanwhile, so its number is never handed to a directory
    made at the same path later (ext4 hands a removed directory's number to the next one at
    once). Writers of one directory share one (`dir_identity`): one descriptor a directory."""

    __slots__ = ("__weakref__", "key")

    def __init__(self, fd: int, key: tuple[int, int]) -> None:
        self.key = key
        weakref.finalize(self, os.close, fd)


_PINS: weakref.WeakValueDictionary[tuple[int, int], DirPin] = weakref.WeakValueDictionary()
_PINS_LOCK = threading.Lock()


def dir_identity(path: Path) -> DirPin | None:
    """The directory at `path`, pinned, or None when there is none: a writer that holds it
    refuses to write into another directory made at the same path later (the output dir
    removed under a runner, and made again by a second one)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    with _PINS_LOCK:
        pin = _PINS.get(key)
        if pin is None:
            pin = _PINS[key] = DirPin(fd, key)
            return pin
    os.close(fd)  # (pinned already)
    return pin


def same_dir(path: Path, identity: DirPin | None) -> None:
    """Raise UnsafePathError(ESTALE) when `path` is no longer the directory `identity`
    names."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if identity is not None and (st.st_dev, st.st_ino) != identity.key:
        raise UnsafePathError(path, errno.ESTALE, f"{path} is not the directory this runner "
                              "started with (removed and made again, by another runner "
                              "perhaps): nothing is written there")
