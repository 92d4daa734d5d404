"""A followed generation found at its path under another device or inode number while a live
runner follows it, still holding what was read of it (its share mounted again under the runner:
`umount -l` and a mount; a copy moved in its place): it is read on there from the same
position, with no `rotate`. The descriptor it was read from until then is kept for rotateWait
only to tell whether it is that file after all (`Shadow`): what it holds past the position is
what the file at the path holds at the same offsets, or it is another file, read as well."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from msgspec.structs import replace

from watchrun.events import SourceContext
from watchrun.notify import Watch
from watchrun.offload import offload
from watchrun.preads import pread_full
from watchrun.sources.copies import ident
from watchrun.sources.generation import Generation
from watchrun.sources.identity import Checkpoint
from watchrun.sources.opened import Opened, open_at_path
from watchrun.sources.reading import READ_SIZE
from watchrun.sources.resume import next_seq
from watchrun.sources.rotated import Entry
from watchrun.sources.rotation import Rotation
from watchrun.sources.siblings import judged_kept, renumbered_at, renumbered_note
from watchrun.sources.stale import named

log = logging.getLogger("watchrun.checkpoints")

SAME, SHORT, OTHER = "same", "short", "other"
"""What a shadow holds past its position (`Shadow.look`): nothing the file at the path does not
hold too; more than the file at the path shows (yet); bytes that differ from that file's."""


class Shadow:
    """The descriptor `gen` was read from before it went on in the file at the path under other
    numbers (`Remounted._went_on`): every byte it holds before `pos` is `gen`'s file's at the
    same offset; the line there is line `line_no`, beginning at `line_at`."""

    def __init__(self, gen: Generation, now: float) -> None:
        self.gen, self.fd, self.path = gen, gen.fd, gen.path
        self.inode, self.inode_gen, self.since = gen.inode, gen.inode_gen, gen.since
        self.pos, self.line_at, self.line_no = gen.pos, gen.framer.position, gen.framer.line_no
        self.end = self.pos  # where it ended at the last look
        self.grew_at = now
        self.short_at: float | None = None
        """Since when it holds more than `gen` shows: up to `short_end` (its end then)."""
        self.short_end = 0

    def look(self) -> str:
        """(blocking) What it holds past `pos` against what `gen` holds at the same offsets,
        `pos` moved past the bytes they share: SAME, SHORT or OTHER."""
        while True:
            mine = pread_full(self.fd, READ_SIZE, self.pos)
            theirs = pread_full(self.gen.fd, len(mine), self.pos) if mine else b""
            n = shared(mine, theirs)
            if n:
                last = mine.rfind(b"\n", 0, n)
                if last >= 0:
                    self.line_at, self.line_no = self.pos + last + 1, self.line_no + mine.count(
                        b"\n", 0, n)
                self.pos += n
            self.end = self.pos + len(mine) - n
            if n < len(mine):
                return OTHER if n < len(theirs) else SHORT
            if len(mine) < READ_SIZE:
                return SAME


