"""Codex CLI's old `{"id","msg"}` envelope (≤ 0.43) to observations, and what the current
`exec --json` lines share with it: a command shown as one line, errors and retry notices, thread
totals as increments, the final message."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from watchrun.agents.providers.base import JsonAdapter, Observation, as_dict, as_str, observation
from watchrun.agents.providers.toolinfo import parse_retry, result_text
from watchrun.agents.providers.usage import Usage, UsageTracker, codex_usage

__all__ = ["KIND_OPS", "CodexLegacy", "command_line"]

KIND_OPS = {"add": "write", "update": "edit", "delete": "delete"}
LEGACY_KEY = "codex-legacy"
CALL_KINDS = ("exec_command_begin", "exec_command_end", "patch_apply_begin", "patch_apply_end",
              "mcp_tool_call_begin", "mcp_tool_call_end")
"""A tool call's messages, whose `call_id` is the call id (one without it is kept `raw`)."""


def command_line(value: Any) -> str:
    """argv as one command line; `bash -lc CMD` shows as CMD."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if len(value) == 3 and value[1] in ("-lc", "-c") and value[0].rsplit("/", 1)[-1] in (
            "bash", "sh", "zsh",
        ):
            return str(value[2])
        return shlex.join(value)
    return ""


class CodexLegacy(JsonAdapter):
    """The old envelope's messages (`_legacy_msg`; `finish` for a run that ends without
    `task_complete`) and what both envelopes use (the final message, `_error`, `_total`);
    `CodexAdapter` reads the current lines on top of it."""

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._final: str | None = None
        self._legacy_counted = False
        self._legacy = self._legacy_done = self._legacy_error = False
        self._patches: dict[str, dict[str, str]] = {}

    def _error(self, message: str) -> list[Observation]:
        retry = parse_retry(message)
        if retry is not None:
            reason, attempt, most, delay = retry
            return self.retry(reason, attempt, most, delay)
        return self.problem(message)

    def _total(self, key: str, usage: dict[str, Any], fresh: bool) -> Observation:
        """The increment of a thread-cumulative total; `fresh`: a first-seen key counts from
        zero in this process."""
        total = codex_usage(usage)
        first = self.tracker.baseline(key) is None
        inc = self.tracker.cumulative(key, total)
        if first and not fresh:
            inc = Usage(inc.input, inc.cached, inc.output, False)
        return self.usage(inc, source="turn", sessionKey=key, total=total.counts())

    def end(self, exit_code: int | None) -> list[Observation]:
        if (self._legacy and not self._legacy_done and not self._legacy_error
                and exit_code == 0 and self._final is not None):
            self._legacy_done = True
            return [observation("completed", ok=True, result=self._final,
                                reason="exit 0 after an agent message (no task_complete)")]
        return []

    def _legacy_msg(self, msg: dict[str, Any], line: str) -> list[Observation]:
        kind = msg.get("type")
        if kind in ("task_started", "agent_reasoning_section_break", "exec_command_output_delta",
                    "agent_reasoning_delta", "patch_apply_begin_delta"):
            return []
        if kind == "agent_reasoning":
            text = self.shape.text(msg.get("text"), "agent_reasoning.text")
            return [observation("reasoning", text=text)] if text else []
        if kind == "agent_message_delta":
            delta = self.shape.text(msg.get("delta"), "agent_message_delta.delta")
            return [observation("text-delta", text=delta)] if delta else []
        if kind == "agent_message":
            text = self.shape.text(msg.get("message"), "agent_message.message", required=True)
            if text is None:
                return []
            self._final = text
            return [observation("text", text=text)]
        if kind in CALL_KINDS:
            call = self.call_id(msg.get("call_id"), f"{kind}.call_id")
            return [] if call is None else self._legacy_call(kind, call, msg)
        if kind == "token_count":
            info = as_dict(msg.get("info"))
            totals = info.get("total_token_usage") if info else msg
            if not isinstance(totals, dict) or "input_tokens" not in totals:
                return []
            if not self._legacy_counted:
                self.tracker.forget(LEGACY_KEY)
                self._legacy_counted = True
            return [self._total(LEGACY_KEY, totals, fresh=True)]
        if kind in ("stream_error", "error"):  # an error unless a retry notice (`_error`)
            message = str(msg.get("message") or ("stream error; retrying"
                                                  if kind == "stream_error" else "error"))
            self._legacy_error = self._legacy_error or parse_retry(message) is None
            return self._error(message)
        if kind == "task_complete":
            self._legacy_done = True
            last = as_str(msg.get("last_agent_message"))
            out: list[Observation] = []
            if last and last != self._final:
                out.append(observation("text", text=last, final=True, source="task_complete"))
                self._final = last
            return [*out, observation("completed", ok=True, result=self._final)]
        return self.unknown(line, f"msg/{kind}")

    def _legacy_call(self, kind: str, call: str, msg: dict[str, Any]) -> list[Observation]:
        if kind == "exec_command_begin":
            return self.tool(call, "exec_command",
                             {"command": command_line(msg.get("command")), "cwd": msg.get("cwd")})
        if kind == "exec_command_end":
            code = msg.get("exit_code")
            output = msg.get("aggregated_output")
            if not isinstance(output, str):
                output = "".join(str(msg.get(k) or "") for k in ("stdout", "stderr"))
            return self.tool_result(call, code not in (0, None), output, exitCode=code)
        if kind == "patch_apply_begin":
            changes = as_dict(msg.get("changes"))
            ops: dict[str, str] = {}
            for path, change in changes.items():
                change = as_dict(change)
                verb = str(change.get("type") or next(iter(change), "update")).lower()
                ops[path] = KIND_OPS.get(verb, "edit")
            self._patches[call] = ops
            return self.tool(call, "apply_patch", {"files": list(changes)})
        if kind == "patch_apply_end":
            return self._legacy_patch_end(call, msg)
        if kind == "mcp_tool_call_begin":
            inv = as_dict(msg.get("invocation"))
            name = f"{inv.get('server') or 'mcp'}.{inv.get('tool') or '?'}"
            return self.tool(call, name, inv.get("arguments"))
        # mcp_tool_call_end
        result = as_dict(msg.get("result"))
        failed = "Err" in result
        ok = as_dict(result.get("Ok"))
        text = result.get("Err") if failed else result_text(ok.get("content"))
        return self.tool_result(call, failed, str(text or ""))

    def _legacy_patch_end(self, call_id: str, msg: dict[str, Any]) -> list[Observation]:
        ok = bool(msg.get("success", True))
        text = "".join(str(msg.get(k) or "") for k in ("stdout", "stderr"))
        out = self.tool_result(call_id, not ok, text)
        ops = self._patches.pop(call_id, {})
        if ok:
            out += [self.file_change(path, op, call_id) for path, op in ops.items()]
        return out
