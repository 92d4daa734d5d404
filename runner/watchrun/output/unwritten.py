"""Records that got a seq but were never written (given up on a full disk: at a stop, or by a
once run): the `gap` records that explain the missing seqs, and a note on disk that outlives
the runner."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from watchrun.output import safefs
from watchrun.output.notefile import NOTE_BYTES, SLOT, Run, encode, read_note, set_aside

MAX_RUNS = 64
_SEQ = re.compile(rb'^\{"schema":1,"seq":([0-9]+),')
_KIND = re.compile(rb'"kind":"([A-Za-z0-9_-]+)"')
_FLAGS = os.O_RDWR | os.O_CREAT


def seq_of(line: bytes) -> tuple[int, str]:
    """The seq and kind of a record line built by the sink."""
    m, k = _SEQ.match(line), _KIND.search(line)
    if m is None:
        raise ValueError(f"not a record line: {line[:60]!r}")
    return int(m.group(1)), k.group(1).decode() if k else "?"


class Unwritten:
    """Seqs given up unwritten, until a `gap` record for them is written.

    Each run of consecutive seqs `lo..hi` becomes one gap record that takes seq `hi` itself, so
    the stream stays in seq order and the record right after `lo - 1` says what happened.

    The note keeps the runs for the next start: JSON in the two slots allocated at open, written
    in turn (`notefile`). When those could never be allocated (the disk was full from the open
    to the close), the highest seq given up is stamped on the note's modification time instead,
    `hi` nanoseconds before 1970 (an inode field: setting it needs no free space); the next
    start takes every seq above the stream's last record up to `hi` as given up (kinds
    unknown: `?`)."""

    def __init__(self, note: Path | None) -> None:
        self.note = note
        self._dir = safefs.dir_identity(note.parent) if note is not None else None
        self.lost: dict[int, str] = {}  # seq → kind, given up by this run
        self.noted: list[Run] = []  # runs read back from the note (below every seq of this run)
        self.reserved = False
        """The note's NOTE_BYTES are allocated."""
        self.retry = False
        """Allocate the note after the next write that goes through (space may be back)."""
        self.error: OSError | None = None  # the last failure of the note
        self.unkept = ""  # (set by `keep`: the seqs it could not keep)
        self.damage: str | None = None
        """Said at the start: the note was damaged (what it kept is not known), set aside."""
        self._noted = False
        self._slot, self._gen = -1, 0  # the slot written last (the next write: the other one)
        self.floor = 0
        """The highest seq of a file rotated away with none kept (`output.keep: 0`): the next
        start numbers past it when it finds no record (a crash between the unlink and the
        first record of the new file)."""

    def give_up(self, lines: list[bytes]) -> None:
        for line in lines:
            seq, kind = seq_of(line)
            self.lost[seq] = kind

    def runs(self, below: int | None = None) -> list[Run]:
        """Runs of lost seqs (each under `below`), oldest first, with their kinds."""
        out = [r for r in self.noted if below is None or r[1] < below]
        start = len(out)
        for seq in sorted(self.lost):
            if below is not None and seq >= below:
                break
            if len(out) > start and out[-1][1] == seq - 1:
                lo, _, kinds = out[-1]
                out[-1] = (lo, seq, kinds)
            else:
                out.append((seq, seq, {}))
            kinds = out[-1][2]
            kinds[self.lost[seq]] = kinds.get(self.lost[seq], 0) + 1
        return out

    @staticmethod
    def gap_fields(lo: int, hi: int, kinds: dict[str, int]) -> dict[str, Any]:
        n = hi - lo + 1
        return {"reason": "unwritten", "fromSeq": lo, "toSeq": hi, "records": n,
                "kinds": dict(sorted(kinds.items())),
                "message": f"{n} records (seq {lo} to {hi}) could not be written (the disk was "
                           "full or failing: given up at a stop, or after "
                           f"limits.onceWriteTimeout in a once run); this record takes seq {hi}"}

    def written(self, gaps: Iterable[tuple[int, int, object]]) -> None:
        """The gap records of these runs `(lo, hi, …)` are in the file."""
        for lo, hi, _ in gaps:
            self.noted = [r for r in self.noted if (r[0], r[1]) != (lo, hi)]
            for seq in [s for s in self.lost if lo <= s <= hi]:
                del self.lost[seq]
        if not self.lost and not self.noted and self._noted:
            self._noted = False  # (tried once: what stays is below the stream's last record)
            self.save_note()

    # -- the note on disk -----------------------------------------------------------------
    def prepare(self, last_seq: int) -> int:
        """Read a note left by a previous run (runs above `last_seq` become lost seqs again),
        and allocate the note's space for this run. Returns the lowest next seq it allows.
        Raises `safefs.UnsafePathError` for what is no note of the runner's own at its path (a
        symlink, a directory, a FIFO, a hard link, another user's file: planted, and the note it
        replaced may have kept seqs, so the stream does not start); a note that cannot be (the
        disk or its inodes full, a file that cannot be written) is said at the stop if seqs
        were given up then. A damaged note (`notefile.read_note`) is set aside and said
        (`damage`), and the numbering goes on past every seq it still names."""
        fd = self._open()
        if isinstance(self.error, safefs.UnsafePathError):
            raise self.error  # planted: what it stands for may have kept seqs
        if fd < 0:  # (not even created: the disk or its inodes are full, or state/ is not ours)
            self.retry = self.note is not None
            return last_seq + 1
        try:
            note = read_note(fd)  # (before allocating sets its time)
            if note.damage is not None:
                fd = self._set_aside(fd, note.damage)
            if fd >= 0:
                self._allocate(fd)
        finally:
            if fd >= 0:
                os.close(fd)
        self.retry = not self.reserved
        self._slot, self._gen = -1 if self.damage else note.slot, note.gen  # (a new note)
        self.floor = max(note.floor, note.salvaged)
        top = max(last_seq, self.floor)
        for lo, hi, kinds in note.runs:
            if top < lo:
                self.noted.append((lo, hi, kinds))
                top = hi
        stamped = note.stamp > top  # given up by a run that could not write the note
        if stamped:
            self.noted.append((top + 1, note.stamp, {"?": note.stamp - top}))
            top = note.stamp
        if (stamped or self.damage is not None) and not self.save_note() and top > last_seq:
            self._stamp(top)  # (kept as JSON above, when the note could be allocated now)
        if self.damage is not None:
            self.damage += (": the seqs it kept are not known; the stream goes on past every seq "
                            f"it still names (the highest: {note.salvaged}), from seq {top + 1}"
                            if note.salvaged else
                            ": the seqs it kept are not known and it names none; the stream goes "
                            f"on from seq {top + 1} (records the last run gave up unwritten, if "
                            "any, may have had the seqs from there)")
        self._noted = bool(self.noted)
        return top + 1

    def _set_aside(self, fd: int, why: str) -> int:
        """The note is damaged: set it aside (`notefile.set_aside`) and open a new one."""
        os.close(fd)
        assert self.note is not None
        where = set_aside(self.note)
        self.damage = f"the note of records given up unwritten {self.note} is damaged ({why}); " \
            + where
        return self._open()

    def reserve(self) -> None:
        """Allocate the note's space, which could not be when the stream was opened."""
        self.retry = False
        fd = -1 if self.reserved else self._open()
        if fd >= 0:
            try:
                self._allocate(fd)
            finally:
                os.close(fd)

    def write_failed(self) -> None:
        """A write failed: the next one that goes through retries the note's allocation."""
        self.retry = self.note is not None and not self.reserved

    def keep(self) -> tuple[int, OSError | None]:
        """At close: keep the runs not explained yet for the next start (the note allocated now
        if it could not be before; else the stamp). Returns how many seqs could not be kept
        (the next start may use them again; `unkept` says which) and why (None: all kept)."""
        runs = self.runs()
        if not runs:
            return 0, None
        self.reserve()
        if self.save_note() or self._stamp(runs[-1][1]):
            return 0, None
        self.unkept = (f"(seq {runs[0][0]} to {runs[-1][1]}) are in no gap record and no note "
                       f"{self.note or '(none outside an output dir)'}: the next start may "
                       "use their seqs again")
        return sum(hi - lo + 1 for lo, hi, _ in runs), self.error or OSError(errno.ENOENT, "")

    def save_note(self) -> bool:
        """Keep the lost runs (and the floor) on disk for the next start (into the space
        allocated at open, the slot not written last); a note of neither when there is none."""
        runs = self.runs()[-MAX_RUNS:]
        saved = self._write_note(encode(self._gen + 1, runs, self.floor), runs or self.floor)
        self._noted = self._noted and bool(runs)  # (a floor alone explains nothing)
        return saved

    def reached(self, seq: int) -> None:
        """A file ending at `seq` is rotated away and none is kept: keep `seq` as the floor."""
        self.floor = seq
        self.save_note()

    def _open(self) -> int:
        """The note, opened (created when missing: an inode, no data), or -1."""
        if self.note is None:
            return -1
        try:
            safefs.same_dir(self.note.parent, self._dir)  # (never another runner's state/)
            return safefs.open_write(self.note, _FLAGS, 0o640)  # no symlink followed
        except OSError as exc:
            self.error = exc
            return -1

    def _allocate(self, fd: int) -> None:
        try:
            os.posix_fallocate(fd, 0, NOTE_BYTES)
            self.reserved = True
        except OSError as exc:
            self.error = exc

    def _write_note(self, data: bytes, keeps: object) -> bool:
        """Write one slot: the one not written last, so a write torn by a crash leaves the
        other whole (what it keeps is as if this write had not begun)."""
        fd = self._open()
        if fd < 0:
            return False
        slot = 1 - self._slot if self._slot >= 0 else 0
        try:
            os.pwrite(fd, data.ljust(SLOT, b"\0"), slot * SLOT)
            os.fsync(fd)
            self._slot, self._gen = slot, self._gen + 1
            self._noted = bool(keeps)
            return True
        except OSError as exc:
            self.error = exc
            if not keeps:  # nothing to keep: at least no stamp stays
                with contextlib.suppress(OSError):
                    os.utime(fd)
            return False
        finally:
            os.close(fd)

    def _stamp(self, hi: int) -> bool:
        """Keep `hi`, the highest seq given up, where it needs no free space: the note's
        modification time, `hi` ns before 1970 (checked: a file system may clamp it)."""
        fd = self._open()
        if fd < 0:
            return False
        try:
            if hi < 1 << 62:
                os.utime(fd, ns=(os.fstat(fd).st_atime_ns, -hi))
            if os.fstat(fd).st_mtime_ns != -hi:
                raise OSError(errno.EOVERFLOW, "the file system cannot keep that timestamp")
            os.fsync(fd)
            self._noted = True
            return True
        except OSError as exc:
            self.error = exc
            return False
        finally:
            os.close(fd)

