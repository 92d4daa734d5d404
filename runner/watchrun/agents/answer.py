"""The answer rule: which assistant text of a turn is its final answer, from its clean records.

One rule serves every surface: the live turn's `dispatch-finished.reply` (and so `agent run`'s
stdout, the transcript's `answer` and `reply.text`, `agent list`'s `lastReply` and the reply
line of `agent watch`'s `output`), and, while a turn runs, `agent transcript`'s `answer` and
`agent watch`'s `latest_text`. It is fed the records a turn wrote, in order, after the recorder
cleaned them, so a surface can never show text another one did not.

The rule:

1. The provider's own final answer wins: a `completed` record with `ok` and a non-empty
   `result` (each adapter puts its provider's answer there: Claude's `result`, Codex's final
   `agent_message`, Gemini's text after the last tool result, pi's last assistant message,
   OpenCode's last text part, Cursor's last assistant message, Copilot's last non-empty
   `assistant.message`), or a root `text` record marked `final`.
2. Otherwise the last *segment* of root assistant text (no `parentCallId`): consecutive `text`
   records of one message joined by newlines. A root tool call, tool result or denial starts a
   new segment, and so does a `text` whose `messageId` differs from the segment's, so text
   written before a tool call (or in an earlier message) is never joined to the answer.
3. Otherwise the streamed `text-delta`s since the last segment boundary, joined.

A root record with `retracted` (message ids: Claude's `supersedes` and model-refusal fallback)
withdraws those messages: a segment, or deltas, of a withdrawn message are dropped, so a refused
reply is never the answer; until the agent says something else, the answer is empty.

While a turn runs, its answer is not known yet; `so_far()` is the rule's text or, when the
newest segment is still empty (a tool call just started), the last non-empty segment, so a
running turn shows the newest thing the agent said.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BOUNDARIES", "REPLY_CHARS", "AnswerTracker", "is_root"]

REPLY_CHARS = 64 * 1024
"""An answer keeps at most this many characters (its start); more is marked cut."""
BOUNDARIES = frozenset({"tool", "tool-result", "tool-denied"})
"""Root records of these kinds end a segment of assistant text."""


def is_root(rec: dict[str, Any]) -> bool:
    """True for a record of the main agent (a subagent's records carry `parentCallId`)."""
    return rec.get("parentCallId") is None


class _Parts:
    """Text pieces kept up to REPLY_CHARS characters in all; what does not fit is counted."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.size = 0
        self.cut = False

    def add(self, text: str, cut: bool = False) -> None:
        """`cut`: the text came clipped already (its record says `truncated`)."""
        room = REPLY_CHARS - self.size
        self.cut = self.cut or cut
        if len(text) > room:
            self.cut = True
            text = text[: max(0, room)]
        self.items.append(text)
        self.size += len(text)


class AnswerTracker:
    """Feed one turn's clean records in order; `text()` is its answer so far (module doc)."""

    def __init__(self) -> None:
        self._final: str | None = None
        self._final_cut = False  # (its record said `truncated`: clipped before it came here)
        self._segment = _Parts()
        self._segment_id: object = None
        self._deltas = _Parts()
        self._delta_id: object = None
        self._previous = ""
        self._previous_id: object = None

    def feed(self, kind: str, rec: dict[str, Any]) -> None:
        if not is_root(rec):
            return
        if isinstance(gone := rec.get("retracted"), list):
            self._retract({g for g in gone if isinstance(g, str)})
        text, cut = rec.get("text"), rec.get("truncated") is True
        if kind in BOUNDARIES:
            self._remember()
            self._segment, self._deltas = _Parts(), _Parts()
        elif kind == "text" and isinstance(text, str):
            if rec.get("final") is True:
                self._final, self._final_cut = text, cut
                return
            mid = rec.get("messageId")
            if self._segment.items and mid != self._segment_id:
                self._remember()
                self._segment = _Parts()
            self._segment.add(text, cut)
            self._segment_id, self._deltas = mid, _Parts()
        elif kind == "text-delta" and isinstance(text, str):
            self._deltas.add(text, cut)
            self._delta_id = rec.get("messageId")
        elif kind == "completed" and rec.get("ok") is True:
            result = rec.get("result")
            if isinstance(result, str) and result:
                self._final, self._final_cut = result, cut

    def _remember(self) -> None:
        current = self.text()[0] if self._final is None else ""
        if current.strip():
            self._previous = current
            self._previous_id = self._segment_id if self._segment.items else self._delta_id

    def _retract(self, gone: set[str]) -> None:
        """Drop what the withdrawn messages said (module doc)."""
        def withdrawn(mid: object) -> bool:  # (an id is whatever JSON the provider printed)
            return isinstance(mid, str) and mid in gone

        if withdrawn(self._segment_id):
            self._segment, self._segment_id = _Parts(), None
        if withdrawn(self._delta_id):
            self._deltas, self._delta_id = _Parts(), None
        if withdrawn(self._previous_id):
            self._previous, self._previous_id = "", None

    def so_far(self) -> str:
        """While the turn runs: the answer, else the last non-empty segment."""
        return self.text()[0] or self._previous

    def text(self) -> tuple[str, bool]:
        """(answer, whether it was cut to REPLY_CHARS)."""
        if self._final is not None:
            return self._final[:REPLY_CHARS], len(self._final) > REPLY_CHARS or self._final_cut
        if self._segment.items:
            return "\n".join(self._segment.items), self._segment.cut
        return "".join(self._deltas.items), self._deltas.cut
