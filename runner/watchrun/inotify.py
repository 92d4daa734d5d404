"""Linux inotify through ctypes and the process's own libc: init, add and remove watches, read.

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

__all__ = ["Event", "INotify"]

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
