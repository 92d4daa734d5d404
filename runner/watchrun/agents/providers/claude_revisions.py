"""Claude Code's refusals, withdrawn messages and conversation resets to observations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watchrun.agents.providers.base import Observation, as_list, as_str, observation
from watchrun.agents.providers.claude_notices import ClaudeNotices
from watchrun.agents.providers.usage import Usage, UsageTracker

__all__ = ["MAX_UUIDS", "ClaudeRevisions"]

MAX_UUIDS = 4096
"""Assistant lines whose `uuid` is remembered (the newest): a retraction names recent ones."""


class ClaudeRevisions(ClaudeNotices):
    """Records are append-only, so what Claude Code takes back is said in a record of its own.

    Every assistant line has a `uuid` (one per content block of a message); its message id
    (`messageId` on its records) is remembered by it. Two things withdraw messages already
    recorded: an assistant message's `supersedes` (the uuids it replaces: after a refusal
    fallback, or a response whose tool call could not be parsed) and, at the end of the turn,
    `system/model_refusal_fallback`'s `retracted_message_uuids` (the refused partial answer; the
    fallback model answered instead). Each is a `warning` — code `superseded` (with the new
    message's `messageId`) or `refusal-fallback` (`model`, `fallbackModel`, `category`) —
    whose `retracted` lists the message ids withdrawn, each once (the two name the same
    messages: the SDK calls them idempotent). The answer rule (agents/answer.py) drops a
    withdrawn message's text, so a refused reply is never the turn's answer.

    `system/model_refusal_no_fallback` (the model refused and nothing retried) is a `failure`
    (code `refusal`), and so is the refusal's own assistant error frame after it
    (`stop_reason: refusal`, in claude.py). `conversation_reset` (`/clear`, a plan-mode exit,
    a fresh session) is a `session` with the new id (`previousSessionId`, `trigger`), which
    the turn follows: its usage snapshots and baseline carry over to the new session's key.
    """

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._session: str | None = None
        self._counted: dict[str, Usage] = {}
        """Session key: the usage the per-message snapshots of this process counted."""
        self._results_seen: set[str] = set()
        """The session keys whose `result` this process saw."""
        self._uuids: dict[str, str] = {}
        """An assistant line's uuid: its message id (the newest MAX_UUIDS)."""
        self._retracted: set[str] = set()
        self._last_mid: str | None = None
        """The message id of `_last_text`."""

    def revise(self, obj: dict[str, Any], mid: str | None, parent: str | None
               ) -> list[Observation]:
        """An assistant line: remember its uuid; what its `supersedes` withdraws."""
        if (uuid := as_str(obj.get("uuid"))) and mid:
            self._uuids[uuid] = mid
            if len(self._uuids) > MAX_UUIDS:
                del self._uuids[next(iter(self._uuids))]
        gone = self._retract(obj.get("supersedes"), keep=mid)
        if not gone:
            return []
        return [observation("warning", code="superseded", retracted=gone, messageId=mid,
                            parentCallId=parent, message=f"{len(gone)} earlier message(s) "
                            "withdrawn: this one replaces them")]

    def _retract(self, uuids: Any, keep: str | None = None) -> list[str]:
        """The message ids of `uuids` not withdrawn yet (never `keep`, the message itself)."""
        gone: list[str] = []
        for uuid in as_list(uuids):
            mid = self._uuids.get(uuid) if isinstance(uuid, str) else None
            if mid and mid != keep and mid not in self._retracted:
                self._retracted.add(mid)
                gone.append(mid)
        if self._last_mid in gone:
            self._last_text = self._last_mid = None
        return gone

    def notice(self, obj: dict[str, Any], line: str) -> list[Observation]:
        if obj.get("type") == "conversation_reset":
            return self._reset(obj)
        return super().notice(obj, line)

    def system_notice(self, obj: dict[str, Any], sub: Any, line: str) -> list[Observation]:
        if sub not in ("model_refusal_fallback", "model_refusal_no_fallback"):
            return super().system_notice(obj, sub, line)
        model = as_str(obj.get("original_model")) or "the model"
        category = as_str(obj.get("api_refusal_category"))
        said = (as_str(obj.get("content")) or "").strip() or " ".join(filter(None, (
            f"{model} refused the request" + (f" (category: {category})" if category else ""),
            as_str(obj.get("api_refusal_explanation")))))
        if sub == "model_refusal_no_fallback":
            return self.problem(said, code="refusal", dedupe=False)
        fallback = as_str(obj.get("fallback_model"))
        if not as_str(obj.get("content")) and fallback:
            said += f"; {fallback} answered instead"
        return [observation("warning", message=said, code="refusal-fallback", model=model,
                            fallbackModel=fallback, category=category,
                            retracted=self._retract(obj.get("retracted_message_uuids")) or None)]

    def _reset(self, obj: dict[str, Any]) -> list[Observation]:
        new = as_str(obj.get("new_conversation_id"))
        old = self._session or as_str(obj.get("session_id"))
        if not new:
            self.shape.problems.append("new_conversation_id: expected a session id")
            return []
        old_key, new_key = f"claude:{old or '?'}", f"claude:{new}"
        if new_key != old_key:  # a total after the reset may go on from the one before it
            if (baseline := self.tracker.baseline(old_key)) is not None:
                self.tracker.restore(new_key, baseline)
            if old_key in self._counted:
                self._counted[new_key] = self._counted.get(new_key, Usage()) + \
                    self._counted.pop(old_key)
            if old_key in self._results_seen:
                self._results_seen.add(new_key)
        self._session = new
        return [observation("session", sessionId=new, previousSessionId=old,
                            trigger=as_str(obj.get("trigger")) or "reset")]
