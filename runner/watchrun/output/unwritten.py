"""Records that got a seq but were never written (given up at shutdown on a full disk): the
`gap` records that explain the missing seqs, and a note on disk that outlives the runner."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from watchrun.output import safefs

NOTE_BYTES = 4096
"""The note is allocated at open, so writing it later needs no free space."""
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
    the stream stays in seq order and the record right after `lo - 1` says what happened."""

    def __init__(self, note: Path | None) -> None:
        self.note = note
        self.lost: dict[int, str] = {}  # seq → kind
        self._noted = False

    def give_up(self, lines: list[bytes]) -> None:
        for line in lines:
            seq, kind = seq_of(line)
            self.lost[seq] = kind

    def runs(self, below: int | None = None) -> list[tuple[int, int, dict[str, int]]]:
        """Runs of consecutive lost seqs (each under `below`), oldest first, with their kinds."""
        out: list[tuple[int, int, dict[str, int]]] = []
        for seq in sorted(self.lost):
            if below is not None and seq >= below:
                break
            if out and out[-1][1] == seq - 1:
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
                           f"full or failing at shutdown); this record takes seq {hi}"}

    def written(self, lo: int, hi: int) -> None:
        for seq in range(lo, hi + 1):
            self.lost.pop(seq, None)
        if not self.lost and self._noted:
            self._write_note(b"")

    # -- the note on disk -----------------------------------------------------------------
    def prepare(self, last_seq: int) -> int:
        """Read a note left by a previous run (runs above `last_seq` become lost seqs again),
        and allocate the note's space for this run. Returns the lowest next seq it allows."""
        next_seq = last_seq + 1
        if self.note is None:
            return next_seq
        try:
            fd = safefs.open_write(self.note, _FLAGS, 0o640)  # no symlink followed
        except OSError:
            return next_seq
        try:
            text = os.pread(fd, NOTE_BYTES, 0).rstrip(b"\0")
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, NOTE_BYTES)
        finally:
            os.close(fd)
        try:
            doc = json.loads(text) if text else {}
        except ValueError:
            doc = {}
        for lo, hi, kinds in doc.get("runs", []) if isinstance(doc, dict) else []:
            if isinstance(lo, int) and isinstance(hi, int) and last_seq < lo <= hi:
                for seq in range(lo, hi + 1):
                    self.lost[seq] = "?"
                for kind, n in (kinds.items() if isinstance(kinds, dict) else []):
                    self._restore(lo, hi, str(kind), n)
                next_seq = max(next_seq, hi + 1)
                self._noted = True
        return next_seq

    def _restore(self, lo: int, hi: int, kind: str, n: object) -> None:
        todo = n if isinstance(n, int) else 0
        for seq in range(lo, hi + 1):
            if todo <= 0:
                return
            if self.lost.get(seq) == "?":
                self.lost[seq] = kind
                todo -= 1

    def save_note(self) -> bool:
        """Keep the lost runs on disk for the next start (into the space allocated at open)."""
        runs = [[lo, hi, kinds] for lo, hi, kinds in self.runs()][-MAX_RUNS:]
        return self._write_note(json.dumps({"runs": runs}).encode())

    def _write_note(self, data: bytes) -> bool:
        if self.note is None:
            return False
        try:
            fd = safefs.open_write(self.note, _FLAGS, 0o640)  # no symlink followed
        except OSError:
            return False
        try:
            os.pwrite(fd, data.ljust(NOTE_BYTES, b"\0")[:NOTE_BYTES], 0)
            os.fsync(fd)
            self._noted = bool(data)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)
