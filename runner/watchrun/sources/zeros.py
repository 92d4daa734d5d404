"""NUL bytes in a followed file: zeros a writer put at its end to fill later (an mmap logger, a
file extended ahead of its writes), not read until they are filled; and a hole before a line
(a writer without O_APPEND after a copytruncate), passed over and counted."""

from __future__ import annotations

import errno
import os
from typing import NamedTuple, Protocol, runtime_checkable

from watchrun.preads import pread_full

SCAN = 1 << 20
"""NUL bytes are looked through this much at a time."""
LOOK = 64 << 20
"""Bytes of NUL data looked through at most in one look (a hole is passed with SEEK_DATA, unread):
NUL bytes that go on further are looked through at the next one, not in one go on the loop."""
HOLE = 8
"""NUL bytes that begin a line are a hole, passed over, from this many on; fewer are the line's
(a UTF-16 or UTF-32 newline is followed by one to three)."""
_ZEROS = bytes(SCAN)
_NEAR = 256  # (a run that ends within this many bytes is found by `strip`, without a search)
_RUN = bytes(HOLE)
_NL_RUN = b"\n" + _RUN


def _nul(view: memoryview) -> bool:
    """Every byte of `view` is NUL (compared with `memcmp`, not byte by byte)."""
    return all(_ZEROS.startswith(view[k : k + SCAN]) for k in range(0, len(view), SCAN))


def run_end(data: bytes, start: int = 0) -> int:
    """The index of the first byte of `data` at or after `start` that is not NUL (len(data):
    none is)."""
    near = data[start : start + _NEAR]
    if len(kept := near.lstrip(b"\0")):
        return start + len(near) - len(kept)
    view, lo, hi = memoryview(data), start, len(data)
    if _nul(view[lo:hi]):
        return hi
    while hi - lo > 1:  # (view[lo:hi] holds one; everything before lo is NUL)
        mid = (lo + hi) // 2
        if _nul(view[lo:mid]):
            lo = mid
        else:
            hi = mid
    return lo


def run_start(data: bytes) -> int:
    """Where the NUL bytes that end `data` begin (len(data): it ends with another byte)."""
    view, lo, hi = memoryview(data), 0, len(data)
    if not data or data[-1]:
        return hi
    if kept := len(data[-_NEAR:].rstrip(b"\0")):
        return max(0, hi - _NEAR) + kept
    if _nul(view):
        return 0
    while hi - lo > 1:  # (view[hi:] is NUL; view[lo:hi] holds another byte)
        mid = (lo + hi) // 2
        if _nul(view[mid:hi]):
            hi = mid
        else:
            lo = mid
    return hi


class Look(NamedTuple):
    """What a look past an offset found."""

    at: int | None
    """The offset of the first byte that is not NUL (None: none was found)."""
    to: int
    """How far it looked: to `at`, to the end of the file, or as far as LOOK took it."""


def look_past(fd: int, off: int, size: int) -> Look:
    """The file's first byte at or after `off` that is not NUL (`size`: its size by an fstat
    just made)."""
    read = 0
    while read < LOOK:
        try:
            off = os.lseek(fd, off, os.SEEK_DATA)  # past a hole, unread
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return Look(None, max(off, size))
            # (else a file system that cannot tell its holes: they are read)
        data = pread_full(fd, SCAN, off)
        at = run_end(data)
        if at < len(data):
            return Look(off + at, off + at)
        off, read = off + len(data), read + len(data)
        if len(data) < SCAN:
            return Look(None, max(off, size))
    return Look(None, off)


def head_of(fd: int, n: int) -> bytes:
    """The file's first `n` bytes, less the NUL bytes that end them unless other bytes are
    found after those (else they may not be written yet)."""
    head = pread_full(fd, n, 0)
    end = run_start(head)
    if end == len(head):
        return head
    return head if look_past(fd, len(head), os.fstat(fd).st_size).at is not None else head[:end]


