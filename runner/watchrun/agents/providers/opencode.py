"""OpenCode `run --format json` lines to observations."""

from __future__ import annotations

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



class OpenCodeAdapter(JsonAdapter):
    """OpenCode JSON events (`step_start`, `text`, `reasoning`, `tool_use`, `step_finish`,
    `error`, `done`).

    Usage rule: `step_finish.part.tokens` is one LLM call (an increment), emitted as it comes.
    `tokens.input` excludes `cache.read` and `cache.write`, and `tokens.output` excludes
    `tokens.reasoning`; both are added back. `cost` rides along as `costUsd`.

    Status: a `done` event completes the turn (ok unless an `error` event came). Without
    `done` (older builds) the end of the stream completes it when the last event was a
    `step_finish` whose reason is not `tool-calls` (ok), or when an `error` came (failed);
    a stream cut mid-step gives no `completed`. A tool arrives once, when it finished, with
    its `state`; the call id is `part.callID`.
    """

    provider: ClassVar[str] = "opencode"

    def __init__(self, tracker: UsageTracker | None = None) -> None:
        super().__init__(tracker)
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
        part = as_dict(obj.get("part"))
        if kind == "step_start":
            self._ended = False
        elif kind == "text":
            if as_str(part.get("text")):
                self._final = part["text"]
                out.append(observation("text", text=part["text"], messageId=part.get("messageID")))
        elif kind == "reasoning":
            if as_str(part.get("text")):
                out.append(observation("reasoning", text=part["text"],
                                       messageId=part.get("messageID")))
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
            ok = self._error is None
            out.append(observation("completed", ok=ok, result=self._final if ok else None,
                                   sessionId=self._session, reason=obj.get("reason"),
                                   rejected=rejected or None))
        else:
            return out + self.unknown(line, kind)
        return out

    def _tool(self, part: dict[str, Any]) -> list[Observation]:
        call_id = str(part.get("callID") or part.get("id") or "?")
        state = as_dict(part.get("state"))
        out = self.tool(call_id, str(part.get("tool") or "?"), state.get("input"),
                        title=state.get("title"))
        status = state.get("status")
        if status in ("completed", "error"):
            meta = as_dict(state.get("metadata"))
            code = meta.get("exitCode", meta.get("exit"))
            failed = status == "error" or (isinstance(code, int) and code != 0)
            text = state.get("error") if status == "error" else state.get("output")
            out += self.tool_result(call_id, failed, str(text or ""),
                                    exitCode=code if isinstance(code, int) else None)
        return out

    def finish(self) -> list[Observation]:
        if self._done or not (self._ended or self._error):
            return []
        ok = self._error is None
        return [observation("completed", ok=ok, result=self._final if ok else None,
                            sessionId=self._session, reason=self._error or "stop")]
