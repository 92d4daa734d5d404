"""Linux inotify through ctypes and the process's own libc: init, add and remove watches, read;
which file systems inotify cannot see others' changes on (statfs); and the mount table's
changes, which inotify does not report.

A dozen lines of the kernel API instead of a dependency: inotify-simple looked libc up with
`ctypes.util.find_library`, which runs `ldconfig -p` (a child process) at every start. The
descriptor is non-blocking and close-on-exec; `read` returns what is queued without waiting,
which fits `loop.add_reader`, or waits up to a timeout. Shared by the file source and
`agent watch --until`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
from typing import Any, NamedTuple

__all__ = ["REMOTE_FS", "Event", "INotify", "MountTable", "TurnedRemote", "fs_type", "known_local",
           "remote_fs"]

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (of the name that follows)
_READ = 64 * 1024
_MAX_READS = 16
"""Reads per `read` call at most (1 MiB of events); the rest waits for the next call."""


class Event(NamedTuple):
    wd: int
    mask: int
    cookie: int
    name: str


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("inotify_init1", "inotify_add_watch", "inotify_rm_watch"):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


REMOTE_FS = {
    0x6969: "nfs", 0x517B: "smb", 0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x01021997: "9p",
    0x5346414F: "afs", 0x6B414653: "afs", 0x00C36400: "ceph", 0x65735546: "fuse",
    0x0BD00BD0: "lustre", 0x47504653: "gpfs", 0x7461636F: "ocfs2", 0x01161970: "gfs2",
    0x73757245: "coda", 0x564C: "ncp", 0xAAD7AAEA: "panfs", 0xBEEFDEAD: "snfs",
    0x19830326: "beegfs", 0xA501FCF5: "vxfs", 0x61636673: "acfs", 0x013111A8: "ibrix",
    0x786F4256: "vboxsf", 0x7C7C6673: "prl_fs", 0xBACBACBC: "vmhgfs", 0x61756673: "aufs",
    0x6E667364: "nfsd", 0x65735543: "fusectl", 0x50495045: "pipefs",
}
"""statfs(2) `f_type`s of file systems whose files are changed where this kernel's inotify does
not see it (another host, a FUSE daemon, a VM's host: VirtualBox, Parallels and VMware shared
folders; aufs, whose branches change under it): every type GNU tail polls for that reason
(coreutils' stat.c marks them "remote") but overlayfs (a write through the overlay is seen;
`WATCHRUN_FORCE_POLL=1` where a lower layer changes), and 9p, which tail takes for local: a
VM's share of its host's files (WSL's drives), whose changes on the host inotify does not see."""


class TurnedRemote(Exception):
    """Raised by a watch of a notifier made with `leave_remote` (the live runner's) that finds
    its path on a remote file system (`fs`; mounted over it since its watcher started): its
    owner goes on with it elsewhere (the runner: on a thread of its own, `runtime.remote`)."""

    def __init__(self, fs: str) -> None:
        super().__init__(f"on {fs} now")
        self.fs = fs


def fs_type(at: bytes | int) -> int | None:
    """`statfs(at).f_type`, `fstatfs` of a descriptor (None: the call failed, errno is set;
    or there is no such call here)."""
    call = "fstatfs" if isinstance(at, int) else "statfs"
    if _LIBC is None or not hasattr(_LIBC, call):
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs (120 bytes on 64-bit Linux)
    if getattr(_LIBC, call)(at, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF  # f_type comes first


def known_local(fd: int) -> bool:
    """Whether the file open on `fd` is on a file system known to be local (not a remote one,
    and `fstatfs` answered)."""
    kind = fs_type(fd)
    return kind is not None and kind not in REMOTE_FS


def remote_fs(path: str | os.PathLike[str]) -> str | None:
    """The name of the remote file system `path` is on (its nearest existing directory for a
    path that does not exist yet), or None: a local one, or not known."""
    at = os.path.abspath(os.fspath(path))
    while True:
        magic = fs_type(os.fsencode(at))
        if magic is not None:
            return REMOTE_FS.get(magic)
        if ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR) or at == "/":
            return None
        at = os.path.dirname(at)


def _fail(what: str) -> OSError:
    code = ctypes.get_errno() or errno.EIO
    return OSError(code, f"{what}: {os.strerror(code)}")


class INotify:
    """One inotify instance (OSError ENOSYS where the platform has none)."""

    def __init__(self) -> None:
        if _LIBC is None:
            raise OSError(errno.ENOSYS, "inotify is not available on this platform")
        fd = int(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            raise _fail("inotify_init1")
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def add_watch(self, path: str | os.PathLike[str], mask: int) -> int:
        wd = int(_LIBC.inotify_add_watch(self.fd, os.fsencode(path), ctypes.c_uint32(mask)))
        if wd < 0:
            code = ctypes.get_errno() or errno.EIO
            raise OSError(code, os.strerror(code), os.fspath(path))
        return wd

    def rm_watch(self, wd: int) -> None:
        if _LIBC.inotify_rm_watch(self.fd, wd) < 0:
            raise _fail("inotify_rm_watch")

    def read(self, timeout: float = 0.0) -> list[Event]:
        """The queued events ([] when none), waiting up to `timeout` seconds for the first."""
        if timeout > 0:
            select.select([self.fd], [], [], timeout)
        events: list[Event] = []
        for _ in range(_MAX_READS):
            try:
                data = os.read(self.fd, _READ)
            except BlockingIOError:
                break
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, cookie, size = _EVENT.unpack_from(data, pos)
                pos += _EVENT.size
                name = os.fsdecode(data[pos : pos + size].rstrip(b"\0")) if size else ""
                pos += size
                events.append(Event(wd, mask, cookie, name))
            if len(data) < _READ - 4096:  # well short of a full buffer: nothing left queued
                break
        return events

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class MountTable:
    """The runner's mount table, readable (`fileno`, for `loop.add_reader`) once it changed: a
    file system mounted or unmounted anywhere in its mount namespace, which makes no inotify
    event, yet may change where a path leads. /proc/self/mountinfo is always readable, and
    marked POLLPRI at each change: the loop waits on an epoll of it for that mark alone.
    OSError where /proc is not mounted."""

    def __init__(self) -> None:
        self._fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._ep = select.epoll()
            self._ep.register(self._fd, select.EPOLLPRI)
        except OSError:
            os.close(self._fd)
            raise

    def fileno(self) -> int:
        return self._ep.fileno()

    def seen(self) -> None:
        """The change it was readable for is taken: it is readable again at the next one."""
        self._ep.poll(0)

    def close(self) -> None:
        self._ep.close()
        os.close(self._fd)
