"""A file watcher's source: follow a path like `tail -F`, frame its lines, checkpoint positions."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat

from watchrun.clock import Clock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import SourceContext
from watchrun.notify import Notifier, Watch
from watchrun.sources.checkpoints import Checkpoint, CheckpointStore, Keeper, find_moved, identifies
from watchrun.sources.generation import Generation, count_lines, open_regular, tail_start

ROTATE_WAIT = 1.0
"""Seconds an old generation (renamed or deleted) stays open after the switch to the new file,
so lines written late through an old descriptor are still read."""
SAVE_EVERY = 1.0
"""At most one checkpoint write per second while lines flow; none while idle."""
_MISSING = (errno.ENOENT, errno.ENOTDIR)


class FileSource:
    """Follows one path; see SPEC §3.2. Nothing is re-emitted across rotation or restart."""

    def __init__(
        self,
        spec: WatcherSpec,
        limits: Limits,
        store: CheckpointStore,
        notifier: Notifier,
        clock: Clock,
        *,
        once: bool = False,
        read_size: int = 256 * 1024,
    ) -> None:
        if spec.path is None:
            raise ValueError(f"watcher {spec.id!r} has no path")
        self.spec, self.path, self.name = spec, spec.path, str(spec.path)
        self.limits, self.store, self.notifier, self.clock = limits, store, notifier, clock
        self.once, self.read_size = once, read_size
        self._cur: Generation | None = None
        self._old: list[Generation] = []
        self._pending: Checkpoint | None = None  # loaded, not yet applied (file missing)
        self._initial: tuple[int, int, int] | None = None  # dev, inode, size when unreadable
        self._prev_inode: int | None = None
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
    def pending_bytes(self) -> int:
        """Bytes of an unterminated last line waiting for its newline."""
        return self._cur.framer.pending if self._cur else 0

    async def run(self, ctx: SourceContext) -> None:
        watch = self.notifier.watch(self.path)
        saver: asyncio.Task[None] | None = None
        try:
            try:
                await self._begin(ctx, watch)
            except OSError as exc:
                await self._error(ctx, exc)
            self.ready.set()
            if self.once:
                await self._read_once(ctx)
                return
            if not self._old:  # (else the old file is drained first: keep its checkpoint)
                self._keep.save_now(
                    self._checkpoint()
                )  # a crash before the first line still resumes from here
            saver = asyncio.create_task(
                self._keep.run(self._checkpoint, lambda exc: self._save_failed(ctx, exc))
            )
            while True:
                await self._reconcile(ctx, watch)
                await watch.wait()
        finally:
            if saver is not None:
                saver.cancel()
            for timer in self._timers:
                timer.cancel()
            self._keep.save_now(self._checkpoint())
            for gen in [*self._old, *([self._cur] if self._cur else [])]:
                self._close(gen, watch)
            watch.close()

    # -- start ----------------------------------------------------------------------------
    async def _begin(self, ctx: SourceContext, watch: Watch) -> None:
        seen = len(self.store.problems)
        cp = self.store.load(self.spec.id)
        problems = self.store.problems[seen:]
        self._keep.saved = cp
        try:
            fd, st = open_regular(self.path)
        except OSError as exc:
            await ctx.event("start", path=self.name, inode=None, offset=0)
            await self._problems(ctx, problems)
            self._pending = cp
            with contextlib.suppress(OSError):
                st0 = os.stat(self.path)
                if stat.S_ISREG(st0.st_mode):
                    self._initial = (st0.st_dev, st0.st_ino, st0.st_size)
            if exc.errno not in _MISSING:
                await self._error(ctx, exc)
            elif self.once:
                await self._error(ctx, exc, f"{self.name} does not exist")
            # else: waiting for it to appear is not an error (the start record has inode
            # null, the log says "not there yet", `list` says `waiting`)
            return
        watch.track(fd)
        rotate: dict[str, object] | None = None
        if cp is not None and identifies(cp, fd, st) and not (self.once and self.spec.from_start):
            pos, line_no = cp.offset, cp.line_no
        elif cp is not None and not (self.once and self.spec.from_start):
            pos, line_no = 0, 1
            same = (cp.dev, cp.inode) == (st.st_dev, st.st_ino)
            moved = None if same else find_moved(self.path.parent, cp, self.path.name)
            if moved is not None:  # rotated while we were stopped: finish the old file first
                fd2, st2, resume = moved
                at = (cp.offset, cp.line_no) if resume else (0, 1)
                self._retire(Generation(fd2, st2, *at, self.limits.max_line_bytes), watch)
            reason = "truncate" if same else "rename" if moved else "recreate"
            rotate = {"reason": reason, "inode": st.st_ino, "oldInode": cp.inode}
        elif self.spec.from_start or self.once or st.st_size == 0:
            pos, line_no = 0, 1
        else:
            window = min(self.limits.max_line_bytes + 1, 1 << 20)
            pos = tail_start(fd, st.st_size, window)
            line_no = await asyncio.to_thread(count_lines, fd, pos)
        self._cur = Generation(fd, st, pos, line_no, self.limits.max_line_bytes)
        await ctx.event("start", path=self.name, inode=st.st_ino, offset=pos)
        await self._problems(ctx, problems)
        if rotate is not None:
            await ctx.event("rotate", path=self.name, **rotate)

    async def _problems(self, ctx: SourceContext, problems: list[str]) -> None:
        for msg in problems:
            await ctx.event("error", code="checkpoint-corrupt", message=msg, path=self.name)

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
                await self._drain(ctx, gen)
                if gen.retire_at is not None and now >= gen.retire_at:
                    await gen.finish(ctx, self.name)
                    self._close(gen, watch)
                    self._keep.dirty.set()  # the checkpoint may now leave the old file behind
            if self._cur is None:
                await self._appear(ctx, watch)
            if self._cur is not None:
                await self._follow(ctx, watch, self._cur)
            self._last_error = None
        except OSError as exc:
            await self._error(ctx, exc)

    async def _appear(self, ctx: SourceContext, watch: Watch) -> None:
        try:
            fd, st = open_regular(self.path)
        except OSError as exc:
            if exc.errno in _MISSING:
                return
            raise
        watch.track(fd)
        watch.rearm()
        cp, self._pending = self._pending, None
        pos, line_no, ini = 0, 1, self._initial
        if cp is not None and identifies(cp, fd, st):
            pos, line_no = cp.offset, cp.line_no
        elif ini and ini[:2] == (st.st_dev, st.st_ino) and ini[2] <= st.st_size:
            pos = 0 if self.spec.from_start else ini[2]  # unreadable at start: what came since
            line_no = await asyncio.to_thread(count_lines, fd, pos)
        self._initial = None
        self._cur = Generation(fd, st, pos, line_no, self.limits.max_line_bytes)
        if self._prev_inode is not None:
            ev = {"reason": "recreate", "inode": st.st_ino, "oldInode": self._prev_inode}
            await ctx.event("rotate", path=self.name, **ev)
            self._prev_inode = None
        self._keep.dirty.set()

    async def _follow(self, ctx: SourceContext, watch: Watch, gen: Generation) -> None:
        st = os.fstat(gen.fd)
        if gen.rewritten(st.st_size):  # copytruncate, or truncated and rewritten
            await gen.finish(ctx, self.name)
            gen.reset(0, 1)
            ev = {"reason": "truncate", "inode": gen.inode, "oldInode": gen.inode}
            await ctx.event("rotate", path=self.name, **ev)
            self._keep.dirty.set()
        await self._drain(ctx, gen)
        try:
            now_at = os.stat(self.path)
        except OSError as exc:
            if exc.errno not in _MISSING:
                raise
            await self._gone(ctx, gen, watch, st.st_nlink)
            return
        self._gone_at = None
        if (now_at.st_dev, now_at.st_ino) == (gen.dev, gen.inode):
            return
        try:
            fd, new = open_regular(self.path)  # a different file is at the path: switch to it
        except OSError as exc:
            if exc.errno in _MISSING:
                return  # gone again already; the next wake-up looks again
            raise
        watch.track(fd)
        watch.rearm()
        self._retire(gen, watch)
        self._cur = Generation(fd, new, 0, 1, self.limits.max_line_bytes)
        reason = "rename" if st.st_nlink > 0 else "recreate"
        await ctx.event("rotate", reason=reason, path=self.name, inode=new.st_ino,
                        oldInode=gen.inode)  # fmt: skip
        self._keep.dirty.set()
        await self._drain(ctx, self._cur)

    async def _gone(self, ctx: SourceContext, gen: Generation, watch: Watch, nlink: int) -> None:
        """The path is missing. A renamed file is followed until a new one appears; a deleted
        one is released ROTATE_WAIT after it was noticed (it holds disk space)."""
        if nlink > 0:
            return
        now = self.clock.monotonic()
        if self._gone_at is None:
            self._gone_at = now
            self._later(watch)
        elif now - self._gone_at >= ROTATE_WAIT:
            await gen.finish(ctx, self.name)
            self._close(gen, watch)
            self._prev_inode, self._cur, self._gone_at = gen.inode, None, None
            watch.rearm()

    def _retire(self, gen: Generation, watch: Watch) -> None:
        gen.retire_at = self.clock.monotonic() + ROTATE_WAIT
        self._old.append(gen)
        self._later(watch)

    def _later(self, watch: Watch) -> None:
        loop = asyncio.get_running_loop()
        self._timers = [t for t in self._timers if t.when() > loop.time()]
        self._timers.append(loop.call_later(ROTATE_WAIT + 0.05, watch.poke))

    # -- reading --------------------------------------------------------------------------
    async def _drain(self, ctx: SourceContext, gen: Generation, end: int | None = None) -> None:
        moved = self._keep.dirty.set if gen is self._cur else _nothing
        await gen.drain(ctx, self.name, self.read_size, end, moved)

    def _close(self, gen: Generation, watch: Watch) -> None:
        if gen in self._old:
            self._old.remove(gen)
        watch.untrack(gen.fd)
        with contextlib.suppress(OSError):
            os.close(gen.fd)

    # -- checkpoints and errors -----------------------------------------------------------
    def _checkpoint(self) -> Checkpoint | None:
        return self._cur.checkpoint(self.name) if self._cur else None

    async def _save_failed(self, ctx: SourceContext, exc: OSError) -> None:
        await self._error(ctx, exc, f"cannot save checkpoint: {exc.strerror}")

    async def _error(self, ctx: SourceContext, exc: OSError, message: str | None = None) -> None:
        """One `error` record per distinct problem (not one per poll)."""
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        msg = message or f"cannot read {self.name}: {exc.strerror}"
        if (code, msg) != self._last_error:
            self._last_error = (code, msg)
            await ctx.event("error", code=code, message=msg, path=self.name)


def _nothing() -> None:
    pass
