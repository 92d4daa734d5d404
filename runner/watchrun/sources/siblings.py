"""Find a file's generations among its rotated siblings (`app.log.1`, `app.log-20261201`, the
old targets of a swapped symlink) and plan what to read, oldest first. Runs in worker threads."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from watchrun.sources.compressed import (
    drained_or_empty,
    holds_begun,
    holds_whole,
    is_compressed,
)
from watchrun.sources.identity import (
    Archive,
    Checkpoint,
    holds,
    identifies,
    renumbered,
)
from watchrun.sources.opened import Opened, Plan, open_entry
from watchrun.sources.regular import open_regular, runners_own
from watchrun.sources.rotated import NO_FDS, Entry, scan

_DIGITS = re.compile(r"[0-9]+")

ARCHIVES_KEPT = 1024
"""At most this many judged archives are kept (the newest): one more is judged again."""

LISTED: Archive = (0, 0, 0, 0)
"""Among the siblings judged (no file has inode 0): they are every sibling of the last look
(`judged_kept`), so a plain one not among them, holding no generation known, came since,
whatever its mtime (a clock set back). Without it (a checkpoint of an older runner, which
judged only archives; more than ARCHIVES_KEPT siblings) the mtime tells: one modified before
the generation read last is older. An older runner drops it as a sibling no longer there."""


def identity(st: os.stat_result) -> Archive:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def judged_kept(judged: Collection[Archive], entries: list[Entry],
                taken: Collection[tuple[int, int]]) -> list[Archive]:
    """What a look that listed `entries` leaves judged: the siblings judged before (archives,
    lost lines or none; files beside the file when its watcher began) that are still among
    them, unchanged, and every other one it listed by a rotated name, but those `taken` (open,
    being read); with LISTED when all fit in ARCHIVES_KEPT. Those gone (logrotate's `rotate
    N` deleted them) or changed are forgotten."""
    there = {identity(e.st) for e in entries}
    listed = {identity(e.st) for e in entries if e.named and (e.st.st_dev, e.st.st_ino)
              not in taken}
    kept = sorted((a for a in listed.union(judged) if a in there), key=lambda a: (a[3], a[1]))
    return kept[-ARCHIVES_KEPT:] if len(kept) > ARCHIVES_KEPT else [LISTED, *kept]


def locate(cp: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]], *,
           copies_only: bool = False) -> Opened | None:
    """The checkpoint's generation among `entries`: by device and inode first (renamed), then
    by content among the rotated names (a copy made by copytruncate). Opened, reading set to
    start at its offset. One whose bytes do not read (EIO: a bad block) is not it (`refused`
    says so of the generation's own inode)."""
    same = [e for e in entries if (e.st.st_dev, e.st.st_ino) == (cp.dev, cp.inode)]
    others = [e for e in entries if e not in same and e.named and e.st.st_size >= cp.offset]
    others.sort(key=lambda e: -e.st.st_mtime_ns)  # the newest copy first
    for e in ([] if copies_only else same) + others:
        if e.compressed or (e.st.st_dev, e.st.st_ino) in taken:
            continue
        o = open_entry(e)
        if o is None:
            continue
        try:
            found = identifies(cp, o.fd, o.st, o.generation()) if e in same else holds(cp,
                                                                                      o.fd)
        except OSError as exc:
            if exc.errno in NO_FDS:
                os.close(o.fd)
                raise
            found = False
        if found and not is_compressed(o.fd):
            o.start, o.line_no, o.origin = cp.offset, cp.line_no, cp
            return o
        os.close(o.fd)
    return None


def renumbered_at(path: Path, cp: Checkpoint, cur: Opened) -> list[Entry] | None:
    """The siblings listed when the file at the path (`cur`) is the checkpointed generation
    under another device or inode number (`identity.renumbered`: a remount), None when it is
    not. Not when a file beside it is the generation under its own numbers (`identifies`; not
    a new file given its inode number since): that one was renamed, and the file at the path is
    a copy of it (read as a generation of its own, as before). Lists the siblings only when the
    numbers changed."""
    if not renumbered(cp, cur.fd, cur.st):
        return None
    entries = scan(path, [cp])
    found = locate(cp, [e for e in entries if (e.st.st_dev, e.st.st_ino) == (cp.dev, cp.inode)],
                   set())
    if found is not None:
        os.close(found.fd)
        return None
    return entries


def renumbered_note(wid: str, path: str, cp: Checkpoint, st: os.stat_result,
                    line_no: int) -> str:
    """What the log says of a start that found the checkpointed generation renumbered."""
    what = [f"{name} number ({now}, not {was})" for name, now, was in (
        ("device", st.st_dev, cp.dev), ("inode", st.st_ino, cp.inode)) if now != was]
    return (f"watcher {wid}: {path} has another {' and '.join(what)} than its checkpoint (a "
            f"remount?); its content is the same, so reading goes on at line {line_no}")


def refused(cp: Checkpoint, entries: list[Entry], unlisted: dict[str, OSError]
            ) -> dict[str, Any] | None:
    """The `error` record of a checkpointed generation not found because it could not be
    looked at: found by its inode but not opened (permissions) or not read (EIO: the bytes that
    tell it), or in a directory that could not be listed; with the bytes known unread (its
    size now, else the checkpoint's). None when it was looked for and is not there (opened and
    read now: renamed again meanwhile, looked for next; another file given its inode)."""
    where = os.path.dirname(cp.path)
    e = next((e for e in entries if (e.st.st_dev, e.st.st_ino) == (cp.dev, cp.inode)), None)
    if e is not None and runners_own(e.st) is not None:
        return None  # (its inode reused by a file the runner writes: no generation of this log)
    if e is not None:
        try:
            fd = open_regular(e.path)[0]
            try:
                holds(cp, fd)
            finally:
                os.close(fd)
            return None
        except OSError as exc:
            if exc.errno in NO_FDS:
                raise
            err, name, size = exc, e.path, e.st.st_size
    elif where in unlisted:
        err, name, size = unlisted[where], where, 0
    else:
        return None
    unread = max(cp.unread, size - cp.offset)
    what = "cannot read" if e is not None else "cannot list the directory"
    return {"code": errno.errorcode.get(err.errno or 0, "EIO"), "path": name,
            "inode": cp.inode, "offset": cp.offset, "lineNo": cp.line_no, "unread": True,
            "unreadBytes": unread,
            "message": f"{what} {name} (a generation of {cp.path}, inode {cp.inode}, rotated "
                       f"away): {err.strerror}; its lines from line {cp.line_no} (offset "
                       f"{cp.offset}) on were not read ({unread} bytes known)"}


def archived(cp: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]],
             judged: Collection[Archive]) -> Entry | None:
    """The archive holding exactly what was read of the checkpointed generation, which is
    gone: read to its end, then compressed (`compress`, `delaycompress`), renumbered or not."""
    return _archive_of(cp, entries, taken, judged, holds_whole)


def begun_archive(cp: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]],
                  judged: Collection[Archive]) -> Entry | None:
    """The archive (as `archived` looks for it) that holds what was read of the checkpointed
    generation and more, which is gone: compressed before it was read to its end. One that
    only begins alike (another generation of the same first bytes) is not it."""
    return _archive_of(cp, entries, taken, judged, holds_begun)


def _archive_of(cp: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]],
                judged: Collection[Archive], test: Callable[[int, Checkpoint], bool]
                ) -> Entry | None:
    """The first of `archives_of`, or None."""
    return next(archives_of(cp, entries, taken, judged, test), None)


def archives_of(cp: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]],
                judged: Collection[Archive], test: Callable[[int, Checkpoint], bool]
                ) -> Iterator[Entry]:
    """The archives (by their compressed names) made after the checkpoint, not taken or
    judged (by earlier looks: another generation's), whose content passes `test`."""
    for e in entries:
        if not (e.named and e.compressed) or (e.st.st_dev, e.st.st_ino) in taken or \
                e.st.st_mtime_ns < second(cp.mtime_ns) or identity(e.st) in judged:
            continue
        o = open_entry(e)
        if o is None:
            continue
        try:
            passed = test(o.fd, cp)
        finally:
            os.close(o.fd)
        if passed:
            yield e


def second(mtime_ns: int) -> int:
    """`mtime_ns` to the whole second: bzip2 gives its archive the mtime of the file it
    compressed to the second only, so its archive looked older than what it holds."""
    return mtime_ns - mtime_ns % 1_000_000_000


def _numbers(path: str) -> tuple[int, ...]:
    return tuple(int(d) for d in _DIGITS.findall(os.path.basename(path)))


def _oldest_first(found: list[Opened], before: str | None) -> None:
    """Sort by modification time; within one tick of the clock (rotations a few ms apart),
    by the numbers in the names, counting the way they count from `before` (the name of a
    generation older than all of them: `app.log.1` then `.2`, `.3`; or `.3` then `.2`, `.1`
    as RotatingFileHandler shifts them), then by inode."""
    ref = _numbers(before) if before is not None else None
    keys = [_numbers(o.path) for o in found]
    up = ref is None or sum(k > ref for k in keys) >= sum(k < ref for k in keys)
    rank = {id(o): i if up else -i for i, o in
            enumerate(sorted(found, key=lambda o: _numbers(o.path)))}
    found.sort(key=lambda o: (o.st.st_mtime_ns, rank[id(o)], o.st.st_ino))


def newer(entries: list[Entry], known: list[Checkpoint], after_ns: int,
          taken: set[tuple[int, int]], max_n: int, before: str | None = None, *,
          drained: Collection[Checkpoint] = (), judged: Collection[Archive] = (),
          rotated: bool = False) -> tuple[list[Opened], list[dict[str, Any]], list[Archive]]:
    """Generations rotated after `after_ns` that hold nothing already read, oldest first (by
    modification time, see `_oldest_first`), at most the newest `max_n`; gaps for skipped
    ones and for compressed ones, unless they hold what was read of one of the generations
    `drained` (read to their end, or still open) or hold nothing; and the compressed ones
    judged so. Those `judged` by an earlier look (by `identity`: renumbered since, maybe) are
    passed over. `rotated` (the generations rotated past the one read last): with every
    sibling of the last look judged (`LISTED`), a plain one that is not, nor a generation
    known by its inode (one still open, empty when it was read: nothing tells it by its
    bytes), is taken whatever its mtime (written after a clock was set back); an archive
    keeps the mtime of what it holds."""
    found: list[Opened] = []
    gaps: list[dict[str, Any]] = []
    now: list[Archive] = []
    listed = rotated and LISTED in judged
    inodes = {(cp.dev, cp.inode) for cp in known}
    try:
        for e in entries:
            at = (e.st.st_dev, e.st.st_ino)
            if not e.named or at in taken or identity(e.st) in judged or (
                    e.st.st_mtime_ns < (second(after_ns) if e.compressed else after_ns)
                    and (e.compressed or not listed or at in inodes)):
                continue
            o = open_entry(e)
            if e.compressed:  # (by name: the gap stands when it cannot be opened either)
                now.append(identity(e.st))
                if o is None or not drained_or_empty(o.fd, drained):
                    gaps.append({"reason": "compressed", "path": e.path, "inode": e.st.st_ino,
                                 "message": f"{e.path} was rotated and compressed before it "
                                            "was read"})
            elif o is None:
                continue
            elif any(holds(cp, o.fd) for cp in known):
                pass  # a generation (or a copy of one) read before
            elif is_compressed(o.fd):
                now.append(identity(e.st))
                if not drained_or_empty(o.fd, drained):
                    gaps.append({"reason": "compressed", "path": e.path, "inode": e.st.st_ino,
                                 "unreadBytes": o.st.st_size, "message": f"{e.path} is "
                                 "compressed; only plain files are read"})
            else:
                found.append(o)
                continue
            if o is not None:
                os.close(o.fd)
    except OSError:
        Plan(found).close()  # out of descriptors: the caller looks again later
        raise
    _oldest_first(found, before)
    if len(found) > max_n:
        skipped, found = found[: len(found) - max_n], found[len(found) - max_n :]
        size = sum(o.st.st_size for o in skipped)
        names = ", ".join(os.path.basename(o.path) for o in skipped)
        gaps.append({"reason": "max-generations", "unreadBytes": size,
                     "generations": len(skipped),
                     "message": f"{len(skipped)} older unread generations skipped "
                                f"(limits.maxGenerations={max_n}): {names}"})
        for o in skipped:
            os.close(o.fd)
    return found, gaps, now
