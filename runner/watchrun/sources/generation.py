"""One open generation (inode) of a watched file, and the file helpers the tailer uses."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import cast

from watchrun.events import SourceContext
from watchrun.match.framing import CountsLines, LineFramer
from watchrun.sources.checkpoints import FINGERPRINT_BYTES, Checkpoint, fingerprint


class Generation:
    """One open generation (inode) of the watched file and how far it has been read."""

    def __init__(self, fd: int, st: os.stat_result, pos: int, line_no: int, max_line: int) -> None:
        self.fd, self.dev, self.inode = fd, st.st_dev, st.st_ino
        self.max_line = max_line
        self.retire_at: float | None = None
        self.reset(pos, line_no)

    def reset(self, pos: int, line_no: int) -> None:
        self.pos = pos  # next byte to read
        self.framer = LineFramer(self.max_line, offset=pos, line_no=line_no)
        self.done = (pos, line_no)  # records are written up to here: the checkpoint
        self.head = os.pread(self.fd, FINGERPRINT_BYTES, 0)

    def took(self, data: bytes) -> None:
        """Account for `data` read at `pos`; extend a short head while it is contiguous."""
        have = len(self.head)
        if have < FINGERPRINT_BYTES and self.pos <= have < self.pos + len(data):
            self.head += data[have - self.pos : FINGERPRINT_BYTES - self.pos]
        self.pos += len(data)

    def rewritten(self, size: int) -> bool:
        """Truncated below what was read, or its first bytes are no longer the same."""
        if size < self.pos:
            return True
        return bool(self.head) and os.pread(self.fd, len(self.head), 0) != self.head

    async def drain(
        self, ctx: SourceContext, path: str, size: int, end: int | None, moved: Callable[[], None]
    ) -> None:
        """Read to EOF (or `end`), `size` bytes at a time, yielding to the loop in between.
        `moved()` is called once a chunk's records are written and the checkpoint moved."""
        counter = _counter(ctx)
        self.framer.stamp(inode=self.inode, path=path)
        while end is None or self.pos < end:
            want = size if end is None else min(size, end - self.pos)
            data = os.pread(self.fd, want, self.pos)
            if not data:
                return
            self.took(data)
            chunk = self.framer.feed(data)
            if chunk is not None:
                await ctx.chunk(chunk)
                if counter is not None:
                    self.framer.settle(counter.lines_in_last_chunk())
                self.done = (chunk.end, self.framer.line_no)
                moved()
            if len(data) < want:
                return
            await asyncio.sleep(0)  # fairness: other watchers read between our chunks

    async def finish(self, ctx: SourceContext, path: str) -> None:
        """This generation ends (rotated away, truncated, once mode): its unterminated last
        line becomes a line, since no newline will come. The checkpoint stays before it."""
        self.framer.stamp(inode=self.inode, path=path)
        chunk = self.framer.finish()
        if chunk is not None:
            await ctx.chunk(chunk)

    def checkpoint(self, path: str) -> Checkpoint:
        fp, n = fingerprint(self.head), len(self.head)
        return Checkpoint(self.dev, self.inode, fp, self.done[0], self.done[1], path, n)


_COUNTS: dict[type, bool] = {}


def _counter(ctx: SourceContext) -> CountsLines | None:
    """`ctx` when it counts lines for us (`isinstance` on a Protocol costs ~20 µs: once per
    type, not once per wake-up)."""
    kind = type(ctx)
    counts = _COUNTS.get(kind)
    if counts is None:
        counts = _COUNTS[kind] = isinstance(ctx, CountsLines)
    return cast(CountsLines, ctx) if counts else None


def open_regular(path: Path) -> tuple[int, os.stat_result]:
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


def count_lines(fd: int, end: int) -> int:
    """The line number of the line starting at byte `end` (run it in a worker thread)."""
    n, pos = 1, 0
    while pos < end:
        data = os.pread(fd, min(COUNT_READ, end - pos), pos)
        if not data:
            break
        n, pos = n + data.count(b"\n"), pos + len(data)
    return n
