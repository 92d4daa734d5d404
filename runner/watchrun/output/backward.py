"""Read a JSONL stream from its end: newest records first, the last n, a file's whole tail."""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from watchrun.output.records import ReadStats, open_snapshot, parse_record
from watchrun.preads import pread_full

__all__ = ["complete_tail", "last_records", "newest_first", "reverse_lines"]

_BLOCK = 64 * 1024


def reverse_lines(f: BinaryIO, stats: ReadStats) -> Iterator[bytes]:
    """Complete lines of a file, newest first, reading blocks backwards from the end."""
    pos = os.fstat(f.fileno()).st_size
    carry: deque[bytes] = deque()  # a line's tail, which ends just before a newline
    seen_newline = False
    while pos > 0:
        step = min(_BLOCK, pos)
        pos -= step
        f.seek(pos)
        block = f.read(step)
        if b"\n" not in block:
            carry.appendleft(block)
            continue
        parts = (block + b"".join(carry)).split(b"\n")
        carry.clear()
        if not seen_newline:
            seen_newline = True
            if parts.pop():
                stats.torn += 1
        carry.append(parts[0])
        yield from reversed(parts[1:])
    if not seen_newline:
        if any(carry):
            stats.torn += 1
    elif any(carry):
        yield b"".join(carry)


def last_records(
    path: Path, n: int, kinds: set[str] | None = None, *, stats: ReadStats | None = None,
    keep: int | None = None, upto: int | None = None,
) -> list[dict[str, Any]]:
    """The last `n` records (of `kinds`, when given; with a seq of at most `upto`, when given:
    those appended since are passed over), oldest first, read from the end (`keep`: see
    `retained_files`)."""
    found: list[dict[str, Any]] = []
    if n <= 0:
        return found
    with contextlib.closing(newest_first(path, stats=stats, keep=keep)) as recs:
        for rec in recs:
            if (kinds is None or rec.get("kind") in kinds) and (upto is None or rec["seq"] <= upto):
                found.append(rec)
                if len(found) == n:
                    break
    return found[::-1]


def newest_first(path: Path, *, stats: ReadStats | None = None, keep: int | None = None
                 ) -> Generator[dict[str, Any], None, None]:
    """A stream's retained records, newest first, read in blocks from the end (`keep`: see
    `retained_files`); close it to let go of the files early."""
    stats = stats if stats is not None else ReadStats()
    files = open_snapshot(path, keep)
    try:
        for f in reversed(files):
            for line in reverse_lines(f, stats):
                if not line:
                    stats.invalid += 1
                    continue
                rec = parse_record(line, stats)
                if rec is not None:
                    yield rec
    finally:
        for f in files:
            f.close()


def complete_tail(fd: int, size: int) -> tuple[int, bytes]:
    """For a file of `size` bytes open for reading at `fd`: the bytes up to and including its
    last newline (what is left after cutting a torn record), and its last whole line without
    the newline when the block read to find that newline holds all of it (else b"")."""
    pos = size
    while pos > 0:
        step = min(_BLOCK, pos)
        block = pread_full(fd, step, pos - step)
        nl = block.rfind(b"\n")
        if nl >= 0:
            start = block.rfind(b"\n", 0, nl) + 1
            whole = start > 0 or pos == step  # a newline before it, or the file's start
            return pos - step + nl + 1, block[start:nl] if whole else b""
        pos -= step
    return 0, b""
