"""Saving a watcher's checkpoint from the event loop: in worker threads (fsync off the loop),
with the other watchers' saves of the same turn, at most once per interval while it moves,
newer saves winning over older ones, each after the records it covers are durable."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.savebatch import Ask

log = logging.getLogger("watchrun.checkpoints")

Job = Callable[[], None]


@runtime_checkable
class Covered(Protocol):
    """A `SourceContext` whose records a checkpoint covers (`runtime.resuming.Resuming`)."""

    async def durable(self) -> Job | None:
        """On its loop: a job for a worker thread that makes every record written so far
        durable (`JsonlSink.durable`); None when nothing was written since."""
        ...

    async def lost(self, seq: int) -> None:
        """The checkpoint's records before `seq` are not all in the stream: number on from
        `seq`, after a record that says so."""
        ...


class Keeper:
    """Persists one watcher's checkpoint from worker threads: at most once per `interval`
    seconds while it moves (armed by activity, so an idle watcher costs nothing; at a tick the
    loop's keepers share, so the saves of the watchers that moved go in one batch:
    `savebatch.py`), and on demand. Each save takes a ticket from the store (shared by every
    keeper of the runner, so a watcher restarted by a reload keeps the order); the store drops
    a save older than one it wrote. A checkpoint never reaches the disk before the records it
    covers: the job of `covered.durable` runs first, in the save's worker thread (a power cut
    would otherwise leave it past the end of the stream: the lines it covers never read again,
    their seqs given out again)."""

    def __init__(self, store: CheckpointStore, watcher_id: str, interval: float) -> None:
        self.store, self.id, self.interval = store, watcher_id, interval
        self.saved: FileState | None = None
        self.dirty = asyncio.Event()
        self.in_flight = 0
        """Saves running in worker threads."""
        self.covered: Covered | None = None
        """Whose records the checkpoint covers (set when the source runs; None: no records)."""

    async def run(
        self,
        current: Callable[[], FileState | None],
        report: Callable[[OSError], Awaitable[None]],
    ) -> None:
        """Save now (a crash before the first line resumes from here), then after activity."""
        self.dirty.set()
        first = True
        while True:
            await self.dirty.wait()
            if not first:  # (a tick the loop's keepers share: their saves go together)
                await self.store.batch.tick(self.interval)
            first = False
            self.dirty.clear()
            try:
                await self.save(current())
            except OSError as exc:
                await report(exc)

    async def save(self, state: FileState | None) -> None:
        """Write `state` in a worker thread (fsync off the loop). The thread finishes even if
        this is cancelled; a later save still wins over it."""
        if state is None or state == self.saved:
            return
        ticket = self.store.order.ticket(self.id)
        job = asyncio.ensure_future(self._write(state, ticket))
        self.in_flight += 1
        job.add_done_callback(self._landed)
        if await asyncio.shield(job):
            self.saved = state

    async def _write(self, state: FileState, ticket: int) -> bool:
        try:
            first = await self.covered.durable() if self.covered is not None else None
            return await self.store.batch.save(Ask(self.id, state, ticket, first))
        finally:
            self.store.order.settled(self.id)

    def _landed(self, _: object) -> None:
        self.in_flight -= 1

    async def final(self, state: FileState | None) -> None:
        """The save at stop: errors go to the log (there is no record stream any more)."""
        try:
            await self.save(state)
        except OSError as exc:
            log.error("%s: cannot save checkpoint: %s", self.id, exc.strerror or exc)
