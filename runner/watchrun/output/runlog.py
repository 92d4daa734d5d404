"""The runner's own log on stderr: one line per event, text for people or JSON for machines."""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TextIO

from watchrun.clock import iso_ts
from watchrun.events import MatchInfo, cut_note
from watchrun.match.sanitize import edge_json, edge_name, edge_text, sanitize
from watchrun.output.logstream import LogStream, is_tty, on_journal
from watchrun.output.selflog import SELF_ECHO_NOTE, echoes_a_match

MATCH_LINES_PER_SECOND = 20
"""Matches echoed per watcher per second; the rest are summarised (they are all in the JSONL)."""

Level = Literal["error", "warning", "info"]
PRIORITY: dict[str, int] = {"error": 3, "warning": 4, "info": 6}
"""syslog priorities (sd-daemon(3) `<N>` prefixes): journald files each line under its own."""
ENVELOPE = ("ts", "level", "event", "watcher", "agent", "msg")
"""The keys every JSON line starts with; an event's fields of the same name do not replace them."""

Tap = Callable[[str, str, str | None, str | None, dict[str, Any]], None]
"""Sees every event, logged or not (quiet): (level, event, "watcher" | "agent", name, fields)."""


def text_field(text: str) -> str:
    """Log text made safe for one line (SPEC §6 `sanitize`: escape sequences, C0/C1 controls and
    DEL removed), and its line breaks (newline, U+2028, U+2029) shown as escapes, so a logged
    value can neither restyle a terminal nor start a forged log line."""
    return edge_text(text)


