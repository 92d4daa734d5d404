"""Archives seen cut short when the followed file was truncated (logrotate's `copytruncate` +
`compress`, the compressor still writing the copy's archive): not judged then, but once they
have not changed for rotateWait (as a rotated file is released once idle that long), once each;
one still cut short then is watched on, so that its compressor finishing later is no new loss
(across a restart too: the checkpoint keeps it, `FileState.watched`)."""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any, Literal

from msgspec import Struct
from msgspec.structs import replace

from watchrun.sources.checkpoint_doc import Watched
from watchrun.sources.compressed import drained_or_empty, holds_whole, unsettled
from watchrun.sources.identity import Archive, Checkpoint
from watchrun.sources.opened import open_entry
from watchrun.sources.rotated import NO_FDS, Entry
from watchrun.sources.siblings import identity

WATCHED_KEPT = 64
"""At most this many archives are watched after their gap (the newest): an older one is
dropped from watching, said in the log; completed later, it is judged as any archive."""


class Waiting(Struct, frozen=True):
    """An archive seen cut short at the truncation of `owner`, not judged yet."""

    path: str
    seen: Archive
    """Its device, inode, size and mtime when last looked at (they change while it grows)."""
    since: float
    """When it was last seen changed (the source's monotonic clock)."""
    owner: Checkpoint
    """The truncated generation as far as it was read: an archive that holds exactly that is
    its copy, compressed, and nothing is lost."""
    said: Archive | None = None
    """Its identity when its `gap` was written, still cut short (or when looked at since, cut
    short still): its compressor may only have paused longer than rotateWait. Passed over by
    every look while it is watched; not said lost again."""


def waiting(entries: list[Entry], owner: Checkpoint, now: float) -> list[Waiting]:
    return [Waiting(e.path, identity(e.st), now, owner) for e in entries]


def watched(items: list[Waiting]) -> tuple[Watched, ...]:
    """What the checkpoint keeps of them: those watched after their gap."""
    return tuple(Watched(w.path, w.said, w.owner) for w in items if w.said is not None)


def restored(kept: tuple[Watched, ...], now: float, wait: float) -> list[Waiting]:
    """The archives a checkpoint keeps watched, looked at by the start's first look (as if
    unchanged for `wait` already: one completed while the runner was stopped is judged once
    it has not changed for `wait` from then on)."""
    return [Waiting(w.path, w.said, now - wait, w.owner, w.said) for w in kept]


def settle(items: list[Waiting], known: Collection[Checkpoint], now: float, wait: float, *,
           final: bool = False
           ) -> tuple[list[Waiting], list[dict[str, Any]], list[Archive], list[str]]:
    """In a worker thread: each archive unchanged for `wait` seconds (each, when `final`: the
    source stops) is judged, once: no loss when it holds exactly what was read of its owner,
    or what was read of another generation `known` (read to its end, or still open, so read
    to its end yet: a copy found and read), or nothing; else a `gap{compressed}`, as for an
    archive judged at once — so is one gone before it was whole, and one still cut short
    then, which is watched on (`Waiting.said`; still when `final`, to be kept in the
    checkpoint; WATCHED_KEPT at most): completed since, it is judged again, no gap either way,
    a note when it holds what was read after all. Returns those still waiting, the gaps, the
    archives judged (passed over from then on) and the notes for the log."""
    still: list[Waiting] = []
    gaps: list[dict[str, Any]] = []
    judged: list[Archive] = []
    notes: list[str] = []
    for w in items:
        e = _found(w)
        if e is not None and not final and identity(e.st) != w.seen:
            still.append(replace(w, path=e.path, seen=identity(e.st), since=now))  # (growing)
            continue
        if e is not None and not final and now - w.since < wait:
            still.append(w)
            continue
        if e is None or identity(e.st) == w.said:  # (gone, or unchanged since said lost)
            if w.said is None:
                gaps.append(_gap(w.path, w.seen[1], "was gone before it could be read whole"))
            elif e is not None:
                still.append(replace(w, path=e.path, since=now))
            continue
        judged.append(identity(e.st))
        others = [cp for cp in known if (cp.dev, cp.inode) != (w.owner.dev, w.owner.inode)]
        found = _judge(e, w.owner, others)
        if found == "short":
            still.append(replace(w, path=e.path, seen=identity(e.st), since=now,
                                 said=identity(e.st)))
        if w.said is None and found != "whole":
            gaps.append(_gap(e.path, e.st.st_ino, "was rotated and compressed before it was read"))
        elif w.said is not None and found == "whole":
            notes.append(f"{e.path} (inode {e.st.st_ino}), said lost by a gap{{compressed}} "
                         f"when it was still cut short after limits.rotateWait, was completed "
                         f"since and holds every line read of {w.owner.path} (inode "
                         f"{w.owner.inode}): nothing of it was lost (its compressor paused "
                         "longer than rotateWait; a longer one waits for it)")
    return _bounded(still, notes), gaps, judged, notes


def _bounded(items: list[Waiting], notes: list[str]) -> list[Waiting]:
    """`items` but the oldest watched past WATCHED_KEPT, said in `notes`."""
    said = [w for w in items if w.said is not None]
    if len(said) <= WATCHED_KEPT:
        return items
    dropped = {id(w) for w in said[: len(said) - WATCHED_KEPT]}
    notes.append(f"{len(dropped)} archive(s) said lost while cut short, the oldest of "
                 f"{len(said)}, {said[0].path} first, are no longer watched (at most "
                 f"{WATCHED_KEPT} are): one completed later is judged as any archive, and a "
                 "second gap{compressed} for it is possible")
    return [w for w in items if id(w) not in dropped]


def _judge(e: Entry, owner: Checkpoint, others: list[Checkpoint]
           ) -> Literal["whole", "short", "lost"]:
    """`whole`: the archive holds exactly what was read of its owner, or what was read of one
    of the others, or nothing; `short`: not, and cut short (its compressor may still finish
    it); `lost`: neither (or it cannot be opened)."""
    o = open_entry(e)
    if o is None:
        return "lost"
    try:
        if holds_whole(o.fd, owner) or drained_or_empty(o.fd, others):
            return "whole"
        return "short" if unsettled(o.fd, owner) else "lost"
    finally:
        os.close(o.fd)


def _found(w: Waiting) -> Entry | None:
    """The archive where it was, or renamed beside it since (logrotate's renumbering keeps
    its inode); None when it is gone (or cannot be looked at: not known whole either)."""
    dev, ino = w.seen[:2]
    try:
        st = os.stat(w.path, follow_symlinks=False)
        if (st.st_dev, st.st_ino) == (dev, ino):
            return Entry(w.path, st, True)
    except OSError as exc:
        if exc.errno in NO_FDS:
            raise
    try:
        with os.scandir(os.path.dirname(w.path)) as listing:
            for d in listing:
                if d.inode() == ino and d.is_file(follow_symlinks=False):
                    st = d.stat(follow_symlinks=False)
                    if st.st_dev == dev:
                        return Entry(d.path, st, True)
    except OSError as exc:
        if exc.errno in NO_FDS:
            raise
    return None


def _gap(path: str, inode: int, what: str) -> dict[str, Any]:
    return {"reason": "compressed", "path": path, "inode": inode, "message": f"{path} {what}"}
