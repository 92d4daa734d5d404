"""Blocking reads of an open file: how much to read at once (and the C heap kept for it), where
following from the end starts, line counts and line ends (run the slow ones in a worker thread)."""

from __future__ import annotations

import os

from watchrun.match.simd import count_newlines
from watchrun.output.recorded import Mark, is_record_of
from watchrun.preads import pread_full
from watchrun.sources.zeros import written_end

READ_SIZE = 1 << 20
"""A backlog is read this much at a time (between two yields to the loop): a chunk's Python work
is paid per read (256 KiB reads: 5-10 % more CPU on a big file; 4 MiB ones no longer fit the
caches between the scan and the per-match line counts)."""
DENSE_READ = 64 * 1024
"""A generation's reads start at this size and double with each chunk of few matches, up to
READ_SIZE; a chunk of more than DENSE_MATCHES matches brings them back to it. A read of 1 MiB of
2-byte matching lines is 524k records, whose scan held the loop for ~0.3 s: a flood of short
matching lines is read as a command's output is, 64 KiB (32k records at most) per loop turn."""
DENSE_MATCHES = 4096
START_READ = 256 * 1024
"""A generation's first read asks for this much at most: a 1 MiB first read of 2-byte matching
lines held the loop ~0.15 s (its scan and its 524k spans) before its records could go out in
slices, a 64 KiB one split a backlog of a few long matched lines into a wake of an agent each."""
FIRST_READ = 64 * 1024
"""The least a drain asks for first when the file seemed to hold less: a read of what is there
(a tailed file grew by a few KiB) allocates no READ_SIZE buffer to shrink again."""
PAGE = 4096
"""A read that failed (EIO: one bad block fails every read that covers it) is asked again this
much at a time, up to the piece that fails (`before_fault`)."""
HEAP_MMAP_THRESHOLD = 4 << 20
HEAP_TRIM_THRESHOLD = 4 << 20
_heap_held = False


def first_read(fd: int, pos: int, size: int, held: int | None = None) -> int:
    """How much a drain's first read at `pos` asks for: what the file holds past it (at least
    FIRST_READ, as it may have grown since), at most `size`. `held`: the file's size by an
    `fstat` the caller has just made (none is made again)."""
    if held is None:
        held = os.fstat(fd).st_size
    return min(size, max(held - pos, FIRST_READ))


def before_fault(fd: int, size: int, pos: int) -> bytes:
    """After a read of `size` bytes at `pos` failed: what of them reads, asked again a page at a
    time up to the first page that fails (a bad block: the lines before it are read). Empty
    when the page at `pos` fails too. Only on such an error: a read that works is one call."""
    parts, at, end = [], pos, pos + size
    while at < end:
        want = min(PAGE - at % PAGE, end - at)
        try:
            part = pread_full(fd, want, at)
        except OSError:
            break
        parts.append(part)
        at += len(part)
        if len(part) < want:
            break
    return b"".join(parts)


def hold_heap() -> None:
    """A backlog is being read: keep the C heap's freed pages for the next read buffers.

    Each read and each chunk is a fresh bytes object of READ_SIZE. glibc's malloc serves those
    with mmap or gives the top of its heap back when they are freed, so every buffer's pages
    were faulted in and zeroed again: ~0.2 s of system time per GB, a fifth of a `run --once`.
    Buffers up to HEAP_MMAP_THRESHOLD now come from the heap, which keeps up to
    HEAP_TRIM_THRESHOLD of free pages. Once per process; nothing elsewhere than glibc."""
    global _heap_held
    if _heap_held:
        return
    _heap_held = True
    import ctypes  # (3 ms of import that only a backlog pays)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, HEAP_MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    mallopt(-1, HEAP_TRIM_THRESHOLD)  # M_TRIM_THRESHOLD


def tail_start(fd: int, size: int, window: int) -> int:
    """Following from the end: start at the beginning of an unterminated last line (looked for
    within `window` bytes), so that line is emitted whole once its newline comes; before the NUL
    bytes that end the file (not written yet: `zeros.py`)."""
    size = written_end(fd, size)
    n = min(size, window)
    nl = pread_full(fd, n, size - n).rfind(b"\n")
    if nl >= 0:
        return size - n + nl + 1
    return 0 if n == size else size


COUNT_READ = 256 * 1024
"""count_lines reads this much at a time: it runs in a worker thread and holds the GIL while it
counts one read (~0.15 ms here), which is how long it can delay the event loop."""


def count_lines(fd: int, end: int, start: int = 0, line_no: int = 1) -> int:
    """The line number of the line starting at byte `end`, counting from `start` (line
    `line_no`); run it in a worker thread."""
    n, pos = line_no, start
    while pos < end:
        data = os.pread(fd, min(COUNT_READ, end - pos), pos)
        if not data:
            break
        n, pos = n + count_newlines(data), pos + len(data)
    return n


MARK_READ = 64 * 1024  # bytes read to compare a recorded line (redacted, it is shorter)


def recorded_end(fd: int, size: int, marks: list[Mark]) -> tuple[int, bool]:
    """The offset just past the last of `marks` (offset, recorded line) that is really in the
    file (a file truncated and rewritten since holds other lines there); -1 when none is. True
    with it when that line has no newline yet (recorded by a once run as its last line): the
    offset, `size`, is inside it. Run it in a worker thread."""
    best = (-1, False)
    for offset, text, _ in marks:
        head = pread_full(fd, max(MARK_READ, len(text.encode()) + 16), offset)
        nl = head.find(b"\n")
        line = (head if nl < 0 else head[:nl]).decode("utf-8", "replace")
        if offset < size and is_record_of(text, line):
            end = offset + nl + 1 if nl >= 0 else line_end(fd, offset + len(head), 1 << 40)
            best = max(best, (end, False) if end is not None else (size, True))
    return best


def line_end(fd: int, offset: int, limit: int) -> int | None:
    """The offset just past the line starting at `offset` (None when it has no newline yet
    within `limit` bytes of reading)."""
    pos = offset
    while pos - offset < limit:
        data = os.pread(fd, 64 * 1024, pos)
        if not data:
            return None
        nl = data.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(data)
    return None
