"""`agent watch --until`: wait for a new matching observation, woken by inotify (or polling).

Conditions: `status:S` (an agent-level status record with status S, see
`view_window.is_agent_status`; in a stream that has none, a dispatch-start counts as
`running` and a dispatch-finished as `idle`), `output:TOKEN`, `event:KIND` (any record of
that kind), `delivery:STATE` (queued | delivered | dropped).

`output:TOKEN` looks in assistant text (`text`, and `text-delta`s joined so a token split
across fragments is found), sanitized output (`output`, `stderr`, `raw` previews, a turn's
`reply`) and raw output (a record's `raw` field). The prompt never counts: `prompt` records
are not searched, and when the turn's prompt contains TOKEN, the prompt (whole and line by
line) is removed from a text before searching it, so an agent echoing its prompt does not
satisfy the wait.

Only records strictly after the anchor count: the `--since` cursor, else the stream's latest
record when the wait starts. The stream's file is watched through `watchrun.notify` (inotify on
its directory and the file, so other agents' files wake nothing); where inotify is unavailable,
or WATCHRUN_FORCE_POLL=1, the stream is polled every 250 ms. The directory may appear later
(the runner is not started yet).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchrun.agents.providers.base import KINDS
from watchrun.output.records import format_cursor, iter_records
from watchrun.views.agent_window import (
    ViewError,
    check_since,
    delivery_state,
    is_agent_status,
    latest_seq,
    status_tracker,
    window,
)

__all__ = ["DELIVERY_STATES", "EVENT_KINDS", "UNTIL_KINDS", "UntilMatcher", "parse_until",
           "wait_until"]

UNTIL_KINDS = ("status", "output", "event", "delivery")
DELIVERY_STATES = ("queued", "delivered", "dropped")
EVENT_KINDS = KINDS | {"delivery", "dispatch-finished", "dispatch-start", "dropped", "error",
                       "plan", "prompt", "stderr", "stopped"}
"""The kinds of an agent's records: its adapter's, and those the runner writes of a turn."""
POLL_S = 0.25
_TURN = re.compile(r"turn-([0-9]+)")


def parse_until(condition: str) -> tuple[str, str]:
    """`status:idle` -> ("status", "idle"); anything else is `not_supported`."""
    kind, sep, value = condition.partition(":")
    if not sep or kind not in UNTIL_KINDS or not value:
        raise ViewError("not_supported", f"--until {condition!r}: use status:STATE, "
                        "output:TOKEN, event:KIND or delivery:STATE", until=condition)
    if kind == "status" and value == "interrupted":  # (a reading of the lock: no record)
        raise ViewError("not_supported", f"--until {condition!r}: `interrupted` is what the "
                        "views say of a turn whose writer is gone; no record says it, so it "
                        "cannot be waited for (`agent list` shows it)", until=condition)
    if kind == "event" and value not in EVENT_KINDS:  # (a typo waited out the whole timeout)
        raise ViewError("not_supported", f"--until {condition!r}: an agent's stream has no "
                        f"record of that kind; one of {', '.join(sorted(EVENT_KINDS))}",
                        until=condition)
    if kind == "delivery" and value not in DELIVERY_STATES:
        raise ViewError("not_supported", f"--until {condition!r}: a delivery state is one of "
                        f"{', '.join(DELIVERY_STATES)}", until=condition)
    return kind, value


class UntilMatcher:
    """Decides whether a record (fed oldest first) satisfies a parsed `--until` condition."""

    def __init__(self, path: Path, kind: str, value: str, *, derived_status: bool) -> None:
        self.path, self.kind, self.value = path, kind, value
        self.derived_status = derived_status
        self._prompts: dict[Any, str] = {}
        self._delta_tail: dict[Any, str] = {}

    def matches(self, rec: dict[str, Any]) -> bool:
        kind = rec.get("kind")
        if self.kind == "event":
            return kind == self.value
        if self.kind == "delivery":
            return kind == "delivery" and delivery_state(rec) == self.value
        if self.kind == "status":
            if is_agent_status(rec):
                self.derived_status = False
                return rec.get("status") == self.value
            if self.derived_status and kind in ("dispatch-start", "dispatch-finished"):
                return ("running" if kind == "dispatch-start" else "idle") == self.value
            return False
        return self._output(rec)

    def _output(self, rec: dict[str, Any]) -> bool:
        kind, turn = rec.get("kind"), rec.get("turnId")
        if kind == "prompt":
            self._prompts[turn] = str(rec.get("text") or "")
            return False
        texts: list[Any] = []
        if kind in ("text", "output", "stderr"):
            texts = [rec.get("text"), rec.get("raw")]
        elif kind == "text-delta" and isinstance(rec.get("text"), str):
            joined = self._delta_tail.get(turn, "") + rec["text"]
            self._delta_tail[turn] = joined[-(len(self.value) - 1):] if len(self.value) > 1 else ""
            texts = [joined]
        elif kind == "raw":
            texts = [rec.get("preview"), rec.get("value"), rec.get("raw")]
        elif kind == "dispatch-finished":
            texts = [rec.get("reply")]
        found = [t for t in texts if isinstance(t, str) and self.value in t]
        if not found:
            return False
        prompt = self._prompt(turn)
        return any(self._beyond_prompt(t, prompt) for t in found)

    def _beyond_prompt(self, text: str, prompt: str) -> bool:
        if self.value not in prompt:
            return True
        echoes = [prompt.strip()] + [ln.strip() for ln in prompt.splitlines()]
        for echo in sorted({e for e in echoes if self.value in e}, key=len, reverse=True):
            text = text.replace(echo, "")
        return self.value in text

    def _prompt(self, turn: Any) -> str:
        """The turn's prompt; read back from the stream when it came before the anchor."""
        if turn in self._prompts:
            return self._prompts[turn]
        m = _TURN.fullmatch(turn) if isinstance(turn, str) else None
        text = ""
        if m is not None:
            start = int(m.group(1))
            for i, rec in enumerate(iter_records(self.path, since_seq=max(start - 1, 0))):
                if rec.get("kind") == "prompt" and rec.get("turnId") == turn:
                    text = str(rec.get("text") or "")
                    break
                if i >= 64 or rec.get("kind") == "dispatch-finished":
                    break
        self._prompts[turn] = text
        return text


