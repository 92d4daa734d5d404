"""The note of a stream's seqs given up unwritten (`state/<watchers|agents>-<id>.unwritten`) on
disk: two checksummed slots written in turn, so a torn write leaves the other one whole, and a
damaged note is found out (never taken for an empty one) and set aside."""

from __future__ import annotations

import json
import os
import re
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchrun.output import safefs
from watchrun.output.records import SEQ_LIMIT
from watchrun.preads import pread_full

SLOT = 4096
NOTE_BYTES = 2 * SLOT
"""Both slots are allocated at open (or as soon as space comes back), so writing the note later
needs no free space."""
_SALVAGE = re.compile(rb'\[\s*([0-9]{1,30})\s*,\s*([0-9]{1,30})|"floor"\s*:\s*([0-9]{1,30})')

Run = tuple[int, int, dict[str, int]]
"""Consecutive seqs `lo..hi` given up, and how many records of each kind they were."""


@dataclass
class Note:
    """What a note keeps, as read at a start."""

    stamp: int = 0
    """The seq stamped on its modification time (`Unwritten._stamp`; 0: none)."""
    runs: list[Run] = field(default_factory=list)
    floor: int = 0
    gen: int = 0
    """The number of the write that left it (each write takes the next one)."""
    slot: int = -1
    """The slot it was read from (-1: none); the next write goes to the other one."""
    damage: str | None = None
    """Why part of it cannot be read (None: nothing damaged)."""
    salvaged: int = 0
    """The highest seq the damaged part names (a run's `lo`, `hi`, a `floor`; 0: none)."""

    @property
    def keeps(self) -> bool:
        return bool(self.stamp or self.runs or self.floor or self.damage)


def note_path(path: Path) -> Path | None:
    """Where the note of a stream lives: `state/<watchers|agents>-<id>.unwritten` beside the
    output dir's `watchers/` and `agents/` (none for a JSONL file elsewhere)."""
    if path.parent.name not in ("watchers", "agents"):
        return None
    return path.parent.parent / "state" / f"{path.parent.name}-{path.stem}.unwritten"


def drop_spent(note: Path) -> bool:
    """Remove a stream's note that keeps nothing (no run, no floor, no stamp, no damage), its
    stream closed: the reserve of a watcher forgotten for good. One that keeps seqs stays. True
    when removed."""
    fd = safefs.open_read(note, owned=True)  # (no symlink followed; a regular file of ours)
    try:
        kept = read_note(fd).keeps
    finally:
        os.close(fd)
    if not kept:
        safefs.unlink(note)
    return not kept


def read_note(fd: int) -> Note:
    """What a note keeps: its stamp (read first: allocating or writing the note sets its time),
    and the slot written last of those that are whole. A slot whose checksum does not match (a
    write torn by a crash, or damage) or that holds what no runner writes (a seq of SEQ_LIMIT or
    more, a run that is no run) is `damage`, and the seqs it still names are `salvaged`."""
    note, problems = Note(), []
    mtime = os.fstat(fd).st_mtime_ns
    if -SEQ_LIMIT < mtime < 0:
        note.stamp = -mtime
    elif mtime <= -SEQ_LIMIT:
        problems.append(f"its modification time ({mtime} ns) is no seq a runner stamps")
    data = pread_full(fd, NOTE_BYTES, 0)
    for slot in (0, 1):
        raw = data[slot * SLOT:(slot + 1) * SLOT].rstrip(b"\0")
        if not raw:
            continue
        try:
            gen, runs, floor = _decode(raw, legacy=slot == 0)
        except ValueError as exc:
            problems.append(f"slot {slot + 1}: {exc}")
            note.salvaged = max([note.salvaged, *_named(raw)])
            continue
        if note.slot < 0 or gen > note.gen:
            note.gen, note.runs, note.floor, note.slot = gen, runs, floor, slot
    note.damage = "; ".join(problems) or None
    return note


def encode(gen: int, runs: list[Run], floor: int) -> bytes:
    """A slot's bytes: the JSON, a newline and its CRC-32 in hex. The oldest runs are left out
    when they do not all fit (their seqs are below the others': never given out again)."""
    while True:
        doc: dict[str, Any] = {"gen": gen, "runs": [list(r) for r in runs]}
        if floor:
            doc["floor"] = floor
        body = json.dumps(doc, separators=(",", ":")).encode()
        if len(body) + 9 <= SLOT or not runs:
            return body + b"\n%08x" % zlib.crc32(body)
        runs = runs[1:]


def _decode(raw: bytes, *, legacy: bool) -> tuple[int, list[Run], int]:
    """A slot's write number, runs and floor; ValueError saying what is wrong. A first slot
    with no checksum line is a note written before there were slots (plain JSON)."""
    body, nl, crc = raw.rpartition(b"\n")
    if not nl and legacy:
        body = raw
    elif crc != b"%08x" % zlib.crc32(body):
        raise ValueError("its checksum does not match (a write torn by a crash, or damage)")
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    gen, floor = doc.get("gen", 0), doc.get("floor", 0)
    for key, value in (("gen", gen), ("floor", floor)):
        if not _seq(value, 0):
            raise ValueError(f"`{key}` {value!r} is out of range")
    runs = doc.get("runs", [])
    if not isinstance(runs, list):
        raise ValueError("`runs` is not a list")
    return gen, sorted((_run(run) for run in runs), key=lambda r: r[:2]), floor


def _run(run: Any) -> Run:
    """One run `[lo, hi, {kind: n}]`; the records of no kind named are `?`."""
    if not (isinstance(run, list) and len(run) == 3 and isinstance(run[2], dict)):
        raise ValueError(f"run {run!r} is not [lo, hi, kinds]")
    lo, hi, kinds = run
    if not (_seq(lo, 1) and _seq(hi, lo) and all(_seq(n, 0) for n in kinds.values())):
        raise ValueError(f"run {run!r} is out of range")
    unknown = hi - lo + 1 - sum(kinds.values())
    if unknown < 0:
        raise ValueError(f"run {run!r} counts more records than its seqs")
    counts = {str(k): n for k, n in kinds.items() if n > 0}
    return lo, hi, counts | {"?": unknown} if unknown > 0 else counts


def _seq(value: Any, low: int) -> bool:
    return type(value) is int and low <= value < SEQ_LIMIT


def _named(raw: bytes) -> list[int]:
    """The seqs a damaged slot still names (runs' bounds, a floor) below SEQ_LIMIT."""
    found = (int(n) for m in _SALVAGE.finditer(raw) for n in m.groups() if n is not None)
    return [n for n in found if n < SEQ_LIMIT]


def set_aside(path: Path) -> str:
    """Rename a damaged state file to `<name>.corrupt-<UTC time>` (never through a symlink) and
    say where it went, or that it could not be set aside."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while os.path.lexists(target):
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        safefs.replace(path, target)
    except OSError as exc:
        return f"could not be set aside ({exc.strerror})"
    return f"set aside as {target.name}"
