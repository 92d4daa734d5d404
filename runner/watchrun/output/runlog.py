"""The runner's own log on stderr: a short human line per happening, or JSON for machines."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from watchrun.clock import iso_ts
from watchrun.events import MatchInfo

MATCH_LINES_PER_SECOND = 20
"""Matches echoed per watcher per second; the rest are summarised (they are all in the JSONL)."""


class RunLog:
    """Writes log lines; never raises on a closed or broken stderr."""

    def __init__(self, fmt: str = "text", stream: TextIO | None = None, *, quiet: bool = False):
        self.fmt = fmt
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self._budget: dict[str, tuple[int, int]] = {}  # watcher → (second, lines echoed)
        self._held: dict[str, int] = {}

    def _emit(self, level: str, source: str | None, msg: str, **fields: Any) -> None:
        if self.fmt == "json":
            rec = {"ts": iso_ts(time.time()), "level": level, "source": source, "msg": msg}
            rec.update(fields)
            line = json.dumps(rec, ensure_ascii=False, default=str)
        else:
            who = f"[{source}] " if source else ""
            tag = "" if level == "info" else f"{level}: "
            line = f"watchrun: {who}{tag}{msg}"
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def info(self, msg: str, source: str | None = None, **fields: Any) -> None:
        if not self.quiet:
            self._emit("info", source, msg, **fields)

    def warning(self, msg: str, source: str | None = None, **fields: Any) -> None:
        self._emit("warning", source, msg, **fields)

    def error(self, msg: str, source: str | None = None, **fields: Any) -> None:
        self._emit("error", source, msg, **fields)

    def matches(self, source: str, found: Sequence[MatchInfo]) -> None:
        if self.quiet:
            return
        now = int(time.monotonic())
        second, used = self._budget.get(source, (now, 0))
        if second != now:
            held = self._held.pop(source, 0)
            if held:
                self._emit("info", source, f"... and {held} more matches (see the JSONL)")
            second, used = now, 0
        shown = found[: max(0, MATCH_LINES_PER_SECOND - used)]
        for m in shown:
            self._emit("info", source, f"match {m.where}: {m.line}", where=m.where)
        if len(found) > len(shown):  # counted in bulk: no per-match work past the budget
            self._held[source] = self._held.get(source, 0) + len(found) - len(shown)
        self._budget[source] = (second, used + len(shown))

    def event(self, source: str, kind: str, fields: dict[str, Any]) -> None:
        text = describe(kind, fields)
        if kind == "error":
            self.warning(text, source, kind=kind, **fields)
        elif kind == "stop" and fields.get("reason") == "start-limit":
            self.error(text, source, kind=kind, **fields)
        else:
            self.info(text, source, kind=kind, **fields)


def describe(kind: str, f: dict[str, Any]) -> str:
    """One readable line for a non-match record."""
    if kind == "start":
        if f.get("pid") is not None:
            return f"started run {f.get('run')} (pid {f['pid']})"
        return f"following {f.get('path')}" + (" (not there yet)" if f.get("inode") is None else "")
    if kind == "rotate":
        return f"{f.get('path')} rotated ({f.get('reason')})"
    if kind == "exit":
        how = f"signal {f['signal']}" if f.get("signal") else f"exit code {f.get('exitCode')}"
        return f"run {f.get('run')} ended: {how}"
    if kind == "restart":
        return f"restarting in {f.get('delayMs')} ms (attempt {f.get('attempt')})"
    if kind == "error":
        return f"{f.get('code')}: {f.get('message')}"
    if kind == "stop":
        return f"stopped ({f.get('reason')})" + (f": {f['message']}" if f.get("message") else "")
    return kind


class ForwardToRunLog(logging.Handler):
    """Routes the `watchrun.*` stdlib loggers (notifier, checkpoints) into the runner's log, so
    every line on stderr has one format (text or JSON)."""

    def __init__(self, log: RunLog) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        emit = self.log.error if record.levelno >= logging.ERROR else self.log.warning
        emit(record.getMessage())

    def install(self) -> None:
        root = logging.getLogger("watchrun")
        root.addHandler(self)
        root.propagate = False