def written_end(fd: int, size: int) -> int:
    """Where the NUL bytes that end the file (`size` bytes long) begin: `size` when its last
    byte is another one, or when more than LOOK bytes of them are data (its holes are passed
    with SEEK_DATA/SEEK_HOLE, not read)."""
    if not size or os.pread(fd, 1, size - 1) != b"\0":
        return size
    budget = LOOK
    for start, end in reversed(_data(fd, size)):
        while end > start and budget > 0:
            n = min(SCAN, end - start)
            kept = run_start(pread_full(fd, n, end - n))
            if kept:
                return end - n + kept
            end, budget = end - n, budget - n
    return 0 if budget > 0 else size


def _data(fd: int, size: int) -> list[tuple[int, int]]:
    """The file's data regions (its holes left out), where its file system tells them: the
    whole file where it does not."""
    found: list[tuple[int, int]] = []
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
            off = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break
            return [(0, size)]
        found.append((start, min(off, size)))
    return found


@runtime_checkable
class CountsNul(Protocol):
    """A `SourceContext` that counts the NUL bytes passed over before lines (the pipeline:
    `status`'s `skippedNulBytes`)."""

    def skipped_nul(self, count: int) -> None:
        """`count` more NUL bytes were passed over."""
        ...


class Nuls:
    """A generation's NUL bytes that wait at its end to be written (`ahead`).

    NUL bytes that run to the end of the file are not read: a writer that extends its file
    first and fills it later (an mmap logger, `ftruncate` or `fallocate` ahead) has not written
    them yet, and reading them would make its fill look like a rewrite. Once other bytes follow
    them they are read: HOLE or more before a line (a hole a writer without O_APPEND left after a
    copytruncate), passed over, so the line after them is matched whole; else as the line's."""

    __slots__ = ("_known", "ahead", "more")

    def __init__(self) -> None:
        self.ahead = 0
        """NUL bytes from the read position to the end of the file at the last read."""
        self.more = False
        """The last read stopped at NUL bytes not looked through to their end yet (LOOK): the
        next read goes on looking."""
        self._known = (0, Look(None, 0))  # where the last look's NUL bytes began, what it found

    def forget(self) -> None:
        """The generation is read again from its start (truncated): what was seen is not so."""
        self.ahead, self.more, self._known = 0, False, (0, Look(None, 0))

    def cut(self, fd: int, base: int, data: bytes, at: int, line_start: bool
            ) -> tuple[int, int]:
        """`data` read at offset `base`, from its index `at` on (a line begins there when
        `line_start`): what to read of it, up to its index `take`; then `skip` NUL bytes to pass
        over (a hole: HOLE or more before a line, other bytes after them, maybe past `data`).
        When the two stop short of its end, NUL bytes follow that are not written yet, or not
        known to be (`ahead`, `more`): the read stops there."""
        n, self.ahead, self.more = len(data), 0, False
        if data.find(b"\0", at) < 0:  # (memchr: what an ordinary read pays)
            return n, 0
        if line_start and data.startswith(_RUN, at):
            hole = at
        else:
            nl = data.find(_NL_RUN, at)
            hole = n if nl < 0 else nl + 1
        past = run_end(data, hole)
        if past < n:  # (other bytes follow it in `data`)
            return hole, past - hole
        end = hole if hole < n else run_start(data)  # (the NUL bytes that end `data`)
        if end == n:  # (NUL bytes inside its lines are theirs)
            return n, 0
        begins = data[end - 1 : end] == b"\n" if end > at else line_start
        found = self._after(fd, base + end, base + n, exact=begins)
        if found is None:
            return end, 0
        return (end, found - base - end) if begins and found - base - end >= HOLE else (n, 0)

    def _after(self, fd: int, run: int, off: int, *, exact: bool) -> int | None:
        """The offset of the first byte past `off` that is not NUL (the bytes from `run` to `off`
        are NUL); None when none is known: the NUL bytes from `run` on run to the end of the
        file (`ahead`), or further than was looked yet (`more`). A look goes on where the last
        one of the same NUL bytes ended, as a writer fills them from their start (not when the
        file is shorter now, nor to pass a hole over, `exact`: as far as a look finds now)."""
        size, (since, last) = os.fstat(fd).st_size, self._known
        if since <= run and off < last.to <= size and not (exact and last.at is not None):
            found = last if last.at is not None else look_past(fd, last.to, size)
        else:
            found = look_past(fd, off, size)
        self._known = (run, found)
        if found.at is None:
            self.ahead, self.more = size - run, found.to < size
        return found.at
