"""How the file source follows a file through rotation: truncation (`truncation.py`), renames and
symlink swaps (the generations in between, oldest first), deletion (drained for rotateWait,
then released), and a generation whose descriptor no longer reads (released: `stale.py`)."""

from __future__ import annotations

import asyncio
import errno
import os

from msgspec.structs import replace

from watchrun.events import SourceContext
from watchrun.notify import Watch
from watchrun.offload import offload
from watchrun.sources.followed import MISSING
from watchrun.sources.generation import Generation
from watchrun.sources.plans import plan_switch
from watchrun.sources.stale import Stale, Unread, known_size, lost_gap, named, reading
from watchrun.sources.truncation import Truncation


class Rotation(Truncation):
    """The rotation steps of the file source (the generation followed leaves or changes)."""

    _nul_look: asyncio.TimerHandle | None = None
    """The next look at NUL bytes waiting at the end of the file (`_filled_later`)."""

    async def _follow(self, ctx: SourceContext, watch: Watch, gen: Generation) -> None:
        try:
            await self._read_followed(ctx, watch, gen)
        except Unread as exc:
            await self._unread(ctx, watch, gen, exc)

    async def _unread(self, ctx: SourceContext, watch: Watch, gen: Generation,
                      exc: Unread) -> None:
        """The generation followed does not read (`exc`: EIO, a bad block). While it is the
        file at the path, that is the watcher's `error`, and the next look tries again (a
        failure that passes loses nothing); once another file took the path (logrotate renamed
        it, a new one was made), that one is followed (`_switch`), and `gen`, rotated away, is
        said and released as a rotated generation whose reads fail is (`_rotated`)."""
        try:
            moved = not gen.is_file(os.stat(self.path))
        except OSError:
            moved = False
        if not moved or not await self._switch(ctx, watch, gen):
            raise exc

    async def _read_followed(self, ctx: SourceContext, watch: Watch, gen: Generation) -> None:
        with reading(gen, self.name):  # (its reads failing: `Unread`, `_unread`)
            st = os.fstat(gen.fd)
            own = gen.is_file(st)  # (not on a path-based FUSE file system, sshfs: after a
            # rename on the server, the attributes of the file at its path now, not of it)
            rewritten = own and gen.rewritten()
        if rewritten:  # copytruncate, or truncated and rewritten
            await self._truncated(ctx, watch, gen, st)
            with reading(gen):
                st = os.fstat(gen.fd)
        confirmed = own and bool(gen.head)  # its first bytes were there after `st` was taken
        if own and not confirmed and st.st_size > gen.pos + gen.nul.ahead:  # (copied and
            # truncated while empty to us? not while it holds only NUL bytes, not written yet)
            await self._copies(ctx, watch, gen)
        with reading(gen, self.name):
            grew = await self._drain(ctx, gen, held=st.st_size if own else None)
        if grew:
            gen.grew_at = self.clock.monotonic()
            watch.hurry()  # polling: look again soon while the file grows
        if gen.nul.ahead and not watch.polling:
            self._filled_later(watch)
        if gen.changed:  # truncated while it was read: look again at once
            gen.changed = False
            watch.poke()
            return
        self._unseen.before_look(watch)
        try:
            now_at = os.stat(self.path)
        except OSError as exc:
            if exc.errno not in MISSING:
                raise
            await self._gone(ctx, gen, watch, st.st_nlink if own else 1)
            return
        self._gone_at = None
        if gen.is_file(now_at):
            if confirmed:
                gen.saw(st)
            if unseen := self._unseen.gone(watch):
                await ctx.event("gap", reason="unseen", path=self.name, generations=unseen,
                                message=f"{unseen} file(s) came to {self.name} and were gone "
                                "again before the runner looked (created and deleted, or "
                                "renamed away): what they held was not read")
            return
        await self._switch(ctx, watch, gen)

    def _filled_later(self, watch: Watch) -> None:
        """NUL bytes wait at the end of the file to be written: look again in pollMs, as a
        writer that fills them through mmap makes no inotify event."""
        if self._nul_look is None or self._nul_look.when() <= asyncio.get_running_loop().time():
            self._later(watch, self.notifier.poll_s)
            self._nul_look = self._timers[-1]

    async def _switch(self, ctx: SourceContext, watch: Watch, gen: Generation) -> bool:
        """The followed generation `gen` left the path (renamed, or deleted and a new file
        made; a symlink swapped): open the generations rotated since and the file at the path,
        after their `rotate` records. False when nothing is there (gone again already)."""
        with reading(gen):
            reason = "rename" if os.fstat(gen.fd).st_nlink > 0 else "recreate"
        plan = await offload(plan_switch, self.path, gen.checkpoint(at_read=True),
                             self._known(), self.max_gens, truncated=False,
                             archives=self._archives, waiting=self._pending_archives())
        if not plan.steps:
            return False  # gone again already; the next wake-up looks again
        if plan.at_path and plan.steps[-1].announce is not None:
            plan.steps[-1].announce["reason"] = reason
        await self._apply(ctx, watch, plan)
        return True

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
            await self._saved(ctx, self._state())

    async def _release(self, ctx: SourceContext, gen: Generation, watch: Watch, *,
                       early: bool = False) -> None:
        """Close a rotated generation read to its end: idle for rotateWait, or `early` (more
        than limits.maxGenerations open), when its checkpoint says so: seen grown later, what
        it grew by was not read (`sources/released.py`)."""
        await gen.finish(ctx, self.name)
        cp = replace(gen.checkpoint(finished=True), released_early=early)
        if (name := named(gen)) is not None:  # (where it is now: a start looks there for
            cp = replace(cp, path=name)  # what was written to it after this)
        self._remember(cp)
        self._close(gen, watch)
        await self._saved(ctx, self._state())  # finished: not taken for lost after a crash

    async def _drain(self, ctx: SourceContext, gen: Generation, end: int | None = None,
                     held: int | None = None) -> int:
        with reading(gen):  # (ESTALE: that generation is gone, `_reconcile` releases it)
            return await super()._drain(ctx, gen, end, held)

    async def _rotated(self, ctx: SourceContext, watch: Watch) -> bool:
        """Read the generations rotated away, each released once it has not grown for
        rotateWait (or early: more than limits.maxGenerations open). One whose reads fail does
        not hold up the others or the file at the path: gone (ESTALE), it is released now;
        failing otherwise (EIO), it is the watcher's error and is tried again at each look,
        until it is released as the others are (`_lost`: with the gap of what it could not be
        read of). True: one failed and is still open."""
        now, failed = self.clock.monotonic(), False
        for gen in list(self._old):
            fault: OSError | None = None
            try:
                if await self._drain(ctx, gen):
                    gen.grew_at = now
                    self._later(watch, self.rotate_wait)
            except Stale as exc:
                await self._lost(ctx, gen, watch, exc)
                continue
            except OSError as exc:
                fault = exc
            idle = now - (gen.grew_at or now) >= self.rotate_wait
            if idle or (len(self._old) > self.max_gens and gen is self._old[0]):
                if fault is None:
                    await self._release(ctx, gen, watch, early=not idle)
                else:
                    await self._lost(ctx, gen, watch, fault)
            elif fault is not None and not failed:
                failed = True
                await self._error(ctx, fault, (
                    f"cannot read {named(gen) or gen.read_as or gen.path} (inode {gen.inode}, "
                    f"rotated away from {self.name}): {fault.strerror}; {self.name} is read on, "
                    "and this one is released once it has not been read for "
                    "limits.rotateWait"), watch)
        return failed

    async def _lost(self, ctx: SourceContext, gen: Generation, watch: Watch,
                    exc: OSError) -> None:
        """`gen`'s descriptor no longer reads (`exc`; `stale.py`): it is released now, a
        `gap{missing}` for what of it is not read (`lost_gap`), its checkpoint finished
        (deleted, when ESTALE says so: its inode number may be another file's next). Gone
        (ESTALE), its last line so far is a line; failing (EIO: a bad block), the line its
        failure cut is none (its rest is there, unread): the gap begins with it. The one at
        the path leaves it: the next look reads the file there."""
        if gen is not self._cur and gen not in self._old:
            return  # (released already)
        size, gone = known_size(gen), exc.errno == errno.ESTALE
        if gone:
            await gen.finish(ctx, self.name)
        read = gen.checkpoint(at_read=gone, finished=True)
        gap = lost_gap(read, named(gen) or gen.read_as or gen.path, size, exc,
                       followed=gen is self._cur)
        if gap is not None:
            await ctx.event("gap", **gap)
        cp = gen.checkpoint(finished=True)
        if gone:
            cp = replace(cp, deleted=True)
        self._remember(cp)
        self._close(gen, watch)
        if gen is self._cur:
            self._released, self._cur, self._gone_at = cp, None, None
            watch.rearm()
        await self._saved(ctx, self._state())
