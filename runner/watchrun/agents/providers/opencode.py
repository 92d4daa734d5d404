"""OpenCode `run --format json` lines to observations."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.base import (
    JsonAdapter,
    Observation,
    as_dict,
    as_list,
    as_str,
    observation,
)
from watchrun.agents.providers.usage import UsageTracker, opencode_usage

__all__ = ["OpenCodeAdapter"]

_REJECTED = re.compile(r"rejected permission to use|specified a rule which prevents you",
                       re.IGNORECASE)


class OpenCodeAdapter(JsonAdapter):
    """OpenCode JSON events (`step_start`, `text`, `reasoning`, `tool_use`, `step_finish`,
    `error`, `done`).

    Usage rule: `step_finish.part.tokens` is one LLM call (an increment), emitted as it comes.
    `tokens.input` excludes `cache.read` and `cache.write`, and `tokens.output` excludes
    `tokens.reasoning`; both are added back. `cost` rides along as `costUsd`.

    Status: a `done` event, where a build prints one, completes the turn (ok unless an
    `error` event came). Without `done` (1.18.33, the npm release of 2026-12, prints none: only
    step_start, step_finish, text, reasoning, tool_use and error) the end of the stream
    completes it when the last event was a `step_finish` whose reason is not `tool-calls`
    (ok), or when an `error` came (failed); a stream cut mid-step gives no `completed`. A
    tool arrives once, when it finished, with its `state`; the call id is `part.callID`. The
    answer is the last text part.

    Rejections: without `--auto`, `opencode run` rejects every permission request; the tool
    part then errors with "The user rejected permission to use this specific tool call" (or,
    for a deny rule, "…specified a rule which prevents you…"), and the run says
    "permission requested: …; auto-rejecting" on stderr (plain text). Builds that print `done`
    (its source in anomalyco/opencode's run.ts at 00f9806) also list the rejected permissions
    in `done.rejected`. Each is a `tool-denied` (once per call, and a `done` entry only for a
    tool not already reported).
    """

    provider: ClassVar[str] = "opencode"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._denied_tools: set[str] = set()
        self._session: str | None = None
        self._final: str | None = None
        self._error: str | None = None
        self._ended = False
        self._done = False

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        out: list[Observation] = []
        sid = as_str(obj.get("sessionID"))
        if sid and self._session is None:
            self._session = sid
            out.append(observation("session", sessionId=sid))
        kind = obj.get("type")
        part = self.shape.obj(obj.get("part"), "part")
        if kind == "step_start":
            self._ended = False
        elif kind == "text":
            if text := self.shape.text(part.get("text"), "part.text", required=True):
                self._final = text
                out.append(observation("text", text=text, messageId=part.get("messageID")))
        elif kind == "reasoning":
            if text := self.shape.text(part.get("text"), "part.text"):
                out.append(observation("reasoning", text=text, messageId=part.get("messageID")))
        elif kind == "tool_use":
            out += self._tool(part)
        elif kind == "step_finish":
            reason = part.get("reason")
            self._ended = reason != "tool-calls"
            if isinstance(part.get("tokens"), dict):
                out.append(self.usage(opencode_usage(part["tokens"]), source="step",
                                      messageId=part.get("messageID"), costUsd=part.get("cost")))
        elif kind == "error":
            error = as_dict(obj.get("error"))
            data = as_dict(error.get("data"))
            message = str(data.get("message") or error.get("name") or "error")
            self._error = message
            out += self.problem(message, code=error.get("name"), hint=data.get("statusCode"))
        elif kind == "done":
            self._done = True
            rejected = as_list(obj.get("rejected"))
            for name in rejected:
                if isinstance(name, str) and name not in self._denied_tools:
                    self._denied_tools.add(name)
                    out += self.denied(None, name, "rejected",
                                       f"permission {name!r} was rejected (non-interactive run)")
            ok = self._error is None
            out.append(observation("completed", ok=ok, result=self._final if ok else None,
                                   sessionId=self._session, reason=obj.get("reason"),
                                   rejected=rejected or None))
        else:
            return out + self.unknown(line, kind)
        return out

    def _tool(self, part: dict[str, Any]) -> list[Observation]:
        call_id = self.call_id(part.get("callID") or part.get("id"), "tool part.callID")
        if call_id is None:
            return []
        state = as_dict(part.get("state"))
        out = self.tool(call_id, str(part.get("tool") or "?"), state.get("input"),
                        title=state.get("title"))
        status = state.get("status")
        if status in ("completed", "error"):
            meta = as_dict(state.get("metadata"))
            code = meta.get("exitCode", meta.get("exit"))
            failed = status == "error" or (isinstance(code, int) and code != 0)
            text = state.get("error") if status == "error" else state.get("output")
            refused = status == "error" and _REJECTED.search(str(text or "")) is not None
            out += self.tool_result(call_id, failed, str(text or ""), ran=not refused,
                                    exitCode=code if isinstance(code, int) else None)
            if refused:
                name = str(part.get("tool") or "?")
                self._denied_tools.add(name)
                reason = "rule" if "rule" in str(text) else "rejected"
                out += self.denied(call_id, name, reason, str(text))
        return out

    def end(self, exit_code: int | None) -> list[Observation]:
        if self._done or not (self._ended or self._error):
            return []
        ok = self._error is None
        return [observation("completed", ok=ok, result=self._final if ok else None,
                            sessionId=self._session, reason=self._error or "stop")]
