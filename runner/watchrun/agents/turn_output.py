"""A turn's output as it is printed: stdout lines through the provider's adapter into records
(an oversized protocol line ends the parsing, a generic agent's long line is cut; a long line
is parsed in a worker thread, and its many records are written a slice at a time),
stderr lines as `stderr` records (what the adapter reads in them, or in the exit, told redacted),
the tally of what was written."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from watchrun.agents.clean import clean_text, unreserved
from watchrun.agents.providers import Observation, make_adapter
from watchrun.agents.providers.base import PREVIEW_CHARS
from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder
from watchrun.agents.tally import Tally
from watchrun.clock import Clock
from watchrun.config.model import AgentSpec, Limits
from watchrun.events import Chunk
from watchrun.match.framing import LineFramer
from watchrun.match.redact import redactor
from watchrun.match.sanitize import clip, decode
from watchrun.process.spawn import Proc

__all__ = ["SLICE_RECORDS", "TurnOutput"]

READ_BYTES = 64 * 1024
_HEAD = 4 * PREVIEW_CHARS  # bytes of a pending line kept for an oversized line's preview
SLICE_RECORDS = 1000
"""A protocol line's records are written this many at a time, the loop let run between: one
line of 400 000 content blocks was as many records written in one go, holding the loop ~19 s
(and Claude's `--output-format json` prints a whole session as one line: none is dropped)."""
PARSE_OFF_LOOP_BYTES = 256 * 1024
"""A protocol line this long is parsed in a worker thread: the adapter's parse of one line of
400 000 blocks (15 MB) held the loop ~2 s; in a thread the loop runs between the interpreter's
switches, held only for the JSON decode itself (~0.3 s of that line)."""
REASON_BYTES = 1024
"""A failure read from stderr or the exit keeps this many bytes of its message."""
_NOT_EVENTS = frozenset({"output", "raw"})
"""Observations of a line that is no event of the provider's protocol (plain output, JSON it
does not know or cannot read): after the final result they do not move the settle on."""


class TurnOutput:
    """Reads one turn's stdout and stderr and writes their records. Tells the turn when output
    last came (`activity`, for idleTimeout), when to stop after the completion marker
    (`settle_at`, set with a `poke`) or after the provider's final result (`final_at`), and
    through `stop` that an oversized line ends it."""

    def __init__(self, spec: AgentSpec, limits: Limits, out: Recorder, clock: Clock,
                 tracker: UsageTracker | None, settle_s: float, poke: asyncio.Event,
                 stop: Callable[[str, str], None]) -> None:
        self.limits, self.out, self.clock, self.settle_s = limits, out, clock, settle_s
        self._poke, self._stop = poke, stop
        self.adapter = make_adapter(spec.provider, tracker, spec.command)
        self._text_only = spec.provider == "generic"  # no protocol: a long line is text, cut
        self.tally = Tally(spec.until)
        self._hide = redactor(spec.redact)
        self.turn_id = ""
        self.activity = 0.0
        self.settle_at: float | None = None
        self.final_at: float | None = None
        """When the provider's final result came, or its last protocol event since: the turn
        stops FINAL_SETTLE_S after it. Output that is no event (`_NOT_EVENTS`, stderr) leaves
        it: a background process printing on must not hold the turn open."""
        self._discard = False  # after an oversized line: stdout is drained, not parsed
        self.parsing = False
        """True while stdout's reader writes the records of lines it has read (a line of many
        records takes a while, the loop let run between slices): the turn's end waits for it."""
        self._head = b""
        self._adapter_lock = asyncio.Lock()  # (held while a worker thread parses a long line)

    async def read_stdout(self, proc: Proc) -> None:
        framer = LineFramer(self.limits.max_line_bytes if self._text_only
                            else self.limits.max_event_bytes)
        while data := await proc.read(READ_BYTES):
            self.activity = self.clock.monotonic()
            if self._discard:
                continue
            nl = data.rfind(b"\n")
            self._head = data[nl + 1 :][:_HEAD] if nl >= 0 else (self._head + data)[:_HEAD]
            chunk = framer.feed(data)
            if chunk is not None:
                await self._chunk(chunk)
            if not (self._discard or self._text_only) and \
                    framer.pending > self.limits.max_event_bytes:
                self._oversized(self._head, framer.pending)
            await self.out.flush()
        if not self._discard:
            chunk = framer.finish()
            if chunk is not None:
                await self._chunk(chunk)
        await self.out.flush()

    async def _chunk(self, chunk: Chunk) -> None:
        self.parsing = True
        try:
            await self._lines(chunk)
        finally:
            self.parsing = False

    async def _lines(self, chunk: Chunk) -> None:
        data, pos = chunk.data, 0
        while pos < len(data) and not self._discard:
            end = data.index(b"\n", pos)
            omitted = chunk.cut_at(pos)
            if omitted and not self._text_only:
                self._oversized(data[pos:end], end - pos + omitted)
                break
            line = data[pos:end]
            if len(line) >= PARSE_OFF_LOOP_BYTES:  # (stderr's lines wait for the adapter)
                async with self._adapter_lock:
                    found = await self._parse_off_loop(line)
            else:
                found = self._parse(line)
            if omitted:  # (a generic agent's line cut at maxLineBytes: what it lost is said)
                found = [Observation(o.kind, {**o.fields, "truncated": True,
                                              "omittedBytes": omitted}) for o in found]
            for at in range(0, len(found), SLICE_RECORDS):
                if at:  # (a line of many records: the loop runs between slices)
                    await self.out.flush()
                    await asyncio.sleep(0)
                self._observe(found[at : at + SLICE_RECORDS])
            self._after_final(found, silent_event=bool(line.strip()))
            pos = end + 1

    async def _parse_off_loop(self, line: bytes) -> list[Observation]:
        """`_parse` in a worker thread; a cancel waits for the thread to end, so the adapter is
        never used by the thread and the turn's end at once."""
        work = asyncio.ensure_future(asyncio.to_thread(self._parse, line))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            await asyncio.wait({work})
            raise

    def _parse(self, line: bytes) -> list[Observation]:
        """The adapter's observations of one line, parsed as printed (the recorder cleans
        them)."""
        return self.adapter.parse(decode(line))

    def _oversized(self, head: bytes, size: int) -> None:
        limit = self.limits.max_event_bytes
        self.out.emit("raw", {"turnId": self.turn_id, "value": decode(head)[:PREVIEW_CHARS],
                              "reason": "oversized-event", "bytes": size, "truncated": True})
        self._discard = True
        self._stop("oversized-event", f"a protocol line longer than {limit} bytes "
                   "(limits.maxEventBytes); the rest of the output was not parsed")

    def _observe(self, found: list[Observation]) -> None:
        """Write the adapter's observations (the recorder cleans them) and tally what was
        written, so the turn's reply is made of clean text only."""
        for obs in found:
            fields = unreserved(obs.fields)
            fields["turnId"] = self.turn_id
            clean = self.out.emit(obs.kind, fields, limit=self.limits.max_line_bytes)
            self.tally.note(obs.kind, clean)
        if self.tally.marker_seen and self.settle_at is None:
            self.settle_at = self.clock.monotonic() + self.settle_s
            self._poke.set()
        if self.tally.completed_ok is not None and self.final_at is None:
            self.final_at = self.clock.monotonic()  # (the turn's timers take it from here)
            self._poke.set()

    def _after_final(self, found: list[Observation], *, silent_event: bool) -> None:
        """A line the adapter read as an event of its provider's protocol (an observation not
        in `_NOT_EVENTS`; or none at all, when `silent_event`: a non-blank stdout line it read
        and records nothing of), after the final result: the settle counts from here."""
        if self.final_at is not None and (
                any(o.kind not in _NOT_EVENTS for o in found) or (silent_event and not found)):
            self.final_at = self.clock.monotonic()

    async def read_stderr(self, proc: Proc) -> None:
        framer = LineFramer(self.limits.max_line_bytes)
        while True:
            data = await proc.read_stderr(READ_BYTES)
            chunk = framer.feed(data) if data else framer.finish()
            if data:
                self.activity = self.clock.monotonic()
            if chunk is not None:
                async with self._adapter_lock:
                    self._stderr_lines(chunk)
                await self.out.flush()
            if not data:
                return

    def _stderr_lines(self, chunk: Chunk) -> None:
        """A `stderr` record per line with text; a line the framer cut at limits.maxLineBytes
        is marked `truncated`, as a clipped `output` line is."""
        data, pos = chunk.data, 0
        while pos < len(data):
            end = data.index(b"\n", pos)
            text = decode(data[pos:end])
            if clean_text(text, None)[0].strip():
                cut = {"truncated": True} if chunk.cuts and chunk.cut_at(pos) else {}
                self.out.emit("stderr", {"turnId": self.turn_id, "text": text, "raw": text,
                                         **cut}, limit=self.limits.max_line_bytes)
            found = self._told(self.adapter.stderr(text))
            self._observe(found)
            self._after_final(found, silent_event=False)
            pos = end + 1

    def finish(self, exit_code: int | None) -> None:
        """The adapter's last observations, once the process has exited."""
        self._observe(self._told(self.adapter.finish(exit_code)))

    def _told(self, found: list[Observation]) -> list[Observation]:
        """A failure the adapter read in stderr or the exit (the CLI's own words: its error
        line, which `agent run` and `agent list` show as the turn's error) redacted as a
        prompt is, its `${VAR}` secrets too, and clipped to REASON_BYTES."""
        return [Observation(o.kind, {**o.fields, "message": self._reason(o.fields["message"])})
                if o.kind in ("failure", "quota") and isinstance(o.fields.get("message"), str)
                else o for o in found]

    def _reason(self, text: str) -> str:
        said, cut = clip(self._hide.redact(clean_text(text, None)[0])[0], REASON_BYTES)
        return f"{said}…" if cut else said
