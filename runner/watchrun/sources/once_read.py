"""How a file source reads in once mode: every generation to its current end, the file that
took the path meanwhile too, and what it could not read said in an `error` record."""

from __future__ import annotations

import errno
import os

from watchrun.events import SourceContext
from watchrun.notify import Watch
from watchrun.offload import offload
from watchrun.sources.followed import MISSING
from watchrun.sources.generation import Generation
from watchrun.sources.remounted import Remounted


class OnceRead(Remounted):
    """The once-mode steps of the file source (`run --once`: read to the end, then stop)."""

    async def _read_once(self, ctx: SourceContext, watch: Watch) -> None:
        """Once mode: every generation to its current end; an unterminated last line counts.
        A file that took the path meanwhile (a rename and a new file, a symlink swapped) is
        read too, after its `rotate` record, as the live tailer reads it."""
        read: set[int] = set()
        for rounds in range(self.max_gens + 1):
            for gen in self.opened:
                if id(gen) not in read:
                    read.add(id(gen))
                    await self._read_to_end(ctx, gen)
            if self._cur is None or not await offload(self._moved, self._cur):
                return
            if rounds == self.max_gens:
                break
            if not await self._switch(ctx, watch, self._cur):
                return
        await ctx.event("error", code="rotated", path=self.name, unread=True, message=(
            f"{self.name} was rotated while it was read, more often than "
            f"limits.maxGenerations={self.max_gens} generations are followed: the file at "
            "its path at the end was not read"))

    async def _gone_at_end(self, ctx: SourceContext) -> None:
        """Once mode, every generation found read: a path with no file at it (the followed
        generation renamed away, nothing made in its place) is said in the stream, as at a
        start that found nothing to read (the verdict is an ERROR either way)."""
        try:
            await offload(os.stat, self.path)
        except OSError as exc:
            if exc.errno in MISSING:
                await self._error(ctx, exc, f"{self.name} does not exist", None)

    async def _read_to_end(self, ctx: SourceContext, gen: Generation) -> None:
        end = gen.seen_size
        try:
            end = os.fstat(gen.fd).st_size
            await self._drain(ctx, gen, end)
        except OSError as exc:  # a failing disk: the rest of this generation is not read
            # (from where reads fail: the lines before a bad block are), and the record says so
            # (a once verdict's ERROR); the other ones are read
            await _not_read(ctx, gen, end, errno.errorcode.get(exc.errno or 0, "EIO"),
                            f"cannot read {gen.path} from offset {gen.pos} on: {exc.strerror}",
                            unread=True, offset=gen.pos)
            return
        await gen.finish(ctx, self.name, kept=True)  # (its first bytes judged, if not yet:
        # never a pass over a file no text pattern matches, `Generation.judge`)
        if gen.pos < end and not gen.nul.ahead:  # (NUL bytes not written yet: nothing to read)
            gen.seen_size = gen.pos  # said now: the next run does not count them again
            await _not_read(ctx, gen, end, "cut-short",
                            f"{gen.path} was truncated while it was read")

    def _moved(self, gen: Generation) -> bool:
        """Another file than `gen` is at the path (blocking: in a worker thread). Not when none
        can be seen (renamed away without a new one, deleted: nothing more is there to read)."""
        try:
            at = os.stat(self.path)
        except OSError:
            return False
        return not gen.is_file(at)


async def _not_read(ctx: SourceContext, gen: Generation, end: int, code: str, why: str,
                    **flags: int) -> None:
    """The `error` record of a once read that stopped short of `end`: how many bytes not read."""
    lost = max(0, end - gen.pos)
    await ctx.event("error", code=code, path=gen.path, **flags, unreadBytes=lost,
                    message=f"{why}: {lost} of its {end} bytes were not read")
