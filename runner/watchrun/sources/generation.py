"""One open generation (inode) of a watched file: reading and framing it, and its position."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from watchrun.events import SourceContext
from watchrun.match.framing import CountsLines, LineFramer
from watchrun.sources.identity import FINGERPRINT_BYTES, Checkpoint, position, tail_before


class Generation:
    """One open generation (inode) of the watched file and how far it has been read."""

    def __init__(self, fd: int, st: os.stat_result, pos: int, line_no: int, max_line: int, *,
                 path: str, seq: int | None = None) -> None:
        self.fd, self.dev, self.inode, self.path = fd, st.st_dev, st.st_ino, path
        self.max_line = max_line
        self.seen_size, self.seen_mtime = st.st_size, st.st_mtime_ns
        self.grew_at: float | None = None  # monotonic time of its last growth (once retired)
        self.announce: dict[str, Any] | None = None  # a `rotate` record before its first line
        self.reset(pos, line_no, seq)

    def reset(self, pos: int, line_no: int, seq: int | None = None) -> None:
        self.pos = pos  # next byte to read
        self.framer = LineFramer(self.max_line, offset=pos, line_no=line_no)
        self.done = (pos, line_no)  # records are written up to here: the checkpoint
        self.done_seq = seq  # every record of a line past `done` has at least this seq
        self.head = os.pread(self.fd, FINGERPRINT_BYTES, 0)
        self.tail = tail_before(self.fd, pos)

    def took(self, data: bytes) -> None:
        """Account for `data` read at `pos`; extend a short head while it is contiguous."""
        have = len(self.head)
        if have < FINGERPRINT_BYTES and self.pos <= have < self.pos + len(data):
            self.head += data[have - self.pos : FINGERPRINT_BYTES - self.pos]
        self.pos += len(data)
        self.tail = (self.tail + data[-FINGERPRINT_BYTES:])[-FINGERPRINT_BYTES:]

    def rewritten(self, st: os.stat_result) -> bool:
        """Truncated below what was read, or its first bytes or the bytes before the read
        position are no longer the same (rewritten in place, maybe to a bigger size)."""
        if st.st_size < self.pos:
            return True
        if self.head and os.pread(self.fd, len(self.head), 0) != self.head:
            return True
        return bool(self.tail) and tail_before(self.fd, self.pos) != self.tail

    def saw(self, st: os.stat_result) -> None:
        """`st` (an fstat) was taken while this generation was still at the watched path: a
        generation rotated after it is modified no earlier than this."""
        self.seen_size = max(self.seen_size, st.st_size)
        self.seen_mtime = st.st_mtime_ns

    async def drain(
        self, ctx: SourceContext, path: str, size: int, end: int | None, moved: Callable[[], None]
    ) -> int:
        """Read to EOF (or `end`), `size` bytes at a time, yielding to the loop in between;
        return the bytes read. `moved()` is called once a chunk's records are written and the
        checkpoint moved."""
        counter = _counter(ctx)
        start = self.pos
        self.framer.stamp(inode=self.inode, path=path)
        while end is None or self.pos < end:
            want = size if end is None else min(size, end - self.pos)
            data = os.pread(self.fd, want, self.pos)
            if not data:
                break
            self.took(data)
            chunk = self.framer.feed(data)
            if chunk is not None:
                await ctx.chunk(chunk)
                if counter is not None:
                    self.framer.settle(counter.lines_in_last_chunk())
                self.done = (chunk.end, self.framer.line_no)
                self.done_seq = next_seq(ctx)
                moved()
            if len(data) < want:
                break
            await asyncio.sleep(0)  # fairness: other watchers read between our chunks
        self.seen_size = max(self.seen_size, self.pos)
        return self.pos - start

    async def finish(self, ctx: SourceContext, path: str) -> None:
        """This generation ends (rotated away, truncated, once mode): its unterminated last
        line becomes a line, since no newline will come. The checkpoint stays before it."""
        self.framer.stamp(inode=self.inode, path=path)
        chunk = self.framer.finish()
        if chunk is not None:
            await ctx.chunk(chunk)

    def checkpoint(self, *, finished: bool = False, at_read: bool = False) -> Checkpoint:
        """Its checkpoint at the last recorded line (or at the read position), from memory:
        the file may have been truncated or rewritten since it was read."""
        off, line_no = (self.pos, self.framer.line_no) if at_read else self.done
        ahead = self.pos - off
        tail = self.tail if not ahead else self.tail[: max(0, len(self.tail) - ahead)]
        return position(self.dev, self.inode, self.seen_mtime, self.head, tail, off, line_no,
                        self.path, size=self.seen_size, finished=finished)


_COUNTS: dict[type, bool] = {}


def _counter(ctx: SourceContext) -> CountsLines | None:
    """`ctx` when it counts lines for us (`isinstance` on a Protocol costs ~20 µs: once per
    type, not once per wake-up)."""
    kind = type(ctx)
    counts = _COUNTS.get(kind)
    if counts is None:
        counts = _COUNTS[kind] = isinstance(ctx, CountsLines)
    return cast(CountsLines, ctx) if counts else None


@dataclass(slots=True)
class Recorded:
    """What a stream recorded since a checkpoint's seq (records a crash kept past it)."""

    offsets: dict[int, tuple[int, str]] = field(default_factory=dict)
    """inode → offset and text of the last line recorded from the checkpointed generation of
    that inode (a line at or before it is a repeat); it applies to copies of it too."""
    fresh: dict[int, tuple[int, str]] = field(default_factory=dict)
    """The same for the last generation that started in that inode (truncate, recreate)."""
    ended: set[int] = field(default_factory=set)
    """Inodes a `rotate` record left: followed to their end."""
    renewed: set[int] = field(default_factory=set)
    """Inodes where a new generation started (truncate, recreate into them)."""

    def marks(self, inode: int, origin: int | None) -> list[tuple[int, str]]:
        """Where the last line recorded from the generation now open as `inode` may be (it
        continues the checkpointed generation `origin`; None: opened afresh)."""
        fresh = [self.fresh[inode]] if inode in self.fresh else []
        if origin is None or (origin == inode and inode in self.renewed):
            return fresh
        first = [self.offsets[origin]] if origin in self.offsets else []
        return first + (fresh if inode != origin else [])


