"""One watcher's path from source to sink: chunks → matcher → match records → JSONL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk, MatchInfo
from watchrun.match.keyblocks import KeyBlocks, Region, hide_key_bodies, inside, key_body
from watchrun.match.matcher import Matcher
from watchrun.match.redact import Redactor, clean_text, marker, redact_line
from watchrun.match.sanitize import clip, raw_text, redrawn, sanitize
from watchrun.match.simd import count_newlines
from watchrun.output.jsonl import json_str
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.runtime.counters import Counters, Landed
from watchrun.runtime.matches import (
    Found,
    RecentMatches,
    Rows,
    every_line,
    plain_rows,
    where_members,
)
from watchrun.runtime.recent_lines import RecentLines
from watchrun.runtime.resuming import Resuming

if TYPE_CHECKING:
    from watchrun.runtime.isolation import IsolatedMatcher

FIRST_KEPT = 5
SLICE = 4096
"""A chunk's match records are built, written and handed on this many at a time, the loop let
run between: all at once, the 524k of a 1 MiB read of 2-byte matching lines held it seconds."""
FINAL_WRITE_S = 2.0
"""How long the `stop` record is retried on a failing disk before it is given up."""
OnMatches = Callable[[WatcherSpec, Sequence[MatchInfo], "WatcherPipeline"], None]
"""Who gets a watcher's new matches (agents, actions), with the pipeline they came through:
also while the watcher is being stopped, when it is no running watcher's any more."""


