"""Claude Code `-p --output-format stream-json --verbose` lines to observations."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.base import (
    Observation,
    as_dict,
    as_list,
    as_str,
    epoch_to_iso,
    observation,
)
from watchrun.agents.providers.claude_revisions import ClaudeRevisions
from watchrun.agents.providers.toolinfo import result_text
from watchrun.agents.providers.usage import (
    Usage,
    UsageTracker,
    anthropic_model_usage,
    anthropic_usage,
)

__all__ = ["ClaudeAdapter"]

RESTORED_TOTALS_SINCE = (2, 1, 277)
"""From this version a resumed process restores the session's saved totals on `result`."""
RESUME_FLAGS = ("--resume", "-r", "--continue", "-c")
SILENT_BLOCKS = frozenset(("text", "thinking", "redacted_thinking", "image", "document",
                           "tool_use", "server_tool_use", "mcp_tool_use"))
"""Content blocks it knows (those that hold no text to record, too): any other is recorded."""

_SUBTYPE_CODES = {"error_max_turns": "max-turns", "error_during_execution": "execution",
                  "error_max_budget_usd": "max-budget",
                  "error_max_structured_output_retries": "structured-output"}


def _version(text: Any) -> tuple[int, int, int] | None:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", text) if isinstance(text, str) else None
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


