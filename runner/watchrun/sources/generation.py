"""One open generation (inode) of a watched file: reading and framing it, and its position."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any, cast

from watchrun.events import Chunk, SourceContext
from watchrun.match.framing import CountsLines, LineFramer
from watchrun.preads import pread_full
from watchrun.sources.identity import (
    FINGERPRINT_BYTES,
    Checkpoint,
    birth_ns,
    position,
    punched,
    tail_before,
)
from watchrun.sources.reading import (
    DENSE_MATCHES,
    DENSE_READ,
    FIRST_READ,
    READ_SIZE,
    START_READ,
    before_fault,
    first_read,
    hold_heap,
)
from watchrun.sources.resume import next_seq
from watchrun.sources.unreadable import judged
from watchrun.sources.zeros import CountsNul, Nuls, head_of


class Generation:
    """One open generation (inode) of the watched file and how far it has been read."""

    def __init__(self, fd: int, st: os.stat_result, pos: int, line_no: int, max_line: int, *,
                 path: str, seq: int | None = None, inode_gen: int | None = None,
                 within: bool = False) -> None:
        self.fd, self.dev, self.inode, self.path = fd, st.st_dev, st.st_ino, path
        self.inode_gen = inode_gen
        """Its inode's generation number (None: not known), kept in its checkpoints."""
        self.born = birth_ns(fd) if inode_gen is None else None
        """Where that is not known (tmpfs): when its inode was made, kept in its checkpoints."""
        self.max_line = max_line
        self.seen_size, self.seen_mtime = st.st_size, st.st_mtime_ns
        self.grew_at: float | None = None  # monotonic time of its last growth (once retired)
        self.announce: dict[str, Any] | None = None  # a `rotate` record before its first line
        self.pinned = False
        """Truncated and read again from 0: `seen_mtime` stays at the truncation, so a copy of
        a generation that came and went between the search for copies and reading the file
        again is still found at the next truncation."""
        self.changed = False
        """A read stopped because the first bytes changed under it (truncated meanwhile)."""
        self.since = 0
        """The seq of the `rotate` record before its first line (0: none)."""
        self.read_as: str | None = None
        """The name its lines are recorded under when it was not opened at the watched path (a
        rotated generation found beside it, a copy: `app.log.1`); None: the watched path's."""
        self.nul = Nuls()
        """Its NUL bytes not written yet at its end (`zeros.py`)."""
        self.step = START_READ
        """What its next read asks for at most: START_READ first, DENSE_READ after a chunk of many
        matches, up to READ_SIZE (doubling) after chunks of few (`reading.DENSE_READ`)."""
        self.reset(pos, line_no, seq, within=within)

    def reset(self, pos: int, line_no: int, seq: int | None = None, *,
              within: bool = False) -> None:
        self.pos = pos  # next byte to read
        self.framer = LineFramer(self.max_line, offset=pos, line_no=line_no, passing=within)
        self.done = (pos, line_no)  # records are written up to here: the checkpoint
        self.within = within
        """`done` is inside its line, whose head was recorded (`finish`): the rest is passed
        over (`LineFramer.passing`)."""
        self.done_seq = seq  # every record of a line past `done` has at least this seq
        self.head = head_of(self.fd, FINGERPRINT_BYTES)
        self.tail = tail_before(self.fd, pos)
        self.nul.forget()
        self.judged = False  # (its first bytes: `judge`)

    def took(self, data: bytes) -> None:
        """Account for `data` read at `pos`; extend a short head while it is contiguous."""
        have = len(self.head)
        if have < FINGERPRINT_BYTES and self.pos <= have < self.pos + len(data):
            self.head += data[have - self.pos : FINGERPRINT_BYTES - self.pos]
        self.pos += len(data)
        self.tail = (self.tail + data[-FINGERPRINT_BYTES:])[-FINGERPRINT_BYTES:]

    def passed(self, n: int) -> None:
        """`n` NUL bytes at `pos`, before a line, are passed over (a hole: `zeros.py`)."""
        some = min(n, FINGERPRINT_BYTES)  # (what the fingerprints take of them)
        self.took(bytes(some))
        self.pos += n - some
        self.framer.skip(n)

    def is_file(self, st: os.stat_result) -> bool:
        """`st` (a stat of the watched path) is of this generation's file."""
        return (st.st_dev, st.st_ino) == (self.dev, self.inode)

    def rewritten(self) -> bool:
        """Truncated below what was read, or its first bytes or the bytes before the read
        position are no longer the same (rewritten in place, maybe to a bigger size). Told by
        what reads return, not by the size `fstat` reports: where attributes are cached apart
        from the data (NFS and CIFS `actimeo`, FUSE `attr_timeout`, sshfs), that size lags
        what a read has just returned, and a file read past it is no truncated one while it
        still holds the bytes read (docs/decisions.md: "A size below the read position"). First
        bytes that read as NUL where they changed, the bytes before the read position still the
        same, are a hole punched in its head (`fallocate --punch-hole`, to free a log's space
        under its writer): not rewritten."""
        if self.head and not self._head_kept():
            return True
        return bool(self.tail) and tail_before(self.fd, self.pos) != self.tail

    def _head_kept(self) -> bool:
        """Its first bytes read as they did; or changed only to NUL bytes, the bytes before the
        read position still the same (a punched hole; a copytruncate whose writer goes on at
        its old offset leaves NUL bytes before that position too)."""
        now = pread_full(self.fd, len(self.head), 0)
        return now == self.head or (bool(self.tail) and punched(self.head, now)
                                    and tail_before(self.fd, self.pos) == self.tail)

    def went_on(self, fd: int, st: os.stat_result, path: str, inode_gen: int | None) -> int:
        """This generation is read on from the file open as `fd` (found holding what was read
        of it under other numbers: `sources/remounted.py`), at the same position, its pending
        line too; returns the descriptor it was read from until now (the caller's to close)."""
        old, self.fd, self.dev, self.inode = self.fd, fd, st.st_dev, st.st_ino
        self.path, self.inode_gen = path, inode_gen
        self.born = birth_ns(fd) if inode_gen is None else None
        return old

    def saw(self, st: os.stat_result) -> None:
        """`st` (an fstat) was taken while this generation was still at the watched path (its
        first bytes were checked after it): a generation rotated after it is modified no
        earlier than this."""
        self.seen_size = max(self.seen_size, st.st_size)
        if not self.pinned:
            self.seen_mtime = st.st_mtime_ns

    async def drain(
        self, ctx: SourceContext, path: str, size: int, end: int | None, moved: Callable[[], None],
        held: int | None = None,
    ) -> int:
        """Read to EOF (or `end`), at most `size` bytes at a time, fewer while its chunks hold
        many matches (`step`; the first read: what the file holds, `held` when the caller has
        just looked), yielding to the loop in between;
        return the bytes read. `moved()` is called once a chunk's records are written and the
        checkpoint moved."""
        counter = _counter(ctx)
        if not self.judged:  # (before its lines when its first bytes are known: most files)
            await self.judge(ctx)
        start, waited, self.nul.ahead, holes = self.pos, self.nul.ahead, 0, 0
        self.framer.stamp(inode=self.inode, path=self.read_as or path)
        cap = min(size, self.step)
        want = first_read(self.fd, self.pos, cap, held)
        if waited:  # (at NUL bytes not written yet: what was filled of them first, not all)
            want = min(want, FIRST_READ)
        while end is None or self.pos < end:
            want = want if end is None else min(want, end - self.pos)
            fault: OSError | None = None
            try:
                data = pread_full(self.fd, want, self.pos)  # (fewer: the end of the file)
            except OSError as exc:  # (a bad block: what is before it is read, then `exc`)
                data, fault = before_fault(self.fd, want, self.pos), exc
                if not data:
                    raise
            if not data:
                break
            if len(data) == cap:
                hold_heap()  # a backlog: its read buffers are reused, not faulted in anew
            if self.head and not self._head_kept():
                self.changed = True  # truncated (copytruncate) since the last look: `data`
                break  # may be the next generation's; the caller finds the copy first
            got, base, at, skip = len(data), self.pos, 0, 0
            while at < got:  # its pieces between holes (`zeros.py`)
                take, skip = self.nul.cut(self.fd, base, data, at, not self.framer.pending)
                piece = data if (at, take) == (0, got) else data[at:take]
                self.took(piece)
                chunk = self.framer.feed(piece)
                if chunk is not None:
                    await self._handed(ctx, chunk, counter, moved)
                elif self.within:  # the rest of a line recorded before: nothing to record
                    self.done, self.done_seq = (self.framer.position, self.framer.line_no), \
                        next_seq(ctx)
                    moved()
                self.within = self.within and self.framer.passing
                if not skip:
                    break
                self.passed(skip)
                holes, at = holes + skip, take + skip
            if fault is not None:  # (from `pos` on, nothing reads: the caller says so)
                raise fault
            if not (skip or self.nul.more) and (  # (a first read of what `fstat` showed:
                    self.nul.ahead or got < want or (want < cap and not waited)):  # a
                break  # write since then is another event, another drain)
            cap = want = min(size, self.step)
            await asyncio.sleep(0)  # fairness: other watchers read between our chunks
        self.seen_size = max(self.seen_size, self.pos + self.nul.ahead)
        if holes and isinstance(ctx, CountsNul):
            ctx.skipped_nul(holes)
        if not self.judged:  # (what was read may have made them known)
            await self.judge(ctx)
        return self.pos - start

    async def judge(self, ctx: SourceContext, *, end: bool = False) -> None:
        """Its first bytes said, once, when no text pattern can read past them (UTF-16, UTF-32,
        compressed: `unreadable.py`), as `error` records: once LOOKED_AT of them are known, or
        at its `end` (rotated away, truncated, released, a once run's read) with fewer. Said
        again after a truncation (`reset`: other first bytes). Its lines are read all the same
        (counted; a pattern written for those bytes may match them)."""
        said = judged(self.head, end)
        if said is None:
            return
        self.judged = True
        for code, why in said:
            await ctx.event("error", code=code, path=self.path, message=f"{self.path} {why}")

    async def _handed(self, ctx: SourceContext, chunk: Chunk, counter: CountsLines | None,
                      moved: Callable[[], None]) -> None:
        """`chunk` handed to `ctx`: its records are written, the checkpoint moves past it."""
        await ctx.chunk(chunk)
        if counter is not None:
            self.framer.settle(counter.lines_in_last_chunk())
            dense = counter.matches_in_last_chunk() > DENSE_MATCHES
            self.step = DENSE_READ if dense else min(READ_SIZE, 2 * self.step)
        self.done = (chunk.end, self.framer.line_no)
        self.done_seq = next_seq(ctx)
        moved()

    async def finish(self, ctx: SourceContext, path: str, *, kept: bool = False) -> None:
        """This generation ends (rotated away, truncated, once mode): its unterminated last
        line becomes a line, since no newline will come, and first bytes too few to judge so
        far are judged as they are. The checkpoint stays before that line; with `kept` (a once
        run: the next run reads on from the checkpoint), past it when a record covers it (it
        matched): its rest, once written, is passed over, not judged again."""
        self.framer.stamp(inode=self.inode, path=self.read_as or path)
        chunk = self.framer.finish()
        if chunk is not None:
            seq = next_seq(ctx)
            await ctx.chunk(chunk)
            if kept and seq is not None and next_seq(ctx) != seq:
                self.framer.go_on()
                self.done, self.done_seq = (chunk.end, chunk.line_no), next_seq(ctx)
                self.within = True
        if not self.judged:
            await self.judge(ctx, end=True)

    def checkpoint(self, *, finished: bool = False, at_read: bool = False) -> Checkpoint:
        """Its checkpoint at the last recorded line (or at the read position), from memory:
        the file may have been truncated or rewritten since it was read."""
        off, line_no = (self.pos, self.framer.line_no) if at_read else self.done
        within = self.framer.passing if at_read else self.within
        ahead = self.pos - off
        tail = self.tail if not ahead else self.tail[: max(0, len(self.tail) - ahead)]
        pending = json.dumps(self.announce) if self.announce else ""
        try:
            deleted = os.fstat(self.fd).st_nlink == 0
        except OSError:
            deleted = False
        return position(self.dev, self.inode, self.seen_mtime, self.head, tail, off, line_no,
                        self.path, size=self.seen_size, finished=finished, seq=self.done_seq,
                        since=self.since, deleted=deleted, announce=pending,
                        inode_gen=self.inode_gen, mid_line=within, born=self.born)


_COUNTS: dict[type, bool] = {}


def _counter(ctx: SourceContext) -> CountsLines | None:
    """`ctx` when it counts lines for us (`isinstance` on a Protocol costs ~20 µs: once per
    type, not once per wake-up)."""
    kind = type(ctx)
    counts = _COUNTS.get(kind)
    if counts is None:
        counts = _COUNTS[kind] = isinstance(ctx, CountsLines)
    return cast(CountsLines, ctx) if counts else None
