"""`matches --follow` and `logs --follow`: what a watcher records, each new item once, like
`tail -F` — across JSONL rotation, a stream deleted and recreated, and a restart of the runner.

Both readers are woken by the caller (`watchrun.notify`, inotify or polling) and never block:
`read()` returns what is new since the last call. Files are opened without following symlinks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from watchrun.output import safefs, tailfile
from watchrun.output.records import (
    ReadStats,
    iter_records,
    offset_after,
    oldest_seq,
    parse_record,
)
from watchrun.preads import pread_full
from watchrun.views.agent_window import explains

__all__ = ["Generations", "JsonlFollower", "TailFollower"]

BLOCK = 1 << 20
"""Bytes read per step (a longer record is read in a window that doubles until it fits)."""
ROUNDS = 64
"""Switches and catch-ups one `read()` makes at most (the rest waits for the next call)."""


class Generations:
    """The file a path names, read by descriptor (`_fd`, from `_pos`) across rotation:
    `_open_path()` opens what the path names now, `_moved()` says whether it names another file
    since (the caller reads the old one to its end, then closes it and opens the new one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._id: tuple[int, int] | None = None
        self._pos = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._id = -1, None

    def _open_path(self) -> bool:
        try:
            fd = safefs.open_read(self.path)
        except FileNotFoundError:
            return False
        st = os.fstat(fd)
        self._fd, self._id, self._pos = fd, (st.st_dev, st.st_ino), 0
        return True

    def _moved(self) -> bool | None:
        """Whether the path names another file now; None when it names none and the open file
        was deleted (nothing writes to it any more: it is read to its end and closed, which
        also lets the kernel tell the watch that its directory went, if it did). While the
        path names nothing and the file still has a name, a rotation is half done: kept."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return None if os.fstat(self._fd).st_nlink == 0 else False
        return (st.st_dev, st.st_ino) != self._id


class JsonlFollower(Generations):
    """Follows `<id>.jsonl` by `seq`, which goes up by one per record across rotation and
    runner restarts: each record is returned once and in order. The open generation is read by
    descriptor; once the path names another file (rotated to `.1`, or deleted and recreated)
    the old one is read to its end first. A record further on than the next seq means the ones
    between are in rotated files (several rotations between two reads): they are read from
    there (`iter_records`), and what `output.keep` already removed is counted in `gaps`; seqs
    a `gap{reason: unwritten}` record accounts for are not missing, and a hole no record
    explains, among records still retained, is counted in `missing` (never blamed on
    rotation). A generation that starts at a seq already returned is a stream begun again
    (its JSONL was removed and the runner started over at 1): counted in `restarts` and read
    whole."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.last = 0
        """The seq of the newest record returned (or passed over as shown already)."""
        self.restarts = 0
        self.gaps = 0
        """Records rotated away (past `output.keep`) before they could be read."""
        self.missing = 0
        """Seqs absent from the retained records with no record saying why (a damaged file)."""
        self.stats = ReadStats()
        self._fresh = False  # the open generation came after a switch: it may begin anew
        self._hole: dict[str, Any] | None = None  # found where seq last + 1 was expected

    def start_after(self, seq: int) -> None:
        """Return only records with a seq above `seq`, starting in the current file (found by
        a binary search; what a rotation since moved away is found by the hole it leaves)."""
        self.close()
        self.last = seq
        if self._open(fresh=False):
            with os.fdopen(os.dup(self._fd), "rb") as f:
                self._pos = at = offset_after(f, seq)
                f.seek(at)
                for line in f:  # past the last record up to `seq`: what lies before it
                    at += len(line)  # (lines that are no record too) is the caller's
                    rec = parse_record(line, ReadStats()) if line.endswith(b"\n") else None
                    if rec is not None and rec["seq"] > seq:
                        break
                    if rec is not None:
                        self._pos = at

    def read(self) -> list[dict[str, Any]]:
        """Every complete record written since the last call, oldest first."""
        out: list[dict[str, Any]] = []
        for _ in range(ROUNDS):
            if self._fd < 0 and not self._open(fresh=True):
                break
            out += self._drain()
            if self._hole is not None:
                out += self._catch_up(self._hole)
                continue
            moved = self._moved()
            if moved is False:
                break
            out += self._drain()  # what was written to it before it was rotated away
            self.close()
            if moved is None:
                break
        return out

    def close(self) -> None:
        super().close()
        self._hole = None

    def _open(self, *, fresh: bool) -> bool:
        if not self._open_path():
            return False
        self._fresh = fresh
        return True

    def _catch_up(self, hole: dict[str, Any]) -> list[dict[str, Any]]:
        """Records between `last` and the one found after a hole, from the rotated files that
        hold them; what is in none is counted: rotated away if older than the oldest retained
        record (listed after the read, so a rotation meanwhile is not taken for damage)."""
        found: int = hole["seq"]
        out: list[dict[str, Any]] = []
        seen, before = ReadStats(), None
        for rec in iter_records(self.path, since_seq=self.last, stats=seen):
            if rec["seq"] >= found:
                break
            if before is not None:  # lines skipped between two records caught up on are in
                # files this follower never read (not those before them or after: it read
                # those, or they are older; counted again, they were said again at every hole)
                self.stats.torn += seen.torn - before.torn
                self.stats.invalid += seen.invalid - before.invalid
            before = ReadStats(seen.torn, seen.invalid)
            out.append(rec)
        oldest = oldest_seq(self.path) or found
        for rec in [*out, hole]:
            seq = rec["seq"]
            if seq > self.last + 1 and not explains(rec, self.last + 1):
                rotated = max(0, min(seq, oldest) - self.last - 1)
                self.gaps += rotated  # gone: more rotations than `output.keep`
                self.missing += seq - self.last - 1 - rotated
            self.last = seq
        self.last = found - 1
        self._hole = None
        return out

    def _drain(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if os.fstat(self._fd).st_size < self._pos:  # cut short in place: read it again
            self._pos, self._fresh = 0, True
        while True:
            want = BLOCK
            while True:
                data = pread_full(self._fd, want, self._pos)
                cut = data.rfind(b"\n")
                if cut >= 0 or len(data) < want:
                    break
                want *= 2
            if cut < 0:  # nothing, or a record still being written
                return out
            start = 0
            while start <= cut:
                end = data.index(b"\n", start)
                rec = self._take(data[start:end])
                if self._hole is not None:
                    return out  # this line is read again once the hole is filled
                self._pos += end + 1 - start
                start = end + 1
                if rec is not None:
                    out.append(rec)
            if len(data) < want:
                return out

    def _take(self, line: bytes) -> dict[str, Any] | None:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            rec = None
        if not isinstance(rec, dict) or type(rec.get("seq")) is not int:
            self.stats.invalid += 1
            return None
        seq: int = rec["seq"]
        if self._fresh:
            self._fresh = False
            if seq <= self.last:  # a new generation continues the seq; a new stream does not
                self.restarts += 1
                self.last = seq - 1
        if seq <= self.last:
            return None
        if seq > self.last + 1:
            self._hole = rec
            return None
        self.last = seq
        return rec


class TailFollower:
    """Follows a watcher's `.tail` snapshot (its last `maxLogLines` raw lines, rewritten about
    once a second while lines arrive). Its header says which start of the watcher wrote it and
    how many lines that start had read, so each line is returned once; lines that scrolled out
    of the snapshot before it was read are counted, never passed off as none."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run: str | None = None
        self.end: int | None = None

    def first(self, n: int) -> list[str]:
        """The last `n` lines there are now (none before the watcher ever ran)."""
        tail = self._load()
        if tail is None:
            return []
        self.run, self.end = tail.run, tail.end
        return tail.lines[-n:] if n > 0 else []

    def read(self) -> tuple[list[str], int]:
        """(the lines new since the last call, how many more arrived but are not kept)."""
        tail = self._load()
        if tail is None or tail.run is None or tail.end is None:
            return [], 0
        same = tail.run == self.run and self.end is not None
        new = tail.end - (self.end or 0) if same else tail.end  # else a new start: all new
        self.run, self.end = tail.run, tail.end
        if new <= 0:
            return [], 0
        shown = tail.lines[-new:]
        return shown, new - len(shown)

    def _load(self) -> tailfile.Tail | None:
        return tailfile.load(self.path)
