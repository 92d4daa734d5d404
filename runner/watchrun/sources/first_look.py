"""A watcher's first look at its file, with no checkpoint yet: the files beside it then are
known from that moment on, so that no later look takes one of them, whatever its mtime, for a
copy made since (copytruncate) or a generation rotated since, and reads it from its first line.
Runs in a worker thread."""

from __future__ import annotations

import os
from pathlib import Path

from watchrun.preads import pread_full
from watchrun.sources.copies import ident
from watchrun.sources.identity import (
    FINGERPRINT_BYTES,
    Archive,
    Checkpoint,
    position,
    tail_before,
)
from watchrun.sources.opened import Opened, open_entry
from watchrun.sources.rotated import Entry, scan
from watchrun.sources.siblings import judged_kept


def first_look(path: Path, cur: Opened, kept: int) -> tuple[list[Checkpoint], list[Archive]]:
    """The siblings beside `path` (`rotated.scan`) when the watcher first opened `cur` there.

    The plain ones a later look could take for lines written since, oldest first, as finished
    generations checkpointed at their end (`beside`): each one modified no earlier than `cur`
    (the generation rotated away just before, written once more after `cur` was made or in
    the same tick of the file system's clock), or else the newest (that previous generation,
    which the application may write to until it reopens its file); at most `kept`, the
    newest. A later look passes over each while it holds what it held then (its first bytes
    and those before that end): written to after, it is still no copy; made anew or copied
    over, it is one. Every sibling is judged too (passed over while unchanged,
    `siblings.identity`; `judged_kept`: with LISTED, a plain one not among them later came
    since, whatever its mtime): the archives a later look could take for archives made since
    (no `gap` is due for them), the plain ones beyond the `kept` newest and the older ones.
    An empty sibling is not kept: it holds nothing to know it by, and what it gets later was
    written since. OSError: out of descriptors (nothing is left open)."""
    mtime = cur.st.st_mtime_ns
    entries = [e for e in scan(path, []) if e.named and ident(e.st) != ident(cur.st)]
    plain = sorted((e for e in entries if not e.compressed and e.st.st_size),
                   key=lambda e: (e.st.st_mtime_ns, e.st.st_ino))
    chosen = [e for e in plain if e.st.st_mtime_ns >= mtime] or plain[-1:]
    known = [cp for e in chosen[-kept:] if (cp := _at_end(e)) is not None]
    return known, judged_kept((), entries, ())


def _at_end(e: Entry) -> Checkpoint | None:
    """`e`'s checkpoint at its size, finished, its line there not counted (a file as big as
    the log is not read at a start for a number that is never used: `Checkpoint.beside`);
    None when it cannot be opened (or is no longer the file listed: a later look judges what
    is there then)."""
    o = open_entry(e)
    if o is None:
        return None
    try:
        size = o.st.st_size
        return position(o.st.st_dev, o.st.st_ino, o.st.st_mtime_ns,
                        pread_full(o.fd, FINGERPRINT_BYTES, 0), tail_before(o.fd, size), size,
                        1, e.path, finished=True, inode_gen=o.generation(), beside=True)
    finally:
        os.close(o.fd)
