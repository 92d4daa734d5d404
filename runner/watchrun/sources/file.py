"""A file watcher's source: follow a path like `tail -F` through every generation of the file,
frame its lines, checkpoint positions, and record what cannot be read."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import stat
from typing import Any

from watchrun.clock import Clock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import SourceContext
from watchrun.notify import Notifier, Watch
from watchrun.sources.checkpoints import CheckpointStore, FileState, Keeper
from watchrun.sources.generation import (
    Generation,
    Recorded,
    count_lines,
    next_seq,
    recorded_end,
    resumable,
    tail_start,
)
from watchrun.sources.identity import Checkpoint
from watchrun.sources.plans import plan_start, plan_switch
from watchrun.sources.siblings import Opened, Plan, open_at_path

SAVE_EVERY = 1.0
"""At most one checkpoint write per second while lines flow; none while idle."""
RETRY_S = 1.0
"""An open that failed for want of descriptors (EMFILE/ENFILE) is tried again this often."""
_MISSING = (errno.ENOENT, errno.ENOTDIR)
_NO_FDS = (errno.EMFILE, errno.ENFILE)


class FileSource:
    """Follows one path; see SPEC §3.2. Every generation of the file is read, oldest first;
    nothing is re-emitted across rotation or restart; what cannot be read is a `gap` record."""

    def __init__(self, spec: WatcherSpec, limits: Limits, store: CheckpointStore,
                 notifier: Notifier, clock: Clock, *, once: bool = False,
                 read_size: int = 256 * 1024) -> None:
        if spec.path is None:
            raise ValueError(f"watcher {spec.id!r} has no path")
        self.spec, self.path, self.name = spec, spec.path, str(spec.path)
        self.limits, self.store, self.notifier, self.clock = limits, store, notifier, clock
        self.once, self.read_size = once, read_size
        self.rotate_wait, self.max_gens = limits.rotate_wait_ms / 1000, limits.max_generations
        self._cur: Generation | None = None
        self._old: list[Generation] = []  # rotated away, still read; oldest first
        self._history: list[Checkpoint] = []  # finished generations, oldest first
        self._released: Checkpoint | None = None  # the deleted generation last followed
        self._pending: FileState | None = None  # checkpointed; nothing found yet (path missing)
        self._recorded = Recorded()  # after a crash: what was recorded past the checkpoint
        self._resume_seq: int | None = None  # until every generation was read once
        self._initial: tuple[int, int, int] | None = None  # dev, inode, size when unreadable
        self._gone_at: float | None = None
        self._last_error: tuple[str, str] | None = None
        self._keep = Keeper(store, spec.id, SAVE_EVERY)
        self._timers: list[asyncio.TimerHandle] = []
        self.ready = asyncio.Event()
        """Set once the start position is held (or the path is watched while missing): a line
        appended after that is read. The runner sends READY=1 only when every source is ready."""

    @property
    def state(self) -> str:
        """For `list`/`status`: `error` while the path cannot be read (EACCES, …), `waiting`
        while it is missing, else `running`."""
        if self._last_error is not None:
            return "error"
        return "running" if self._cur is not None else "waiting"

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
    def pending_bytes(self) -> int:
        """Bytes of an unterminated last line waiting for its newline."""
        return self._cur.framer.pending if self._cur else 0

    async def run(self, ctx: SourceContext) -> None:
        watch = self.notifier.watch(self.path)
        saver: asyncio.Task[None] | None = None
        try:
            await self._begin(ctx, watch)
            self.ready.set()
            if self.once:
                await self._read_once(ctx)
                return
            saver = asyncio.create_task(
                self._keep.run(self._state, lambda exc: self._save_failed(ctx, exc)))
            while True:
                await self._reconcile(ctx, watch)
                await watch.wait()
        finally:
            if saver is not None:
                saver.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await saver
            for timer in self._timers:
                timer.cancel()
            await self._keep.final(self._state())
            for gen in [*self._old, *([self._cur] if self._cur else [])]:
                self._close(gen, watch)
            watch.close()

    # -- start ----------------------------------------------------------------------------
    async def _begin(self, ctx: SourceContext, watch: Watch) -> None:
        seen = len(self.store.problems)
        state = await asyncio.to_thread(self._load)
        problems = self.store.problems[seen:]
        if self.once and self.spec.from_start:
            state = None  # once + fromStart: the whole file, on every run
        resumes = resumable(ctx)
        if state is not None and state.seq is not None and resumes is not None:
            self._recorded = await resumes.recorded(state.seq)
            self._resume_seq = state.seq
        try:
            plan = await self._first_plan(state)
        except OSError as exc:
            self._pending = state
            await self._unreadable(ctx, exc, problems, watch)
            return
        if not plan.steps:
            self._pending = state
            await self._unreadable(ctx, OSError(errno.ENOENT, "missing"), problems, watch)
            return
        await self._apply(ctx, watch, plan, start=problems)
        await self._keep.save(self._state())  # durable before READY: a crash right after
        # the start resumes from here, not from nothing (which would skip what came between)

    def _load(self) -> FileState | None:
        if self.spec.previous_id is not None:
            self.store.adopt(self.spec.previous_id, self.spec.id)
        state = self.store.load(self.spec.id)
        if state is not None:
            self._history = [cp for cp in state.generations if cp.finished][-self.max_gens :]
        return state

    async def _first_plan(self, state: FileState | None) -> Plan:
        if state is not None:
            known = list(state.generations)
            return await asyncio.to_thread(plan_start, self.path, known, self.max_gens,
                                           self._recorded)
        o = open_at_path(self.path)
        if o is None:
            return Plan()
        if not (self.spec.from_start or self.once or o.st.st_size == 0):
            window = min(self.limits.max_line_bytes + 1, 1 << 20)
            o.start = tail_start(o.fd, o.st.st_size, window)
            o.line_no = await asyncio.to_thread(count_lines, o.fd, o.start)
        return Plan([o], at_path=True)

    async def _unreadable(self, ctx: SourceContext, exc: OSError, problems: list[str],
                          watch: Watch) -> None:
        await ctx.event("start", path=self.name, inode=None, offset=0)
        await self._problems(ctx, problems)
        with contextlib.suppress(OSError):
            st0 = os.stat(self.path)
            if stat.S_ISREG(st0.st_mode):
                self._initial = (st0.st_dev, st0.st_ino, st0.st_size)
        if exc.errno in _MISSING and not self.once:
            return  # waiting for it to appear is not an error: the start record has inode
            # null, the log says "not there yet", `list` says `waiting`
        msg = f"{self.name} does not exist" if exc.errno in _MISSING else None
        await self._error(ctx, exc, msg, watch)

    async def _problems(self, ctx: SourceContext, problems: list[str]) -> None:
        for msg in problems:
            await ctx.event("error", code="checkpoint-corrupt", message=msg, path=self.name)

    async def _open(self, ctx: SourceContext, o: Opened) -> Generation:
        """A generation from what a plan opened. After a crash, lines recorded past the
        checkpoint (up to the last recorded line of that inode) are skipped, not read again."""
        start, line_no = o.start, o.line_no
        renewed = o.announce is not None and o.announce["reason"] in ("truncate", "recreate")
        finished = {(cp.inode, cp.since) for cp in self._history if cp.since}
        marks = self._recorded.marks(o.st.st_ino, o.origin, renewed, finished)
        resumes = resumable(ctx)
        end = -1
        if marks and resumes is not None:
            end = await asyncio.to_thread(recorded_end, o.fd, o.st.st_size, marks)
        if resumes is not None and end > start:
            skipped_to = await asyncio.to_thread(count_lines, o.fd, end, start, line_no)
            resumes.skipped(skipped_to - line_no)
            start, line_no = end, skipped_to
        seq = self._resume_seq if self._resume_seq is not None else next_seq(ctx)
        gen = Generation(o.fd, o.st, start, line_no, self.limits.max_line_bytes, path=o.path,
                         seq=seq)
        gen.announce = o.announce
        if o.origin is not None and o.origin.inode == gen.inode:  # the same generation, on
            gen.since = o.origin.since
            if o.origin.announce and gen.announce is None:  # (saved before it was written)
                gen.announce = json.loads(o.origin.announce)
        return gen

    async def _apply(self, ctx: SourceContext, watch: Watch, plan: Plan, *,
                     start: list[str] | None = None) -> None:
        """Open what a plan found: the last generation is followed, the others are read first
        (at once) and kept open for rotateWait; the one followed until now joins them."""
        gens = [await self._open(ctx, o) for o in plan.steps]
        *olds, cur = gens
        if start is not None:
            inode = cur.inode if plan.at_path else None
            await ctx.event("start", path=self.name, inode=inode, offset=cur.pos)
            await self._problems(ctx, start)
        for gap in plan.gaps:
            await ctx.event("gap", **gap)
        if self._cur is not None:
            olds.insert(0, self._cur)
        now = self.clock.monotonic()
        for gen in olds:
            gen.grew_at = now
        self._old += olds
        self._cur = cur
        for gen in gens:
            watch.track(gen.fd)
        watch.rearm()
        if olds:
            self._later(watch, self.rotate_wait)
        if start is None:
            await self._keep.save(self._state())  # the switch is durable before more is read
            for gen in gens:
                await self._drain(ctx, gen)
        self._keep.dirty.set()

    async def _read_once(self, ctx: SourceContext) -> None:
        """Once mode: every generation to its current end; an unterminated last line counts."""
        for gen in [*self._old, *([self._cur] if self._cur else [])]:
            await self._drain(ctx, gen, os.fstat(gen.fd).st_size)
            await gen.finish(ctx, self.name)

    # -- following ------------------------------------------------------------------------
    async def _reconcile(self, ctx: SourceContext, watch: Watch) -> None:
        """Bring everything up to date: old generations, appearance, truncation, rotation."""
        if watch.stale:
            watch.rearm()
        try:
            now = self.clock.monotonic()
            for gen in list(self._old):
                if await self._drain(ctx, gen):
                    gen.grew_at = now
                    self._later(watch, self.rotate_wait)
                idle = now - (gen.grew_at or now) >= self.rotate_wait
                if idle or (len(self._old) > self.max_gens and gen is self._old[0]):
                    await self._release(ctx, gen, watch)
            if self._cur is None:
                await self._appear(ctx, watch)
            if self._cur is not None:
                await self._follow(ctx, watch, self._cur)
            if self._pending is None:  # every generation known at the start was read once
                self._resume_seq, self._recorded = None, Recorded()
            self._last_error = None
        except OSError as exc:
            await self._error(ctx, exc, None, watch)

    async def _appear(self, ctx: SourceContext, watch: Watch) -> None:
        if self._pending is not None:
            plan = await asyncio.to_thread(plan_start, self.path, list(self._pending.generations),
                                           self.max_gens, self._recorded)
            if plan.steps:
                self._pending = None
                await self._apply(ctx, watch, plan)
            return
        if self._released is not None:
            ended, self._released = self._released, None
            plan = await asyncio.to_thread(plan_switch, self.path, ended, self._known(),
                                           self.max_gens, truncated=False)
            if not plan.at_path:
                plan.close()
                self._released = ended
                return
            announce = plan.steps[-1].announce
            assert announce is not None
            announce["reason"] = "recreate"
            await self._apply(ctx, watch, plan)
            return
        o = open_at_path(self.path)
        if o is None:
            return
        ini, self._initial = self._initial, None
        if ini and ini[:2] == (o.st.st_dev, o.st.st_ino) and ini[2] <= o.st.st_size:
            o.start = 0 if self.spec.from_start else ini[2]  # unreadable at start: what came since
            o.line_no = await asyncio.to_thread(count_lines, o.fd, o.start)
        await self._apply(ctx, watch, Plan([o], at_path=True))

    async def _follow(self, ctx: SourceContext, watch: Watch, gen: Generation) -> None:
        st = os.fstat(gen.fd)
        if gen.rewritten(st):  # copytruncate, or truncated and rewritten
            await self._truncated(ctx, watch, gen, st)
            st = os.fstat(gen.fd)
        confirmed = bool(gen.head)  # its first bytes were still there after `st` was taken
        if not confirmed and st.st_size > 0:  # (copied and truncated while empty to us?)
            await self._copies(ctx, watch, gen)
        if await self._drain(ctx, gen):
            gen.grew_at = self.clock.monotonic()
            watch.hurry()  # polling: look again soon while the file grows
        if gen.changed:  # truncated while it was read: look again at once
            gen.changed = False
            watch.poke()
            return
        try:
            now_at = os.stat(self.path)
        except OSError as exc:
            if exc.errno not in _MISSING:
                raise
            await self._gone(ctx, gen, watch, st.st_nlink)
            return
        self._gone_at = None
        if (now_at.st_dev, now_at.st_ino) == (gen.dev, gen.inode):
            if confirmed:
                gen.saw(st)
            return
        reason = "rename" if os.fstat(gen.fd).st_nlink > 0 else "recreate"
        plan = await asyncio.to_thread(plan_switch, self.path, gen.checkpoint(at_read=True),
                                       self._known(), self.max_gens, truncated=False)
        if not plan.steps:
            return  # gone again already; the next wake-up looks again
        if plan.at_path and plan.steps[-1].announce is not None:
            plan.steps[-1].announce["reason"] = reason
        await self._apply(ctx, watch, plan)

    async def _truncated(self, ctx: SourceContext, watch: Watch, gen: Generation,
                         st: os.stat_result) -> None:
        """The followed file was truncated (or rewritten in place). What was not read yet is
        read from a copy when one is found beside it (copytruncate); the rest is counted."""
        ended = gen.checkpoint()
        plan = await asyncio.to_thread(plan_switch, self.path, ended, self._known(),
                                       self.max_gens, truncated=True)
        copy = plan.copy
        if copy is not None:
            plan.steps.insert(0, copy)  # read from the recorded position on
        else:
            await gen.finish(ctx, self.name)
        self._remember(gen.checkpoint(at_read=True, finished=True))
        old_size, read_to = gen.seen_size, gen.pos
        gen.reset(0, 1, next_seq(ctx))
        gen.seen_size = os.fstat(gen.fd).st_size
        gen.seen_mtime, gen.pinned = st.st_mtime_ns, True  # (taken before the siblings were)
        gen.announce = announce = {"reason": "truncate", "inode": gen.inode,
                                   "oldInode": gen.inode, "oldSize": old_size}
        olds = await self._read_first(ctx, watch, plan)
        if copy is not None:
            read_to = olds[0].pos  # what the copy held (read now, maybe still being written)
        announce["unreadBytes"] = max(0, old_size - read_to)

    async def _read_first(self, ctx: SourceContext, watch: Watch, plan: Plan) -> list[Generation]:
        """Read the copy and the middle generations of a plan now, before the current file;
        they are kept open for rotateWait (a copy may still be being written)."""
        if not plan.steps and not plan.gaps:
            return []  # nothing to read first: no checkpoint save before the current file
        olds = [await self._open(ctx, o) for o in plan.steps]  # the copy, then the middle ones
        for gap in plan.gaps:
            await ctx.event("gap", **gap)
        now = self.clock.monotonic()
        for old in olds:
            if old.announce is not None:
                old.announce["reason"] = "truncate"  # copies of generations truncated since
            old.grew_at = now
            watch.track(old.fd)
            self._old.append(old)
        if olds:
            self._later(watch, self.rotate_wait)
        await self._keep.save(self._state())  # the truncation is durable before more is read
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
        plan = await asyncio.to_thread(plan_switch, self.path, gen.checkpoint(), self._known(),
                                       self.max_gens, truncated=True)
        await self._read_first(ctx, watch, plan)

    async def _gone(self, ctx: SourceContext, gen: Generation, watch: Watch, nlink: int) -> None:
        """The path is missing. A renamed file is followed until a new one appears; a deleted
        one is released once it has not grown for rotateWait (it holds disk space)."""
        if nlink > 0:
            return
        now = self.clock.monotonic()
        if self._gone_at is None:
            self._gone_at = now
            self._later(watch, self.rotate_wait)
        elif now - max(self._gone_at, gen.grew_at or 0) >= self.rotate_wait:
            await gen.finish(ctx, self.name)
            self._released = gen.checkpoint(finished=True)
            self._remember(self._released)
            self._close(gen, watch)
            self._cur, self._gone_at = None, None
            watch.rearm()
            await self._keep.save(self._state())

    async def _release(self, ctx: SourceContext, gen: Generation, watch: Watch) -> None:
        await gen.finish(ctx, self.name)
        self._remember(gen.checkpoint(finished=True))
        self._close(gen, watch)
        await self._keep.save(self._state())  # finished: not taken for lost after a crash

    def _later(self, watch: Watch, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._timers = [t for t in self._timers if t.when() > loop.time()]
        self._timers.append(loop.call_later(delay + 0.05, watch.poke))

    # -- reading --------------------------------------------------------------------------
    async def _drain(self, ctx: SourceContext, gen: Generation, end: int | None = None) -> int:
        if gen.announce is not None:
            fields, gen.announce = gen.announce, None
            gen.since = next_seq(ctx) or 0  # the seq the `rotate` record gets
            await ctx.event("rotate", path=self.name, **fields)
        return await gen.drain(ctx, self.name, self.read_size, end, self._keep.dirty.set)

    def _close(self, gen: Generation, watch: Watch) -> None:
        if gen in self._old:
            self._old.remove(gen)
        watch.untrack(gen.fd)
        with contextlib.suppress(OSError):
            os.close(gen.fd)

    # -- checkpoints and errors -----------------------------------------------------------
    def _remember(self, cp: Checkpoint) -> None:
        self._history = [*self._history, cp][-self.max_gens :]

    def _known(self) -> list[Checkpoint]:
        opened = [*self._old, *([self._cur] if self._cur else [])]
        return [*self._history, *(g.checkpoint(at_read=True) for g in opened)]

    def _state(self) -> FileState | None:
        opened = [*self._old, *([self._cur] if self._cur else [])]
        if not opened and self._pending is not None:
            return self._pending
        gens = [*self._history, *(g.checkpoint() for g in opened)]
        if not gens:
            return None
        seqs = [g.done_seq for g in opened if g.done_seq is not None]
        if self._resume_seq is not None:
            seqs.append(self._resume_seq)
        return FileState(tuple(gens), min(seqs) if seqs else None)

    async def _save_failed(self, ctx: SourceContext, exc: OSError) -> None:
        await self._error(ctx, exc, f"cannot save checkpoint: {exc.strerror}", None)

    async def _error(self, ctx: SourceContext, exc: OSError, message: str | None,
                     watch: Watch | None) -> None:
        """One `error` record per distinct problem (not one per poll). Out of descriptors
        (EMFILE/ENFILE), the source looks again on a timer: no event may come."""
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        msg = message or f"cannot read {self.name}: {exc.strerror}"
        if watch is not None and exc.errno in _NO_FDS:
            self._later(watch, RETRY_S)
        if (code, msg) != self._last_error:
            self._last_error = (code, msg)
            fields: dict[str, Any] = {"code": code, "message": msg, "path": self.name}
            await ctx.event("error", **fields)
