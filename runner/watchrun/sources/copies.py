"""Copytruncate's copies among a file's siblings, where no copy holds the checkpoint's offset:
the copies made while the runner was away from a file checkpointed empty, and a copy that ends
before where the runner had read."""

from __future__ import annotations

import os

from watchrun.sources.identity import (
    FINGERPRINT_BYTES,
    Archive,
    Checkpoint,
    position,
    same_head,
    tail_before,
)
from watchrun.sources.rotated import Entry
from watchrun.sources.siblings import Opened, Plan, newer, open_entry


def ident(st: os.stat_result) -> tuple[int, int]:
    """A file's identity: its device and inode."""
    return st.st_dev, st.st_ino


def emptied(last: Checkpoint, cur: Opened) -> bool:
    """The followed file is at the path, checkpointed while it was empty (just after a
    truncation: nothing to recognise it by), and modified since: it may have been copied and
    truncated meanwhile. (Unmodified, it was not: no siblings are listed, which a restart of
    many watchers on empty files would pay for each.)"""
    return not last.fingerprint_len and cur.st.st_mtime_ns != last.mtime_ns


def copied_since(cur: Opened, last: Checkpoint, entries: list[Entry], known: list[Checkpoint],
                 taken: set[tuple[int, int]], max_n: int, plan: Plan,
                 judged: set[Archive]) -> None:
    """The followed file is at the path, but its checkpoint was taken while it was empty (just
    after a truncation): nothing tells whether it was truncated again since. Copies made after
    that checkpoint (copytruncate while the runner was frozen or down) hold what it was
    written meanwhile: the oldest continues it, the file at the path is truncated since.
    The archives judged by an earlier look are passed over; those judged now join `judged`."""
    fresh, gaps, now = newer(entries, known, last.mtime_ns, taken, max_n,
                             drained=finished(known), judged=judged)
    Plan([o for o in fresh if not o.st.st_size]).close()  # copies of it still empty: nothing
    fresh = [o for o in fresh if o.st.st_size]  # to read, and no sign it was emptied again
    if fresh and _begins_alike(fresh[-1], cur):  # a snapshot (a backup), not truncated since
        Plan(fresh).close()
        return  # (its gaps are not written: the archives they name are not judged yet)
    plan.gaps += gaps
    judged.update(now)
    if fresh:
        if not any(g["reason"] == "max-generations" for g in gaps):  # (else that one is lost)
            fresh[0].start, fresh[0].line_no, fresh[0].origin = last.offset, last.line_no, last
        cur.start, cur.line_no, cur.origin = 0, 1, None
        plan.steps += fresh


def cut_short(ended: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]]
              ) -> Checkpoint | None:
    """The copy of a truncated generation that ends before where it was read (copytruncate's
    copy raced the writer, and a concurrent copy sees a write in part): modified since the
    checkpoint, shorter than its offset, beginning with its first bytes. All it holds was
    read: its checkpoint is returned finished, to be known from then on, so that neither this
    search nor a later one (the emptied file's next write looks for copies again, and the
    copy's last write may share the truncation's clock tick) takes it for a newer generation
    and reads it again from its first line."""
    for e in sorted(entries, key=lambda e: -e.st.st_mtime_ns):  # the newest: this truncation's
        if ident(e.st) in taken or e.compressed or not e.named or \
                e.st.st_mtime_ns < ended.mtime_ns or \
                not ended.fingerprint_len <= e.st.st_size < ended.offset:
            continue
        o = open_entry(e)
        if o is None:
            continue
        try:
            if same_head(ended, o.fd):
                size = o.st.st_size  # (its line number there is not counted: it is finished)
                return position(o.st.st_dev, o.st.st_ino, o.st.st_mtime_ns,
                                os.pread(o.fd, FINGERPRINT_BYTES, 0), tail_before(o.fd, size),
                                size, ended.line_no, e.path, size=size, finished=True,
                                inode_gen=o.generation())
        finally:
            os.close(o.fd)
    return None


def _begins_alike(copy: Opened, cur: Opened) -> bool:
    n = min(FINGERPRINT_BYTES, copy.st.st_size)
    return n > 0 and os.pread(copy.fd, n, 0) == os.pread(cur.fd, n, 0)


def finished(known: list[Checkpoint]) -> list[Checkpoint]:
    """Generations read to their end, at a start (none is open yet)."""
    return [cp for cp in known if cp.finished]
