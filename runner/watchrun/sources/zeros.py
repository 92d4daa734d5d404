"""NUL bytes in a followed file: zeros a writer put at its end to fill later (an mmap logger, a
file extended ahead of its writes), not read until they are filled; and a hole before a line
(a writer without O_APPEND after a copytruncate), passed over and counted."""

from __future__ import annotations

import errno
import os
from typing import Protocol, runtime_checkable

SCAN = 1 << 20
"""NUL bytes are looked through this much at a time (a hole is passed with SEEK_DATA, unread)."""
_ZEROS = bytes(SCAN)


def _nul(view: memoryview) -> bool:
    """Every byte of `view` is NUL (compared with `memcmp`, not byte by byte)."""
    return all(_ZEROS.startswith(view[k : k + SCAN]) for k in range(0, len(view), SCAN))


def run_end(data: bytes, start: int = 0) -> int:
    """The index of the first byte of `data` at or after `start` that is not NUL (len(data):
    none is)."""
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
    if _nul(view):
        return 0
    while hi - lo > 1:  # (view[hi:] is NUL; view[lo:hi] holds another byte)
        mid = (lo + hi) // 2
        if _nul(view[mid:hi]):
            hi = mid
        else:
            lo = mid
    return hi


def next_data(fd: int, off: int) -> int | None:
    """The offset of the file's first byte at or after `off` that is not NUL; None when it holds
    only NUL bytes from `off` to its end."""
    while True:
        try:
            off = os.lseek(fd, off, os.SEEK_DATA)  # past a hole, unread
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return None
            # (else a file system that cannot tell its holes: they are read)
        data = os.pread(fd, SCAN, off)
        at = run_end(data)
        if at < len(data):
            return off + at
        if len(data) < SCAN:
            return None
        off += len(data)


def head_of(fd: int, n: int) -> bytes:
    """The file's first `n` bytes, less the NUL bytes that end it (not written yet)."""
    head = os.pread(fd, n, 0)
    end = run_start(head)
    return head[:end] if end < len(head) and next_data(fd, len(head)) is None else head


def written_end(fd: int, size: int) -> int:
    """Where the NUL bytes that end the file (`size` bytes long) begin: `size` when its last
    byte is another one. Its holes are passed with SEEK_DATA/SEEK_HOLE, not read."""
    if not size or os.pread(fd, 1, size - 1) != b"\0":
        return size
    for start, end in reversed(_data(fd, size)):
        while end > start:
            n = min(SCAN, end - start)
            kept = run_start(os.pread(fd, n, end - n))
            if kept:
                return end - n + kept
            end -= n
    return 0


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
    them they are read: in a line, as its bytes; before a line (a hole a writer without
    O_APPEND left after a copytruncate), passed over, so the line after them is matched whole."""

    __slots__ = ("_known", "ahead")

    def __init__(self) -> None:
        self.ahead = 0
        """NUL bytes from the read position to the end of the file at the last read."""
        self._known = (0, 0)  # (from, to): NUL bytes up to the end of the file at a last look

    def forget(self) -> None:
        """The generation is read again from its start (truncated): what was seen is not so."""
        self.ahead, self._known = 0, (0, 0)

    def cut(self, fd: int, pos: int, data: bytes, line_start: bool) -> tuple[int, int]:
        """`data` read at `pos` (at the start of a line when `line_start`): read its first
        `take` bytes, then pass over `skip` NUL bytes (a hole before a line: other bytes follow
        them, maybe past `data`). When the two do not reach the end of `data`, the rest of the
        file is NUL bytes (`ahead`): the read stops there until they are written."""
        n, self.ahead = len(data), 0
        if b"\0" not in data:  # (memchr: what an ordinary read pays)
            return n, 0
        begins = line_start and not data[0]
        i = 0 if begins else data.find(b"\n\0") + 1
        if begins or i:  # NUL bytes begin a line at i
            j = run_end(data, i)
            if j < n:
                return i, j - i
            found = self._after(fd, pos + i, pos + n)
            return (i, 0) if found is None else (i, found - pos - i)
        end = run_start(data)  # NUL bytes in a line are its bytes, unless the file ends there
        return (end, 0) if end < n and self._after(fd, pos + end, pos + n) is None else (n, 0)

    def _after(self, fd: int, run: int, off: int) -> int | None:
        """The offset of the first byte past `off` that is not NUL (the bytes from `run` to `off`
        are NUL); None when there is none up to the end of the file (`ahead`: the NUL bytes from
        `run` on). NUL bytes found to run to its end at an earlier look are not looked through
        again, as a writer fills them from their start (unless the file is shorter now)."""
        size, (since, to) = os.fstat(fd).st_size, self._known
        known = since <= run and off < to <= size and next_data(fd, to) is None
        found = None if known else next_data(fd, off)
        if found is None:
            self.ahead, self._known = size - run, (run, size)
        return found
