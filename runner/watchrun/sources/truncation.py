"""How the file source follows a truncation of the file it follows: what was not read yet is
read from a copy (copytruncate) or counted lost, copies made while it looked away are read, and
the archives seen cut short at a truncation (a copy being compressed) are judged once they
settle (`unsettled.py`)."""

from __future__ import annotations

import contextlib
import os

from watchrun.events import SourceContext
from watchrun.notify import Watch
from watchrun.offload import offload
from watchrun.preads import pread_full
from watchrun.sources.announced import copy_gone
from watchrun.sources.followed import Followed, log
from watchrun.sources.generation import Generation
from watchrun.sources.identity import FINGERPRINT_BYTES
from watchrun.sources.opened import Plan
from watchrun.sources.plans import plan_switch
from watchrun.sources.resume import next_seq
from watchrun.sources.unsettled import settle, waiting
from watchrun.sources.zeros import head_of


class Truncation(Followed):
    """The truncation steps of the file source (the generation followed is cut short or
    rewritten in place, maybe copied first)."""

    async def _truncated(self, ctx: SourceContext, watch: Watch, gen: Generation,
                         st: os.stat_result) -> None:
        """The followed file was truncated (or rewritten in place). What was not read yet is
        read from a copy when one is found beside it (copytruncate); the rest is counted."""
        ended = gen.checkpoint()
        plan = await offload(plan_switch, self.path, ended, self._known(), self.max_gens,
                             truncated=True, archives=self._archives,
                             waiting=self._pending_archives())
        copy = plan.copy
        if copy is not None:
            plan.steps.insert(0, copy)  # read from the recorded position on
        else:
            await gen.finish(ctx, self.name)
        if plan.cut is not None:
            self._remember(plan.cut)
        read = gen.checkpoint(at_read=True, finished=True)
        if plan.lost is not None:  # (from where it was read to, its last line now recorded)
            plan.gaps.insert(0, copy_gone(read, None, plan.lost))
        if plan.waiting:
            self._waiting += waiting(plan.waiting, read, self.clock.monotonic())
            self._later(watch, self.rotate_wait)
        self._remember(read)
        old_size, read_to = gen.seen_size, gen.pos + gen.nul.ahead  # (not written: not lost)
        gen.reset(0, 1, next_seq(ctx))
        gen.seen_size = os.fstat(gen.fd).st_size
        gen.seen_mtime, gen.pinned = st.st_mtime_ns, True  # (taken before the siblings were)
        gen.announce = announce = {"reason": "truncate", "inode": gen.inode,
                                   "oldInode": gen.inode, "oldSize": old_size}
        olds = await self._read_first(ctx, watch, plan)
        if not olds:  # (else saved before they were read) durable before more is read: a
            await self._saved(ctx, self._state())  # crash's start goes on from the truncation
        if copy is not None:
            read_to = olds[0].pos  # what the copy held (read now, maybe still being written)
        announce["unreadBytes"] = max(0, old_size - read_to)

    async def _read_first(self, ctx: SourceContext, watch: Watch, plan: Plan) -> list[Generation]:
        """Read the copy and the middle generations of a plan now, before the current file;
        they are kept open for rotateWait (a copy may still be being written)."""
        await self._gaps(ctx, plan)
        if not plan.steps and not plan.gaps and not plan.waiting:
            return []  # nothing to read first: no checkpoint save before the current file
        # (an archive waiting to be judged is not kept in the checkpoint: the truncation is,
        # so that after a crash the archive is known for what was read of the generation)
        olds = await self._made(ctx, plan, again=False)  # the copy, then the middle ones
        for o, old in zip(plan.steps, olds, strict=True):
            old.read_as = o.path
        now = self.clock.monotonic()
        for old in olds:
            if old.announce is not None:
                old.announce["reason"] = "truncate"  # copies of generations truncated since
            old.grew_at = now
            watch.track(old.fd)
            self._old.append(old)
        if olds:
            self._later(watch, self.rotate_wait)
        await self._saved(ctx, self._state())  # the truncation is durable before more is read
        for old in olds:
            await self._drain(ctx, old)
        self._keep.dirty.set()
        return olds

    async def _copies(self, ctx: SourceContext, watch: Watch, gen: Generation) -> None:
        """The file had nothing in it when last looked at and has lines now: if it was copied
        and truncated meanwhile (maybe several times), the copies hold lines never read. (Not
        when it left the path: then the siblings are generations rotated after it.)"""
        with contextlib.suppress(OSError):
            at = os.stat(self.path)
            if (at.st_dev, at.st_ino) != (gen.dev, gen.inode):
                return
        for _ in range(self.max_gens):
            first = head_of(gen.fd, FINGERPRINT_BYTES)  # (copies made later: of these or
            plan = await offload(plan_switch, self.path, gen.checkpoint(),  # newer)
                                 self._known(), self.max_gens, truncated=True,
                                 archives=self._archives, waiting=self._pending_archives())
            await self._read_first(ctx, watch, plan)
            if pread_full(gen.fd, len(first), 0) == first:
                if gen.pos == 0:
                    gen.head = first  # reading it notices a truncation from now on
                return
            # copied and truncated again while the copies were read: look for that copy too

    def _pending_archives(self) -> list[tuple[int, int]]:
        """The archives waiting to be judged, or watched after their gap (device, inode): no
        plan judges them."""
        return [w.seen[:2] for w in self._waiting]

    async def _settle(self, ctx: SourceContext, watch: Watch, *, final: bool = False) -> None:
        """Judge the archives seen cut short at a truncation that have not changed for
        rotateWait (all of them, as they are, when `final`: the source stops): `settle`."""
        now = self.clock.monotonic()
        if not self._waiting or (not final and now < min(w.since for w in self._waiting)
                                 + self.rotate_wait):
            return
        self._waiting, gaps, judged, notes = await offload(
            settle, self._waiting, self._known(), now, self.rotate_wait, final=final)
        for gap in gaps:
            await ctx.event("gap", **gap)
        for note in notes:
            log.warning("watcher %s: %s", self.spec.id, note)
        self._archives = (*self._archives, *judged)  # (passed over from now on)
        if self._waiting and not final:  # (at the stop, those watched on are checkpointed)
            self._later(watch, self.rotate_wait)
        self._keep.dirty.set()