class WatcherPipeline(Resuming):
    """The `SourceContext` a watcher's source reports into."""

    def __init__(
        self,
        spec: WatcherSpec,
        limits: Limits,
        sink: JsonlSink,
        writer: AsyncWriter,
        matcher: Matcher,
        log: RunLog,
        *,
        on_matches: OnMatches | None = None,
        on_event: Callable[[WatcherSpec, str, dict[str, Any]], None] | None = None,
        require: Matcher | None = None,
        redactor: Redactor | None = None,
        isolated: IsolatedMatcher | None = None,
        judges: bool = False,
    ) -> None:
        self.spec, self.limits, self.sink, self.writer = spec, limits, sink, writer
        self.judges = judges
        """A once run's: a verdict counts the matches a run that never ended recorded."""
        self.opening = []
        writer.on_gap = lambda fields: self._told("gap", fields)
        self.matcher, self.log = matcher, log
        self.on_matches, self.on_event = on_matches, on_event
        self.require = require
        self._off_loop = any(m is not None and m.engine != "hyperscan" for m in (matcher, require))
        """RE2 (or `re`) scans in a worker thread: linear, yet `a.{1000}x|b.{1000}y` takes
        seconds on a 64 KiB line (google-re2 lets the interpreter lock go as it searches)."""
        self._keys = KeyBlocks() if spec.wake or spec.actions else None
        """Private-key blocks are followed for the records with `output.redact`, and always for
        a watcher whose matches leave the machine (`wake`, `actions`)."""
        self._regions: list[Region] = []  # of the chunk at hand: its lines inside a key block
        self._key_counted = 0  # the last key block counted as redacted
        self.stopped = False
        """A `stop` record is out: the source gave up (start limit); none is written again."""
        self.isolated = isolated
        """Set when a pattern needs Python `re`: matching runs in a worker, never here."""
        self.counters = Counters(RecentLines(limits.max_log_lines),
                                 recent=RecentMatches(limits.max_matches))
        self.on_touch: Callable[[], None] | None = None
        self._counted: tuple[bytes, int, int] = (b"", 0, 0)  # last chunk: data, lines, pos
        self._matched = 0  # the last chunk's matching lines
        self.redact_with(redactor)

    def redact_with(self, redactor: Redactor | None) -> None:
        """From now on (its start; a reload that changed `redact`), `output.redact`'s redactor."""
        self.redactor = redactor  # (match records, the tail and the log are redacted with it)
        self._keys = self._keys or (KeyBlocks() if redactor is not None else None)
        self._where: tuple[object, bytes, str] = (None, b"", "")  # its members, redacted anew

    def lines_in_last_chunk(self) -> int:
        """`framing.CountsLines`: the lines of the last chunk, counting only what `chunk()`
        did not count while numbering its matched lines (so the source need not count); the
        tail is told (a long chunk keeps only its last lines there), and the chunk's bytes
        are let go of (an idle watcher would keep a 1 MiB read)."""
        data, lines, pos = self._counted
        n = lines + count_newlines(data, pos)
        self._counted = (b"", n, 0)
        self.counters.tail.settle(n)
        return n

    def matches_in_last_chunk(self) -> int:
        """`framing.CountsLines`: the matching lines of the last chunk."""
        return self._matched

    async def chunk(self, chunk: Chunk) -> None:
        """The hot path: O(1) Python work per chunk plus one engine scan of its bytes; lines
        are looked at one by one only where the engine found a match. Their records go out
        SLICE at a time, the loop let run between."""
        data = chunk.data
        self._matched = 0
        c = self.counters
        c.bytes_read += chunk.end - chunk.offset
        if self._keys is not None:  # (every chunk: a block goes on across them)
            self._regions = self._keys.regions(data)
        c.tail.add(chunk, self._regions)
        if chunk.cuts:
            c.cut_lines += len(chunk.cuts)
            c.cut_bytes += sum(cut.omitted for cut in chunk.cuts)
        if self.on_touch is not None:
            self.on_touch()
        rows: Rows | None = None
        if self.isolated is not None:
            spans = await self._isolated(chunk)
        else:
            if self.redactor is None and not self._regions and self.matcher.every_line(data):
                rows = every_line(chunk, self._members(chunk)[0])
            need = self.require is not None and not c.require_seen
            hit, spans = await asyncio.to_thread(self._look, data, need, rows is None) \
                if self._off_loop else self._look(data, need, rows is None)
            c.require_seen |= hit
        if rows is not None:
            self._counted = (data, len(rows.lines), len(data))
            self._matched = len(rows.lines)
            slices: Iterator[tuple[Rows, list[tuple[int, int]]]] = (
                (part, []) for part in rows.parts(SLICE))
        elif not spans:
            self._counted = (data, 0, 0)
            return
        else:
            self._matched = len(spans)
            slices = self._sliced(chunk, spans)
        where = self._members(chunk)[1]
        for k, (some, lines) in enumerate(slices):
            if k:
                await asyncio.sleep(0)  # fairness: other watchers run between the slices
            await self._record(some, lines, where)

    def _sliced(self, chunk: Chunk, spans: list[tuple[int, int]]
                ) -> Iterator[tuple[Rows, list[tuple[int, int]]]]:
        """The rows of `spans`, SLICE at a time, each built as it is asked for (all of a 1 MiB
        read of 2-byte lines at once held the loop ~0.3 s), with their spans."""
        after: tuple[int, int] | None = None
        for k in range(0, len(spans), SLICE):
            some = spans[k : k + SLICE]
            rows, after = self._rows(chunk, some, after)
            yield rows, some

    async def _record(self, rows: Rows, spans: list[tuple[int, int]], where: str) -> None:
        """Write the match records of `rows` (whose lines are `spans`, or none were needed)."""
        found = Found(rows, where, self.sink.cursor_prefix, self.sink.next_seq)
        landed = Landed(self.counters, rows)
        try:
            await self.writer.write_lines(self.sink.match_records(
                rows.lines, rows.line_nos, rows.offsets, rows.rest), on_written=landed)
        finally:  # (the rest given up: the matches whose records are written are handed on)
            self._hand_on(found.head(landed.done), rows, spans)

    def _look(self, data: bytes, require: bool, find: bool
              ) -> tuple[bool, list[tuple[int, int]]]:
        """Whether `require` matches `data`, and the matching lines' spans (each if asked)."""
        hit = require and self.require is not None and bool(self.require.find(data))
        return hit, self.matcher.find(data) if find else []

    def _hand_on(self, found: Found, rows: Rows, spans: list[tuple[int, int]]) -> None:
        """Matches whose records are written to the evidence, `recent`, log, agents, actions."""
        if not found:
            return
        c = self.counters
        if (n := min(len(found), FIRST_KEPT - len(c.first))) > 0:
            c.first.extend(rows.evidence(found, n))
        c.recent.extend(found)
        self.log.matches(self.spec.id, found)
        if self.on_matches is not None:
            self.on_matches(self.spec, self._outgoing(found, spans), self)

    def _outgoing(self, found: Found, spans: list[tuple[int, int]]) -> Sequence[MatchInfo]:
        """The matches handed on to agents and actions. Without `output.redact` the records keep
        a private key's lines, but a line inside a key block leaves the machine as the marker: a
        prompt's own redaction needs the block's BEGIN line, which a key body's match lacks."""
        if self.redactor is not None or not self._regions:
            return found
        return hide_key_bodies(found, spans, self._regions)

    def _members(self, chunk: Chunk) -> tuple[bytes, str]:
        """`where_members` of the chunk's source, kept while it does not change."""
        key = (chunk.path, chunk.inode) if chunk.path is not None else chunk.run
        if key != self._where[0]:
            self._where = (key, *where_members(chunk, self.redactor))
        return self._where[1], self._where[2]

    def _rows(self, chunk: Chunk, spans: list[tuple[int, int]], after: tuple[int, int] | None
              ) -> tuple[Rows, tuple[int, int]]:
        """The records' columns of `spans` (the chunk's matches after `after`: `plain_rows`):
        one pass over them, sanitizing only the lines that need it (and all of them with
        `output.redact`); and where the next slice's count goes on from."""
        plain = self.limits.max_line_bytes if self.redactor is None else -1
        rows, odd, lines = plain_rows(chunk, spans, plain, self._members(chunk)[0], after)
        self._counted = (chunk.data, lines, spans[-1][0])
        for k in odd:  # lines that need sanitizing, clipping or redaction
            self._match(chunk, spans[k], rows, k)
        return rows, (spans[-1][0], chunk.line_no + lines)

    async def _isolated(self, chunk: Chunk) -> list[tuple[int, int]]:
        """Match in the worker; a line over the time budget is an `error` record (regex-timeout)
        and is skipped, so the checkpoint moves past it and a restart does not stall on it."""
        assert self.isolated is not None
        found = await self.isolated.scan(chunk.data)
        self.counters.require_seen |= found.require_hit
        for fields in found.timeouts(chunk, self.isolated.budget_s):
            await self.event("error", **fields)
        return found.spans

    def _match(self, chunk: Chunk, span: tuple[int, int], rows: Rows, k: int) -> None:
        """Fill in row `k`, a line that is not plain: sanitized (and redacted with
        `output.redact`), clipped, marked `truncated` when it was cut or clipped, with `raw`
        when sanitizing changed it."""
        decoded = raw_text(chunk.data[span[0] : span[1]])
        raw: str | None = decoded
        found: dict[str, int] = {}
        block = 0
        omitted = chunk.cut_at(span[0]) if chunk.cuts else 0
        if self.redactor is None:
            text, clipped = sanitize(decoded, self.limits.max_line_bytes)
        elif key_body(block := inside(self._regions, span[0]), decoded):
            text, raw, clipped = marker("private-key"), None, False  # a line of a private key
        else:  # redact, then clip; a secret the reader cut (`omitted`) is hidden as cut
            text, raw, found = redact_line(self.redactor, sanitize(decoded)[0], decoded,
                                           cut=omitted > 0)
            text, clipped = clip(text, self.limits.max_line_bytes)
        if block:  # a key block counts once, whichever of its lines were recorded
            found = {k: n for k, n in found.items() if k != "private-key"}
            if block != self._key_counted:
                found["private-key"] = found.get("private-key", 0) + 1
                self._key_counted = block
        if found:  # (counted as the record is written: `Landed`)
            rows.redacted = rows.redacted or {}
            rows.redacted[k] = found
        members = rows.rest[k]
        if omitted or clipped:
            members += b',"truncated":true,"omittedBytes":%d' % omitted
            rows.cuts = rows.cuts or {}  # (counted as the record is written: `Landed`)
            rows.cuts[k] = omitted
        if raw is not None and text != raw:
            members += b',"raw":' + json_str(raw)
            if (whole := redrawn(raw)) is not None:  # (`raw` is redacted with `output.redact`)
                shown = sanitize(whole, self.limits.max_line_bytes)[0]
                rows.whole = {**(rows.whole or {}), k: shown}
        rows.lines[k] = json_str(text)[1:-1]
        rows.rest[k] = members
        rows.split()[k] = text

    def _said(self, value: Any) -> Any:
        """An event's field as its record says it: text (also an argv's) sanitized, redacted."""
        if isinstance(value, list | tuple):
            return [self._said(v) for v in value]
        return clean_text(value, self.redactor) if isinstance(value, str) else value

    async def event(self, kind: str, *, echo: bool = True, **fields: Any) -> None:
        """Record (and log, unless `echo` is false: the caller said it) an event; its text fields
        sanitized (SPEC §6: a `path` or a `message` may hold a file name others chose), with
        `output.redact` redacted too (a `start` record's `command` holds what a `${VAR}` gave)."""
        self.opened()  # (what the sink's open found goes first, if `lost` has not said it)
        clean = {k: self._said(v) for k, v in fields.items()
                 if v is not None or k in ("exitCode", "signal")}
        if kind in ("gap", "rotate", "error"):
            self.counters.note(kind, clean)
        line = self.sink.record(kind, clean)
        # the `stop` record, the last, is given up after a while on a full disk (a `gap` says so)
        final = FINAL_WRITE_S if kind == "stop" else None
        await self.writer.write_lines([line], give_up_after=final)
        if kind == "error":  # (error records written: not one waiting or given up)
            self.counters.errors += 1
        self.stopped = self.stopped or kind == "stop"
        self._told(kind, clean, echo)

    def _told(self, kind: str, fields: dict[str, Any], echo: bool = True) -> None:
        """A record in the file (a `gap{unwritten}` the sink wrote too: `AsyncWriter.on_gap`)
        is logged, so counted by the metrics, unless the caller said it, and told (`on_event`)."""
        if echo:
            self.log.event(self.spec.id, kind, fields)
        if self.on_event is not None:
            self.on_event(self.spec, kind, fields)
