"""pi coding agent `-p --mode json` lines to observations."""

from __future__ import annotations

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
from watchrun.agents.providers.toolinfo import result_text
from watchrun.agents.providers.usage import UsageTracker, pi_usage

__all__ = ["PiAdapter"]

_FAILED_STOPS = ("error", "aborted")
BLOCKS = ("text", "thinking", "toolCall", "image")
"""The content blocks of an assistant message it knows (an image holds no text): any other
keeps its line `raw`, so a message's text never vanishes under a new block type."""
COMPACTION_START = ("compaction_start", "auto_compaction_start")
COMPACTION_END = ("compaction_end", "auto_compaction_end")
"""pi 0.73 named its compaction events `compaction_*` (manual ones too); older builds print
`auto_compaction_*` with the same fields."""


class PiAdapter(JsonAdapter):
    """pi JSON events (`session`, `agent_*`, `turn_*`, `message_*`, `tool_execution_*`,
    `compaction_*` (≤ 0.72: `auto_compaction_*`), `auto_retry_*`).

    Usage rule: each assistant `message_end` is one API call with its own `usage` (an
    increment); `message_start`/`message_update` usage is zero or partial and `turn_end` and
    `agent_end` repeat messages, so only `message_end` counts. `input` excludes `cacheRead`
    and `cacheWrite`; both are added back.

    Text: `text_delta` updates are `text-delta`; the `text` blocks of an assistant
    `message_end` are the `text` (`messageId` is the message's index in this run, since pi
    messages carry no id). The answer is the last assistant message with text of the last
    turn. Tool calls and results are deduplicated by `toolCallId` (they repeat in `toolCall`
    blocks, `toolResult` messages and `turn_end.toolResults`).
    `auto_retry_start` is a `model-retry`; `compaction_start` a `status` `compacting`;
    `compaction_end` a `compaction`, or a `warning` (`compaction-failed`) when it carries
    `errorMessage` (nothing was compacted).
    Status: auto-retry and compaction add `agent_start`/`agent_end` pairs, so the outcome is
    decided at the end of the stream: `completed` when the last lifecycle event was
    `agent_end` or `auto_retry_end`, ok unless the last assistant `stopReason` is error or
    aborted (or the retry gave up).
    """

    provider: ClassVar[str] = "pi"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._messages = 0
        self._compaction: Any = None
        self._session: str | None = None
        self._ended = False
        self._stop: str | None = None
        self._error: str | None = None
        self._final: str | None = None

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        kind = obj.get("type")
        if kind == "session":
            self._session = as_str(obj.get("id"))
            return [observation("session", sessionId=self._session, cwd=obj.get("cwd"),
                                version=obj.get("version"))]
        if kind in ("agent_start", "turn_start", "message_start", "tool_execution_update"):
            if kind == "agent_start":
                self._ended = False
            return []
        if kind == "agent_end":
            self._ended = True
            return []
        if kind == "turn_end":
            out: list[Observation] = []
            for res in as_list(obj.get("toolResults")):
                out += self._tool_result(as_dict(res))
            return out
        if kind == "message_update":
            event = self.shape.obj(obj.get("assistantMessageEvent"), "assistantMessageEvent")
            if event.get("type") == "text_delta" and (
                    delta := self.shape.text(event.get("delta"), "text_delta.delta")):
                return [observation("text-delta", text=delta, index=event.get("contentIndex"))]
            return []
        if kind == "message_end":
            return self._message(self.shape.obj(obj.get("message"), "message", required=True))
        if kind in ("tool_execution_start", "tool_execution_end"):
            if (call := self.call_id(obj.get("toolCallId"), f"{kind}.toolCallId")) is None:
                return []
            if kind == "tool_execution_start":
                return self.tool(call, str(obj.get("toolName") or "?"), obj.get("args"))
            return self.tool_result(call, bool(obj.get("isError")),
                                    result_text(as_dict(obj.get("result")).get("content")))
        if kind in COMPACTION_START:
            self._compaction = obj.get("reason")
            return [observation("status", status="compacting", reason=obj.get("reason"))]
        if kind in COMPACTION_END:
            trigger, self._compaction = self._compaction or obj.get("reason"), None
            if error := as_str(obj.get("errorMessage")):
                return [observation("warning", message=error, code="compaction-failed")]
            result = as_dict(obj.get("result"))
            return [observation("compaction", trigger=trigger,
                                tokensBefore=result.get("tokensBefore"),
                                aborted=True if obj.get("aborted") else None)]
        if kind == "auto_retry_start":
            self._ended = False
            return self.retry(str(obj.get("errorMessage") or "retrying"), obj.get("attempt"),
                              obj.get("maxAttempts"), obj.get("delayMs"))
        if kind == "auto_retry_end":
            self._ended = True
            if obj.get("success") is False:
                message = str(obj.get("finalError") or self._error or "retries exhausted")
                self._stop = "error"
                return self.problem(message, code="retry-exhausted")
            return []
        return self.unknown(line, kind)

    def _message(self, msg: dict[str, Any]) -> list[Observation]:
        role = msg.get("role")
        if role == "toolResult":
            return self._tool_result(msg)
        if role != "assistant":
            return []
        out: list[Observation] = []
        texts: list[str] = []
        self._messages += 1
        mid = f"message-{self._messages}"
        for block in self.shape.items(msg.get("content"), "message.content", required=True):
            block = self.shape.obj(block, "a content block")
            btype = block.get("type")
            if btype == "text" and (text := self.shape.text(block.get("text"), "text.text",
                                                            required=True)):
                texts.append(text)
                out.append(observation("text", text=text, messageId=mid))
            elif btype == "thinking" and (
                    text := self.shape.text(block.get("thinking"), "thinking.thinking")):
                out.append(observation("reasoning", text=text))
            elif btype == "toolCall" and as_str(block.get("id")):
                out += self.tool(str(block["id"]), str(block.get("name") or "?"),
                                 block.get("arguments"))
            else:
                self.shape.known(btype, BLOCKS, "content block.type")
        if isinstance(msg.get("usage"), dict):
            out.append(self.usage(pi_usage(msg["usage"]), source="message",
                                  model=msg.get("model")))
        self._stop = as_str(msg.get("stopReason"))
        if self._stop in _FAILED_STOPS:
            self._error = str(msg.get("errorMessage") or f"stopped: {self._stop}")
            out += self.problem(self._error, code="aborted" if self._stop == "aborted" else None,
                                dedupe=False)
        elif texts:
            self._final = "\n".join(texts)
        return out

    def _tool_result(self, res: dict[str, Any]) -> list[Observation]:
        call_id = res.get("toolCallId")
        if not isinstance(call_id, str):
            return []
        return self.tool_result(call_id, bool(res.get("isError")), result_text(res.get("content")))

    def end(self, exit_code: int | None) -> list[Observation]:
        if not self._ended:
            return []
        ok = self._stop not in _FAILED_STOPS
        return [observation("completed", ok=ok, result=self._final if ok else None,
                            sessionId=self._session, reason=self._error if not ok else self._stop)]
