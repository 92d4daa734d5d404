"""Compiled hyperscan databases on disk, so a runner loads its patterns instead of compiling them.

Beside the config cache (`config/cache.py`: the same directory rules, `hyperscan/` instead of
`config/`), one file per database, named by a hash of hyperscan's version, the expressions and
their flags. The directory must be the runner's own and closed to others (0700), the files
are written atomically (0600) and read without following a link; hyperscan itself refuses a
database built for another version or CPU (then it is compiled again). Loading saves ~3.5 MiB
of resident memory (the compiler's pages) and 1-5 ms per pattern at every start.
"""

from __future__ import annotations

import os
from pathlib import Path

from watchrun.config.cache import cache_dir
from watchrun.config.private import PrivateStore

__all__ = ["KEEP", "DiskStore", "disk_store"]

KEEP = 256
"""Databases kept; the oldest are removed when one is written."""


class DiskStore(PrivateStore):
    """An `engines.Store` in a directory only the runner may write (`config/private.py`)."""

    def __init__(self, where: Path) -> None:
        super().__init__(where, ".db", keep=KEEP, max_bytes=64 << 20)


def disk_store(environ: dict[str, str] | os._Environ[str]) -> DiskStore | None:
    """The runner's store, or None when the cache is off (`WATCHRUN_CONFIG_CACHE=0`)."""
    where = cache_dir(environ)
    return DiskStore(where.parent / "hyperscan") if where is not None else None
