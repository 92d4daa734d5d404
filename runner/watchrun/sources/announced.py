"""The records a plan of a followed file writes about its generations: the `gap` of one lost
(gone, or compressed before it was read to its end) and the `rotate` record before each
generation not read before."""

from __future__ import annotations

from typing import Any

from watchrun.output.recorded import Mark
from watchrun.sources.identity import Checkpoint
from watchrun.sources.opened import Opened, Plan
from watchrun.sources.resume import Recorded
from watchrun.sources.rotated import Entry


def missing_gap(cp: Checkpoint, recorded: Mark | None = None,
                archive: Entry | None = None, seen: int = 0) -> dict[str, Any]:
    """A generation that was being read and is gone (deleted, or its inode taken by a new
    file), or found as `archive` (compressed, beginning as it did; `seen`: bytes of it known
    past the checkpoint): read up to its checkpoint, or past the last line recorded from it
    after that."""
    offset, line_no = _after(cp, recorded)
    unread = max(0, cp.size - offset, cp.offset + seen - offset)
    if archive is not None:
        return {"reason": "compressed", "path": archive.path, "inode": archive.st.st_ino,
                "offset": offset, "lineNo": line_no, "unreadBytes": unread,
                "message": f"{archive.path} is the generation being read (inode {cp.inode}), "
                           "rotated and compressed before it was read to its end: from line "
                           f"{line_no} (offset {offset}) on it was not read"
                           + (f" ({unread} bytes known)" if unread else "")}
    return {"reason": "missing", "path": cp.path, "inode": cp.inode, "offset": offset,
            "lineNo": line_no, "unreadBytes": unread,
            "message": f"the generation being read (inode {cp.inode}) is gone from line "
                       f"{line_no} (offset {offset}) on: {unread} bytes of it seen then were "
                       "not read, nor what was written to it after the runner last looked, nor "
                       "any generation created and deleted while the runner was not looking"}


def copy_gone(cp: Checkpoint, recorded: Mark | None, made: str) -> dict[str, Any]:
    """The generation being read was truncated, and the copy that held what followed what
    was read is gone (`copies.overwritten`: `made`, a copy written later, is no copy of it: its
    `laterCopy`, which the once report's hint tells from a log deleted). Its `unreadBytes` is 0,
    not known: what it held past that, if anything, was never seen (the bytes seen are the
    truncation's `rotate` record's)."""
    offset, line_no = _after(cp, recorded)
    return {"reason": "missing", "path": cp.path, "inode": cp.inode, "offset": offset,
            "lineNo": line_no, "unreadBytes": 0, "laterCopy": made,
            "message": f"the generation being read (inode {cp.inode}) was truncated, and no "
                       f"copy of it holds its lines from line {line_no} (offset {offset}) on: "
                       f"{made}, written since, does not begin as it did, so it was copied and "
                       "truncated again and the copy that went on from there was overwritten "
                       "or deleted (more truncations than copies kept, logrotate's `rotate`); "
                       "what it held past there, if anything, was not read"}


def _after(cp: Checkpoint, recorded: Mark | None) -> tuple[int, int]:
    """The offset and line number from which the generation `cp` is not known read: its
    checkpoint, or past the last line recorded from it after that (before a crash)."""
    offset, line_no = cp.offset, cp.line_no
    if recorded is not None and recorded.offset >= offset:
        offset = recorded.offset + len(recorded.line.encode("utf-8", "replace")) + 1
        line_no = max(line_no, recorded.line_no + 1)
    return offset, line_no


def announce(plan: Plan, cur: Opened | None, last: Checkpoint, reused: bool,
              rewritten: bool, recorded: Recorded) -> Plan:
    """The file at the path last, and the `rotate` record before each generation not read
    before: truncate (the same file, or its copy found), recreate, or rename."""
    if cur is not None:
        plan.steps.append(cur)
        plan.at_path = True
    copy = next((s for s in plan.steps if s.origin is last), None)
    prev = last.inode
    for o in plan.steps:
        if o is cur and o.origin is not None and o.origin is not last:  # back at one read
            o.announce = {"reason": "rename", "inode": o.st.st_ino, "oldInode": prev}
        elif o.origin is None:
            reason = "rename"
            if o is cur and (rewritten or (reused and copy is not None)):
                reason = "truncate"  # (copytruncate while the runner was down)
            elif o is cur and copy is None:
                reason = "recreate"
            o.announce = {"reason": reason, "inode": o.st.st_ino, "oldInode": prev}
            if reason == "truncate":
                read_to = last.offset if copy is None else copy.st.st_size
                mark = recorded.last(last) if copy is None else None
                if mark is not None:  # recorded past the checkpoint before a crash
                    read_to = max(read_to, missing_gap(last, mark)["offset"])
                unread = max(0, last.size - read_to)
                o.announce |= {"oldSize": last.size, "unreadBytes": unread}
        prev = o.st.st_ino
    return plan
