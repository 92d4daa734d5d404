"""GitHub Copilot CLI `copilot -p --output-format json` lines to observations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.base import (
    JsonAdapter,
    Observation,
    as_dict,
    as_str,
    observation,
)
from watchrun.agents.providers.toolinfo import result_text, retry_class
from watchrun.agents.providers.usage import UsageTracker, copilot_usage

__all__ = ["CopilotAdapter"]

_QUIET = frozenset({
    "user.message", "assistant.turn_start", "assistant.turn_end", "assistant.idle",
    "assistant.intent", "assistant.message_start", "assistant.reasoning_delta",
    "assistant.streaming_delta", "assistant.tool_call_delta", "assistant.server_tool_progress",
    "tool.execution_partial_result", "tool.execution_progress", "tool.user_requested",
    "model.call_start", "model.call_finished", "hook.start", "hook.end", "hook.progress",
    "skill.invoked", "subagent.started", "subagent.completed", "subagent.selected",
    "subagent.deselected", "permission.requested", "permission.completed",
    "pending_messages.modified",
})
"""Events that say nothing a transcript shows (the turn loop, deltas of things that arrive
whole later, hooks); other unknown types are kept as `raw` unless marked ephemeral."""
AUTH_ADVICE = "run `copilot login` (or set COPILOT_GITHUB_TOKEN / GH_TOKEN) for the agent"
ABORTS = {"user_initiated": "the user aborted the turn (Ctrl+C)",
          "remote_command": "a remote command aborted the turn",
          "user_abort": "an MCP server's user.abort notification aborted the turn",
          "autopilot_credit_limit": "autopilot stopped the run: its objective reached the "
                                    "--max-ai-credits limit"}
"""`abort.data.reason` (copilot-sdk's `AbortReason`) in words; another is named as written."""


class CopilotAdapter(JsonAdapter):
    """Copilot CLI JSON lines: session events `{type, data, id, timestamp, parentId,
    ephemeral?}` and a last `result {sessionId, exitCode, usage}` (premium requests and
    durations; token counts come per model call in `assistant.usage` when printed).

    Text: `assistant.message_delta` is a `text-delta`; `assistant.message` (`content`, which is
    empty for a message that only requests tools) a `text` with its `messageId`; a sub-agent's
    messages carry `parentToolCallId`. The answer is the last non-empty root
    `assistant.message` (one with `phase: final_answer` wins).

    Tools: `tool.execution_start` / `tool.execution_complete` by `toolCallId`; `success: false`
    with `error.code: "denied"` means the permissions refused the call (in `-p` mode an
    ungranted tool is denied and the run still exits 0): a `tool-denied`.

    Problems: `model.call_failure` is a `model-error` (the CLI retries by itself); `session.error`
    a failure (or quota); `session.warning` a `warning`; `session.compaction_complete` a
    `compaction`. `abort` ends the turn: a failure (code `aborted`, `reason` in words; a
    sub-agent's, with `agentId`, is a `warning`: its parent goes on). `subagent.failed` is a
    `warning` (`subagent-failed`, `callId`: the call that ran it; that call's own result comes
    as `tool.execution_complete`). `system.notification` is a `status` `notification`
    (`description`: its text, `state`: what it is about, e.g. `agent_completed`).
    Status: `result.exitCode` 0 and no `session.error` or `abort` is ok.
    """

    provider: ClassVar[str] = "copilot"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._session: str | None = None
        self._final: str | None = None
        self._final_phase = False
        self._error: str | None = None

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        kind = obj.get("type")
        if not isinstance(kind, str):
            return self.unknown(line, kind)
        data = self.shape.obj(obj.get("data"), "data")
        if kind == "result":
            return self._result(obj)
        if kind in ("session.start", "session.resume"):
            self._session = as_str(data.get("sessionId")) or self._session
            return [observation("session", sessionId=self._session,
                                model=data.get("selectedModel"), version=data.get("copilotVersion"))
                    ] if self._session else []
        if kind == "assistant.message_delta":
            text = self.shape.text(data.get("deltaContent"), "data.deltaContent") or \
                self.shape.text(data.get("content"), "data.content")
            return [observation("text-delta", text=text, messageId=data.get("messageId"),
                                parentCallId=data.get("parentToolCallId"))] if text else []
        if kind == "assistant.message":
            return self._message(data)
        if kind == "assistant.reasoning":
            text = self.shape.text(data.get("content"), "data.content")
            return [observation("reasoning", text=text)] if text else []
        if kind == "assistant.usage":
            return [self.usage(copilot_usage(data), source="call", model=data.get("model"),
                               parentCallId=data.get("parentToolCallId"))]
        if kind in ("tool.execution_start", "tool.execution_complete"):
            call = self.call_id(data.get("toolCallId"), "data.toolCallId")
            if call is None:
                return []
            if kind == "tool.execution_complete":
                return self._complete(call, data)
            return self.tool(call, str(data.get("toolName") or "?"), data.get("arguments"),
                             parentCallId=data.get("parentToolCallId"))
        if kind == "model.call_failure":
            status = data.get("statusCode")
            message = str(data.get("errorMessage") or data.get("failureKind")
                          or "model call failed")
            return [observation("model-error", message=message, status=status,
                                error=retry_class(message, status), model=data.get("model"))]
        if kind == "session.error":
            self._error = str(data.get("message") or data.get("errorType") or "session error")
            etype = as_str(data.get("errorType"))
            return self.problem(self._error, code=etype, hint=data.get("statusCode"),
                                advice=AUTH_ADVICE if etype in ("authentication", "authorization")
                                else None)
        if kind == "session.warning":
            return [observation("warning", message=str(data.get("message") or "warning"),
                                code=data.get("warningType"))]
        if kind == "abort":
            return self._abort(obj, as_str(data.get("reason")) or "no reason given")
        if kind == "subagent.failed":
            who = as_str(data.get("agentDisplayName")) or as_str(data.get("agentName"))
            return [observation("warning", code="subagent-failed",
                                message=f"{who or 'a sub-agent'} failed: "
                                        f"{as_str(data.get('error')) or 'no reason given'}",
                                callId=as_str(data.get("toolCallId")))]
        if kind == "system.notification":
            text = self.shape.text(data.get("content"), "data.content")
            return [observation("status", status="notification", description=text or None,
                                state=as_str(as_dict(data.get("kind")).get("type")))]
        if kind == "session.compaction_complete":
            return [observation("compaction", trigger=data.get("trigger"),
                                tokensBefore=data.get("preCompactionTokens"),
                                tokensAfter=data.get("postCompactionTokens"),
                                aborted=None if data.get("success", True) else True)]
        if kind in _QUIET or obj.get("ephemeral") is True or kind.startswith("session."):
            return []
        return self.unknown(line, kind)

    def _abort(self, obj: dict[str, Any], reason: str) -> list[Observation]:
        if as_str(obj.get("agentId")):  # a sub-agent's: its parent goes on
            return [observation("warning", message=f"a sub-agent was aborted ({reason})",
                                code="aborted")]
        self._error = ABORTS.get(reason) or f"the turn was aborted ({reason})"
        return self.problem(self._error, code="aborted", dedupe=False)

    def _message(self, data: dict[str, Any]) -> list[Observation]:
        text = self.shape.text(data.get("content"), "data.content", required=True)
        parent = as_str(data.get("parentToolCallId"))
        out: list[Observation] = []
        if reasoning := self.shape.text(data.get("reasoningText"), "data.reasoningText"):
            out.append(observation("reasoning", text=reasoning, parentCallId=parent))
        if text is None:
            return out
        final_phase = data.get("phase") == "final_answer"
        if parent is None and (final_phase or not self._final_phase):
            self._final, self._final_phase = text, final_phase
        return [*out, observation("text", text=text, messageId=data.get("messageId"),
                                  phase=data.get("phase"), parentCallId=parent)]

    def _complete(self, call_id: str, data: dict[str, Any]) -> list[Observation]:
        parent = as_str(data.get("parentToolCallId"))
        if data.get("success") is True:
            result = as_dict(data.get("result"))
            text = result.get("detailedContent") or result.get("content")
            return self.tool_result(call_id, False, result_text(text), parentCallId=parent)
        error = as_dict(data.get("error"))
        message = str(error.get("message") or "the tool call failed")
        denied = error.get("code") == "denied"
        out = self.tool_result(call_id, True, message, ran=not denied, code=error.get("code"),
                               parentCallId=parent)
        return out + (self.denied(call_id, None, "denied", message) if denied else [])

    def _result(self, obj: dict[str, Any]) -> list[Observation]:
        self._session = as_str(obj.get("sessionId")) or self._session
        code = obj.get("exitCode")
        ok = code == 0 and self._error is None
        usage = as_dict(obj.get("usage"))
        return [observation(
            "completed", ok=ok, result=self._final if ok else None, sessionId=self._session,
            exitCode=code, premiumRequests=usage.get("premiumRequests"),
            durationMs=usage.get("sessionDurationMs"),
            reason=None if ok else (self._error or (
                f"exit code {code}" if code is not None else "its result event has no exitCode "
                "(not Copilot's JSON output? `copilot -p … --output-format json`)")),
        )]
