"""Read JSONL records back (views, cursors, resume): across rotated files, in seq order."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

from msgspec import Struct

from watchrun.output import safefs

__all__ = [
    "ID_PATTERN",
    "ID_RULE",
    "ReadStats",
    "cursor_expired",
    "format_cursor",
    "is_id",
    "iter_records",
    "offset_after",
    "oldest_seq",
    "open_snapshot",
    "parse_cursor",
    "parse_record",
    "retained_files",
    "stream_ids",
]

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
"""A watcher id or agent name: also a file name and a cursor prefix."""
ID_RULE = "1 to 64 letters, digits, `_`, `.` or `-`, starting with a letter or digit"
"""ID_PATTERN in words, for the errors that refuse an id."""
_CURSOR = re.compile(rf"({ID_PATTERN}):([0-9a-f]{{16}})")
_ID = re.compile(ID_PATTERN)
_BLOCK = 64 * 1024
QUICK_TRIES, SNAPSHOT_TRIES = 10, 55
"""`open_snapshot`'s tries of a stable listing: the first ones at once, then with pauses."""
_MAX_SEQ = 2**64 - 1
SEQ_LIMIT = 1 << 62
"""The runner's state (a note of seqs given up, a checkpoint) names seqs below this: no stream
counts that far, and a larger one (damage, a planted file) would number records past it, their
cursors past 16 hex digits."""


