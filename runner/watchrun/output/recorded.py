"""What a file watcher's stream recorded since a seq, read backwards from its end: the records a
crash kept past a checkpoint, per inode and per generation read from it, and whether a recorded
text is a given line (crash recovery)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from watchrun.match.sanitize import sanitize
from watchrun.output.backward import reverse_lines
from watchrun.output.records import ReadStats, open_snapshot, parse_record

__all__ = ["Epoch", "Mark", "is_record_of", "recorded_since"]

_REDACTED = re.compile(r"\[REDACTED:[^\]\s]+\]")
_CUT_TOKEN = re.compile(r"\[(?:R(?:E(?:D(?:A(?:C(?:T(?:E(?:D(?::[^\]\s]*)?)?)?)?)?)?)?)?)?\Z")
CLIPPED_AT_LEAST = 64
"""A recorded text this long may be a line clipped at `maxLineBytes`: it matches as a prefix."""


class Mark(NamedTuple):
    """The last match recorded from a generation: its offset, line (`raw` when it has one) and
    line number; offset -1 for none."""

    offset: int = -1
    line: str = ""
    line_no: int = 0


def is_record_of(text: str, line: str) -> bool:
    """`text` (a match record's `raw`, or its `line`) is what was recorded of the file's `line`
    (decoded): the same, or sanitized; with secrets replaced by `[REDACTED:kind]`
    (`output.redact`); or, when long, a prefix (clipped). Pure."""
    if not text:
        return False
    if text == line:
        return True
    clipped = len(text) >= CLIPPED_AT_LEAST
    if clipped:  # a `[REDACTED:kind]` cut by the clipping is left out of the prefix
        text = _CUT_TOKEN.sub("", text)
    pattern = re.compile(".+?".join(re.escape(p) for p in _REDACTED.split(text)), re.DOTALL)
    test = pattern.match if clipped else pattern.fullmatch
    return any(test(form) is not None for form in (line, sanitize(line)[0]))


class Epoch(NamedTuple):
    """The records of one generation read from an inode."""

    since: int = 0
    """The seq of the `rotate` record into the inode that began it (0: begun before the records
    looked at)."""
    mark: Mark = Mark()
    """Its last recorded match."""
    inode_gen: int | None = None
    """The inode's generation number its `rotate` record named (None: not known)."""


def recorded_since(path: Path, since_seq: int, keep: int | None = None,
                   matches: list[tuple[str, str]] | None = None,
                   ) -> tuple[dict[int, list[Epoch]], set[int], bool]:
    """What a file watcher's stream recorded from `since_seq` on, read backwards from the end
    (only those records are read): per inode, its epochs oldest first (each `rotate` record
    into an inode begins one: a new generation read from it), and the inodes a `rotate`
    record left. `keep`: as in `retained_files`. `matches` (when given) gets each match the
    stream's last run recorded — since that run's `start` record, before `since_seq` too —
    as (`path:lineNo`, line), oldest first; the bool says they are all there (False: the
    `start` record was not found, rotated away by `output.keep`)."""
    recs: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    whole = matches is None
    files = open_snapshot(path, keep)
    try:
        for f in reversed(files):
            for line in reverse_lines(f, ReadStats()):
                rec = parse_record(line, ReadStats()) if line else None
                if rec is None:
                    continue
                kind = rec.get("kind")
                if not whole:
                    whole = kind == "start"
                    if kind == "match":
                        found.append(rec)
                if rec["seq"] < since_seq:
                    if whole:
                        break
                elif kind in ("match", "rotate"):
                    recs.append(rec)
            else:
                continue
            break
    finally:
        for f in files:
            f.close()
    if matches is not None:
        matches += [(f"{r.get('path')}:{r.get('lineNo')}", str(r.get("line", "")))
                    for r in reversed(found)]
    epochs: dict[int, list[Epoch]] = {}
    ended: set[int] = set()
    for rec in reversed(recs):
        inode = rec.get("inode")
        if not isinstance(inode, int):
            continue
        marks = epochs.setdefault(inode, [Epoch()])
        if rec["kind"] == "match" and isinstance(rec.get("offset"), int):
            line_no = rec.get("lineNo")  # the newest, not the furthest: a copy that got a
            # deleted generation's inode number is read from its start after it
            marks[-1] = marks[-1]._replace(mark=Mark(rec["offset"], str(rec.get(
                "raw", rec.get("line", ""))), line_no if isinstance(line_no, int) else 0))
        elif rec["kind"] == "rotate":
            if isinstance(rec.get("oldInode"), int) and rec["oldInode"] != inode:
                ended.add(rec["oldInode"])
            gen = rec.get("inodeGen")
            marks.append(Epoch(int(rec["seq"]), inode_gen=gen if isinstance(gen, int) else None))
    return epochs, ended, whole
