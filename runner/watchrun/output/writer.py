"""Write a sink's records from the event loop, in order, retrying a failing disk with backoff."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watchrun.offload import at_stop
from watchrun.output.notefile import Run
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.unwritten import Unwritten, seq_of

__all__ = ["CLOSE_WRITE_S", "AsyncWriter"]

CLOSE_WRITE_S = 2.0
"""At a stop, what is still queued is retried this long on a failing disk, then given up."""


class AsyncWriter:
    """Writes a sink's lines from the event loop, in order: failures are retried with backoff
    (100 ms doubling to 5 s). Callers await: a stuck disk is back-pressure. Lines are given up
    (and their seqs explained by a `gap` record) only when the caller is cancelled or its
    `give_up_after` passes: at shutdown, never while running — except where the writer is
    given `give_up_after` itself (a once run, which must end: then every write has it)."""

    def __init__(
        self, sink: JsonlSink, *, on_error: Callable[[str], None] | None = None,
        on_recovered: Callable[[], None] | None = None, initial_delay: float = 0.1,
        max_delay: float = 5.0, give_up_after: float | None = None,
    ) -> None:
        self.sink, self.on_error, self.on_recovered = sink, on_error, on_recovered
        self.initial_delay, self.max_delay = initial_delay, max_delay
        self.give_up_after = give_up_after
        """The default of `write_lines`'s own (None: retry for as long as it takes)."""
        self._stop_at: float | None = None  # `give_up_by`: the loop time every write ends by
        self.gave_up = False
        """Lines were given up by the writer's own deadline and nothing was written since: a
        later write gets one try (a disk that failed that long is not waited for again)."""
        self.failing = False
        """True from the first failure of an episode until a write succeeds again."""
        self.on_gap: Callable[[dict[str, Any]], None] | None = None
        """Told the fields of each `gap{unwritten}` record the sink writes ahead of the lines
        it is given (seqs given up earlier: at a stop, by an earlier runner), once in the file."""
        self.retries = 0
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()

    async def write(self, kind: str, fields: Mapping[str, Any]) -> int:
        """Build and write one record; return its seq."""
        line = self.sink.record(kind, fields)
        seq = self.sink.next_seq - 1
        await self.write_lines([line])
        return seq

    def write_now(self, kind: str, fields: Mapping[str, Any]) -> int:
        """`sink.write`: one try, now (SinkWriteError), `on_gap` told as by `write_lines`."""
        due = self._due(self.sink.next_seq)
        try:
            return self.sink.write(kind, fields)
        finally:
            self._told(due)

    async def close(self) -> None:
        """Close the sink off the loop (`offload.at_stop`); its close writes the `gap` records
        of what was given up when it can, and `on_gap` is told of those (when it returned)."""
        due = self._due(None)
        try:
            await at_stop(self.sink.close)
        except SinkWriteError:  # (it closed: its sync or its note failed)
            self._told(due)
            raise
        self._told(due)

    def _write(self, lines: list[bytes]) -> None:
        """`sink.write_lines`, `on_gap` told of the gap records it wrote ahead of `lines`."""
        due = self._due(seq_of(lines[0])[0] if lines else None)
        try:
            self.sink.write_lines(lines)
        finally:
            self._told(due)

    def _due(self, below: int | None) -> list[Run]:
        """The runs of seqs given up whose `gap` records a write of seqs from `below` on (all
        of them: None) writes first, when someone is to be told."""
        unwritten = self.sink.unwritten
        if self.on_gap is None or not (unwritten.lost or unwritten.noted):
            return []
        return unwritten.runs(below)

    def _told(self, due: list[Run]) -> None:
        """`on_gap` told of each of the `due` runs whose `gap` record is now in the file."""
        if not due or self.on_gap is None:
            return
        left = {(lo, hi) for lo, hi, _ in self.sink.unwritten.runs()}
        for lo, hi, kinds in due:
            if (lo, hi) not in left:
                self.on_gap(Unwritten.gap_fields(lo, hi, kinds))

    async def write_lines(self, lines: Sequence[bytes], *, give_up_after: float | None = None,
                          on_written: Callable[[int], None] | None = None) -> None:
        """Write all `lines`; `on_error` once per failure episode, `on_recovered` after it.
        With `give_up_after` (seconds; the writer's own by default), what is still unwritten
        then is given up and SinkWriteError raised. `on_written(n)`: the next `n` of `lines`
        are in the file, whole (called as they land: a full disk takes a batch in parts)."""
        pending = list(lines)
        loop = asyncio.get_running_loop()
        if self.gave_up:
            give_up_after = 0.0
        elif give_up_after is None:
            give_up_after = self.give_up_after
        deadline = None if give_up_after is None else loop.time() + give_up_after
        try:
            async with self._lock:
                await self._retry(pending, deadline, on_written)
        except BaseException:
            if pending:
                self.sink.give_up(pending)
            raise

    async def _retry(self, pending: list[bytes], deadline: float | None,
                     on_written: Callable[[int], None] | None) -> None:
        delay = self.initial_delay
        while True:
            try:
                self._write(pending)
                written = len(pending)
                pending.clear()
                if on_written is not None and written:
                    on_written(written)
                break
            except SinkWriteError as exc:
                del pending[: exc.written]
                if on_written is not None and exc.written:
                    on_written(exc.written)
                self.retries += 1
                if not self.failing:
                    self.failing = True
                    if self.on_error is not None:
                        self.on_error(f"{exc}; retrying, no record is dropped"
                                      if self.give_up_after is None else
                                      f"{exc}; retrying for {self.give_up_after:g} s, then it "
                                      "fails")
                now = asyncio.get_running_loop().time()
                stop_at = self._stop_at
                if (deadline is not None and now >= deadline) or (
                        stop_at is not None and now >= stop_at):
                    self.gave_up = self.give_up_after is not None or stop_at is not None
                    raise
            self._wake.clear()
            now = asyncio.get_running_loop().time()  # (the last try is at the deadline itself)
            wait = max(0.0, min([delay, *(t - now for t in (deadline, self._stop_at)
                                          if t is not None)]))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            delay = min(delay * 2, self.max_delay)
        self.gave_up = False
        if self.failing:
            self.failing = False
            if self.on_recovered is not None:
                self.on_recovered()

    def give_up_by(self, seconds: float) -> None:
        """Stopping: every write, the one retrying now too, gives up what it has not written
        `seconds` from now (a stop never waits for space)."""
        at = asyncio.get_running_loop().time() + seconds
        self._stop_at = at if self._stop_at is None else min(self._stop_at, at)
        self.retry_now()

    def retry_now(self) -> None:
        """Cut the current backoff short (space was freed, or the runner is stopping)."""
        self._wake.set()
