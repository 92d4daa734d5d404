"""Copytruncate's copies among a file's siblings that the file at the path does not tell of:
the copies made while the runner was away from a file checkpointed empty, or from one written
the same first bytes again after its truncation, and a copy that ends before where the runner
had read."""

from __future__ import annotations

import os
from pathlib import Path

from watchrun.preads import pread_full
from watchrun.sources.compressed import WHOLE_MAX, content_at, holds_begun, unsettled
from watchrun.sources.identity import (
    FINGERPRINT_BYTES,
    Archive,
    Checkpoint,
    birth_ns,
    holds,
    position,
    same_head,
    tail_before,
)
from watchrun.sources.opened import Opened, Plan, open_entry
from watchrun.sources.rotated import Entry
from watchrun.sources.siblings import archives_of, identity, newer


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
    written meanwhile: the oldest continues it, the file at the path is truncated since;
    unless the file goes on from each of them alike (snapshots: `_went_on_otherwise`, which a
    banner written again after every truncation does not fool). The archives judged by an
    earlier look are passed over; those judged now join `judged`."""
    fresh, gaps, now = newer(entries, known, last.mtime_ns, taken, max_n,
                             drained=finished(known), judged=judged)
    Plan([o for o in fresh if not o.st.st_size]).close()  # copies of it still empty: nothing
    fresh = [o for o in fresh if o.st.st_size]  # to read, and no sign it was emptied again
    if fresh and not _went_on_otherwise(cur, last.offset, [
            pread_full(o.fd, AHEAD, last.offset) for o in fresh]):  # snapshots (backups) the
        Plan(fresh).close()  # file goes on from alike: not truncated since
        return  # (its gaps are not written: the archives they name are not judged yet)
    plan.gaps += gaps
    judged.update(now)
    if fresh:
        if not any(g["reason"] == "max-generations" for g in gaps):  # (else that one is lost)
            fresh[0].start, fresh[0].line_no, fresh[0].origin = last.offset, last.line_no, last
        cur.start, cur.line_no, cur.origin = 0, 1, None
        plan.steps += fresh


def written_again(path: Path, last: Checkpoint, cur: Opened) -> bool:
    """The followed file is at the path holding what was read, modified since, and a file was
    made or renamed beside it since (its directory, or its real one through a symlink,
    modified): what a copytruncate while the runner was away looks like when the file was
    written the same bytes again as far as the offset (a banner after each truncation). A stat
    of each directory; only then are the siblings listed (`copied_past`)."""
    if not last.fingerprint_len or cur.st.st_mtime_ns == last.mtime_ns:
        return False
    for where in {path.parent, Path(last.path).parent}:
        try:
            if os.stat(where).st_mtime_ns >= last.mtime_ns:
                return True
        except OSError:
            continue
    return False


def copied_past(cur: Opened, last: Checkpoint, entries: list[Entry], known: list[Checkpoint],
                taken: set[tuple[int, int]], max_n: int, plan: Plan,
                judged: set[Archive]) -> tuple[Entry, int] | None:
    """`written_again`: copies made since (born after the checkpoint, where the file system
    tells) that hold what was read and more, one of them going on past the offset otherwise
    than the file at the path does, say the file was copied and truncated, then written the
    same first bytes again. The oldest copy is the one it continued into: read on from the
    offset (compressed: a gap, its archive returned with the bytes seen past the offset); the
    later ones from their start, as generations rotated since; the file at the path from its
    start. No such copy (none, or snapshots the file goes on alike from): nothing changes but
    for an archive that begins as the file and cannot be decompressed past the offset (still
    being written): it may be the copy, and is a gap (the fail-closed side)."""
    fresh, gaps, now = newer(entries, known[:-1], last.mtime_ns, taken, max_n,
                             drained=finished(known), judged=judged)
    packed, unknown = _packed_copies(last, [e for e in entries
                                            if any(g.get("path") == e.path for g in gaps)])
    copies = sorted([*_plain_copies(last, fresh), *packed],
                    key=lambda c: c[0])  # (made in one tick of the file clock: the older
    # content first, as an archive keeps the mtime of the file it compressed)
    if not _went_on_otherwise(cur, last.offset, [past for _, _, past in copies]):
        Plan(fresh).close()
        plan.gaps += [g for g in gaps if g.get("path") in {e.path for e in unknown}]
        judged.update(identity(e.st) for e in unknown)
        return None
    plan.gaps += gaps
    judged.update(now)
    cur.start, cur.line_no, cur.origin = 0, 1, None
    plan.steps += fresh
    _, ours, past = copies[0]
    if isinstance(ours, Entry):
        return ours, len(past)
    if not any(g["reason"] == "max-generations" for g in gaps):  # (else ours was skipped)
        ours.start, ours.line_no, ours.origin = last.offset, last.line_no, last
    return None


AHEAD = 64 * 1024
"""Bytes past the offset compared between a copy and the file at the path (more than the
output an application writes alike after its banner at each start)."""


def _went_on_otherwise(cur: Opened, offset: int, pasts: list[bytes]) -> bool:
    """Some copy goes on past the offset (`pasts`: its next AHEAD bytes) otherwise than the
    file at the path does: the file was truncated since the copy was made, and maybe written
    the same first bytes again. None does: the copies are snapshots of it (backups)."""
    return any(past != pread_full(cur.fd, len(past), offset) for past in pasts)


def _born_since(fd: int, st: os.stat_result, last: Checkpoint) -> int | None:
    """When the file was made (its mtime where the file system does not tell), if after the
    checkpoint: a generation made before it that was written since is no copy."""
    born = birth_ns(fd)
    made = st.st_mtime_ns if born is None else born
    return made if made >= last.mtime_ns else None


_Copy = tuple[tuple[int, int], "Opened | Entry", bytes]
"""A copy: when it was made and its mtime (the order of copies), it, its bytes past the
offset."""


def _plain_copies(last: Checkpoint, fresh: list[Opened]) -> list[_Copy]:
    return [((born, o.st.st_mtime_ns), o, pread_full(o.fd, AHEAD, last.offset)) for o in fresh
            if o.st.st_size > last.offset and holds(last, o.fd)
            and (born := _born_since(o.fd, o.st, last)) is not None]


def _packed_copies(last: Checkpoint, archives: list[Entry]
                   ) -> tuple[list[_Copy], list[Entry]]:
    """The archives that are copies, and those that begin as the file but cannot be
    decompressed past the offset (cut short: being written; or read further than WHOLE_MAX)."""
    found: list[_Copy] = []
    unknown: list[Entry] = []
    for e in archives:
        o = open_entry(e)
        if o is None:
            continue
        try:
            born = _born_since(o.fd, o.st, last)
            if born is None or not holds_begun(o.fd, last):
                continue
            past = content_at(o.fd, last.offset, AHEAD) if last.offset <= WHOLE_MAX else None
            if past:
                found.append(((born, o.st.st_mtime_ns), e, past))
            elif past is None:
                unknown.append(e)
        finally:
            os.close(o.fd)
    return found, unknown


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
                                pread_full(o.fd, FINGERPRINT_BYTES, 0), tail_before(o.fd, size),
                                size, ended.line_no, e.path, size=size, finished=True,
                                inode_gen=o.generation())
        finally:
            os.close(o.fd)
    return None


def being_written(ended: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]],
                  judged: set[Archive]) -> list[Entry]:
    """The archives made since the truncated generation's checkpoint that may be its copy's
    but cannot be told whole yet (`compressed.unsettled`: its compressor still writing it, as
    logrotate's `compress` does right after the truncation). Judged at once, such an archive
    was a false `gap`, and once whole it was another archive (its size and mtime changed),
    judged again: a second one."""
    return list(archives_of(ended, entries, taken, judged, unsettled))


def overwritten(cp: Checkpoint, fresh: list[Opened]) -> str | None:
    """The followed generation was truncated and no copy holds what was read of it: the name
    of one of `fresh` (generations written since its checkpoint that hold none read: made
    since, or a name copied over since, as `cp` does, which keeps its inode and birth time)
    that does not begin as it did, if any. copytruncate is in use, and what was copied after
    that copy is no copy of it: the copy that went on from what was read was overwritten or
    deleted (`rotate N` with more truncations than N between two looks). An empty one is no
    sign of it (a copy of the file while it was empty)."""
    if not cp.fingerprint_len:
        return None
    return next((o.path for o in fresh if o.st.st_size and not same_head(cp, o.fd)), None)


def finished(known: list[Checkpoint]) -> list[Checkpoint]:
    """Generations read to their end, at a start (none is open yet)."""
    return [cp for cp in known if cp.finished]
