"""An agent's record stream: ordered, retrying writes, and reading back its history."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

from watchrun.agents.providers.usage import UsageTracker
from watchrun.clock import Clock
from watchrun.output.records import iter_records
from watchrun.output.runlog import RunLog
from watchrun.output.sink import AsyncWriter, JsonlSink

__all__ = ["Recorder", "read_history"]


class Recorder:
    """An agent's JSONL stream: a record is built at once (its seq is known) and written in
    order by a background flush that retries on disk errors (nothing is dropped)."""

    def __init__(self, sink: JsonlSink, log: RunLog, name: str) -> None:
        self.sink = sink
        self.writer = AsyncWriter(
            sink, on_error=lambda msg: log.error(f"cannot write records: {msg}", name),
            on_recovered=lambda: log.info("writing records again", name))
        self._out: list[bytes] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def next_seq(self) -> int:
        return self.sink.next_seq

    @property
    def pending(self) -> int:
        """Records built but not written yet."""
        return len(self._out)

    def emit(self, kind: str, fields: dict[str, Any]) -> int:
        """Build one record and queue it for writing; returns its seq."""
        self._out.append(self.sink.record(kind, fields))
        with contextlib.suppress(RuntimeError):  # no running loop: the next flush writes it
            self._kick()
        return self.sink.next_seq - 1

    def _kick(self) -> None:
        if self._out and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """The only writer: callers are never able to cancel a batch half-way."""
        while self._out:
            batch, self._out = self._out, []
            await self.writer.write_lines(batch)

    async def flush(self) -> None:
        """Wait until every queued record is written (while the disk fails: back-pressure)."""
        while self._out or (self._task is not None and not self._task.done()):
            self._kick()
            assert self._task is not None
            await asyncio.shield(self._task)

    async def close(self) -> None:
        await self.flush()
        self.sink.close()


def read_history(rec: Recorder, tracker: UsageTracker, clock: Clock) -> tuple[int, int, str]:
    """Teach `tracker` the usage baselines of an agent's history (so resumed sessions are not
    counted twice); close a turn a crashed runner left open; (turns, tokens, last reply)."""
    turns = tokens = 0
    reply = ""
    open_turn: dict[str, Any] | None = None
    for r in iter_records(rec.sink.path):
        kind = r.get("kind")
        if kind == "usage":
            with contextlib.suppress(ValueError):
                tracker.learn(r)
        elif kind == "dispatch-start":
            turns, open_turn = turns + 1, r
        elif kind == "dispatch-finished":
            tokens += r["tokens"] if isinstance(r.get("tokens"), int) else 0
            reply = str(r.get("reply") or "")
            if open_turn is not None and open_turn.get("turnId") == r.get("turnId"):
                open_turn = None
    if open_turn is not None:
        started = datetime.fromisoformat(str(open_turn["ts"]).replace("Z", "+00:00"))
        rec.emit("dispatch-finished", {
            "turnId": open_turn.get("turnId"), "status": "cancelled", "completed": False,
            "usage": {"input": 0, "cached": 0, "output": 0, "complete": False}, "tokens": 0,
            "durationMs": max(0, round((clock.now() - started.timestamp()) * 1000)),
            "exitCode": None, "signal": None, "reply": "",
            "error": {"code": "runner-restarted",
                      "message": "the runner stopped before this turn ended"}})
    return turns, tokens, reply