def _clean(value: Any) -> Any:
    """A field value for a JSON line: every string in it sanitized."""
    if isinstance(value, str):
        return sanitize(value)[0]
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {sanitize(str(k))[0]: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return sanitize(str(value))[0]


class _Out:
    """The stream and how lines are framed on it; shared by a log and its scoped views."""

    def __init__(self, stream: TextIO, environ: Mapping[str, str], timestamps: bool | None,
                 dropped: Callable[[int], str]):
        """`dropped(n)`: the line that says `n` lines were dropped (stderr not read)."""
        self.stream = stream
        self.journal = on_journal(stream, environ)
        self.timestamps = (not self.journal and not is_tty(stream)) if timestamps is None \
            else timestamps
        self.lock = threading.Lock()  # one whole line per write, also from worker threads
        self.taps: list[Tap] = []
        self.unblocked: LogStream | None = None
        """A stream with a file descriptor (stderr) is written through a `LogStream`: a stderr
        nobody reads must not stop the runner."""
        with contextlib.suppress(OSError, ValueError, AttributeError):  # StringIO & co. have none
            self.unblocked = LogStream(stream.fileno(),
                                       lambda n: self.framed("warning", dropped(n)))

    def framed(self, level: str, line: str) -> str:
        return (f"<{PRIORITY[level]}>{line}" if self.journal else line) + "\n"

    def write(self, level: str, line: str) -> None:
        if self.unblocked is not None:
            self.unblocked.write(self.framed(level, line))
            return
        try:
            with self.lock:
                self.stream.write(self.framed(level, line))
                self.stream.flush()
        except (OSError, ValueError):
            pass


class RunLog:
    """Writes log lines; never raises on a closed or broken stderr.

    Text: `watchrun: [app] warning: message`, prefixed by an ISO timestamp when stderr is not a
    terminal (a file, a pipe, a container log). JSON (`--log-format json`): one object per line
    with `ts`, `level`, `event`, `watcher` or `agent`, `msg` and the event's fields. Under
    systemd (stderr is the journal) each line starts with its `<N>` syslog priority and has no
    timestamp of its own (the journal adds it).
    """

    def __init__(self, fmt: str = "text", stream: TextIO | None = None, *, quiet: bool = False,
                 timestamps: bool | None = None, environ: Mapping[str, str] | None = None):
        self.fmt = fmt
        self.quiet = quiet
        self.subject = "watcher"
        """What the `source` argument names: a watcher, or (see `scoped`) an agent."""
        self._out = _Out(stream if stream is not None else sys.stderr,
                         os.environ if environ is None else environ, timestamps,
                         lambda n: self._line("warning", "log-dropped", f"{n} log lines dropped: "
                                              "stderr was not read in time (every record is "
                                              "in the JSONL files)", None, {"count": n}))
        self._budget: dict[str, tuple[int, int]] = {}  # watcher → (second, lines echoed)
        self._held: dict[str, int] = {}  # watcher → matches not echoed, not yet said
        self._due: set[str] = set()  # watchers whose held count a timer will say
        self._echoes: set[str] = set()  # watchers told they match the log's own echoes

    @property
    def stream(self) -> TextIO:
        return self._out.stream

    def scoped(self, subject: str) -> RunLog:
        """The same log, where `source` names a `subject` (e.g. "agent") instead of a watcher."""
        view = copy.copy(self)
        view.subject = subject
        view._budget, view._held, view._due, view._echoes = {}, {}, set(), set()
        return view

    def add_tap(self, tap: Tap) -> None:
        """Also hand every event to `tap` (the metrics count them), quiet or not."""
        self._out.taps.append(tap)

    # -- the structured API ---------------------------------------------------------------------
    def log(self, level: Level, event: str, msg: str, source: str | None = None, /,
            **fields: Any) -> None:
        """One event: `event` names it (`ready`, `rotate`, `turn-end`, ...), `msg` says it for a
        person, `fields` carry its facts for machines."""
        for tap in self._out.taps:
            tap(level, event, self.subject if source else None, source, fields)
        if level == "info" and self.quiet:
            return
        self._emit(level, event, msg, source, fields)

    def info(self, msg: str, source: str | None = None, /, *, event: str = "message",
             **fields: Any) -> None:
        self.log("info", event, msg, source, **fields)

    def warning(self, msg: str, source: str | None = None, /, *, event: str = "message",
                **fields: Any) -> None:
        self.log("warning", event, msg, source, **fields)

    def error(self, msg: str, source: str | None = None, /, *, event: str = "message",
              **fields: Any) -> None:
        self.log("error", event, msg, source, **fields)

    def drain(self, stall_s: float) -> None:
        """Wait until the lines said so far are written, as long as stderr's reader takes some
        at least every `stall_s` (before an `os._exit`, which writes nothing more)."""
        if self._out.unblocked is not None:
            self._out.unblocked.drain(stall_s)

    def _emit(self, level: str, event: str, msg: str, source: str | None,
              fields: dict[str, Any]) -> None:
        self._out.write(level, self._line(level, event, msg, source, fields))

    def _line(self, level: str, event: str, msg: str, source: str | None,
              fields: dict[str, Any]) -> str:
        out = self._out
        if self.fmt == "json":
            rec: dict[str, Any] = {"ts": iso_ts(time.time()), "level": level, "event": event}
            if source:
                rec[self.subject] = source
            rec["msg"] = text_field(msg)  # (the text line, as the text log has it)
            rec.update((k, v) for k, v in fields.items() if k not in ENVELOPE)
            line = edge_json(_clean(rec))
        else:
            who = f"[{text_field(source)}] " if source else ""
            tag = "" if level == "info" else f"{level}: "
            line = who + tag + text_field(msg)
            if not out.journal:  # the journal names the unit: no need to say "watchrun"
                line = "watchrun: " + line
            if out.timestamps:
                line = f"{iso_ts(time.time())} {line}"
        return line

    # -- what watchers report -------------------------------------------------------------------
    def matches(self, source: str, found: Sequence[MatchInfo]) -> None:
        """Echo matched lines, at most MATCH_LINES_PER_SECOND per watcher per second; the
        number of the others is said when the second is over (its next match, its next event,
        or a timer of the running event loop, whichever comes first). A line that is the log's
        own echo of a match is not echoed, which would be matched again without end; the first
        is said (`output/selflog.py`)."""
        if self.quiet:
            return
        clock = time.monotonic()
        now = int(clock)
        second, used = self._budget.get(source, (now, 0))
        if second != now:
            self._release(source)
            second, used = now, 0
        shown = found[: max(0, MATCH_LINES_PER_SECOND - used)]
        for m in shown:
            if echoes_a_match(m.line):  # (recorded, never echoed: `output/selflog.py`)
                if source not in self._echoes:
                    self._echoes.add(source)
                    self.warning(SELF_ECHO_NOTE, source, event="self-echo")
                continue
            fields: dict[str, Any] = {"where": m.where, "line": m.line, "lineNo": m.line_no}
            if m.cut is not None:
                fields["truncated"] = True
            self._emit("info", "match", f"match {edge_name(m.where)}: {m.line}"
                       f"{cut_note(m.cut)}", source, fields)
        if len(found) > len(shown):  # counted in bulk: no per-match work past the budget
            self._held[source] = self._held.get(source, 0) + len(found) - len(shown)
            self._say_later(source, now + 1 - clock)
        self._budget[source] = (second, used + len(shown))

    def _say_later(self, source: str, delay: float) -> None:
        """Say the held count after `delay` s, on the running loop (none: at the watcher's
        next match or event)."""
        import asyncio  # (loaded by then: a command without a loop does not pay for it here)

        if source in self._due:
            return
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_later(delay, self._timer, source)
            self._due.add(source)

    def _timer(self, source: str) -> None:
        self._due.discard(source)
        clock = time.monotonic()
        if self._budget.get(source, (None, 0))[0] == int(clock):  # (a timer of the second
            self._say_later(source, int(clock) + 1 - clock)  # before: what is held now is
            return  # this second's, said when it is over, in one line)
        self._release(source)

    def _release(self, source: str) -> None:
        held = self._held.pop(source, 0)
        if held:
            self._emit("info", "matches-held", f"... and {held} more matches (see the JSONL)",
                       source, {"count": held})

    def event(self, source: str, kind: str, fields: dict[str, Any]) -> None:
        """A watcher's non-match record (`start`, `rotate`, `exit`, `error`, ...), logged with
        the record's fields."""
        self._release(source)  # (a stop, an exit: what was not echoed is said first)
        text = describe(kind, fields)
        if kind in ("error", "gap"):
            self.log("warning", kind, text, source, **fields)
        elif kind == "stop" and fields.get("reason") == "start-limit":
            self.log("error", kind, text, source, **fields)
        else:
            self.log("info", kind, text, source, **fields)


def describe(kind: str, f: dict[str, Any]) -> str:
    """One readable line for a non-match record (its path as `edge_name` shows it)."""
    if kind == "start":
        if f.get("pid") is not None:
            again = f", restart attempt {f['attempt']}" if f.get("attempt") else ""
            return f"started run {f.get('run')} (pid {f['pid']}{again})"
        # inode null: missing (waited for), or not readable (its error record comes next)
        return f"following {edge_name(f.get('path'))}" + (
            " (not opened yet)" if f.get("inode") is None else "")
    if kind == "rotate":
        return f"{edge_name(f.get('path'))} rotated ({f.get('reason')})"
    if kind == "exit":
        how = f"signal {f['signal']}" if f.get("signal") else f"exit code {f.get('exitCode')}"
        return f"run {f.get('run')} ended: {how}"
    if kind == "restart":
        return f"restarting in {f.get('delayMs')} ms (attempt {f.get('attempt')})"
    if kind == "error":
        return f"{f.get('code')}: {f.get('message')}"
    if kind == "gap":  # (it said "gap" alone: what was lost, and why, was in the JSONL only)
        return f"gap ({f.get('reason')}): {f.get('message')}"
    if kind == "stop":
        return f"stopped ({f.get('reason')})" + (f": {f['message']}" if f.get("message") else "")
    return kind


class ForwardToRunLog(logging.Handler):
    """Routes the `watchrun.*` stdlib loggers (notifier, checkpoints) into the runner's log, so
    every line on stderr has one format (text or JSON); the event is the logger's last name.
    It is also the last resort of every other logger with no handler (the standard library's
    own: hashlib short of memory logged a traceback), said as one line, its traceback not."""

    def __init__(self, log: RunLog) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        level: Level = "error" if record.levelno >= logging.ERROR else "warning"
        self.log.log(level, record.name.rpartition(".")[2], record.getMessage())

    def install(self) -> None:
        root = logging.getLogger("watchrun")
        root.addHandler(self)
        root.propagate = False
        logging.lastResort = self
        if not logging.root.handlers:  # (else `logging.exception`'s basicConfig prints them)
            logging.root.addHandler(self)
