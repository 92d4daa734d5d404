"""Find a file's generations among its rotated siblings (`app.log.1`, `app.log-20261201`, the
old targets of a swapped symlink) and plan what to read, oldest first. Runs in worker threads."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchrun.sources.generation import open_regular
from watchrun.sources.identity import Checkpoint, holds, identifies

COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".z", ".zip", ".br", ".7z")
_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd", b"\x04\x22\x4d\x18", b"PK\x03")
_DIGITS = re.compile(r"[0-9]+")
_MISSING = (errno.ENOENT, errno.ENOTDIR)


@dataclass(slots=True)
class Opened:
    """A generation opened for reading, and where reading it starts."""

    fd: int
    st: os.stat_result
    path: str
    start: int = 0
    line_no: int = 1
    origin: Checkpoint | None = None
    """The checkpoint it continues (the generation itself, or a copy of it)."""
    announce: dict[str, Any] | None = None
    """The `rotate` record written before its first line."""


@dataclass(slots=True)
class Plan:
    steps: list[Opened] = field(default_factory=list)
    """Generations to read, oldest first; with `at_path`, the last one is the file at the path."""
    gaps: list[dict[str, Any]] = field(default_factory=list)
    at_path: bool = False
    copy: Opened | None = None
    """After a truncation: a copy holding the truncated generation (copytruncate)."""

    def close(self) -> None:
        for o in [*self.steps, *([self.copy] if self.copy else [])]:
            with contextlib.suppress(OSError):
                os.close(o.fd)


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    st: os.stat_result
    compressed: bool


def open_at_path(path: Path) -> Opened | None:
    """The file at the path, or None when it is missing."""
    try:
        fd, st = open_regular(path)
    except OSError as exc:
        if exc.errno in _MISSING:
            return None
        raise
    return Opened(fd, st, str(path))


def _mask(name: str) -> str:
    return _DIGITS.sub("#", name)


def scan(path: Path, known: list[Checkpoint]) -> list[Entry]:
    """Regular files (symlinks are not followed) beside the path whose names start with the
    path's name, or, for the targets of a symlinked path, that only differ from a target's
    name in their digits (`app-0001.log` → `app-0002.log`). The path itself is not one."""
    rules: dict[str, set[tuple[str, bool]]] = {str(path.parent): {(path.name, False)}}
    targets = [Path(cp.path) for cp in known]
    with contextlib.suppress(OSError):
        if path.is_symlink():
            targets.append(Path(os.path.realpath(path)))
    for t in targets:
        if t != path:
            rules.setdefault(str(t.parent), set()).add((t.name, True))
    found: list[Entry] = []
    for directory, bases in rules.items():
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for e in entries:
            if e.path == str(path) or not any(
                e.name != b and (e.name.startswith(b) or (masked and _mask(e.name) == _mask(b)))
                for b, masked in bases
            ):
                continue
            try:
                if not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append(Entry(e.path, st, e.name.lower().endswith(COMPRESSED)))
    return found


def _open_entry(e: Entry) -> Opened | None:
    try:
        fd, st = open_regular(e.path)
    except OSError:
        return None
    if (st.st_dev, st.st_ino) != (e.st.st_dev, e.st.st_ino):
        os.close(fd)  # renamed again meanwhile: the next look finds it
        return None
    return Opened(fd, st, e.path)


def locate(cp: Checkpoint, entries: list[Entry], taken: set[tuple[int, int]], *,
           copies_only: bool = False) -> Opened | None:
    """The checkpoint's generation among `entries`: by device and inode first (renamed), then
    by content (a copy made by copytruncate). Opened, reading set to start at its offset."""
    same = [e for e in entries if (e.st.st_dev, e.st.st_ino) == (cp.dev, cp.inode)]
    others = [e for e in entries if e not in same and e.st.st_size >= cp.offset]
    others.sort(key=lambda e: -e.st.st_mtime_ns)  # the newest copy first
    for e in ([] if copies_only else same) + others:
        if e.compressed or (e.st.st_dev, e.st.st_ino) in taken:
            continue
        o = _open_entry(e)
        if o is None:
            continue
        if (identifies if e in same else holds)(cp, o.fd, o.st) and not _is_compressed(o.fd):
            o.start, o.line_no, o.origin = cp.offset, cp.line_no, cp
            return o
        os.close(o.fd)
    return None


def _is_compressed(fd: int) -> bool:
    return os.pread(fd, 4, 0).startswith(_MAGIC)


def newer(entries: list[Entry], known: list[Checkpoint], after_ns: int,
          taken: set[tuple[int, int]], max_n: int) -> tuple[list[Opened], list[dict[str, Any]]]:
    """Generations rotated after `after_ns` that hold nothing already read, oldest first (by
    modification time), at most the newest `max_n`; gaps for compressed and skipped ones."""
    found: list[Opened] = []
    gaps: list[dict[str, Any]] = []
    for e in entries:
        if (e.st.st_dev, e.st.st_ino) in taken or e.st.st_mtime_ns < after_ns:
            continue
        if e.compressed:
            gaps.append({"reason": "compressed", "path": e.path, "inode": e.st.st_ino,
                         "message": f"{e.path} was rotated and compressed before it was read"})
            continue
        o = _open_entry(e)
        if o is None:
            continue
        if any(holds(cp, o.fd, o.st) for cp in known):
            os.close(o.fd)  # a generation (or a copy of one) read before
        elif _is_compressed(o.fd):
            gaps.append({"reason": "compressed", "path": e.path, "inode": e.st.st_ino,
                         "unreadBytes": o.st.st_size,
                         "message": f"{e.path} is compressed; only plain files are read"})
            os.close(o.fd)
        else:
            found.append(o)
    found.sort(key=lambda o: (o.st.st_mtime_ns, o.st.st_ino))
    if len(found) > max_n:
        skipped, found = found[: len(found) - max_n], found[len(found) - max_n :]
        size = sum(o.st.st_size for o in skipped)
        names = ", ".join(os.path.basename(o.path) for o in skipped)
        gaps.append({"reason": "max-generations", "unreadBytes": size,
                     "message": f"{len(skipped)} older unread generations skipped "
                                f"(limits.maxGenerations={max_n}): {names}"})
        for o in skipped:
            os.close(o.fd)
    return found, gaps


def missing_gap(cp: Checkpoint) -> dict[str, Any]:
    return {"reason": "missing", "path": cp.path, "inode": cp.inode, "offset": cp.offset,
            "unreadBytes": cp.unread,
            "message": f"the generation being read (inode {cp.inode}, offset {cp.offset}) is "
                       f"gone; at least {cp.unread} bytes of it were not read"}


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def plan_start(path: Path, known: list[Checkpoint], max_n: int, ended: set[int]) -> Plan:
    """Resume from checkpointed generations (`known`, oldest first; the last is the one that
    was followed): the file at the path when it is still that one; otherwise every generation
    since, found among the siblings, then the file at the path."""
    cur = open_at_path(path)
    last = known[-1]
    at_path = cur is not None and identifies(last, cur.fd, cur.st)
    if cur is not None and at_path:
        cur.start, cur.line_no, cur.origin = last.offset, last.line_no, last
        if all(cp.finished for cp in known[:-1]):
            return Plan([cur], at_path=True)
    plan = Plan()
    entries = scan(path, known)
    taken = {_ident(cur.st)} if cur is not None else set()
    rewritten = cur is not None and not at_path and _ident(cur.st) == (last.dev, last.inode)
    for cp in known:
        if (cp.finished and cp is not last) or (cp is last and at_path):
            continue
        found = locate(cp, entries, taken)
        if found is not None:
            plan.steps.append(found)
            taken.add(_ident(found.st))
        elif not (cp.finished or cp.inode in ended or (rewritten and cp is last)):
            plan.gaps.append(missing_gap(cp))
    if not at_path:  # generations rotated after the one followed, before the file at the path
        fresh, gaps = newer(entries, known, last.mtime_ns, taken, max_n)
        plan.steps += fresh
        plan.gaps += gaps
    if cur is not None:
        plan.steps.append(cur)
        plan.at_path = True
    prev = last.inode
    for i, o in enumerate(plan.steps):
        if o.origin is None:
            reason = "rename"
            if o is cur and rewritten:
                reason = "truncate"
            elif o is cur and not any(s.origin is last for s in plan.steps):
                reason = "recreate"
            o.announce = {"reason": reason, "inode": o.st.st_ino, "oldInode": prev}
            if reason == "truncate":
                before = plan.steps[i - 1] if i else None
                copied = before.st.st_size if before and before.origin is last else None
                unread = last.unread if copied is None else max(0, last.size - copied)
                o.announce |= {"oldSize": last.size, "unreadBytes": unread}
        prev = o.st.st_ino
    return plan


def plan_switch(path: Path, ended: Checkpoint, known: list[Checkpoint], max_n: int, *,
                truncated: bool) -> Plan:
    """The followed generation `ended` left the path (or was truncated at `ended.offset`):
    find a copy of it (truncated), the generations rotated since, and the file at the path."""
    cur = open_at_path(path)
    plan = Plan()
    entries = scan(path, [*known, ended])
    taken = {(ended.dev, ended.inode)} | ({_ident(cur.st)} if cur is not None else set())
    if truncated:
        plan.copy = locate(ended, entries, taken, copies_only=True)
        if plan.copy is not None:
            taken.add(_ident(plan.copy.st))
    fresh, gaps = newer(entries, [*known, ended], ended.mtime_ns, taken, max_n)
    plan.steps, plan.gaps = fresh, gaps
    if cur is not None and not truncated:  # (a deleted file's inode may be reused at once)
        plan.steps.append(cur)
        plan.at_path = True
    elif cur is not None:
        os.close(cur.fd)
    prev = ended.inode
    for o in plan.steps:
        o.announce = {"reason": "rename", "inode": o.st.st_ino, "oldInode": prev}
        prev = o.st.st_ino
    return plan
