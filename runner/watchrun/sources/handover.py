"""How a live file source whose path turned remote ends (`inotify.TurnedRemote`): what it has
open on a local file system is read to its end and released on the runner's loop, and its
checkpoint is left to the source that goes on with the path on a thread of its own
(`successor`, `runtime.remote`)."""

from __future__ import annotations

import contextlib
from typing import Self

from watchrun.events import SourceContext
from watchrun.inotify import TurnedRemote, known_local
from watchrun.notify import Watch
from watchrun.offload import offload
from watchrun.sources.generation import Generation
from watchrun.sources.once_read import OnceRead


class HandOver(OnceRead):
    """The last steps of a live file source whose path is on a remote file system now (one
    mounted over it, or over a directory on the way, since the source started)."""

    async def _hand_over(self, ctx: SourceContext, watch: Watch) -> None:
        """The generation followed, when it is still on a local file system (hidden by the
        mount), is read to its end and the file now at the path is opened in its place, as a
        rotation (`rename`: the hidden file keeps its links; the rotation's `TurnedRemote`
        comes before a line of the new file is read, its `rotate` record left to write). Then
        every generation open on a local file system is read to its end and released, as after
        rotateWait: the start from the checkpoint would look for them in vain (hidden), and
        take them for lost. Those on the remote file system are left to that start, unread
        here, where a read that never returns would hold every watcher."""
        local = await offload(_local, self.opened)
        cur = self._cur
        if cur is not None and cur in local:
            with contextlib.suppress(TurnedRemote, OSError):
                await self._follow(ctx, watch, cur)
        for gen in [g for g in self.opened if g in local]:
            try:
                await self._drain(ctx, gen)
                await gen.finish(ctx, self.name)
            except OSError:
                continue  # (kept open, and in the checkpoint: the next start says its loss)
            self._remember(gen.checkpoint(finished=True))
            if gen is self._cur:
                self._cur = None
            self._close(gen, watch)

    def successor(self) -> Self:
        """A source made as this one was, to go on from its checkpoint once this one ended;
        its start sets this one's `ready` (which the runner's start may be waiting on)."""
        new = type(self)(self.spec, self.limits, self.store, self.notifier, self.clock,
                         once=self.once, read_size=self.read_size)
        new.ready = self.ready
        return new


def _local(gens: list[Generation]) -> list[Generation]:
    """Those of `gens` on a file system known to be local (fstatfs: in a worker thread)."""
    return [g for g in gens if known_local(g.fd)]
