"""One watcher's path from source to sink: chunks → matcher → match records → JSONL."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk
from watchrun.logs import RunLog
from watchrun.matcher import Matcher
from watchrun.records import last_records
from watchrun.sanitize import raw_text, sanitize
from watchrun.sink import AsyncWriter, JsonlSink


FIRST_KEPT = 5
SPAWN_ERRORS = {"ENOENT", "EACCES", "ENOTDIR", "ENOEXEC", "EPERM", "E2BIG", "ENOMEM"}
"""`error` codes that mean a command could not be started (once mode: exit 3)."""


@dataclass(slots=True)
class MatchInfo:
    """A recorded match, kept in memory for views, wake delivery and gates."""

    line: str
    line_no: int
    offset: int
    where: str
    """`path:line` for files, `run N:line` for commands."""


@dataclass(slots=True)
class Counters:
    lines: int = 0
    bytes_read: int = 0
    matches: int = 0
    skipped_duplicates: int = 0
    truncated: int = 0
    errors: int = 0
    last_match_at: float | None = None
    first: list[MatchInfo] = field(default_factory=list)
    """The first few matches (for gate verdicts)."""
    require_seen: bool = False
    spawn_failed: bool = False
    recent: deque[MatchInfo] = field(default_factory=deque)
    tail: deque[bytes] = field(default_factory=deque)


class WatcherPipeline:
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
        on_matches: Callable[[WatcherSpec, list[MatchInfo]], None] | None = None,
        on_event: Callable[[WatcherSpec, str, dict[str, Any]], None] | None = None,
        require: Matcher | None = None,
    ) -> None:
        self.spec = spec
        self.limits = limits
        self.sink = sink
        self.writer = writer
        self.matcher = matcher
        self.log = log
        self.on_matches = on_matches
        self.on_event = on_event
        self.require = require
        self.counters = Counters(
            recent=deque(maxlen=limits.max_matches), tail=deque(maxlen=limits.max_log_lines)
        )
        last = last_records(sink.path, 1, {"match"})
        self._skip = self._resume_point(last[0] if last else None)
        self.on_touch: Callable[[], None] | None = None

    @staticmethod
    def _resume_point(last: dict[str, Any] | None) -> tuple[int, int] | None:
        """After a crash, records past the checkpoint may already be written: the last match
        record's (inode, offset) says how far, so those lines are not recorded twice."""
        if not last or last.get("kind") != "match" or last.get("inode") is None:
            return None
        return int(last["inode"]), int(last["offset"])

    async def chunk(self, chunk: Chunk) -> None:
        data = chunk.data
        c = self.counters
        nlines = data.count(b"\n")
        c.lines += nlines
        c.bytes_read += chunk.end - chunk.offset
        self._keep_tail(data, nlines)
        if self.on_touch is not None:
            self.on_touch()
        if self.require is not None and not c.require_seen and self.require.find(data):
            c.require_seen = True
        spans = self.matcher.find(data)
        if not spans:
            return
        records: list[bytes] = []
        found: list[MatchInfo] = []
        line_no, pos = chunk.line_no, 0
        for start, end in spans:
            line_no += data.count(b"\n", pos, start)
            pos = start
            offset = chunk.source_offset(start)
            if self._skip is not None:
                if chunk.inode == self._skip[0] and offset <= self._skip[1]:
                    c.skipped_duplicates += 1
                    continue
                self._skip = None
            record, info = self._match(chunk, data[start:end], line_no, offset, start)
            records.append(record)
            found.append(info)
        if not records:
            return
        await self.writer.write_lines(records)
        c.matches += len(found)
        c.last_match_at = time.time()
        c.recent.extend(found)
        if len(c.first) < FIRST_KEPT:
            c.first.extend(found[: FIRST_KEPT - len(c.first)])
        self.log.matches(self.spec.id, found)
        if self.on_matches is not None:
            self.on_matches(self.spec, found)

    def _match(
        self, chunk: Chunk, line: bytes, line_no: int, offset: int, pos: int
    ) -> tuple[bytes, MatchInfo]:
        raw = raw_text(line)
        text, clipped = sanitize(raw, self.limits.max_line_bytes)
        omitted = chunk.cut_at(pos)
        fields: dict[str, Any] = {"line": text, "lineNo": line_no, "offset": offset}
        if chunk.path is not None:
            fields["path"] = chunk.path
            fields["inode"] = chunk.inode
            where = f"{chunk.path}:{line_no}"
        else:
            fields["run"] = chunk.run
            where = f"run {chunk.run}:{line_no}"
        if omitted or clipped:
            fields["truncated"] = True
            fields["omittedBytes"] = omitted
            self.counters.truncated += 1
        if text != raw:
            fields["raw"] = raw
        return self.sink.record("match", fields), MatchInfo(text, line_no, offset, where)

    def _keep_tail(self, data: bytes, nlines: int) -> None:
        """Keep the last `maxLogLines` raw lines for `watchrun logs` without a per-line loop."""
        keep = self.counters.tail.maxlen or 0
        if nlines > keep:
            cut = len(data) - 1
            for _ in range(keep):
                cut = data.rfind(b"\n", 0, cut)
            data = data[cut + 1 :]
        self.counters.tail.extend(data[:-1].split(b"\n"))

    async def event(self, kind: str, **fields: Any) -> None:
        clean = {k: v for k, v in fields.items() if v is not None or k in ("exitCode", "signal")}
        if kind == "error":
            self.counters.errors += 1
            if self.spec.kind == "command" and str(clean.get("code", "")) in SPAWN_ERRORS:
                self.counters.spawn_failed = True
        await self.writer.write_lines([self.sink.record(kind, clean)])
        self.log.event(self.spec.id, kind, clean)
        if self.on_event is not None:
            self.on_event(self.spec, kind, clean)
