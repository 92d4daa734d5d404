"""A file watcher's source: follow a path like `tail -F` through every generation of the file,
frame its lines, checkpoint positions, and record what cannot be read."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import stat
from typing import Any

from msgspec.structs import replace

from watchrun.events import SourceContext
from watchrun.inotify import TurnedRemote
from watchrun.notify import Watch
from watchrun.offload import offload
from watchrun.sources import applies
from watchrun.sources.applies import applied, beside, judged_gone, left_beside
from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.faults import RETRY_S
from watchrun.sources.first_look import first_look
from watchrun.sources.handover import HandOver
from watchrun.sources.identity import birth_ns
from watchrun.sources.keeper import Covered
from watchrun.sources.long_line import say_in
from watchrun.sources.opened import Plan, open_at_path
from watchrun.sources.plans import plan_start, plan_switch
from watchrun.sources.reading import count_lines, tail_start
from watchrun.sources.resume import Recorded, resumable
from watchrun.sources.rotated import Entry
from watchrun.sources.stale import Stale
from watchrun.sources.unsettled import restored

log = logging.getLogger("watchrun.checkpoints")  # (the runner log's `checkpoints` events)


class FileSource(HandOver):
    """Follows one path; see SPEC §3.2. Every generation of the file is read, oldest first;
    nothing is re-emitted across rotation or restart; what cannot be read is a `gap` record."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._began = applies.beside_now(self.path) if self.once else frozenset()  # (built
        # as the run begins, before its commands: what is beside the file then is older)
        self._beside: tuple[list[Entry], list[Entry]] = ([], [])

    _aside_note: str | None = None
    """The warning that the checkpoint found at start was of another path, set aside."""
    resumed: tuple[str, int] | None = None
    """Where the read began when it went on from a checkpoint: the file and its line number."""
    read_on: tuple[str, int] | None = None
    """Where the read began when the watcher had a checkpoint, its first line too (what
    `watchrun add` says of an id an earlier run left a checkpoint of)."""
    _reached: int | None = None
    """The highest seq the checkpoint found at start keeps: the stream had given out those
    below it (None: none, or one adopted from another id, whose stream it was)."""

    async def run(self, ctx: SourceContext) -> None:
        watch = self.notifier.watch(self.path)
        saver: asyncio.Task[None] | None = None
        self._keep.covered = ctx if isinstance(ctx, Covered) else None
        try:
            await self._begin(ctx, watch)
            self.ready.set()
            if self.once:
                await self._read_once(ctx, watch)
                if self._cur is not None:  # (none: `_begin` said why)
                    await self._gone_at_end(ctx)
                return
            saver = asyncio.create_task(
                self._keep.run(self._state, lambda exc: self._save_failed(ctx, exc)))
            watch.looking()  # the first look is the next line: the wake-ups of the start's
            while True:  # own arming (the path, the descriptor) need no second look
                await self._reconcile(ctx, watch)
                await watch.wait()
        except TurnedRemote:  # (the runner goes on with the path on a thread of its own)
            await self._hand_over(ctx, watch)
            raise
        finally:
            if saver is not None:
                saver.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await saver
            for timer in self._timers:
                timer.cancel()
            try:
                await self._settle(ctx, watch, final=True)  # (not left unsaid at a stop)
            finally:
                self._caught_up(ctx)
                await self._keep.final(self._state(stopping=True))
            for gen in self.opened:
                self._close(gen, watch)
            self._drop_shadows(watch)
            watch.close()

    @property
    def _rereads(self) -> bool:
        """once + fromStart: the file at the path is read whole on every run (so matches are
        not de-duplicated after a crash); generations rotated away since the last run are read
        on from where it ended."""
        return self.once and self.spec.from_start

    async def _begin(self, ctx: SourceContext, watch: Watch) -> None:
        while True:
            state, plan, failed = await offload(self._prepare)  # one call off the loop for both
            problems = self.store.taken(self.spec.id)  # (its own: others load meanwhile)
            short = applies.unloaded_for_fds(problems, str(self.store.path(self.spec.id)))
            if short is None:
                break
            if plan is not None:
                plan.close()
            if self.once:
                raise OSError(*short)
            await self._error(ctx, OSError(*short), short[1], None)  # (not kept: once a second)
            self.ready.set()  # the runner goes on; this watcher loads it again a second later
            await asyncio.sleep(RETRY_S)
        if self._aside_note is not None:
            log.warning("%s", self._aside_note)
        if self._reached is not None and self._keep.covered is not None:
            await self._keep.covered.lost(self._reached)  # (a stream that ends before it)
        resumes, seq = resumable(ctx), None
        if (state is not None and state.seq is not None and resumes is not None
                and not self._rereads):
            recorded = await resumes.recorded(state.seq)
            if recorded.epochs or recorded.ended:  # a crash left records past the checkpoint:
                self._recorded, self._resume_seq = recorded, state.seq  # a resume, planned
                if plan is not None:  # again knowing them
                    plan.close()
                plan, failed = None, None
            else:  # none: the checkpoint's seq still holds for what it opens (no new save)
                seq = state.seq
        try:
            if failed is not None:
                raise failed
            if plan is None:
                plan = await offload(self._plan, state)
        except OSError as exc:
            self._pending = state
            await self._unreadable(ctx, exc, problems, watch)
            return
        if not plan.steps:  # (what the plan judged is said now: the path may never come back)
            self._pending = None if state is None else judged_gone(state, plan)
            await self._unreadable(ctx, OSError(errno.ENOENT, "missing"), problems, watch, plan)
            return
        self._required.carry(ctx, state, plan, self._matching)
        if state is not None:
            self.read_on = (plan.steps[0].path, plan.steps[0].line_no)
            if plan.steps[0].start > 0:  # (read on: a `require` unseen is unseen since there)
                self.resumed = self.read_on
        try:
            await self._apply(ctx, watch, plan, start=problems, seq=seq)
        except OSError as exc:  # (opened, but not read: EIO, ESPIPE, a read denied)
            self._pending = state
            await self._unreadable(ctx, exc, problems, watch)
            return
        await left_beside(ctx, self.spec, self.name, *self._beside)
        # durable before READY: a crash right after the start resumes from here, not from
        await self._saved(ctx, self._state())  # nothing (skipping what came between)

    def _prepare(self) -> tuple[FileState | None, Plan | None, OSError | None]:
        """In a worker thread: the checkpoint, and the plan from it as if no record was left
        past it (as after every clean stop; `_begin` plans again when a crash left some)."""
        adopted = self.spec.previous_id is not None and self.store.adopt(self.spec.previous_id,
                                                                          self.spec.id)
        loaded = self.store.load(self.spec.id)
        if loaded is not None and adopted:  # its seqs are of the old id's stream, not this one's
            loaded = replace(loaded, seq=None, generations=tuple(
                replace(g, seq=None) for g in loaded.generations))
        elif loaded is not None:  # (each seq it keeps is one the stream had reached)
            self._reached = max((s for s in (loaded.seq, *(g.seq for g in loaded.generations))
                                 if s is not None), default=None)
        # (a checkpoint set aside: the first save replaces it)
        state, self._aside_note = applied(loaded, self.spec, self.name, self._matching,
                                          once=self.once)
        if state is not None:
            self._history = [cp for cp in state.generations if cp.finished][-self._kept :]
            self._archives = state.archives
            self._waiting = restored(state.watched, self.clock.monotonic(), self.rotate_wait)
            self._keep.saved = state  # on disk: the same state is not written again at start
        try:
            return state, self._plan(state), None
        except OSError as exc:
            return state, None, exc

    def _plan(self, state: FileState | None) -> Plan:
        """Where reading starts (blocking: in a worker thread)."""
        if state is not None:
            plan = plan_start(self.path, list(state.generations), self.max_gens, self._recorded,
                              state.archives, self._pending_archives())
            if plan.at_path and (self._rereads or (self.once and applies.rewritten(plan, state))):
                plan.steps[-1].start, plan.steps[-1].line_no = 0, 1  # the file at the path whole
            return plan
        o = open_at_path(self.path)
        if o is None:
            return Plan()
        try:  # (the files beside it now: none is read later for lines written since)
            known, judged = first_look(self.path, o, self._kept)
            if self.once:  # (a first run: what it does not read beside the file is said)
                self._beside = beside(self.path, self._began)
            if not (self.spec.from_start or self.once or o.st.st_size == 0):
                window = min(self.limits.max_line_bytes + 1, 1 << 20)
                o.start = tail_start(o.fd, o.st.st_size, window)
                o.line_no = count_lines(o.fd, o.start)
        except OSError:
            os.close(o.fd)
            raise
        return Plan([o], at_path=True, kept=known, archives=judged)

    async def _reconcile(self, ctx: SourceContext, watch: Watch) -> None:
        """Bring everything up to date: old generations, appearance, truncation, rotation. A
        generation found gone meanwhile (`sources/stale.py`) is released, and all is looked at
        again without it (at most once for each generation that can be open)."""
        if watch.stale:
            watch.rearm()
        try:
            failed = False
            for _ in range(self.max_gens + 2):
                try:
                    failed = await self._rotated(ctx, watch)
                    if self._cur is None:
                        await self._appear(ctx, watch)
                    if self._cur is not None:
                        await self._follow(ctx, watch, self._cur)
                    break
                except Stale as exc:
                    await self._lost(ctx, exc.gen, watch, exc)
            await self._settle(ctx, watch)
            await say_in(ctx, self.opened, self.name)
            if self._pending is None:  # every generation known at the start was read once
                self._resume_seq, self._recorded = None, Recorded()
            if not failed:  # (else a rotated generation's error stands: `_rotated`)
                self._last_error = None
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.EINVAL):  # (not a regular file at the path)
                with contextlib.suppress(OSError):
                    st = os.lstat(self.path)
                    if not stat.S_ISREG(st.st_mode):
                        self._unseen.other((st.st_dev, st.st_ino))
            await self._error(ctx, exc, None, watch)

    async def _appear(self, ctx: SourceContext, watch: Watch) -> None:
        if self._pending is not None:
            plan = await offload(self._plan, self._pending)
            if plan.steps:
                self._pending = None
                await self._apply(ctx, watch, plan)
            return
        if self._released is not None:
            ended, self._released = self._released, None
            plan = await offload(plan_switch, self.path, ended, self._known(),
                                 self.max_gens, truncated=False, archives=self._archives,
                                 waiting=self._pending_archives())
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
        plan, ini = Plan([o], at_path=True, arrived=1), self._initial
        if ini and ini[:2] == (o.st.st_dev, o.st.st_ino) and ini[3] <= o.st.st_size \
                and (ini[2] is None or ini[2] == birth_ns(o.fd)):  # (not a new file, same inode)
            o.start = 0 if self.spec.from_start else ini[3]  # unreadable at start: what came since
            try:
                o.line_no = await offload(count_lines, o.fd, o.start)
            except OSError:
                plan.close()
                raise
        await self._apply(ctx, watch, plan)
        self._initial = None

