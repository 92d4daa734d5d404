"""The `.tail` snapshot of a watcher (`state/<id>.tail`): its last raw lines, sanitized, under a
header saying which run of the watcher they come from, the line count before the first of them
and how many a reader shows (`maxLogLines`): lines are appended to it as they are read
(`runtime/tail_files.py`), and the count the last one has is known, so that `logs --follow` can
print each line once."""

from __future__ import annotations

import json
import os
from pathlib import Path

from msgspec import Struct, field

from watchrun.output import safefs
from watchrun.preads import pread_full

__all__ = ["MARK", "READ_BYTES", "Tail", "load", "more", "parse", "render"]

READ_BYTES = 64 << 20
"""At most this much of a `.tail` file's end is read (`--lines` is at most 2000 lines of at
most 4096 characters); a larger snapshot (maxLogLines up to 100 000) loses its oldest lines."""
_HEAD_BYTES = 4096

MARK = "\x1ewatchrun-tail "
"""Starts the header line. A sanitized line never holds a control character such as U+001E, so
no watched line can pass for the header."""


class Tail(Struct, frozen=True):
    """What a `.tail` file says."""

    lines: list[str] = field(default_factory=list)
    run: str | None = None
    """Which run of the watcher wrote it (None: an old file without the header)."""
    end: int | None = None
    """How many lines that run had read when the snapshot was taken: the last line's number."""


def render(run: str, end: int, lines: list[str], keep: int | None = None) -> bytes:
    """The file's bytes: the header line (`start`: the count before the first line; `keep`:
    how many of the last lines a reader shows, None: all), then one line each (they hold no
    newline)."""
    head: dict[str, str | int] = {"run": run, "start": end - len(lines)}
    if keep is not None:
        head["keep"] = keep
    return (MARK + json.dumps(head, separators=(",", ":")) + "\n").encode() + more(lines)


def more(lines: list[str]) -> bytes:
    """Lines appended to a file `render` wrote (its header counts them)."""
    return "".join(f"{x}\n" for x in lines).encode()


def parse(data: bytes, skipped: int = 0) -> Tail:
    """Lines are split on `\\n` only: a U+2028 or a lone `\\r` inside one stays inside it. A
    last line with no newline is an append under way (or cut short by a crash): not yet a line.
    `skipped`: lines of the file left out of `data` between its header and the rest."""
    found = data.decode("utf-8", errors="replace").split("\n")
    if found and found[-1] == "":
        found.pop()
    if not found or not found[0].startswith(MARK):
        return Tail(found)
    try:
        head = json.loads(found[0][len(MARK):])
    except ValueError:
        head = None
    if not isinstance(head, dict):
        return Tail(found[1:])
    run, start, keep = head.get("run"), _count(head.get("start")), _count(head.get("keep"))
    lines, end = found[1:], _count(head.get("end"))  # (`end`: an older file, never appended to)
    if start is not None:
        if lines and not data.endswith(b"\n"):
            lines.pop()
        end = start + skipped + len(lines)
    if keep is not None:
        lines = lines[len(lines) - min(keep, len(lines)):]
    return Tail(lines, run if isinstance(run, str) else None, end)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def load(path: Path, limit: int = READ_BYTES) -> Tail | None:
    """What the snapshot at `path` says: its header and the lines of its last `limit` bytes
    (whole lines only: the newest, never the file's first ones passed off as its last); None
    when there is none. Never through a symlink; any other OSError is the caller's to say."""
    try:
        fd = safefs.open_read(path)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size <= limit:
            return parse(pread_full(fd, size, 0))
        head = pread_full(fd, min(_HEAD_BYTES, size), 0)
        head = head[:head.index(b"\n") + 1] if head.startswith(MARK.encode()) and \
            b"\n" in head else b""
        body = pread_full(fd, limit, size - limit)
        cut = size - limit + body.find(b"\n") + 1
        return parse(head + body[cut - size + limit:], _newlines(fd, len(head), cut))
    finally:
        os.close(fd)


def _newlines(fd: int, lo: int, hi: int) -> int:
    """The newlines between offsets `lo` and `hi` (read a block at a time, not kept)."""
    found = 0
    while lo < hi and (part := os.pread(fd, min(hi - lo, 1 << 24), lo)):
        found, lo = found + part.count(b"\n"), lo + len(part)
    return found
