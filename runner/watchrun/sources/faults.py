"""What a followed path's source says went wrong, each as what it is: a read that failed (the
watcher's `error`, once per distinct problem), a checkpoint that could not be used, and a
checkpoint save that failed (`cannot save checkpoint`: the log itself is read on)."""

from __future__ import annotations

import asyncio
import errno
from typing import Any

from watchrun.events import SourceContext
from watchrun.notify import Watch
from watchrun.process.tree import short_of_files
from watchrun.sources.checkpoint_doc import FileState, LoadProblem
from watchrun.sources.keeper import Keeper
from watchrun.sources.making import Making
from watchrun.sources.rotated import NO_FDS
from watchrun.sources.stale import Unread

RETRY_S = 1.0
"""An open that failed for want of descriptors (EMFILE/ENFILE) is tried again this often."""


class Faults(Making):
    """The error records of a followed path's source (`Followed` holds the state they say)."""

    name: str
    once: bool
    _keep: Keeper
    _last_error: tuple[str, str] | None
    _timers: list[asyncio.TimerHandle]
    _save_said: tuple[str | None, FileState | None] | None = None
    """The last checkpoint save that failed, as said, and the state saved before it."""

    def _later(self, watch: Watch, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._timers = [t for t in self._timers if t.when() > loop.time()]
        self._timers.append(loop.call_later(delay + 0.05, watch.poke))

    async def _error(self, ctx: SourceContext, exc: OSError, message: str | None,
                     watch: Watch | None) -> None:
        """One `error` record per distinct problem (not one per poll). Out of descriptors
        (EMFILE/ENFILE), said with the limit, the source looks again on a timer: no event may
        come."""
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        msg = message or (exc.message if isinstance(exc, Unread) else
                          f"cannot read {self.name}: {exc.strerror}")
        if exc.errno in NO_FDS:
            msg += f" ({short_of_files(code)})"
            if watch is not None:
                self._later(watch, RETRY_S)
        if (code, msg) != self._last_error:
            self._last_error = (code, msg)
            fields: dict[str, Any] = {"code": code, "message": msg, "path": self.name}
            await ctx.event("error", **fields)

    async def _problems(self, ctx: SourceContext, problems: list[LoadProblem]) -> None:
        """The checkpoint could not be used: where the last run ended is lost, so a once run
        cannot know it looked at every line (`unread`: its verdict is an ERROR)."""
        flags = {"unread": True} if self.once else {}
        for p in problems:
            await ctx.event("error", code=p.code, message=p.message, path=self.name, **flags)

    async def _saved(self, ctx: SourceContext, state: FileState | None) -> None:
        """A save a step makes before it reads on (the start, a switch, a truncation, a
        release). One that fails (the output disk full) is said as the saver says it, never as
        a failure to read the log, and reading goes on: the saver tries again. A once run's
        raises (a run whose checkpoint cannot be kept is no pass)."""
        try:
            await self._keep.save(state)
        except OSError as exc:
            if self.once:
                raise OSError(exc.errno, f"cannot save checkpoint: {exc.strerror}") from exc
            self._keep.dirty.set()
            await self._save_failed(ctx, exc)

    async def _save_failed(self, ctx: SourceContext, exc: OSError) -> None:
        """A checkpoint save that failed: one `error` record until a save goes through (the
        file is still read: no `error` state); out of descriptors, said with the limit, and
        the saver tries again a second later (as an open is), not only after the next line."""
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        hint = short_of_files(code)
        if hint is not None:
            self._keep.dirty.set()
        said = (exc.strerror, self._keep.saved)
        if said != self._save_said:
            self._save_said = said
            await ctx.event("error", code=code, path=self.name, message=(
                f"cannot save checkpoint: {exc.strerror}" + (f" ({hint})" if hint else "")))
