"""The state of one followed path shared by the parts of the file source: the generations
open and finished, the checkpoint kept of them, and the steps every part takes (open what a
plan found, skipping what a crash already recorded; read; save; their errors: `faults.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import stat
from typing import Any

from msgspec.structs import replace

from watchrun.clock import Clock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import SourceContext
from watchrun.notify import Notifier, Watch
from watchrun.sources.applies import Required, matching
from watchrun.sources.checkpoint_doc import FileState, LoadProblem
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.faults import Faults
from watchrun.sources.generation import Generation
from watchrun.sources.identity import FINISHED_KEPT, Archive, Checkpoint, birth_ns
from watchrun.sources.keeper import Keeper
from watchrun.sources.long_line import growing_in
from watchrun.sources.opened import Plan
from watchrun.sources.reading import READ_SIZE
from watchrun.sources.resume import Recorded, next_seq
from watchrun.sources.siblings import renumbered_note
from watchrun.sources.stopped import at_stop
from watchrun.sources.unseen import Unseen
from watchrun.sources.unsettled import Waiting, watched

SAVE_EVERY = 1.0
"""At most one checkpoint write per second while lines flow; none while idle."""
MISSING = (errno.ENOENT, errno.ENOTDIR)

log = logging.getLogger("watchrun.checkpoints")


class Followed(Faults):
    """The generations of one followed path and what is known of them; see SPEC §3.2."""

    def __init__(self, spec: WatcherSpec, limits: Limits, store: CheckpointStore,
                 notifier: Notifier, clock: Clock, *, once: bool = False,
                 read_size: int = READ_SIZE) -> None:
        if spec.path is None:
            raise ValueError(f"watcher {spec.id!r} has no path")
        self.spec, self.path, self.name = spec, spec.path, str(spec.path)
        self.limits, self.store, self.notifier, self.clock = limits, store, notifier, clock
        self.once, self.read_size = once, read_size
        self.rotate_wait, self.max_gens = limits.rotate_wait_ms / 1000, limits.max_generations
        self._cur: Generation | None = None
        self._old: list[Generation] = []  # rotated away, still read; oldest first
        self._history: list[Checkpoint] = []  # finished generations, oldest first
        self._kept = max(self.max_gens, FINISHED_KEPT)  # (how many of them: identity.py)
        self._released: Checkpoint | None = None  # the deleted generation last followed
        self._pending: FileState | None = None  # checkpointed; nothing found yet (path missing)
        self._recorded = Recorded()  # after a crash: what was recorded past the checkpoint
        self._resume_seq: int | None = None  # until every generation was read once
        self._initial: tuple[int, int, int | None, int] | None = None
        """Device, inode, birth time (`birth_ns`) and size of a file unreadable at start."""
        self._gone_at: float | None = None
        self._unseen = Unseen()  # files that came to the path and went before any look
        self._archives: tuple[Archive, ...] = ()  # siblings judged (FileState's)
        self._waiting: list[Waiting] = []  # archives seen cut short (`unsettled.py`)
        self._last_error: tuple[str, str] | None = None
        self._keep = Keeper(store, spec.id, SAVE_EVERY)
        self._matching = matching(spec, limits.max_line_bytes)  # (checkpointed: `applies`)
        self._required = Required()
        self._timers: list[asyncio.TimerHandle] = []
        self.ready = asyncio.Event()
        """Set once the start position is held (or the path is watched while missing): a line
        appended after that is read. The runner sends READY=1 only when every source is ready."""

    @property
    def state(self) -> str:
        """For `list`/`status`: `error` while the path cannot be read (EACCES, …), `starting`
        until its start position is held (a restart after a reload, say: not `waiting`, which
        says the file is not there), `waiting` while it is missing, else `running`."""
        if self._last_error is not None:
            return "error"
        if self._cur is not None:
            return "running"
        return "waiting" if self.ready.is_set() else "starting"

    @property
    def cannot_read(self) -> str | None:
        """Why the path cannot be read now (the message of its `error` record), or None."""
        return self._last_error[1] if self._last_error is not None else None

    @property
    def inode(self) -> int | None:
        """The inode being followed (None while the file is missing)."""
        return self._cur.inode if self._cur else None

    @property
    def offset(self) -> int:
        """Offset up to which records are written (what the checkpoint holds)."""
        return self._cur.done[0] if self._cur else 0

    @property
    def saving(self) -> bool:
        """A checkpoint save is running in a worker thread."""
        return self._keep.in_flight > 0

    @property
    def opened(self) -> list[Generation]:
        """The generations open, oldest first: those rotated away and still read, then the
        one at the path."""
        return [*self._old, *([self._cur] if self._cur else [])]

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unterminated last line waiting for its newline."""
        return self._cur.framer.pending if self._cur else 0

    @property
    def long_line(self) -> dict[str, Any] | None:
        """`status`'s `longLine`: a line growing past limits.maxLineBytes (`long_line.py`)."""
        return growing_in(self.opened, self.name)

    async def _apply(self, ctx: SourceContext, watch: Watch, plan: Plan, *,
                     start: list[LoadProblem] | None = None, seq: int | None = None) -> None:
        """Open what a plan found: the last generation is followed, the others are read first
        (at once) and kept open for rotateWait; the one followed until now joins them."""
        gens = await self._made(ctx, plan, seq)
        for o, gen in zip(plan.steps, gens, strict=True):  # (its lines name the file read)
            gen.read_as = None if plan.at_path and o is plan.steps[-1] else o.path
        *olds, cur = gens
        before = self._cur  # (read to its end first: a crash may come before the next look)
        if start is not None:
            inode = cur.inode if plan.at_path else None
            await ctx.event("start", path=self.name, inode=inode, offset=cur.pos)
            at = plan.steps[-1]  # (not when a once run reads it whole: `FileSource._plan`)
            if plan.renumbered and at.origin is not None and at.start == at.origin.offset:
                log.warning("%s", renumbered_note(self.spec.id, self.name, at.origin, at.st,
                                                  cur.done[1]))
            await self._problems(ctx, start)
        await self._gaps(ctx, plan)
        if self._cur is not None:
            olds.insert(0, self._cur)
        now = self.clock.monotonic()
        for gen in olds:
            gen.grew_at = now
        self._old += olds
        self._cur = cur
        for gen in gens:
            watch.track(gen.fd)
        if start is None or watch.stale:  # (at start the watch was armed before the plan was
            watch.rearm()  # made: a change to the path since then has marked it stale)
        if olds:
            self._later(watch, self.rotate_wait)
        if start is None:
            self._unseen.arrived += plan.arrived
            await self._saved(ctx, self._state())  # the switch is durable before more is read
            for gen in [*([before] if before is not None else []), *gens]:
                try:
                    await self._drain(ctx, gen)
                except OSError as exc:  # the one followed until now does not read (EIO): the
                    if gen is not before or exc.errno == errno.ESTALE:  # new ones are read
                        raise  # now, and it is looked at again at once as a rotated one
                    watch.poke()  # (`Rotation._rotated`: its error, its release)
        self._keep.dirty.set()

    async def _drain(self, ctx: SourceContext, gen: Generation, end: int | None = None,
                     held: int | None = None) -> int:
        if gen.announce is not None:
            fields, gen.announce = gen.announce, None
            gen.since = next_seq(ctx) or 0  # the seq the `rotate` record gets
            if gen.inode_gen is not None:  # (a crash's records are not taken for another's)
                fields["inodeGen"] = gen.inode_gen
            await ctx.event("rotate", path=self.name, **fields)
        return await gen.drain(ctx, self.name, self.read_size, end, self._keep.dirty.set, held)

    def _close(self, gen: Generation, watch: Watch) -> None:
        if gen in self._old:
            self._old.remove(gen)
        watch.untrack(gen.fd)
        with contextlib.suppress(OSError):
            os.close(gen.fd)

    async def _gaps(self, ctx: SourceContext, plan: Plan) -> None:
        """The plan's `gap` records, then its `error` records; the archives it judged are
        kept. A generation released early found grown keeps the size it has now: what it grew
        by is counted once."""
        for gap in plan.gaps:
            await ctx.event("gap", **gap)
        if plan.archives is not None:
            self._archives = tuple(plan.archives)
        for error in plan.errors:
            await ctx.event("error", **error)
        for cp in plan.kept:
            self._remember(cp)
        sizes = {id(cp): size for cp, size in plan.grown}
        self._history = [replace(cp, size=sizes[id(cp)]) if id(cp) in sizes else cp
                         for cp in self._history]

    def _remember(self, cp: Checkpoint) -> None:
        self._history = [*self._history, cp][-self._kept :]

    def _known(self) -> list[Checkpoint]:
        return [*self._history, *(g.checkpoint(at_read=True) for g in self.opened)]

    def _caught_up(self, ctx: SourceContext) -> None:
        """At stop: a generation with nothing read past its last recorded line takes the seq of
        the next record, so the next start has no records to look through (the stream's last
        record is then the `stop`, past that seq: `WatcherPipeline.recorded`)."""
        seq = next_seq(ctx)
        if seq is None or self._resume_seq is not None:
            return  # the resume is not over: the records it looks for are still needed
        for gen in self.opened:
            if gen.pos == gen.done[0]:
                gen.done_seq = seq

    def _state(self, *, stopping: bool = False) -> FileState | None:
        """The checkpoint to save; `stopping`: the live watcher's last (`stopped.at_stop`)."""
        opened, live = self.opened, not self.once
        if not opened and self._pending is not None:
            return replace(self._pending, path=self.name, matching=self._matching, live=live,
                           watched=watched(self._waiting))
        gens = [*self._history, *(at_stop(g, followed=g is self._cur) if stopping and live
                                  else g.checkpoint() for g in opened)]
        if not gens:
            return None
        seqs = [g.done_seq for g in opened if g.done_seq is not None]
        if self._resume_seq is not None:
            seqs.append(self._resume_seq)
        return FileState(tuple(gens), min(seqs) if seqs else None, self.name, self._archives,
                         self._matching, self._required.seen, live, watched(self._waiting))

    async def _unreadable(self, ctx: SourceContext, exc: OSError, problems: list[LoadProblem],
                          watch: Watch, plan: Plan | None = None) -> None:
        """A start with nothing read (`exc`: why): its `start` record, what the plan judged, and
        an `error` (none while a live watcher's file is missing: it waits)."""
        await ctx.event("start", path=self.name, inode=None, offset=0)
        await self._problems(ctx, problems)
        if plan is not None and (plan.gaps or plan.errors):
            await self._gaps(ctx, plan)
            await self._saved(ctx, self._state())  # (a restart does not say them again)
        with contextlib.suppress(OSError):
            st0 = os.stat(self.path)
            if stat.S_ISREG(st0.st_mode):
                self._initial = (st0.st_dev, st0.st_ino, birth_ns(self.path), st0.st_size)
        if exc.errno in MISSING and not self.once:
            return  # waiting for it to appear is not an error: the start record has inode
            # null, the log says "not opened yet", `list` says `waiting`
        msg = f"{self.name} does not exist" if exc.errno in MISSING else None
        await self._error(ctx, exc, msg, watch)
