"""Files in a directory only the runner may write: the store under both start-up caches.

The directory is created 0700 and opened `O_NOFOLLOW | O_DIRECTORY` through the folder it is in;
a directory or file that is not the runner's own, or that group or others could write, is not
trusted (a miss), nor is the directory when the folder it is in (`$WATCHRUN_CACHE_DIR`, ...) is
neither the runner's nor root's, or group or others could write it. Files are
written 0600 through a temporary file renamed relative to the directory's fd, read without
following a link, and pruned to the newest `keep`. Errors are misses: a cache never fails a
start.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

__all__ = ["PrivateStore"]

_KEY = re.compile(r"[0-9a-f]{64}")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _trusted(st: os.stat_result, *, root_too: bool = False) -> bool:
    """The runner's own (`root_too`: or root's, as the folder the store's directory is in may
    be), and no one else may write it."""
    owners = (os.geteuid(), 0) if root_too else (os.geteuid(),)
    return st.st_uid in owners and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class PrivateStore:
    """`load`/`save` of `<key><suffix>` files (keys: sha256 hex) in `where`."""

    def __init__(self, where: Path, suffix: str, *, keep: int, max_bytes: int) -> None:
        self.where, self.suffix, self.keep, self.max_bytes = where, suffix, keep, max_bytes

    def _dir(self, create: bool) -> int | None:
        if create:
            with contextlib.suppress(OSError):
                missing = [d for d in (self.where, *self.where.parents) if not d.exists()]
                for d in reversed(missing):  # each directory this creates is private (0700)
                    d.mkdir(mode=0o700, exist_ok=True)
        try:  # (the folder it is in too: another user could swap what is in their folder)
            pfd = os.open(self.where.parent, _DIR & ~os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            if not _trusted(os.fstat(pfd), root_too=True):
                return None
            fd = os.open(self.where.name, _DIR, dir_fd=pfd)
        except OSError:
            return None
        finally:
            os.close(pfd)
        if not _trusted(os.fstat(fd)):
            os.close(fd)
            return None
        return fd

    def load(self, key: str) -> bytes | None:
        """The file's bytes, or None: absent, unreadable, too big, or not to be trusted."""
        if not _KEY.fullmatch(key):
            return None
        dfd = self._dir(create=False)
        if dfd is None:
            return None
        try:
            fd = os.open(key + self.suffix, _READ, dir_fd=dfd)
        except OSError:
            return None
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _trusted(st) or st.st_size > self.max_bytes:
                return None
            data = b""
            while part := os.read(fd, st.st_size + 1 - len(data)):
                data += part
            return data
        except OSError:
            return None
        finally:
            os.close(fd)

    def save(self, key: str, data: bytes) -> None:
        """Write the file atomically (0600), then remove all but the newest `keep`."""
        if not _KEY.fullmatch(key):
            return
        dfd = self._dir(create=True)
        if dfd is None:
            return
        tmp = f".{key}.{os.getpid()}.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            fd = os.open(tmp, _CREATE, 0o600, dir_fd=dfd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, key + self.suffix, src_dir_fd=dfd, dst_dir_fd=dfd)
            kept = [e for e in os.scandir(dfd) if e.name.endswith(self.suffix)]
            for old in sorted(kept, key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns
                              )[: -self.keep]:
                os.unlink(old.name, dir_fd=dfd)
        except OSError:
            pass  # a cache: the next start does the work again
        finally:
            os.close(dfd)
