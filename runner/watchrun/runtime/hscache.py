"""Compiled hyperscan databases on disk, so a runner loads its patterns instead of compiling them.

Beside the config cache (`config/cache.py`: the same directory rules, `hyperscan/` instead of
`config/`), one file per database, named by a hash of hyperscan's version, the expressions and
their flags. The directory must be the runner's own and closed to others (0700), the files
are written atomically (0600) and read without following a link; hyperscan itself refuses a
database built for another version or CPU (then it is compiled again). Loading saves ~3.5 MiB
of resident memory (the compiler's pages) and 1-5 ms per pattern at every start.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from watchrun.config.cache import cache_dir

__all__ = ["KEEP", "DiskStore", "disk_store"]

_KEY = re.compile(r"[0-9a-f]{64}")
_MAX = 64 << 20
KEEP = 256
"""Databases kept; the oldest are removed when one is written."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class DiskStore:
    """An `engines.Store` in a directory only the runner may write."""

    def __init__(self, where: Path) -> None:
        self.where = where

    def _dir(self, create: bool) -> int | None:
        if create:
            with contextlib.suppress(OSError):
                self.where.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(self.where, _DIR)
        except OSError:
            return None
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            os.close(fd)
            return None
        return fd

    def load(self, key: str) -> bytes | None:
        if not _KEY.fullmatch(key):
            return None
        dfd = self._dir(create=False)
        if dfd is None:
            return None
        try:
            fd = os.open(f"{key}.db", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=dfd)
        except OSError:
            return None
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                    or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_size > _MAX):
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
        if not _KEY.fullmatch(key):
            return
        dfd = self._dir(create=True)
        if dfd is None:
            return
        tmp = f".{key}.{os.getpid()}.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=dfd)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, f"{key}.db", src_dir_fd=dfd, dst_dir_fd=dfd)
            kept = [e for e in os.scandir(dfd) if e.name.endswith(".db")]
            for old in sorted(kept, key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns
                              )[:-KEEP]:
                os.unlink(old.name, dir_fd=dfd)
        except OSError:
            pass  # a cache: the next start compiles again
        finally:
            os.close(dfd)


def disk_store(environ: dict[str, str] | os._Environ[str]) -> DiskStore | None:
    """The runner's store, or None when the cache is off (`WATCHRUN_CONFIG_CACHE=0`)."""
    where = cache_dir(environ)
    return DiskStore(where.parent / "hyperscan") if where is not None else None
