"""Generations released (early under limits.maxGenerations, or idle for rotateWait; or never
read: beside the file when its watcher began) found again grown: what was written to them after
the release was not read, and a `gap` record counts it (only what they grew by)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from watchrun.sources.copies import ident
from watchrun.sources.identity import Checkpoint, identifies
from watchrun.sources.opened import Opened, Plan, open_entry
from watchrun.sources.rotated import Entry, scan


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
    was = (f"was beside the file when the watcher began (not read: a new watcher follows the "
           f"file from its end), {cp.size} bytes long," if cp.beside else
           f"was released at offset {cp.size} {why},")
    return {"reason": "max-generations" if cp.released_early else "late-write", "path": path,
            "inode": cp.inode, "offset": cp.size, "unreadBytes": unread,
            "message": f"{path} (inode {cp.inode}) {was} and written to after that: those "
                       f"{unread} bytes were not read"}


def regrown_gaps(path: Path, known: list[Checkpoint], max_n: int, plan: Plan,
                 *also: Opened | None, entries: list[Entry] | None = None) -> Plan:
    """The gaps of generations released (early, or idle for rotateWait) found grown, unless
    this plan reads them on (`also`: the file at the path, a copy). Without a listing made
    already, the siblings are listed only when one was released early or one is found grown
    where it was released (a stat each: `_grew`)."""
    if entries is not None or any(cp.released_early or _grew(cp) for cp in known):
        found = scan(path, known) if entries is None else entries
        read = {ident(o.st) for o in [*plan.steps, *also] if o is not None}
        gaps, plan.grown = regrown(found, known, read, max_n)
        plan.gaps += gaps
    return plan


def _grew(cp: Checkpoint) -> bool:
    """A generation released (finished) is still where it was and bigger than what was read."""
    if not cp.finished or cp.deleted:
        return False
    try:
        st = os.stat(cp.path)
    except OSError:
        return False
    return ident(st) == (cp.dev, cp.inode) and st.st_size > cp.size