class ClaudeAdapter(ClaudeRevisions):
    """Claude Code stream-json (messages beside the conversation: `ClaudeNotices`; refusals,
    withdrawn messages, conversation resets: `ClaudeRevisions`).

    Usage rule: `assistant.message.usage` is a per-API-call snapshot repeated on every content
    block line of one `message.id` (and its output count is the early one), so it is counted
    once per message id through `UsageTracker.snapshot` and marked `complete: false`;
    `stream_event` `message_start`/`message_delta` usage feeds the same per-message snapshot.
    `result.usage` (field-wise max with the sum of `modelUsage`, which also covers side models)
    is cumulative for the session: the increment since the last total of that session
    (`UsageTracker.cumulative`, key `claude:<session_id>`) minus what the snapshots of this
    process already counted is emitted as the remainder, with the raw `total` and
    `sessionKey` so baselines can be rebuilt from history. Builds before 2.1.277 restart the
    total at zero in every process, so their first `result` forgets the stored baseline.
    Anthropic's `input_tokens` excludes cache reads and writes; they are added (SPEC §5).
    The remainder is `complete: true` ("these totals are exact", settling the snapshots before
    it) unless the session was first seen here while the command resumes one (`--resume`,
    `--continue`) on a build that restores earlier totals, or a snapshot counted more than
    the total allows.

    Status: `result.is_error` is authoritative (not `subtype`). `system/api_retry` is a
    `model-retry` (the CLI retries by itself), `system/compact_boundary` a `compaction`, each
    `result.permission_denials` entry a `tool-denied`. Known lines that carry nothing for a
    transcript (prompt echo, `system/thinking_tokens`, stream block start/stop) give [].

    Shape: the fields a transcript is made of (`message`, its `content` and blocks, a block's
    `text`/`thinking`/`id`/`tool_use_id`, a stream event's delta, `result`) are read through
    `self.shape`, so one of the wrong type leaves a `raw` `malformed-event` record. One reading
    is not a problem: `content` given as a plain string, which the Messages API allows as
    shorthand for a single text block — an assistant's is recorded as its `text`, a user's is
    the prompt echo (the prompt is already recorded), so it gives [].
    """

    provider: ClassVar[str] = "claude"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._process_scoped = False
        self._streaming: dict[str | None, str] = {}

    def _key(self, obj: Mapping[str, Any]) -> str:
        return f"claude:{as_str(obj.get('session_id')) or self._session or '?'}"

    def handle_other(self, value: Any, line: str) -> list[Observation]:
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            # `--output-format json --verbose` prints every message as one JSON array.
            return [o for item in value for o in self.handle(item, line)]
        return super().handle_other(value, line)

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        kind = obj.get("type")
        if kind == "system":
            return self._system(obj, line)
        if kind == "assistant":
            return self._assistant(obj)
        if kind == "user":
            return self._user(obj)
        if kind == "stream_event":
            return self._stream(obj)
        if kind == "rate_limit_event":
            return self._rate_limit(as_dict(obj.get("rate_limit_info")))
        if kind == "result":
            return self._result(obj)
        return self.notice(obj, line)

    def _system(self, obj: dict[str, Any], line: str) -> list[Observation]:
        sub = obj.get("subtype")
        if sub == "init":
            self._session = as_str(obj.get("session_id")) or self._session
            version = obj.get("claude_code_version")
            parsed = _version(version)
            self._process_scoped = parsed is not None and parsed < RESTORED_TOTALS_SINCE
            return [observation("session", sessionId=self._session, model=obj.get("model"),
                                cwd=obj.get("cwd"), version=version)]
        if sub == "status":
            return [observation("status", status=str(obj.get("status") or "idle"))]
        if sub == "thinking_tokens":
            return []
        if sub == "compact_boundary":
            meta = as_dict(obj.get("compact_metadata") or obj.get("compactMetadata"))
            return [observation("compaction", trigger=meta.get("trigger"),
                                tokensBefore=meta.get("pre_tokens", meta.get("preTokens")))]
        if sub == "api_retry":
            error = as_str(obj.get("error"))
            status = obj.get("error_status")
            what = " ".join(str(p) for p in (error, f"(HTTP {status})" if status else None) if p)
            return self.retry(what or "API request failed", obj.get("attempt"),
                              obj.get("max_retries"), obj.get("retry_delay_ms"), status)
        if isinstance(sub, str) and (sub.startswith("task_") or sub.startswith("hook_")):
            return [observation(
                "status", status=sub.replace("_", "-"), callId=obj.get("tool_use_id"),
                taskId=obj.get("task_id"), hook=obj.get("hook_name"),
                description=obj.get("description") or obj.get("summary"),
                state=obj.get("status") or as_dict(obj.get("patch")).get("status"),
            )]
        return self.system_notice(obj, sub, line)

    def _assistant(self, obj: dict[str, Any]) -> list[Observation]:
        msg = self.shape.obj(obj.get("message"), "message", required=True)
        mid = as_str(msg.get("id"))
        parent = as_str(obj.get("parent_tool_use_id"))
        content = msg.get("content")
        if isinstance(content, str):  # shorthand for one text block (class docstring)
            content = [{"type": "text", "text": content}]
        content = self.shape.items(content, "message.content")
        out = self.revise(obj, mid, parent)
        if obj.get("error") or obj.get("is_api_error_message"):
            message = result_text(content).strip() or str(obj.get("error"))
            refused = msg.get("stop_reason") == "refusal"  # (its model refused the request)
            return out + self.problem(message, code="refusal" if refused else str(
                obj.get("error") or "api-error"))
        shape = self.shape
        for block in content:
            block = shape.obj(block, "a content block")
            btype = block.get("type")
            if btype == "text" and (text := shape.text(block.get("text"), "text block.text")):
                out.append(observation("text", text=text, messageId=mid, parentCallId=parent))
                if parent is None:
                    self._last_text, self._last_mid = text, mid
            elif btype == "thinking" and (
                    text := shape.text(block.get("thinking"), "thinking block.thinking")):
                out.append(observation("reasoning", text=text, messageId=mid,
                                       parentCallId=parent))
            elif btype in ("tool_use", "server_tool_use", "mcp_tool_use"):
                if call_id := shape.text(block.get("id"), f"{btype} block.id", required=True):
                    out += self.tool(call_id, str(block.get("name") or "?"),
                                     block.get("input"), messageId=mid, parentCallId=parent)
            elif "tool_use_id" in block and (call_id := shape.text(
                    block["tool_use_id"], f"{btype} block.tool_use_id", required=True)):
                out += self.tool_result(call_id, bool(block.get("is_error")),
                                        result_text(block.get("content")))
            else:  # a block it does not know: its line is kept `raw`
                shape.known(btype, SILENT_BLOCKS, "content block.type")
        usage = msg.get("usage")
        if mid and isinstance(usage, dict):
            out += self._snapshot(obj, mid, anthropic_usage(usage), msg.get("model"), False)
        return out

    def _snapshot(
        self, obj: Mapping[str, Any], mid: str, usage: Usage, model: Any, final: bool
    ) -> list[Observation]:
        usage = Usage(usage.input, usage.cached, usage.output, usage.complete and final)
        inc = self.tracker.snapshot(mid, usage)
        if inc is None:
            return []
        key = self._key(obj)
        self._counted[key] = self._counted.get(key, Usage()) + inc
        return [self.usage(inc, source="message", messageId=mid, model=model, sessionKey=key)]

    def _user(self, obj: dict[str, Any]) -> list[Observation]:
        parent = as_str(obj.get("parent_tool_use_id"))
        out: list[Observation] = []
        content = self.shape.obj(obj.get("message"), "message", required=True).get("content")
        if isinstance(content, str):  # the prompt echo (class docstring)
            return []
        for block in self.shape.items(content, "message.content"):
            block = self.shape.obj(block, "a content block")
            if block.get("type") == "tool_result" and (call_id := self.shape.text(
                    block.get("tool_use_id"), "tool_result block.tool_use_id", required=True)):
                text = result_text(block.get("content"))
                refused = self.refused(call_id, bool(block.get("is_error")), text)
                out += self.tool_result(call_id, bool(block.get("is_error")), text,
                                        ran=not refused, parentCallId=parent)
                if refused:
                    out += self.denied(call_id, None, "permission", text, parentCallId=parent)
        return out

    def _stream(self, obj: dict[str, Any]) -> list[Observation]:
        event = self.shape.obj(obj.get("event"), "event", required=True)
        etype = event.get("type")
        parent = as_str(obj.get("parent_tool_use_id"))
        if etype == "message_start":
            msg = as_dict(event.get("message"))
            if mid := as_str(msg.get("id")):
                self._streaming[parent] = mid
            usage = msg.get("usage")
            if not mid or not isinstance(usage, dict):
                return []
            return self._snapshot(obj, mid, anthropic_usage(usage), msg.get("model"), False)
        mid = self._streaming.get(parent)
        if etype == "content_block_delta":
            delta = self.shape.obj(event.get("delta"), "event.delta")
            if delta.get("type") == "text_delta" and (
                    text := self.shape.text(delta.get("text"), "text_delta.text")):
                return [observation("text-delta", text=text, messageId=mid,
                                    index=event.get("index"), parentCallId=parent)]
            return []
        if etype == "message_delta" and mid and isinstance(event.get("usage"), dict):
            return self._snapshot(obj, mid, anthropic_usage(event["usage"]), None, True)
        return []

    def _rate_limit(self, info: dict[str, Any]) -> list[Observation]:
        state = info.get("status")
        kind = info.get("rateLimitType")
        if state == "rejected":
            return self.problem(f"rate limit reached ({kind or 'unknown window'})",
                                code="rate-limit", resets_at=info.get("resetsAt"),
                                hint="rate limit", dedupe=False)
        return [observation("status", status="rate-limit", rateLimit=state, rateLimitType=kind,
                            resetAt=epoch_to_iso(info.get("resetsAt")),
                            utilization=info.get("utilization"))]

    def _result(self, obj: dict[str, Any]) -> list[Observation]:
        key = self._key(obj)
        out: list[Observation] = []
        usage = obj.get("usage")
        models = obj.get("modelUsage")
        parts = [
            anthropic_usage(usage) if isinstance(usage, dict) else None,
            anthropic_model_usage(models) if isinstance(models, dict) else None,
        ]
        found = [u for u in parts if u is not None]
        if found:
            total = found[0] if len(found) == 1 else found[0].maximum(found[1])
            if self._process_scoped and key not in self._results_seen:
                self.tracker.forget(key)
            first = self.tracker.baseline(key) is None
            self._results_seen.add(key)
            inc = self.tracker.cumulative(key, total)
            counted = self._counted.pop(key, Usage())
            exact = total.complete and not inc.below(counted)
            if first and not self._process_scoped and self.resumed(*RESUME_FLAGS):
                exact = False  # the total may include runs made elsewhere
            rest = inc.minus(counted)
            out.append(self.usage(Usage(rest.input, rest.cached, rest.output, exact),
                                  source="result", sessionKey=key, total=total.counts()))
        for denial in as_list(obj.get("permission_denials")):
            denial = as_dict(denial)
            out += self.denied(as_str(denial.get("tool_use_id")), as_str(denial.get("tool_name")),
                               "permission", input=denial.get("tool_input"))
        is_error = obj.get("is_error")
        if not isinstance(is_error, bool):
            is_error = obj.get("subtype") != "success"
        result = self.shape.text(obj.get("result"), "result")
        if is_error:
            errors = [str(e) for e in self.shape.items(obj.get("errors"), "errors") if e]
            message = "; ".join(errors) or result or str(obj.get("subtype") or "error")
            status = obj.get("api_error_status")
            code = _SUBTYPE_CODES.get(str(obj.get("subtype"))) or (
                f"api-error-{status}" if status else None)
            out += self.problem(message, code=code, hint=status)
        elif result and result.strip() != (self._last_text or "").strip():
            out.append(observation("text", text=result, final=True, source="result"))
        self._last_text = None
        out.append(observation(
            "completed", ok=not is_error, result=None if is_error else result,
            numTurns=obj.get("num_turns"), costUsd=obj.get("total_cost_usd"),
            durationMs=obj.get("duration_ms"), sessionId=obj.get("session_id"),
            reason=obj.get("terminal_reason") or obj.get("subtype"),
        ))
        return out
