"""Generations released (early under limits.maxGenerations, or idle for rotateWait) found again
grown: what was written to them after the release was not read, and a `gap` record counts it
(only what they grew by)."""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from watchrun.sources.identity import Checkpoint, identifies
from watchrun.sources.rotated import Entry
from watchrun.sources.siblings import open_entry


def regrown(entries: list[Entry], known: list[Checkpoint], taken: Collection[tuple[int, int]],
            max_n: int) -> tuple[list[dict[str, Any]], list[tuple[Checkpoint, int]]]:
    """The checkpointed generations released (`finished`) found among `entries`
    (not `taken`: not read on from their checkpoint by this plan) bigger than the size they
    were read to: a `gap` for the bytes past it, and (generation, size now) to keep that size.

    Found by device, inode and what they hold up to where they were read (a file that got the
    inode number since is not taken for one, by its generation number where the file system
    keeps it, else by its bytes). Only these are opened: one each, none when there is none."""
    gaps: list[dict[str, Any]] = []
    grown: list[tuple[Checkpoint, int]] = []
    for cp in known:
        if not cp.finished:
            continue
        for e in entries:
            ident = (e.st.st_dev, e.st.st_ino)
            if ident != (cp.dev, cp.inode) or ident in taken or e.compressed or \
                    e.st.st_size <= cp.size:
                continue
            o = open_entry(e)
            if o is None:
                continue
            try:
                size = o.st.st_size
                if size > cp.size and identifies(cp, o.fd, o.st, o.generation()):
                    gaps.append(_gap(cp, e.path, size, max_n))
                    grown.append((cp, size))
            finally:
                os.close(o.fd)
            break
    return gaps, grown


def _gap(cp: Checkpoint, path: str, size: int, max_n: int) -> dict[str, Any]:
    unread = size - cp.size
    why = (f"while more than limits.maxGenerations={max_n} rotated generations were open"
           if cp.released_early else "after it had not grown for limits.rotateWait")
    return {"reason": "max-generations" if cp.released_early else "late-write", "path": path,
            "inode": cp.inode, "offset": cp.size, "unreadBytes": unread,
            "message": f"{path} (inode {cp.inode}) was released at offset {cp.size} {why}, "
                       f"and written to after that: those {unread} bytes were not read"}
