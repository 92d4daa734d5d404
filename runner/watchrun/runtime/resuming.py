"""The pipeline's side of a file watcher's checkpoint: the stream's numbering, what a crash
recorded past the checkpoint, a stream that ends before it, and its records made durable first."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from watchrun.offload import offload
from watchrun.output.recorded import recorded_since
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.writer import AsyncWriter
from watchrun.runtime.counters import Counters
from watchrun.sources.resume import Recorded

INTERRUPTED = "interrupted"
"""The `stop` reason of a once run that a signal ended before it ended by itself: its verdict
judged part of what it was to, so the next once run counts its matches as a killed run's."""


class Resuming:
    """`sources.resume.Resumable` (crash recovery without repeats),
    `sources.keeper.Covered` (a checkpoint never ahead of the records) and
    `sources.zeros.CountsNul` (a hole's NUL bytes passed over), for `WatcherPipeline`."""

    sink: JsonlSink
    writer: AsyncWriter
    judges: bool
    """A once run's: a verdict counts the matches a run that never ended recorded."""
    counters: Counters
    opening: list[tuple[str, dict[str, Any]]]
    """The records of what the sink's open found (a torn last record cut off, a damaged
    note), said once the stream's numbering is settled: by `lost`, after its `gap`, or before
    the first record of this start (`opened`)."""

    async def event(self, kind: str, *, echo: bool = True, **fields: Any) -> None:
        """Write a non-match record (`WatcherPipeline.event`)."""
        raise NotImplementedError

    @property
    def next_seq(self) -> int:
        return self.sink.next_seq

    async def recorded(self, since_seq: int) -> Recorded:
        """What was recorded from `since_seq` on (the records a crash kept past the
        checkpoint): read backwards from the end of the stream, in a worker thread. Nothing to
        read when the stream's last record (read when the sink opened) is older, or is that
        seq and neither a `match` nor a `rotate` (a clean stop's `stop` record). For a once run
        (`judges`), a stream that does not end with a `stop` record was left by a run that never
        ended, and one that ends with `stop{interrupted}` by a once run a signal ended before it
        ended by itself, so no verdict judged its matches: all of them, behind the checkpoint
        too, are `unjudged` (counted), and when some were rotated away no verdict can be given
        (an `error`)."""
        last = self.sink.last_record
        if last is None:
            return Recorded()
        killed = self.judges and (last.get("kind") != "stop" or last.get("reason") == INTERRUPTED)
        # (a live runner has no verdict: it does not read back every record a crashed one wrote)
        past = last["seq"] > since_seq or (
            last["seq"] == since_seq and last.get("kind") in ("match", "rotate"))
        if not past and not killed:
            return Recorded()
        found: list[tuple[str, str]] | None = [] if killed else None
        epochs, ended, whole = await offload(recorded_since, self.sink.path, since_seq,
                                             self.sink.keep, found)
        if found is not None:
            self.counters.unjudged = found
            if not whole:
                await self.event("error", code="uncounted-matches", message=(
                    "the run before this one did not end by itself (killed, or interrupted by a "
                    "signal), and the first of its records were rotated away (output.keep) "
                    "before they could be counted: "
                    f"{len(found)} of its matches are counted, the others are not known"))
        return Recorded(epochs, ended)

    def skipped(self, lines: int) -> None:
        self.counters.skipped_duplicates += lines

    def skipped_nul(self, count: int) -> None:
        """`sources.zeros.CountsNul`: NUL bytes passed over before a line (a hole)."""
        self.counters.skipped_nul += count

    async def lost(self, seq: int) -> None:
        """The checkpoint counts the records before `seq` as given out, yet the stream ends
        before some of them (its end lost: a power cut its disk did not keep, its files removed
        or put back from a copy; or records the runner was killed as it wrote, a torn last one
        among them, which the sink's open cut off). Their seqs are not given out again: a
        `gap{lost}` takes `seq` and says which are missing, and the records after it go on from
        there, the first of them what the open found (`opening`): called before any record of
        this start, so none takes a lost seq."""
        first = self.sink.next_seq  # (after the last whole record, and past the note's)
        if seq > first:
            held, self.opening = self.opening, []  # (said after the gap, past the lost seqs)
            self.sink.next_seq = seq
            n = seq - first
            try:
                await self.event("gap", reason="lost", fromSeq=first, toSeq=seq - 1, records=n,
                                 message=(
                    f"{n} records (seq {first} to {seq - 1}) are not in the stream, although "
                    "its checkpoint counts them as given out: the stream's end was lost (a power "
                    "cut its disk did not keep, its files removed or put back from a copy), or "
                    "the runner was killed as it wrote them; the lines they covered are not read "
                    f"again, and their seqs are not given out again: this record takes seq {seq}"))
            finally:
                self.opening = held
        self.opened()

    def opened(self) -> None:
        """Write the records of `opening`, if not written yet: one try each (on a full disk
        they are dropped, their seqs given back; the log said what they say)."""
        opening, self.opening = self.opening, []
        for kind, fields in opening:
            with contextlib.suppress(SinkWriteError):
                self.writer.write_now(kind, fields)

    async def durable(self) -> Callable[[], None] | None:
        """The sink's job that makes its records durable (`JsonlSink.durable`)."""
        return self.sink.durable()
