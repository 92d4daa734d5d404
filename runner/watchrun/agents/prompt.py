"""Pure parts of agent turns: prompt and argv rendering, coalesced deliveries, turn limits."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watchrun.agents.providers.base import Adapter, Observation
from watchrun.agents.providers.usage import Usage
from watchrun.match.sanitize import clip, sanitize

__all__ = [
    "PLACEHOLDERS",
    "PROMPT_TOKEN",
    "REPLY_BYTES",
    "Delivery",
    "Tally",
    "TurnWindow",
    "clean_fields",
    "format_matches",
    "render_command",
    "render_prompt",
    "render_turn_prompt",
    "turn_error",
    "turn_outcome",
]

PROMPT_TOKEN = "{prompt}"
PLACEHOLDERS = ("matches", "watcher", "label", "count")
_PLACEHOLDER = re.compile(r"\{(matches|watcher|label|count)\}")
REPLY_BYTES = 64 * 1024
"""A turn's `reply` is clipped to this many bytes."""
_RESERVED = frozenset({"schema", "seq", "cursor", "ts", "kind", "turnId"})
_TEXT_KINDS = frozenset({"text", "text-delta", "output"})


def render_prompt(template: str, values: Mapping[str, str]) -> str:
    """Replace `{matches}` `{watcher}` `{label}` `{count}` in one pass (never str.format: other
    braces stay as written, and a value that contains `{label}` is not expanded again)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), template)


def format_matches(lines: Sequence[str], total: int, limit: int) -> str:
    """The first `limit` lines joined by newlines, then `… and N more` for the rest of `total`."""
    shown = list(lines[: max(0, limit)])
    rest = max(0, total - len(shown))
    return "\n".join([*shown, f"… and {rest} more"] if rest else shown)


def render_command(command: Sequence[str], prompt: str) -> list[str]:
    """argv with `{prompt}` replaced inside each element: the prompt is never split or run by a
    shell, so it cannot inject arguments or shell syntax."""
    return [arg.replace(PROMPT_TOKEN, prompt) for arg in command]


@dataclass(slots=True)
class Delivery:
    """Matches of one watcher (or one `send` text) waiting for an agent's next turn.

    All wake deliveries of one watcher that arrive before a turn takes them merge into one
    Delivery; at most `keep` lines are kept (the first ones), the rest are counted in `overflow`.
    """

    id: str
    label: str
    keep: int
    watcher: str | None = None
    source: str = "wake"
    """`wake` (a watcher's matches) or `send` (a manual prompt from the control socket)."""
    seq: int = 0
    """Order of creation (the seq of its `queued` record)."""
    count: int = 0
    lines: list[str] = field(default_factory=list)
    overflow: int = 0

    def add(self, lines: Sequence[str]) -> None:
        room = max(0, self.keep - len(self.lines))
        self.lines.extend(lines[:room])
        self.overflow += max(0, len(lines) - room)
        self.count += len(lines)

    def record(self, state: str, match_lines: int, **extra: Any) -> dict[str, Any]:
        """The fields of its `delivery` record (`lines` clipped to `match_lines`)."""
        fields: dict[str, Any] = {
            "deliveryId": self.id, "delivery_state": state, "label": self.label,
            "count": self.count, "lines": self.lines[:match_lines], "overflow": self.overflow,
        }
        if self.watcher is not None:
            fields["watcher"] = self.watcher
        else:
            fields["source"] = self.source
        fields.update({k: v for k, v in extra.items() if v is not None})
        return fields


def render_turn_prompt(template: str, deliveries: Sequence[Delivery], match_lines: int) -> str:
    """A wake turn's prompt from its deliveries. With several watchers, `{watcher}` and `{label}`
    list them all, `{count}` is the sum, and each line of `{matches}` starts with `[label] `."""
    many = len(deliveries) > 1
    lines = [f"[{d.label}] {line}" if many else line for d in deliveries for line in d.lines]
    total = sum(d.count for d in deliveries)
    return render_prompt(template, {
        "matches": format_matches(lines, total, match_lines),
        "watcher": ", ".join(d.watcher or d.source for d in deliveries),
        "label": ", ".join(d.label for d in deliveries),
        "count": str(total),
    })


class TurnWindow:
    """`maxTurns` per hour: a sliding window of turn start times (monotonic seconds)."""

    def __init__(self, max_turns: int, window_s: float = 3600.0) -> None:
        self.max_turns = max_turns
        self.window_s = window_s
        self._starts: deque[float] = deque()

    def _prune(self, now: float) -> None:
        while self._starts and self._starts[0] <= now - self.window_s:
            self._starts.popleft()

    def used(self, now: float) -> int:
        self._prune(now)
        return len(self._starts)

    def allow(self, now: float) -> bool:
        """True (and the start is counted) when fewer than `max_turns` started in the window."""
        if self.used(now) >= self.max_turns:
            return False
        self._starts.append(now)
        return True

    def retry_in(self, now: float) -> float:
        """Seconds until the oldest start leaves the window (0 when a turn is allowed now)."""
        if self.used(now) < self.max_turns:
            return 0.0
        return max(0.0, self._starts[0] + self.window_s - now)


def turn_outcome(*, stop_reason: str | None, completed_ok: bool | None, marker_seen: bool,
                 exit_code: int | None, generic: bool) -> tuple[str, bool]:
    """(status, completed) of a finished turn: done | failed | cancelled (the records contract)."""
    ok = (exit_code == 0 and stop_reason is None) if generic else completed_ok is True
    completed = ok or marker_seen or stop_reason == "completion"
    if stop_reason == "aborted":
        return "cancelled", completed
    if stop_reason == "completion" or (marker_seen and stop_reason is None):
        return "done", True
    if stop_reason is not None:
        return "failed", completed
    return ("done" if completed else "failed"), completed


def turn_error(status: str, stop_reason: str | None, stop_message: str, tally: Tally,
               exit_code: int | None, signal: str | None) -> dict[str, str] | None:
    """`dispatch-finished.error` of a turn that is not done: the first cause that applies."""
    if status == "done":
        return None
    if stop_reason is not None:
        return {"code": stop_reason, "message": stop_message}
    if tally.failure is not None:
        return {"code": tally.failure_code or "failure", "message": tally.failure}
    if tally.completed_ok is False:
        return {"code": "provider", "message": tally.completed_reason
                or "the provider reported that the turn failed"}
    if signal is not None:
        return {"code": "signal", "message": f"the process was killed by {signal}"}
    if exit_code:
        return {"code": "exit", "message": f"the process exited with code {exit_code}"}
    return {"code": "incomplete", "message": "the process exited without a final result"}


def clean_fields(value: Any, max_bytes: int) -> tuple[Any, bool]:
    """Every string in a JSON value sanitized and clipped to `max_bytes`; whether any was cut."""
    if isinstance(value, str):
        return sanitize(value, max_bytes)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        cut = False
        for key, item in value.items():
            out[str(key)], one = clean_fields(item, max_bytes)
            cut = cut or one
        return out, cut
    if isinstance(value, list | tuple):
        items = [clean_fields(item, max_bytes) for item in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


class Tally:
    """What a turn's observations add up to: its records, usage, reply and outcome facts.

    `until` is the completion marker: `output:TEXT` (in assistant text or plain output),
    `event:KIND` (an observation of that kind) or `status:STATUS` (a provider status).
    """

    def __init__(self, adapter: Adapter, until: str | None = None) -> None:
        self.adapter = adapter
        kind, _, arg = (until or "").partition(":")
        self._marker = (kind, arg) if until and arg else None
        self.marker_seen = False
        self.completed_ok: bool | None = None
        self.completed_reason: str | None = None
        self.failure: str | None = None
        self.failure_code: str | None = None
        self._usage: Usage | None = None
        self._final: str | None = None
        self._parts: list[str] = []
        self._deltas: list[str] = []
        self._size = 0
        self._cut = False
        self._tail = ""

    @property
    def usage(self) -> Usage:
        """The turn's usage: the sum of its increments (incomplete when none was reported)."""
        return self._usage if self._usage is not None else Usage(complete=False)

    def line(self, text: str) -> list[tuple[str, dict[str, Any]]]:
        """One stdout line (sanitized, without its newline) -> records (kind, fields)."""
        return self._take(self.adapter.parse(text))

    def finish(self) -> list[tuple[str, dict[str, Any]]]:
        return self._take(self.adapter.finish())

    def reply(self) -> tuple[str, bool]:
        """The final assistant text (clipped to REPLY_BYTES) and whether it was clipped."""
        if self._final is not None:
            text, cut = self._final, False
        elif self._parts:
            text, cut = "\n".join(self._parts), self._cut
        else:
            text, cut = "".join(self._deltas), self._cut
        clipped, more = clip(text, REPLY_BYTES)
        return clipped, cut or more

    def _take(self, found: list[Observation]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for obs in found:
            fields = {(f"provider_{k}" if k in _RESERVED else k): v for k, v in obs.fields.items()}
            self._note(obs.kind, fields)
            out.append((obs.kind, fields))
        return out

    def _note(self, kind: str, f: dict[str, Any]) -> None:
        text = f.get("text") if isinstance(f.get("text"), str) else None
        if kind == "usage":
            try:
                inc = Usage.from_counts(f, complete=f.get("complete") is not False)
            except ValueError:
                inc = Usage(complete=False)
            self._usage = inc if self._usage is None else self._usage + inc
        elif kind == "completed":
            self.completed_ok = bool(f.get("ok"))
            reason = f.get("reason")
            self.completed_reason = str(reason) if reason and not f.get("ok") else None
            if f.get("ok") and isinstance(f.get("result"), str) and f["result"]:
                self._final = f["result"]
        elif kind == "failure":
            self.failure = str(f.get("message") or "failure")
            self.failure_code = str(f["code"]) if f.get("code") else None
        elif kind in ("tool", "tool-result"):
            self._parts, self._deltas, self._size, self._cut = [], [], 0, False
        elif kind == "text" and text is not None:
            if f.get("final"):
                self._final = text
            elif f.get("parentCallId") is None:
                self._deltas = []
                self._add(self._parts, text)
        elif kind == "text-delta" and text is not None and f.get("parentCallId") is None:
            self._add(self._deltas, text)
        self._check_marker(kind, f, text)

    def _add(self, parts: list[str], text: str) -> None:
        if self._size + len(text) > REPLY_BYTES:
            self._cut = True
            text = text[: max(0, REPLY_BYTES - self._size)]
        if text or not self._cut:
            parts.append(text)
            self._size += len(text)

    def _check_marker(self, kind: str, f: dict[str, Any], text: str | None) -> None:
        if self._marker is None or self.marker_seen:
            return
        what, arg = self._marker
        if what == "event":
            self.marker_seen = kind == arg
        elif what == "status":
            self.marker_seen = kind == "status" and f.get("status") == arg
        elif what == "output" and kind in _TEXT_KINDS and text is not None:
            seen = (self._tail + text) if kind == "text-delta" else text
            self.marker_seen = arg in seen
            self._tail = seen[-(len(arg) - 1) :] if kind == "text-delta" and len(arg) > 1 else ""
