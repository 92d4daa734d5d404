"""Cursor agent CLI `cursor-agent -p --output-format stream-json` lines to observations."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.base import (
    JsonAdapter,
    Observation,
    as_dict,
    as_str,
    observation,
)
from watchrun.agents.providers.usage import UsageTracker, cursor_usage

__all__ = ["CursorAdapter"]

SILENT_BLOCKS = ("thinking", "redacted_thinking", "tool_use", "image")
"""Content blocks of an `assistant` line that hold no text of the answer (`text` does; any
other is recorded `raw`, so a message's text never vanishes under a new block type)."""
_BULKY = ("beforeFullFileContent", "afterFullFileContent", "fileContent", "streamContent")
"""Result fields that repeat whole files: left out of a tool result's text."""
_AUTH = re.compile(r"not logged in|authenticat|api key|login", re.IGNORECASE)
_TRUST = re.compile(r"--trust|trust this directory|workspace trust", re.IGNORECASE)
AUTH_ADVICE = "run `cursor-agent login`, or set CURSOR_API_KEY in the agent's env"
TRUST_ADVICE = ("cursor-agent refuses an untrusted directory in print mode: add `--trust` (or "
                "`--force`) to the agent's command")


def _tool(tool_call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(`read`, body) from `{"readToolCall": body}`: Cursor names a call by its one key."""
    for key, body in tool_call.items():
        if isinstance(body, dict):
            return (key.removesuffix("ToolCall") or key), body
    return "?", {}


def _result_text(success: dict[str, Any]) -> str:
    """A successful tool result as text: a command's output, a file's content, a diff, else
    the result object without the whole-file copies."""
    if "stdout" in success or "stderr" in success:
        return "".join(str(success.get(k) or "") for k in ("stdout", "stderr"))
    for key in ("content", "diffString", "output"):
        if isinstance(success.get(key), str):
            return str(success[key])
    rest = {k: v for k, v in success.items() if k not in _BULKY}
    return json.dumps(rest, ensure_ascii=False) if rest else ""


class CursorAdapter(JsonAdapter):
    """Cursor agent stream-json (`system/init`, `user`, `thinking`, `assistant`, `tool_call`,
    `result`; `interaction_query` is the CLI answering itself and carries nothing).

    Text: without `--stream-partial-output` each `assistant` line is one whole message (the
    text between tool calls); with it, token deltas come as `assistant` lines with
    `timestamp_ms` and a last one repeats the whole message. So each `assistant` line is a
    `text-delta`, and the message becomes one `text` when a line repeats what came before it,
    or when a tool call, the result or the end follows. With partial output the CLI also
    prints, at the end, the whole run's text once more: a line without `timestamp_ms`, in a run
    whose earlier lines had it, whose text is every message so far joined (the pending deltas
    last). That line is a repeat, no record: its pending deltas become their message, and
    nothing else. A line that repeats one earlier message only is a new message (a message
    said again), unless it is the run's only one. The answer is the last message:
    `result.result` concatenates every message of the run (it is the answer only when no
    message came). Thinking deltas are joined into one `reasoning` at `thinking/completed`.

    Tools: `tool_call` `started`/`completed` with `call_id`; the result is `success`, `error`
    or `rejected` (a permission refused it: `tool-denied`). A shell result with a non-zero
    `exitCode` failed.

    Usage: `result.usage` (camelCase, when present) is the run's total, emitted as this turn's
    increment; without `cacheReadTokens` it is `complete: false`.

    Status: `result.is_error`. On failure the CLI may print no `result` at all and say why on
    stderr: then the stderr line that says why (`stderr_tail.py`) is the failure (auth and
    workspace-trust refusals get advice).
    """

    provider: ClassVar[str] = "cursor"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._session: str | None = None
        self._parts: list[str] = []
        self._thinking: list[str] = []
        self._last_message: str | None = None
        self._said: list[str] = []
        """Every message of the run so far, in order."""
        self._streamed = False
        """An `assistant` line with `timestamp_ms` came: the run streams partial output."""

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        kind, sub = obj.get("type"), obj.get("subtype")
        if kind == "system" and sub == "init":
            self._session = as_str(obj.get("session_id")) or self._session
            return [observation("session", sessionId=self._session, model=obj.get("model"),
                                cwd=obj.get("cwd"))]
        if kind in ("user", "interaction_query"):
            return []
        if kind == "thinking":
            if sub == "delta" and isinstance(obj.get("text"), str):
                self._thinking.append(obj["text"])
                return []
            return self._think()
        if kind == "assistant":
            return self._assistant(obj)
        if kind == "tool_call":
            return [*self._flush(), *self._tool_call(obj, sub)]
        if kind == "result":
            return self._result(obj)
        return self.unknown(line, kind if sub is None else f"{kind}/{sub}")

    def _think(self) -> list[Observation]:
        text, self._thinking = "".join(self._thinking), []
        return [observation("reasoning", text=text)] if text.strip() else []

    def _assistant(self, obj: dict[str, Any]) -> list[Observation]:
        message = self.shape.obj(obj.get("message"), "message", required=True)
        parts: list[str] = []
        for block in self.shape.items(message.get("content"), "message.content",
                                      required=isinstance(obj.get("message"), dict)):
            block = self.shape.obj(block, "a content block")
            if block.get("type") == "text":
                parts.append(self.shape.text(block.get("text"), "text block.text",
                                             required=True) or "")
            else:  # its line is kept `raw`
                self.shape.known(block.get("type"), SILENT_BLOCKS, "content block.type")
        text = "".join(parts)
        if not text:
            return []
        if "timestamp_ms" in obj:
            self._streamed = True
        elif self._streamed and self._said and text == "".join(self._said + self._parts):
            return self._flush()  # the whole run's text again, at its end (class docstring)
        if self._parts and text == "".join(self._parts):  # the whole message after its deltas
            self._parts = []
            return self._message(text)
        self._parts.append(text)
        return [observation("text-delta", text=text)]

    def _message(self, text: str) -> list[Observation]:
        self._last_message = text
        self._said.append(text)
        return [observation("text", text=text)]

    def _flush(self) -> list[Observation]:
        out = self._think()
        if self._parts:
            text, self._parts = "".join(self._parts), []
            out += self._message(text)
        return out

    def _tool_call(self, obj: dict[str, Any], sub: Any) -> list[Observation]:
        call_id = self.call_id(obj.get("call_id"), "tool_call.call_id")
        if call_id is None:
            return []
        name, body = _tool(as_dict(obj.get("tool_call")))
        out = self.tool(call_id, name, body.get("args"))
        if sub != "completed":
            return out
        result = as_dict(body.get("result"))
        if "rejected" in result:
            rejected = as_dict(result.get("rejected"))
            why = as_str(rejected.get("reason"))
            what = as_str(rejected.get("command")) or as_str(rejected.get("path")) or name
            message = f"rejected: {what}" + (f" ({why})" if why else "")
            return [*out, *self.tool_result(call_id, True, message, ran=False),
                    *self.denied(call_id, name, "rejected", message)]
        success = result.get("success")
        if success is None and not ({"error", "failure"} & result.keys()):
            success = result  # older builds put the result fields at the top
        if isinstance(success, dict):
            code = success.get("exitCode")
            failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
            return out + self.tool_result(call_id, failed, _result_text(success),
                                          exitCode=code if isinstance(code, int) else None)
        error = result.get("error") or result.get("failure") or result
        detail = as_dict(error)
        message = (as_str(detail.get("errorMessage")) or as_str(detail.get("message"))
                   or as_str(error) or json.dumps(error, ensure_ascii=False))
        return out + self.tool_result(call_id, True, message)

    def _result(self, obj: dict[str, Any]) -> list[Observation]:
        out = self._flush()
        usage = obj.get("usage")
        if isinstance(usage, dict):
            out.append(self.usage(cursor_usage(usage), source="result"))
        is_error = obj.get("is_error")
        if not isinstance(is_error, bool):
            is_error = obj.get("subtype") != "success"
        result = self.shape.text(obj.get("result"), "result")
        if is_error:
            out += self.problem(result or str(obj.get("subtype") or "error"))
        answer = self._last_message if self._last_message is not None else result
        if not is_error and self._last_message is None and result:
            out += self._message(result)
        out.append(observation(
            "completed", ok=not is_error, result=None if is_error else answer,
            sessionId=as_str(obj.get("session_id")) or self._session,
            durationMs=obj.get("duration_ms"), requestId=obj.get("request_id"),
            reason=obj.get("subtype") if is_error else None,
        ))
        return out

    def end(self, exit_code: int | None) -> list[Observation]:
        return self._flush()

    def exit_problem(self, reason: str) -> list[Observation]:
        advice = (TRUST_ADVICE if _TRUST.search(reason) else
                  AUTH_ADVICE if _AUTH.search(reason) else None)
        return self.problem(reason, code="auth" if advice == AUTH_ADVICE else None,
                            advice=advice)