def shared(a: bytes, b: bytes) -> int:
    """How many first bytes `a` and `b` have in common (halving: each comparison in C)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; a[lo:hi] != b[lo:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def went_on_at(path: Path, cp: Checkpoint) -> tuple[Opened, list[Entry]] | None:
    """(blocking) The file at the path, when it holds the generation `cp` (its checkpoint at the
    read position) under other numbers and no sibling is that generation under its own
    (`siblings.renumbered_at`), with the siblings listed; else None. Also when `cp`'s file was
    deleted (a copy moved over it): its descriptor, kept as a `Shadow`, tells whether it is
    still written to."""
    o = open_at_path(path)
    if o is None:
        return None
    try:
        listed = renumbered_at(path, replace(cp, deleted=False), o)
        if listed is not None:
            o.generation()
            return o, listed
    except OSError:
        os.close(o.fd)
        raise
    os.close(o.fd)
    return None


class Remounted(Rotation):
    """The switch of a live file source whose followed generation is at the path under other
    numbers, and the shadows it leaves (see the module's docstring)."""

    _shadows: tuple[Shadow, ...] = ()

    async def _switch(self, ctx: SourceContext, watch: Watch, gen: Generation) -> bool:
        if not self.once and await self._went_on(ctx, watch, gen):
            return True
        return await super()._switch(ctx, watch, gen)

    async def _went_on(self, ctx: SourceContext, watch: Watch, gen: Generation) -> bool:
        """When the file at the path is `gen` under other numbers, `gen` is read on from it,
        said once in the log; the descriptor it was read from is kept as a `Shadow`."""
        cp = gen.checkpoint(at_read=True)
        found = await offload(went_on_at, self.path, cp)
        if found is None:
            return False
        o, listed = found
        try:  # (first: a path turned remote is left to the source that goes on from the
            watch.rearm()  # checkpoint, on a thread of its own, `handover.py`: the same rule)
        except BaseException:
            os.close(o.fd)
            raise
        self._shadows = (*self._shadows, Shadow(gen, self.clock.monotonic()))
        gen.went_on(o.fd, o.st, o.path, o.gen)
        at = ident(o.st)
        self._history = [c for c in self._history if not c.beside or (c.dev, c.inode) != at]
        self._archives = tuple(judged_kept(self._archives, listed, [at]))  # (older than it,
        # under their numbers now, as at a start: `plans.plan_start`)
        log.warning("%s", renumbered_note(self.spec.id, self.name, cp, o.st, gen.done[1]))
        self._unseen.arrived += 1  # (it came to the path: `Unseen`, as a plan's file does)
        watch.track(o.fd)
        self._later(watch, self.rotate_wait)
        await self._saved(ctx, self._state())  # the switch is durable before more is read
        await self._drain(ctx, gen)
        return True

    async def _rotated(self, ctx: SourceContext, watch: Watch) -> bool:
        await self._shadowed(ctx, watch)
        return await super()._rotated(ctx, watch)

    async def _shadowed(self, ctx: SourceContext, watch: Watch) -> None:
        """Each shadow is looked at: once it has held nothing its generation does not for
        rotateWait, it is closed unread (a share mounted again: the same file's bytes); when it
        holds bytes that differ, or more than its generation shows for rotateWait, it is
        another file (a copy was moved in its place while it was written to): its lines from
        where they part are read as a rotated generation's."""
        now = self.clock.monotonic()
        for s in self._shadows:
            was, said = s.pos, None
            if s.gen in self.opened:  # (else it was released: nothing left to compare with)
                with contextlib.suppress(OSError):  # (its reads fail: nothing to read of it)
                    said = await offload(s.look)
            if s.pos != was:
                s.grew_at = now
                self._later(watch, self.rotate_wait)
            if said != SHORT:
                s.short_at = None
            elif s.short_at is None or s.pos >= s.short_end:  # (what it held more is shown)
                s.short_at, s.short_end = now, s.end
                self._later(watch, self.rotate_wait)
            if said == OTHER or (s.short_at is not None and now - s.short_at >= self.rotate_wait):
                self._shadows = tuple(x for x in self._shadows if x is not s)
                if not self._read_apart(ctx, s, now):
                    self._unshadow(watch, s)
            elif said is None or (said == SAME and now - s.grew_at >= self.rotate_wait):
                self._unshadow(watch, s)

    def _read_apart(self, ctx: SourceContext, s: Shadow, now: float) -> bool:
        """`s` is another file than its generation's: read as a rotated generation from the
        line where they part (its lines, recorded under its inode number). False when it cannot
        be (its reads fail)."""
        try:
            gen = Generation(s.fd, os.fstat(s.fd), s.line_at, s.line_no,
                             self.limits.max_line_bytes, path=s.path, seq=next_seq(ctx),
                             inode_gen=s.inode_gen)
        except OSError:
            return False
        gen.since, gen.read_as, gen.grew_at = s.since, named(gen), now
        self._old.append(gen)
        self._keep.dirty.set()
        log.warning("watcher %s: %s (inode %d) was written to after a file holding the same "
                    "took its place at the path: they are two files, so its lines from line %d "
                    "on are read too", self.spec.id, s.path, s.inode, s.line_no)
        return True

    def _unshadow(self, watch: Watch, s: Shadow) -> None:
        """`s` is closed, unread."""
        self._shadows = tuple(x for x in self._shadows if x is not s)
        watch.untrack(s.fd)
        with contextlib.suppress(OSError):
            os.close(s.fd)

    def _drop_shadows(self, watch: Watch) -> None:
        """The source stops: the shadows are closed unread."""
        for s in self._shadows:
            self._unshadow(watch, s)
