"""An agent's record stream: every record cleaned (`agents/clean.py`), ordered retrying writes,
and its opening as the only writer, with its history read back (`agents/history.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from watchrun.agents.clean import FIELD_BYTES, clean_record
from watchrun.agents.history import History, read_history, settle_history
from watchrun.agents.streamlock import StreamLock
from watchrun.clock import Clock
from watchrun.config.model import OutputSpec
from watchrun.offload import StuckCall, at_stop
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.writer import CLOSE_WRITE_S, AsyncWriter

__all__ = ["Recorder", "open_recorder"]

class Recorder:
    """An agent's JSONL stream: every record's text is cleaned here (`clean_record`), so no
    adapter or caller can forget; a record is built at once (its seq is known) and written in
    order by a background flush that retries on disk errors (nothing is dropped)."""

    def __init__(self, sink: JsonlSink, log: RunLog, name: str, *,
                 max_bytes: int = FIELD_BYTES, lock: StreamLock | None = None,
                 give_up_after: float | None = None) -> None:
        self.sink = sink
        self.log, self.name = log, name
        self.lock = lock
        """This process's claim on the stream (`open_recorder`), released by `close`."""
        self.max_bytes = max_bytes
        self.writer = AsyncWriter(
            sink, on_error=lambda msg: log.error(f"cannot write records: {msg}", name),
            on_recovered=lambda: log.info("writing records again", name),
            give_up_after=give_up_after)
        self.failed: str | None = None
        """Why records were given up (a once run's write deadline, or the stop's); None while
        every record was written."""
        self._out: list[bytes] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def next_seq(self) -> int:
        return self.sink.next_seq

    @property
    def pending(self) -> int:
        """Records built but not written yet."""
        return len(self._out)

    def say_dropped(self, counts: Sequence[int], why: str, reason: str) -> None:
        """One log line for deliveries just recorded `dropped` (`counts`: the matches, or the
        prompt, each held): nothing is lost without the log saying so."""
        if counts:
            self.log.warning(f"{len(counts)} waiting delivery(ies) of {sum(counts)} match(es) "
                             f"or prompt(s) dropped: {why}", self.name,
                             event="deliveries-dropped", reason=reason,
                             deliveries=len(counts), count=sum(counts))

    def emit(self, kind: str, fields: Mapping[str, Any], *, limit: int | None = None
             ) -> dict[str, Any]:
        """Clean one record (strings clipped to `limit`, default `max_bytes`), build it and
        queue it for writing; returns the fields as written."""
        clean = clean_record(kind, fields, limit or self.max_bytes)
        self._out.append(self.sink.record(kind, clean))
        with contextlib.suppress(RuntimeError):  # no running loop: the next flush writes it
            self._kick()
        return clean

    def _kick(self) -> None:
        if self._out and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """The only writer: callers are never able to cancel a batch half-way. Records the
        writer gives up (its deadline passed) are explained by a `gap` record later, and
        `failed` says why."""
        while self._out:
            batch, self._out = self._out, []
            try:
                await self.writer.write_lines(batch)
            except SinkWriteError as exc:
                self._give_up(f"its records could not be written: {exc}")

    async def flush(self) -> None:
        """Wait until every queued record is written (while the disk fails: back-pressure)."""
        while self._out or (self._task is not None and not self._task.done()):
            self._kick()
            assert self._task is not None
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Write what is queued (on a failing disk for at most CLOSE_WRITE_S: then it is given
        up, a stop never waits for space), close the file (an fsync, in a thread), unlock."""
        try:
            self.stopping()
            await self.flush()
            try:
                await at_stop(self.sink.close)  # an fsync
            except (SinkWriteError, StuckCall) as exc:
                self.log.error(f"closing its records failed: {exc}", self.name)
        finally:
            if self.lock is not None:
                self.lock.release()

    def stopping(self) -> None:
        """The runner stops: a write retrying on a failing disk gives up after CLOSE_WRITE_S,
        so a turn ending (which waits for its records) cannot hold the stop."""
        self.writer.give_up_by(CLOSE_WRITE_S)

    def _give_up(self, why: str) -> None:
        if self._out:
            self.sink.give_up(self._out)
            self._out = []
        if self.failed is None:
            self.failed = why
            self.log.error(why, self.name)


async def open_recorder(path: Path, name: str, out: OutputSpec, line_bytes: int, log: RunLog,
                        clock: Clock, *, give_up_after: float | None = None
                        ) -> tuple[Recorder, History]:
    """Open an agent's stream as its only writer (in a worker thread: it locks, creates files
    and reads the last record), read its history (`read_history`) and settle what a stopped
    runner left open: with the lock obtained, whoever left it is dead. Another live writer:
    `StreamBusyError`, and nothing is read or written. Cancelled meanwhile, the stream is
    closed and unlocked again (in a thread: the close fsyncs)."""
    opening = asyncio.get_running_loop().run_in_executor(None, functools.partial(
        _open_locked, path, name, out, clock))
    # (a future, not a task: the end of a run cancels tasks, and a cancelled one would drop
    # the sink its thread opened; the future lands while the loop waits for the threads)
    try:
        sink, lock = await asyncio.shield(opening)
        history = await read_history(sink.path)
    except BaseException:
        opening.add_done_callback(_close_opened)  # at once, or when its thread is done
        raise
    rec = Recorder(sink, log, name, max_bytes=line_bytes, lock=lock,
                   give_up_after=give_up_after)
    if sink.repaired_bytes:  # as a watcher's stream says it (`runtime/wiring.py`)
        msg = f"repaired a torn last record ({sink.repaired_bytes} bytes) after a crash"
        log.warning(msg, name)
        rec.emit("error", {"code": "sink-repaired", "message": msg,
                           "bytes": sink.repaired_bytes})
    if sink.unwritten.damage is not None:  # (as a watcher's stream says it, too)
        log.warning(sink.unwritten.damage, name)
        rec.emit("error", {"code": "note-corrupt", "message": sink.unwritten.damage,
                           "path": str(sink.unwritten.note)})
    left = history.open_turn.get("turnId") if history.open_turn is not None else None
    queued = [d["count"] if isinstance(d.get("count"), int) else 0 for d in history.queued]
    settle_history(rec.emit, history, clock)
    if left is not None:  # (its turn-start was in the log of the runner that stopped)
        log.log("warning", "turn-end", f"{left} cancelled: the runner stopped before it ended",
                name, turnId=left, status="cancelled")
    rec.say_dropped(queued, "left queued by a runner that stopped", "runner-restarted")
    return rec, history


def _open_locked(path: Path, name: str, out: OutputSpec, clock: Clock
                 ) -> tuple[JsonlSink, StreamLock]:
    """The lock first: the sink's open repairs a torn last record, which must be ours."""
    lock = StreamLock(path, name)
    try:
        return JsonlSink(path, name, max_bytes=out.max_bytes, keep=out.keep, clock=clock), lock
    except BaseException:
        lock.release()
        raise


def _close_opened(opening: asyncio.Future[tuple[JsonlSink, StreamLock]]) -> None:
    """Close the sink `opening` opened, if it did, then unlock (in a thread: the close
    fsyncs)."""
    if opening.cancelled() or opening.exception() is not None:
        return
    sink, lock = opening.result()

    def close() -> None:
        try:
            sink.close()
        finally:
            lock.release()

    try:
        asyncio.get_running_loop().run_in_executor(None, close)
    except RuntimeError:  # the run is ending: no executor any more
        close()
