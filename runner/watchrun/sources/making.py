"""Generations made of what a plan opened, the crash dedup applied: all of a plan's or, when one
cannot be read, none (its descriptors closed)."""

from __future__ import annotations

import json
import os

from watchrun.config.model import Limits
from watchrun.events import SourceContext
from watchrun.offload import offload
from watchrun.sources.generation import Generation
from watchrun.sources.identity import Checkpoint
from watchrun.sources.opened import Opened, Plan
from watchrun.sources.reading import count_lines, recorded_end
from watchrun.sources.resume import Recorded, next_seq, resumable


class Making:
    """The steps of a followed path's source that make generations of what a plan opened
    (`Followed` holds the state they read and change)."""

    limits: Limits
    _old: list[Generation]
    _history: list[Checkpoint]
    _recorded: Recorded
    _resume_seq: int | None

    async def _open(self, ctx: SourceContext, o: Opened, seq: int | None = None) -> Generation:
        """A generation from what a plan opened (read now: no longer a file `beside` it). After
        a crash, lines recorded past the checkpoint (up to the last recorded line of that inode)
        are skipped. `seq`: a lower bound of the seqs of its lines' records (default: the next).
        Read on from inside a line whose head was recorded (`Checkpoint.mid_line`), its rest is
        passed over."""
        start, line_no, at = o.start, o.line_no, (o.st.st_dev, o.st.st_ino)
        within = o.origin is not None and o.origin.mid_line and (start, line_no) == (
            o.origin.offset, o.origin.line_no)
        self._history = [c for c in self._history if not c.beside or (c.dev, c.inode) != at]
        renewed = o.announce is not None and o.announce["reason"] in ("truncate", "recreate")
        finished = {(cp.inode, cp.since) for cp in self._history if cp.since}
        marks = self._recorded.marks(o.st.st_ino, o.generation(), o.origin, renewed, finished)
        resumes = resumable(ctx)
        end, inside = -1, False
        if marks and resumes is not None:
            end, inside = await offload(recorded_end, o.fd, o.st.st_size, marks)
        if resumes is not None and end > start:
            skipped_to = await offload(count_lines, o.fd, end, start, line_no)
            resumes.skipped(skipped_to - line_no)
            start, line_no, within = end, skipped_to, inside
        if self._resume_seq is not None:
            seq = self._resume_seq
        gen = Generation(o.fd, o.st, start, line_no, self.limits.max_line_bytes, path=o.path,
                         seq=seq if seq is not None else next_seq(ctx), inode_gen=o.generation(),
                         within=within)
        gen.announce = o.announce
        began = self._recorded.began(gen.inode)
        if o.origin is None and gen.announce is not None and marks and began:
            gen.announce, gen.since = None, began  # its `rotate` record and lines were
            # written before a crash: not again (a second one began an epoch of its own, and
            # a checkpoint saved before it was written took the lines for the first one's)
        if o.origin is not None and o.origin.inode != gen.inode and gen.announce is None:
            gen.since = began  # a copy: its records follow the last `rotate` record into its
            # inode (the number may have been another generation's, read earlier)
        if o.origin is not None and o.origin.inode == gen.inode:  # the same generation, on
            gen.since = o.origin.since
            if o.origin.announce and gen.announce is None:  # (saved before it was written)
                written = self._recorded.announced(o.origin)
                if written is None:
                    gen.announce = json.loads(o.origin.announce)
                else:  # written before a crash: not again (its lines follow that record)
                    gen.since = written
        if gen.announce is not None and (first := next_seq(ctx)) is not None:
            gen.done_seq = first  # its records follow its `rotate` record, not yet written:
            # the first one into its inode from here (an older seq, as a resume gives, may
            # find an earlier truncation of the same inode after a crash)
        return gen

    def _again(self, o: Opened) -> Generation | None:
        """The path points back at a generation read before (a symlink flipped back, a hard
        link): still open (rotated away, read for rotateWait), it is followed on from where it
        is, not read by a second reader (`_take_back`); once released, it is opened again at its
        checkpoint (no longer finished). After the `rotate` record that says so."""
        if o.origin is None or (o.origin.dev, o.origin.inode) != (o.st.st_dev, o.st.st_ino):
            return None
        if o.announce is not None:
            o.announce["reason"] = "rename"  # (not a new file: its lines go on)
        self._history = [cp for cp in self._history if cp is not o.origin]
        return next((g for g in self._old if (g.dev, g.inode) == (o.origin.dev, o.origin.inode)),
                    None)

    def _take_back(self, ctx: SourceContext, o: Opened, gen: Generation) -> None:
        """`gen`, still open, is what `o` opened again (`_again`): `o`'s descriptor is closed."""
        os.close(o.fd)
        self._old.remove(gen)
        gen.announce, gen.grew_at = o.announce, None
        if gen.announce is not None and (first := next_seq(ctx)) is not None:
            gen.done_seq = first  # (nothing past `done` is recorded yet: its records follow)

    async def _made(self, ctx: SourceContext, plan: Plan, seq: int | None = None, *,
                    again: bool = True) -> list[Generation]:
        """A generation of each file a plan opened (`again`: or the one still open, `_again`).
        When one cannot be made (opened, but its first bytes not read: EIO, ESPIPE, a read
        denied), none is: every descriptor the plan opened is closed, the generations known
        are as they were, and the error is raised (tried again at the next look, which kept
        one more descriptor each time)."""
        history, gens = self._history, []
        try:
            for o in plan.steps:
                gens.append((self._again(o) if again else None) or await self._open(ctx, o, seq))
        except BaseException:
            self._history = history
            plan.close()  # (those of generations made own them; those taken back are open)
            raise
        for o, gen in zip(plan.steps, gens, strict=True):
            if gen.fd != o.fd:
                self._take_back(ctx, o, gen)
        return gens
