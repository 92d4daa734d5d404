"""Saving a watcher's checkpoint from the event loop: in worker threads (fsync off the loop),
at most once per interval while it moves, newer saves winning over older ones."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from watchrun.sources.checkpoints import CheckpointStore, FileState

log = logging.getLogger("watchrun.checkpoints")


class Keeper:
    """Persists one watcher's checkpoint from worker threads: at most once per `interval`
    seconds while it moves (armed by activity, so an idle watcher costs nothing), and on
    demand. Each save takes a ticket from the store (shared by every keeper of the runner, so
    a watcher restarted by a reload keeps the order); the store drops a save older than one it
    wrote."""

    def __init__(self, store: CheckpointStore, watcher_id: str, interval: float) -> None:
        self.store, self.id, self.interval = store, watcher_id, interval
        self.saved: FileState | None = None
        self.dirty = asyncio.Event()
        self.in_flight = 0
        """Saves running in worker threads."""

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
            if not first:
                await asyncio.sleep(self.interval)
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
        ticket = self.store.ticket()
        job = asyncio.ensure_future(asyncio.to_thread(self.store.save, self.id, state, ticket))
        self.in_flight += 1
        job.add_done_callback(self._landed)
        if await asyncio.shield(job):
            self.saved = state

    def _landed(self, _: object) -> None:
        self.in_flight -= 1

    async def final(self, state: FileState | None) -> None:
        """The save at stop: errors go to the log (there is no record stream any more)."""
        try:
            await self.save(state)
        except OSError as exc:
            log.error("%s: cannot save checkpoint: %s", self.id, exc.strerror or exc)
