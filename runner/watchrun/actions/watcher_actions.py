"""One watcher's actions in a live runner, and the records they write into its JSONL: queued,
written in order by one flusher task the hub owns, and at a stop written or given up (and said)
within CLOSE_WRITE_S."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection
from typing import Any, Protocol

from watchrun.actions.reactor import ActionRuntime, Host
from watchrun.actions.windows import Carried
from watchrun.config.model import ActionSpec, WatcherSpec
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.writer import CLOSE_WRITE_S, AsyncWriter

__all__ = ["Owner", "Stream", "WatcherActions"]


class Stream(Protocol):
    """A watcher's record stream (its pipeline): action records go in its JSONL, in seq order."""

    sink: JsonlSink
    writer: AsyncWriter


class Owner(Host, Protocol):
    """What a watcher's actions need of the hub that owns them (`hub.py`)."""

    keep: int
    changed: asyncio.Event
    """Set when a batch of records is written (the hub's `idle` waits on it)."""

    def counter(self, wid: str, action: str) -> dict[str, int]: ...


class WatcherActions:
    """The actions of one watcher, and the records they write into its JSONL (in order: each
    record is built and handed to the writer in one step)."""

    def __init__(self, spec: WatcherSpec, stream: Stream, hub: Owner,
                 carried: dict[str, tuple[ActionSpec, Carried]]) -> None:
        self.spec, self.stream, self.hub = spec, stream, hub
        self.actions = [ActionRuntime(spec, a, hub, self.record, hub.counter(spec.id, a.name),
                                      hub.keep) for a in spec.actions]
        for action in self.actions:  # (windows open before a reload go on)
            was, windows = carried.get(action.spec.name, (None, None))
            if was == action.spec and windows is not None:
                action.gate.resume(windows)
        self._out: deque[tuple[str, dict[str, Any]]] = deque()
        self._flusher: asyncio.Task[None] | None = None
        self.lost = 0
        """Records given up at the close (a failing disk)."""

    @property
    def busy(self) -> bool:
        return bool(self._out) or any(a.busy for a in self.actions) or (
            self._flusher is not None and not self._flusher.done())

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        self._out.append((kind, fields))
        self.kick()

    def kick(self) -> None:
        if self._out and self.hub.running and (self._flusher is None or self._flusher.done()):
            self._flusher = self.hub.spawn(self._flush(), f"action-records:{self.spec.id}")
        for action in self.actions:
            action.start_workers()

    async def _flush(self, give_up_after: float | None = None) -> None:
        """Write the queued records; those given up (`give_up_after` passed on a failing disk:
        the writer's `gap` explains their seqs) are counted in `lost`."""
        while self._out:
            kind, fields = self._out.popleft()
            stream = self.stream
            try:
                await stream.writer.write_lines([stream.sink.record(kind, fields)],
                                                give_up_after=give_up_after)
            except ValueError as exc:  # its sink was closed (the watcher was stopped)
                self.hub.log.error(f"a {kind} record was lost: {exc}", self.spec.id)
            except SinkWriteError:
                self.lost += 1
        self.hub.changed.set()

    async def close(self, reason: str, kept: Collection[ActionSpec] = ()) -> None:
        """Cancel running firings (each records `cancelled`), drop what waits (recorded), and
        write every record before returning: on a failing disk for at most CLOSE_WRITE_S, then
        what is left is given up and said (a stop never waits for space). An action in `kept`
        (a reload left it as it was) closes because its watcher restarts: said so."""
        for action in self.actions:
            action.closing = True
            action.ended_by = "watcher-restarted" if action.spec in kept else reason
        workers = [task for a in self.actions for task in a.workers]
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        for action in self.actions:
            action.abandon(action.ended_by)
        loop = asyncio.get_running_loop()
        end = loop.time() + CLOSE_WRITE_S
        while self._flusher is not None and not self._flusher.done():
            await asyncio.wait({self._flusher}, timeout=max(0.0, end - loop.time()))
            if not self._flusher.done():  # (its record in hand is given up: a `gap` says so)
                self._flusher.cancel()
                await asyncio.gather(self._flusher, return_exceptions=True)
                self.lost += 1
        if self._out:  # not running, or the time is up: written here, or given up
            await self._flush(give_up_after=max(0.0, end - loop.time()))
        if self.lost:
            self.hub.log.error(f"{self.lost} action record(s) given up: they could not be written "
                               f"within {CLOSE_WRITE_S:g} s of the stop (a full disk?)",
                               self.spec.id, event="action-records-lost")
