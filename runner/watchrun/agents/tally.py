"""What a turn adds up to: usage, answer, outcome facts, the `until` marker, its result."""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from watchrun.agents.answer import AnswerTracker
from watchrun.agents.providers.usage import Usage
from watchrun.match.sanitize import clip

__all__ = ["REPLY_BYTES", "Tally", "TurnResult", "turn_error", "turn_outcome"]

REPLY_BYTES = 64 * 1024
"""A turn's `reply` is clipped to this many bytes (on a character boundary)."""

_TEXT_KINDS = frozenset({"text", "text-delta", "output"})


class TurnResult(Struct, frozen=True):
    """How a turn ended (the same facts as its `dispatch-finished` record)."""

    turn_id: str
    status: str
    """done | failed | cancelled"""
    completed: bool
    reply: str
    usage: Usage
    exit_code: int | None
    signal: str | None
    duration_ms: int
    stop_reason: str | None = None
    error: dict[str, str] | None = None
    started: bool = True
    """False when its process could not be started (ENOENT, EACCES, …)."""
    reply_truncated: bool = False
    """The answer was longer than what is kept (`replyTruncated`): `reply` is its start."""


class Tally:
    """Fed every record of one turn after the recorder cleaned it (so nothing here can see text
    the records do not show).

    Usage is the sum of the `usage` increments. `complete` means "these totals are exact": an
    increment marked `complete: false` makes the sum inexact, unless a later complete increment
    made from a cumulative total of the same `sessionKey` (it carries `total`) settles it — that
    total covers the provisional counts before it (Claude's per-message snapshots, then its
    `result`). No usage at all is unknown, never a made-up exact zero.

    `until` is the completion marker: `output:TEXT` (in assistant text or plain output),
    `event:KIND` (a record of that kind) or `status:STATUS` (a status the adapter reported, never
    the runner's own: config/statuses.py lists them).
    """

    def __init__(self, until: str | None = None) -> None:
        kind, _, arg = (until or "").partition(":")
        self._marker = (kind, arg) if until and arg else None
        self.marker_seen = False
        self.completed_ok: bool | None = None
        self.completed_reason: str | None = None
        self.failure: str | None = None
        self.failure_code: str | None = None
        self.answer = AnswerTracker()
        self._counts: Usage | None = None
        self._unsettled: set[object] = set()
        self._tail = ""

    @property
    def usage(self) -> Usage:
        """The turn's usage: the sum of its increments (incomplete when none was reported)."""
        if self._counts is None:
            return Usage(complete=False)
        c = self._counts
        return Usage(c.input, c.cached, c.output, not self._unsettled)

    def reply(self) -> tuple[str, bool]:
        """The turn's answer (agents/answer.py), clipped to REPLY_BYTES, and whether it was
        cut."""
        text, cut = self.answer.text()
        clipped, more = clip(text, REPLY_BYTES)
        return clipped, cut or more

    def note(self, kind: str, f: dict[str, Any]) -> None:
        """One clean record of the turn (its fields, without the envelope)."""
        text = f.get("text") if isinstance(f.get("text"), str) else None
        self.answer.feed(kind, f)
        if kind == "usage":
            self._usage(f)
        elif kind == "completed":
            self.completed_ok = bool(f.get("ok"))
            reason = f.get("reason")
            self.completed_reason = str(reason) if reason and not f.get("ok") else None
        elif kind in ("failure", "quota"):
            self.failure = str(f.get("message") or kind)
            code = f.get("code") or ("quota" if kind == "quota" else None)
            self.failure_code = str(code) if code else None
        self._check_marker(kind, f, text)

    def _usage(self, f: dict[str, Any]) -> None:
        try:
            inc = Usage.from_counts(f)
        except ValueError:
            self._unsettled.add(object())  # unreadable counts: the sum cannot be exact
            return
        self._counts = inc if self._counts is None else self._counts + inc
        key = f.get("sessionKey") if isinstance(f.get("sessionKey"), str) else None
        if f.get("complete") is False:
            self._unsettled.add(key if key is not None else object())
        elif key is not None and isinstance(f.get("total"), dict):
            self._unsettled.discard(key)

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


def turn_outcome(*, stop_reason: str | None, completed_ok: bool | None, marker_seen: bool,
                 exit_code: int | None, generic: bool) -> tuple[str, bool]:
    """(status, completed) of a finished turn: done | failed | cancelled (the records contract)."""
    ok = (exit_code == 0 and stop_reason is None) if generic else completed_ok is True
    settled = stop_reason == "completion" and (marker_seen or completed_ok is not False)
    completed = ok or marker_seen or settled
    if stop_reason == "aborted":
        return "cancelled", completed
    if settled or (marker_seen and stop_reason is None):
        return "done", True
    if stop_reason is not None:
        return "failed", completed
    return ("done" if completed else "failed"), completed


def turn_error(status: str, stop_reason: str | None, stop_message: str, tally: Tally,
               exit_code: int | None, signal: str | None) -> dict[str, str] | None:
    """`dispatch-finished.error` of a turn that is not done: the first cause that applies."""
    if status == "done":
        return None
    if stop_reason is not None and stop_reason != "completion":  # (stopped after a final
        return {"code": stop_reason, "message": stop_message}  # result: judged by it)
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