def is_id(value: object) -> TypeGuard[str]:
    """Whether `value` is a watcher id or agent name (so never a path: no `/`, no `..`)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def format_cursor(stream_id: str, seq: int) -> str:
    """`"<id>:<seq as 16 lowercase hex digits>"` (seq 0 means "before the first record")."""
    if not _ID.fullmatch(stream_id):
        raise ValueError(f"invalid id {stream_id!r}: must match ^{ID_PATTERN}$")
    if not 0 <= seq <= _MAX_SEQ:
        raise ValueError(f"invalid seq {seq}: must be 0..2**64-1")
    return f"{stream_id}:{seq:016x}"


def parse_cursor(cursor: str) -> tuple[str, int]:
    """`"server:000000000000002a"` → `("server", 42)`; anything else is `invalid_cursor`."""
    m = _CURSOR.fullmatch(cursor)
    if m is None:
        raise ValueError(
            f"invalid_cursor: {cursor!r} is not <id>:<16 lowercase hex digits>"
            " (for example server:000000000000002a)"
        )
    return m.group(1), int(m.group(2), 16)


class ReadStats(Struct):
    """What a read skipped, so nothing is dropped silently."""

    torn: int = 0
    """Last lines without their newline: a crash mid-write, or a write still in progress."""
    invalid: int = 0
    """Complete lines that are not a JSON object with an integer `seq`."""


def retained_files(path: Path, keep: int | None = None) -> list[Path]:
    """`<path>.N` … `<path>.1`, `<path>`: the files that exist, oldest first. With `keep` (the
    writer's `output.keep`), only `.1` … `.keep` are looked for, each by name: a runner opening
    500 sinks in one directory then makes 500 * keep lookups, not 500 listings of 500 names."""
    if keep is not None:
        base = str(path)
        files = [Path(name) for n in range(keep, 0, -1)
                 if os.path.lexists(name := f"{base}.{n}")]
    else:
        prefix = path.name + "."
        numbered: list[tuple[int, str]] = []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for name in os.listdir(path.parent):
                if name.startswith(prefix):
                    tail = name[len(prefix) :]
                    if tail.isdigit() and tail[0] != "0":
                        numbered.append((int(tail), name))
        files = [path.parent / name for _, name in sorted(numbered, reverse=True)]
    if os.path.lexists(path):
        files.append(path)
    return files


def stream_ids(folder: Path) -> list[str]:
    """The ids of the streams in `folder`, sorted: each `<id>.jsonl`, and each `<id>.jsonl.1`
    without one (a rotation renamed the live file away and has not created the next yet: a
    stream known by its files alone must not vanish meanwhile)."""
    ids: set[str] = set()
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for name in os.listdir(folder):
            stem = name.removesuffix(".1")
            if stem.endswith(".jsonl"):
                ids.add(stem.removesuffix(".jsonl"))
    return sorted(ids)


def open_snapshot(path: Path, keep: int | None = None) -> list[BinaryIO]:
    """Open every retained file at once, retrying if a rotation moved them meanwhile: the names
    are still the ones listed (a listing made in the middle of a rotation lacks the name just
    renamed away, `.4` after `.4` → `.5`: opened once the rotation is over, every name matches,
    and a generation is skipped), and then each name still names the file opened (checked after
    the second listing, not before: the next rotation, listed at the same step, gives the same
    names). A symlink (or anything but a regular file) in place of one is refused:
    `safefs.UnsafePathError`. A writer rotating faster than a look is waited for: after the
    first quick tries, a pause before each (1 ms more each time, at most 10 ms; ~0.4 s in all,
    blocking: views and worker threads only), so a look lands between two rotations."""
    for attempt in range(SNAPSHOT_TRIES):
        if attempt >= QUICK_TRIES:
            time.sleep(min(attempt - QUICK_TRIES + 1, 10) / 1000)
        files: list[BinaryIO] = []
        stable = True
        names = retained_files(path, keep)
        for p in names:
            try:
                files.append(os.fdopen(safefs.open_read(p), "rb"))
            except FileNotFoundError:
                stable = False
            except BaseException:
                for f in files:
                    f.close()
                raise
        stable = stable and retained_files(path, keep) == names
        if stable:
            for p, f in zip(names, files, strict=True):
                try:
                    same = os.lstat(p).st_ino == os.fstat(f.fileno()).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    stable = False
                    break
        if stable:
            return files
        for f in files:
            f.close()
    raise OSError(f"{path}: files kept rotating while reading; try again")


def parse_record(line: bytes, stats: ReadStats) -> dict[str, Any] | None:
    """One line as a record: a JSON object whose `seq` is an integer and whose `kind`, when it
    has one, is a string (readers look records up by kind); None, counted invalid, otherwise."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a line of deeply nested arrays
        rec = None
    if not isinstance(rec, dict) or type(rec.get("seq")) is not int \
            or not isinstance(rec.get("kind", ""), str):
        stats.invalid += 1
        return None
    return rec


def _line_at(f: BinaryIO, pos: int) -> tuple[int, int, int | None]:
    """(start, end, seq) of the first complete line starting at or after `pos`."""
    start = pos
    if pos > 0:
        f.seek(pos - 1)
        skipped = f.readline()
        start = pos - 1 + len(skipped)
        if not skipped.endswith(b"\n"):
            return start, start, None
    f.seek(start)
    line = f.readline()
    if not line.endswith(b"\n"):
        return start, start, None
    rec = parse_record(line, ReadStats())
    return start, start + len(line), None if rec is None else rec["seq"]


def _first_after(f: BinaryIO, size: int, since: int) -> int:
    """A line start at or before the first line with seq > since (binary search by offset)."""
    lo, hi = 0, size
    while hi - lo > _BLOCK:
        start, end, seq = _line_at(f, (lo + hi) // 2)
        if seq is None or start >= hi:
            break
        if seq <= since:
            lo = end
        else:
            hi = start
    return lo


def offset_after(f: BinaryIO, since_seq: int) -> int:
    """The start of a line at or before the first record of `f` with a seq above `since_seq`
    (a binary search: a follower need not read a whole file to find where it left off)."""
    return _first_after(f, os.fstat(f.fileno()).st_size, since_seq)


def iter_records(
    path: Path, *, since_seq: int | None = None, stats: ReadStats | None = None
) -> Generator[dict[str, Any], None, None]:
    """Every retained record of one stream, oldest first; `since_seq`: strictly after it.

    A last line without its newline (torn by a crash, or being written right now) and lines
    that do not parse are skipped and counted in `stats`.
    """
    stats = stats if stats is not None else ReadStats()
    files = open_snapshot(path)
    try:
        for f in files:
            size = os.fstat(f.fileno()).st_size
            f.seek(0 if since_seq is None else _first_after(f, size, since_seq))
            for line in f:
                if not line.endswith(b"\n"):
                    stats.torn += 1
                    continue
                rec = parse_record(line, stats)
                if rec is not None and (since_seq is None or rec["seq"] > since_seq):
                    yield rec
    finally:
        for f in files:
            f.close()


def oldest_seq(path: Path) -> int | None:
    """The smallest seq still retained (None when the stream has no records)."""
    for rec in iter_records(path):
        return int(rec["seq"])
    return None


def cursor_expired(path: Path, since_seq: int) -> bool:
    """True when records right after `since_seq` were rotated away (`cursor_expired`)."""
    oldest = oldest_seq(path)
    return oldest is not None and since_seq < oldest - 1
