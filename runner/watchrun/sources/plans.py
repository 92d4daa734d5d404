"""Plan what to read of a followed file's generations, oldest first: on start from its
checkpoint, and when the followed generation leaves the path or is truncated. Runs in worker
threads; an OSError (out of descriptors) closes what it opened and propagates."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path

from watchrun.sources.announced import announce, copy_gone, missing_gap
from watchrun.sources.copies import (
    being_written,
    copied_past,
    copied_since,
    cut_short,
    emptied,
    finished,
    ident,
    overwritten,
    written_again,
)
from watchrun.sources.identity import (
    Archive,
    Checkpoint,
    identifies,
    other_generation,
    same_generation,
    same_head,
)
from watchrun.sources.opened import Opened, Plan, open_at_path
from watchrun.sources.released import regrown_gaps
from watchrun.sources.resume import Recorded
from watchrun.sources.rotated import Entry, scan
from watchrun.sources.siblings import (
    archived,
    begun_archive,
    identity,
    judged_kept,
    locate,
    newer,
    refused,
    renumbered_at,
)

SETTLE_TRIES = 5
"""A plan is made again when the path changed while it was made (at most this often)."""


def _at(path: Path) -> tuple[int, int] | None:
    try:
        return ident(os.stat(path))
    except OSError:
        return None


def _settled(path: Path, make: Callable[[], tuple[Plan, tuple[int, int] | None]]) -> Plan:
    """A plan made while the path kept pointing at the same file. The file at the path is
    opened before the siblings are listed: a rotation in between (a symlink swapped to a file
    created after that open, a rename) would list a generation newer than the file at the
    path among those read before it, and it would be read out of order, then again."""
    for _ in range(SETTLE_TRIES - 1):
        plan, at = make()
        if _at(path) == at:
            return plan
        plan.close()
    return make()[0]


def plan_start(path: Path, known: list[Checkpoint], max_n: int, recorded: Recorded,
               archives: Collection[Archive] = (),
               waiting: Collection[tuple[int, int]] = ()) -> Plan:
    """Resume from checkpointed generations (`known`, oldest first; the last is the one that
    was followed): the file at the path when it is still that one (or holds it under another
    device or inode number, as after a remount: `renumbered_at`); otherwise every generation
    since, found among the siblings, then the file at the path. The same inode at the path
    with other first bytes is a new file (a deleted file's inode reused at once, as ext4 does);
    with the same first bytes or inode generation number, the file was truncated or rewritten
    in place. `archives`: the siblings judged already (not judged again; `judged_kept`);
    `waiting`: those (device, inode) watched after their gap (passed over: `unsettled.py`)."""
    def make() -> tuple[Plan, tuple[int, int] | None]:
        cur = open_at_path(path)
        plan = _start_with(path, cur, known, max_n, recorded, archives, waiting)
        return plan, ident(cur.st) if cur is not None else None

    return _settled(path, make)


def _start_with(path: Path, cur: Opened | None, known: list[Checkpoint], max_n: int,
                recorded: Recorded, archives: Collection[Archive],
                waiting: Collection[tuple[int, int]]) -> Plan:
    try:
        return _plan_start(path, cur, known, max_n, recorded, archives, waiting)
    except OSError:
        if cur is not None:
            os.close(cur.fd)
        raise


def _plan_start(path: Path, cur: Opened | None, known: list[Checkpoint], max_n: int,
                recorded: Recorded, archives: Collection[Archive],
                waiting: Collection[tuple[int, int]]) -> Plan:
    last = known[-1]
    at_path = cur is not None and identifies(last, cur.fd, cur.st, cur.generation())
    listed = None if cur is None or at_path else renumbered_at(path, last, cur)
    at_path = at_path or listed is not None  # (remounted: the siblings listed are judged)
    again = cur is not None and at_path and written_again(path, last, cur)
    if cur is not None and at_path:
        cur.start, cur.line_no, cur.origin = last.offset, last.line_no, last
        if all(cp.finished for cp in known[:-1]) and not emptied(last, cur) and not again:
            judged = None if listed is None else judged_kept(archives, listed, [ident(cur.st)])
            return regrown_gaps(path, known, max_n, Plan(
                [cur], at_path=True, renumbered=listed is not None, archives=judged))
    # the followed file's inode is at the path, `rewritten` (truncated or rewritten in place)
    # when it kept its first bytes or its inode generation number says it is the same file
    # (a new file given its number, as that number shows, is neither)
    reused = (cur is not None and ident(cur.st) == (last.dev, last.inode)
              and not other_generation(last, cur.generation()))
    rewritten = (reused and cur is not None and not at_path and not last.deleted
                 and (same_head(last, cur.fd) or same_generation(last, cur.generation(), cur.born)))
    plan = Plan()
    try:
        entries = _gather(path, cur, known, max_n, recorded, at_path, rewritten, again, plan,
                          set(archives), waiting)
        regrown_gaps(path, known, max_n, plan, cur, entries=entries)
    except OSError:
        plan.close()
        raise
    truncated = at_path and cur is not None and cur.origin is None  # (a copy made since
    # says so: read from its start again)
    plan.renumbered = listed is not None and not truncated
    return announce(plan, cur, last, reused, rewritten or truncated, recorded)


def _judge(archive: Entry, taken: set[tuple[int, int]], judged: set[Archive]) -> None:
    """`archive` is accounted for: no generation to read, and judged (not named again)."""
    taken.add(ident(archive.st))
    judged.add(identity(archive.st))


def _gather(path: Path, cur: Opened | None, known: list[Checkpoint], max_n: int,
            recorded: Recorded, at_path: bool, rewritten: bool, again: bool, plan: Plan,
            judged: set[Archive], waiting: Collection[tuple[int, int]]) -> list[Entry]:
    """The checkpointed generations found again, gaps for the lost ones, then those rotated
    after the one followed (not yet the file at the path; or, `again` (`written_again`), the
    copies made of it since), and the archives judged (`judged`: by earlier looks; `waiting`
    passed over); returns the siblings listed."""
    last = known[-1]
    unlisted: dict[str, OSError] = {}
    entries = scan(path, known, unlisted)
    taken = {*waiting, *([ident(cur.st)] if cur is not None else [])}
    back = _read_before(cur, known[:-1]) if cur is not None and not at_path else None
    if cur is not None and back is not None:  # the path points back at a generation read
        cur.start, cur.line_no, cur.origin = back.offset, back.line_no, back  # before
    no_copy = False  # the followed generation, truncated, with no copy found
    for cp in known:
        if (cp.finished and cp is not last) or (cp is last and at_path) or cp is back:
            continue
        found = locate(cp, entries, taken)
        if found is not None:
            plan.steps.append(found)
            taken.add(ident(found.st))
        elif (whole := archived(cp, entries, taken, judged)) is not None:  # read to its end, then
            _judge(whole, taken, judged)  # compressed (or its copytruncate copy): nothing lost,
            # and the archive is no generation rotated since, now or renumbered later
        elif rewritten and cp is last:
            no_copy = True
        elif not cp.finished:
            if (error := refused(cp, entries, unlisted)) is not None:
                plan.errors.append(error)  # not gone: it could not be looked at (an
                plan.kept.append(cp)  # error at each start until it can; no newer one)
                taken.add((cp.dev, cp.inode))
            else:  # gone; or compressed with lines not read: one gap, the archive judged
                found_as = begun_archive(cp, entries, taken, judged)
                plan.gaps.append(missing_gap(cp, recorded.last(cp), found_as))
                if found_as is not None:
                    _judge(found_as, taken, judged)
    if not at_path:  # generations rotated after the one followed, before the file at the path
        before = plan.steps[-1].path if plan.steps else None
        fresh, gaps, now = newer(entries, known, _modified(last, plan), taken, max_n, before,
                                 drained=finished(known), judged=judged, rotated=True)
        if no_copy and (shown := overwritten(last, fresh)) is not None:  # its copy is gone
            plan.gaps.append(copy_gone(last, recorded.last(last), shown))
        plan.steps += fresh
        plan.gaps += gaps
        judged.update(now)
    elif cur is not None and emptied(last, cur):
        copied_since(cur, last, entries, known, taken, max_n, plan, judged)
    elif cur is not None and again:
        packed = copied_past(cur, last, entries, known, taken, max_n, plan, judged)
        if packed is not None:  # (the generation being read, compressed: where its loss began)
            archive, seen = packed
            plan.gaps = [missing_gap(last, recorded.last(last), archive, seen)
                         if g.get("path") == archive.path else g for g in plan.gaps]
    plan.archives = judged_kept(judged, entries, taken)
    return entries


def _modified(last: Checkpoint, plan: Plan) -> int:
    """When the generation followed was last seen modified; from a checkpoint that does not
    say (version 1), when it was found now (else 0: it is gone, and what rotation keeps
    beside the log came after it, as `rotate N` deletes the oldest first)."""
    return last.mtime_ns or next((o.st.st_mtime_ns for o in plan.steps if o.origin is last), 0)


def _copy_of(ended: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]],
             judged: set[Archive], plan: Plan) -> bool:
    """After a truncation: the copy of `ended` (read on from where it was read), or its
    archive holding exactly what was read (judged: nothing lost), or the copy cut short of
    that (all it holds was read); and the archives that may be the copy's but are still being
    written (`plan.waiting`: passed over now). False when none of these is there."""
    plan.copy = locate(ended, entries, taken, copies_only=True)
    if plan.copy is not None:
        taken.add(ident(plan.copy.st))
    elif (whole := archived(ended, entries, taken, judged)) is not None:
        _judge(whole, taken, judged)  # the copy, compressed before the runner looked: it
        return True  # holds what was read, nothing lost
    else:
        plan.cut = cut_short(ended, entries, taken)
        if plan.cut is not None:
            taken.add((plan.cut.dev, plan.cut.inode))
    if ended.fingerprint_len:
        plan.waiting = being_written(ended, entries, taken, judged)
        taken.update(ident(e.st) for e in plan.waiting)
    return plan.copy is not None or plan.cut is not None or bool(plan.waiting)


def _read_before(cur: Opened, known: list[Checkpoint]) -> Checkpoint | None:
    """The newest of the checkpointed generations that the file at the path is (its inode,
    still holding what was read of it): the path was pointed back at it (a symlink flipped
    back, a hard link), so it is read on from its checkpoint, not again from its start. (Not
    a file that was only beside it when the watcher began, `beside`: never read, it comes to
    the path as any other file does.)"""
    gen = cur.generation()
    return next((cp for cp in reversed(known)
                 if not cp.beside and identifies(cp, cur.fd, cur.st, gen)), None)


def plan_switch(path: Path, ended: Checkpoint, known: list[Checkpoint], max_n: int, *,
                truncated: bool, archives: Collection[Archive] = (),
                waiting: Collection[tuple[int, int]] = ()) -> Plan:
    """The followed generation `ended` left the path (or was truncated at `ended.offset`):
    find a copy of it (truncated), the generations rotated since, and the file at the path.
    `archives`: the siblings judged already (not judged again; `judged_kept`); `waiting`:
    those (device, inode) to be judged once they stop changing (passed over)."""
    def make() -> tuple[Plan, tuple[int, int] | None]:
        cur = open_at_path(path)
        at = ident(cur.st) if cur is not None else None
        plan = _switch_with(path, cur, ended, known, max_n, truncated, archives, waiting)
        return plan, at

    return _settled(path, make)


def _switch_with(path: Path, cur: Opened | None, ended: Checkpoint, known: list[Checkpoint],
                 max_n: int, truncated: bool, archives: Collection[Archive],
                 waiting: Collection[tuple[int, int]]) -> Plan:
    plan = Plan()
    try:
        entries = scan(path, [*known, ended])
        taken = {(ended.dev, ended.inode), *waiting} | (
            {ident(cur.st)} if cur is not None else set())
        judged = set(archives)
        continued = not truncated or _copy_of(ended, entries, taken, judged, plan)
        before = next((e.path for e in entries if ident(e.st) == (ended.dev, ended.inode)), None)
        # while running, every generation known is finished or still open (read to its end
        # yet), but for one truncated with no copy found: what it held past what was read
        # is lost (its copy's archive, compressed, holds exactly what was read or is a gap)
        cut = (ended.dev, ended.inode) if truncated and plan.copy is None else None
        drained = [cp for cp in [*known, ended] if (cp.dev, cp.inode) != cut]
        fresh, gaps, now = newer(entries, [*known, ended], ended.mtime_ns, taken, max_n,
                                 before, drained=drained, judged=judged, rotated=True)
        if not continued:
            plan.lost = overwritten(ended, fresh)
        plan.steps, plan.gaps = fresh, gaps
        plan.archives = judged_kept(judged.union(now), entries, taken)
        if not truncated:  # (the copies of a truncation never were at the path)
            plan.arrived = len(fresh) + sum(g.get("generations", 1) for g in gaps) + (
                cur is not None)
        regrown_gaps(path, [*known, ended], max_n, plan, cur, plan.copy, entries=entries)
        if cur is not None and not truncated:  # (a deleted file's inode may be reused at once)
            back = _read_before(cur, known)
            if back is not None:  # (the source goes on with it when it is still open)
                cur.start, cur.line_no, cur.origin = back.offset, back.line_no, back
            plan.steps.append(cur)
            plan.at_path = True
        elif cur is not None:
            os.close(cur.fd)
    except OSError:
        plan.close()
        if cur is not None and not plan.at_path:
            os.close(cur.fd)
        raise
    prev = ended.inode
    for o in plan.steps:
        o.announce = {"reason": "rename", "inode": o.st.st_ino, "oldInode": prev}
        prev = o.st.st_ino
    return plan