@runtime_checkable
class Resumable(Protocol):
    """A `SourceContext` that numbers its records (the pipeline does). The checkpoint keeps
    the seq from which records may cover lines past it; after a crash the source asks what
    was recorded since, and skips what would be recorded twice."""

    @property
    def next_seq(self) -> int:
        """The seq the next record will get."""
        ...

    async def recorded(self, since_seq: int) -> Recorded:
        """What was recorded from `since_seq` on (read off the loop)."""
        ...

    def skipped(self, lines: int) -> None:
        """`lines` were not read again: they were recorded before a crash."""
        ...


_RESUMES: dict[type, bool] = {}


def resumable(ctx: SourceContext) -> Resumable | None:
    kind = type(ctx)
    ok = _RESUMES.get(kind)
    if ok is None:
        ok = _RESUMES[kind] = isinstance(ctx, Resumable)
    return cast(Resumable, ctx) if ok else None


def next_seq(ctx: SourceContext) -> int | None:
    """The seq the context's next record gets, when it numbers its records."""
    r = resumable(ctx)
    return r.next_seq if r is not None else None


def open_regular(path: Path | str) -> tuple[int, os.stat_result]:
    """Open for reading (never blocks on a FIFO); OSError unless it is a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        code = errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL
        raise OSError(code, "not a regular file")
    return fd, st


def tail_start(fd: int, size: int, window: int) -> int:
    """Following from the end: start at the beginning of an unterminated last line (looked for
    within `window` bytes), so that line is emitted whole once its newline comes."""
    n = min(size, window)
    nl = os.pread(fd, n, size - n).rfind(b"\n")
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
        n, pos = n + data.count(b"\n"), pos + len(data)
    return n


def recorded_end(fd: int, size: int, marks: list[tuple[int, str]]) -> int:
    """The offset just past the last of `marks` (offset, recorded line) that is really in the
    file (a file truncated and rewritten since holds other lines there); -1 when none is.
    Run it in a worker thread."""
    best = -1
    for offset, text in marks:
        head = os.pread(fd, max(64, len(text.encode()) + 16), offset)
        line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
        if offset < size and text and (line.startswith(text[:64]) or text.startswith(line)):
            end = line_end(fd, offset, 1 << 40)
            best = max(best, end if end is not None else size)
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