def wait_until(
    records_path: Path, condition: str, *, since_cursor: str | None = None,
    timeout_s: float = 600.0, poll_s: float = POLL_S,
    on_ready: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """Wait for the first record strictly after the anchor that satisfies `condition`.

    Returns {"anchor", "cursor", "match"}: the anchor cursor, the matching record's cursor and
    the record. Raises ViewError: invalid_cursor, cursor_expired, gap_detected (records after
    the last one read went missing), not_supported, watch_timeout. `on_ready(anchor, mode)` is
    called once the anchor is fixed and the watch armed (mode: inotify | poll).
    """
    from watchrun.notify import Notifier  # (asyncio with it: only a wait pays for it)

    kind, value = parse_until(condition)
    name = records_path.name.removesuffix(".jsonl")
    deadline = time.monotonic() + max(0.0, timeout_s)
    notifier = Notifier(max(1, round(poll_s * 1000)))
    watch = notifier.watch(records_path)  # armed before the anchor is read: nothing is missed
    try:
        last = (check_since(records_path, name, since_cursor) if since_cursor is not None
                else latest_seq(records_path))
        anchor = format_cursor(name, last)
        derived = status_tracker(records_path).record is None
        matcher = UntilMatcher(records_path, kind, value, derived_status=derived)
        if on_ready is not None:
            on_ready(anchor, notifier.mode)
        while True:
            for rec in window(records_path, name, last):
                last = int(rec["seq"])
                if matcher.matches(rec):
                    return {"anchor": anchor, "cursor": rec["cursor"], "match": rec}
            left = deadline - time.monotonic()
            if left <= 0:
                raise ViewError("watch_timeout", f"no new record matched --until {condition} "
                                f"within {timeout_s:g} s", until=condition, anchor=anchor,
                                cursor=format_cursor(name, last))
            if watch.stale:
                watch.rearm()
            watch.wait_blocking(left)
    finally:
        watch.close()
        notifier.close()
