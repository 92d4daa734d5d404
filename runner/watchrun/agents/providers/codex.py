"""Codex CLI `exec --json` lines (current and legacy `msg` envelope) to observations."""

from __future__ import annotations

import json
import shlex
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
from watchrun.agents.providers.toolinfo import parse_retry, result_text
from watchrun.agents.providers.usage import Usage, UsageTracker, codex_usage

__all__ = ["CodexAdapter"]

_KIND_OPS = {"add": "write", "update": "edit", "delete": "delete"}
LEGACY_KEY = "codex-legacy"


def _command(value: Any) -> str:
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


class CodexAdapter(JsonAdapter):
    """Codex `exec --json`.

    Usage rule: `turn.completed.usage` is the thread's cumulative total (it includes every
    earlier turn, also those of resumed runs), so the emitted increment is the difference to
    the last total of that thread (`UsageTracker.cumulative`, key `codex:<thread_id>`); the
    record carries `total` and `sessionKey`. `input_tokens` already includes
    `cached_input_tokens`, and `output_tokens` includes reasoning, so they map directly.
    The old envelope's `token_count.info.total_token_usage` is cumulative for the process (no
    thread id exists there): key `codex-legacy`, forgotten at the first count of each process.

    A thread seen for the first time whose command resumes one (`exec resume`) may carry the
    totals of runs made elsewhere: that increment is `complete: false`.

    Status: `turn.completed` is ok, `turn.failed` is not. Retry notices (`Reconnecting... 1/5`,
    `stream error: …; retrying 1/5 in 206ms…`) are `model-retry`, never failures; other
    `error` lines are failures (quota when they speak of rate or usage limits); `error` items
    are warnings. The call id of a tool is `item.id`; a declined command is `tool-denied`.
    The old envelope (≤ 0.43) may end without `task_complete`: a process that exits 0 after
    an agent message and no error completed with that message.
    """

    provider: ClassVar[str] = "codex"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._thread: str | None = None
        self._final: str | None = None
        self._legacy_counted = False
        self._legacy = self._legacy_done = self._legacy_error = False
        self._patches: dict[str, dict[str, str]] = {}

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        if isinstance(obj.get("msg"), dict):
            self._legacy = True
            return self._legacy_msg(obj["msg"], line)
        kind = obj.get("type")
        if kind is None:
            if "prompt" in obj:
                self._legacy = True
                return []  # the old format's prompt echo
            if "model" in obj or "sandbox" in obj:
                self._legacy = True
                return [observation("status", status="config", model=obj.get("model"),
                                    sandbox=obj.get("sandbox"))]
            return self.unknown(line, None)
        if kind == "thread.started":
            self._thread = as_str(obj.get("thread_id")) or self._thread
            return [observation("session", sessionId=self._thread)]
        if kind == "turn.started":
            self._final = None
            self.reset_tools()
            return []
        if kind == "turn.completed":
            out: list[Observation] = []
            if isinstance(obj.get("usage"), dict):
                out.append(self._total(f"codex:{self._thread or '?'}", obj["usage"],
                                       fresh=not self.resumed("resume")))
            out.append(observation("completed", ok=True, result=self._final,
                                   sessionId=self._thread))
            return out
        if kind == "turn.failed":
            message = str(as_dict(obj.get("error")).get("message") or "turn failed")
            return [*self.problem(message),
                    observation("completed", ok=False, reason=message, sessionId=self._thread)]
        if kind == "error":
            return self._error(str(obj.get("message") or "error"))
        if kind in ("item.started", "item.updated", "item.completed"):
            return self._item(kind.split(".", 1)[1],
                              self.shape.obj(obj.get("item"), "item", required=True), line)
        if kind == "item.plan.delta":
            return []
        if kind == "request_user_input":
            return [observation("status", status="input-requested", callId=obj.get("call_id"))]
        return self.unknown(line, kind)

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

    def _item(self, phase: str, item: dict[str, Any], line: str) -> list[Observation]:
        itype = item.get("type")
        iid = str(item.get("id") or "?")
        done = phase == "completed"
        if itype == "agent_message":
            text = self.shape.text(item.get("text"), "agent_message.text")
            if not done or text is None:
                return []
            if self._final is None or item.get("phase") != "commentary":
                self._final = text
            return [observation("text", text=text, messageId=iid, phase=item.get("phase"))]
        if itype == "reasoning":
            text = self.shape.text(item.get("text"), "reasoning.text")
            return [observation("reasoning", text=text, messageId=iid)] if done and text else []
        if itype == "plan":
            return [observation("status", status="plan", text=item.get("text"))] if done else []
        if itype == "todo_list":
            items = [{"text": t.get("text"), "completed": bool(t.get("completed"))}
                     for t in as_list(item.get("items")) if isinstance(t, dict)]
            return [observation("status", status="todo", items=items)]
        if itype == "error":
            return [observation("warning", message=str(item.get("message") or "warning"))]
        if itype == "command_execution":
            command = _command(item.get("command"))
            out = self.tool(iid, "command_execution", {"command": command})
            if done:
                code = item.get("exit_code")
                declined = item.get("status") == "declined"
                failed = declined or item.get("status") == "failed" or code not in (0, None)
                out += self.tool_result(iid, failed, str(item.get("aggregated_output") or ""),
                                        ran=not declined, exitCode=code,
                                        status=item.get("status"))
                if declined:
                    out += self.denied(iid, "command_execution", "declined", command)
            return out
        if itype == "file_change":
            return self._file_change(iid, item, done)
        if itype == "mcp_tool_call":
            name = f"{item.get('server') or 'mcp'}.{item.get('tool') or '?'}"
            out = self.tool(iid, name, item.get("arguments"))
            if done:
                error = as_dict(item.get("error")).get("message")
                result = as_dict(item.get("result"))
                text = result_text(result.get("content")) if result else ""
                if not text and result.get("structured_content") is not None:
                    text = json.dumps(result["structured_content"])
                failed = bool(error) or item.get("status") == "failed"
                out += self.tool_result(iid, failed, str(error or text))
            return out
        if itype == "web_search":
            out = self.tool(iid, "web_search", {"query": item.get("query")})
            return out + (self.tool_result(iid, False, "") if done else [])
        if itype == "collab_tool_call":
            args = {"prompt": item.get("prompt"), "receivers": item.get("receiver_thread_ids")}
            out = self.tool(iid, str(item.get("tool") or "collab"), args)
            if done:
                states = {k: as_dict(v) for k, v in as_dict(item.get("agents_states")).items()}
                text = "\n".join(f"{k}: {v.get('status')} {v.get('message') or ''}".rstrip()
                                 for k, v in states.items())
                out += self.tool_result(iid, item.get("status") == "failed", text)
            return out
        if done or phase == "started":
            return self.unknown(line, f"item/{itype}")
        return []

    def _file_change(self, iid: str, item: dict[str, Any], done: bool) -> list[Observation]:
        changes = [c for c in as_list(item.get("changes")) if isinstance(c, dict)]
        described = ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes)
        out = self.tool(iid, "file_change", {"changes": changes, "description": described})
        if done:
            ok = item.get("status") not in ("failed", "declined")
            out += self.tool_result(iid, not ok, described, status=item.get("status"))
            if ok:
                out += [self.file_change(str(c.get("path")), _KIND_OPS.get(str(c.get("kind")),
                                         "edit"), iid) for c in changes if c.get("path")]
        return out

    # -- the old `{"id","msg"}` envelope ------------------------------------------------------

    def finish(self, exit_code: int | None) -> list[Observation]:
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
            text = self.shape.text(msg.get("message"), "agent_message.message")
            if text is None:
                return []
            self._final = text
            return [observation("text", text=text)]
        if kind == "exec_command_begin":
            return self.tool(str(msg.get("call_id")), "exec_command",
                             {"command": _command(msg.get("command")), "cwd": msg.get("cwd")})
        if kind == "exec_command_end":
            code = msg.get("exit_code")
            output = msg.get("aggregated_output")
            if not isinstance(output, str):
                output = "".join(str(msg.get(k) or "") for k in ("stdout", "stderr"))
            return self.tool_result(str(msg.get("call_id")), code not in (0, None), output,
                                    exitCode=code)
        if kind == "patch_apply_begin":
            changes = as_dict(msg.get("changes"))
            ops: dict[str, str] = {}
            for path, change in changes.items():
                change = as_dict(change)
                verb = str(change.get("type") or next(iter(change), "update")).lower()
                ops[path] = _KIND_OPS.get(verb, "edit")
            self._patches[str(msg.get("call_id"))] = ops
            return self.tool(str(msg.get("call_id")), "apply_patch", {"files": list(changes)})
        if kind == "patch_apply_end":
            return self._legacy_patch_end(msg)
        if kind == "mcp_tool_call_begin":
            inv = as_dict(msg.get("invocation"))
            name = f"{inv.get('server') or 'mcp'}.{inv.get('tool') or '?'}"
            return self.tool(str(msg.get("call_id")), name, inv.get("arguments"))
        if kind == "mcp_tool_call_end":
            result = as_dict(msg.get("result"))
            failed = "Err" in result
            ok = as_dict(result.get("Ok"))
            text = result.get("Err") if failed else result_text(ok.get("content"))
            return self.tool_result(str(msg.get("call_id")), failed, str(text or ""))
        if kind == "token_count":
            info = as_dict(msg.get("info"))
            totals = info.get("total_token_usage") if info else msg
            if not isinstance(totals, dict) or "input_tokens" not in totals:
                return []
            if not self._legacy_counted:
                self.tracker.forget(LEGACY_KEY)
                self._legacy_counted = True
            return [self._total(LEGACY_KEY, totals, fresh=True)]
        if kind == "stream_error":
            return self._error(str(msg.get("message") or "stream error; retrying"))
        if kind == "error":
            message = str(msg.get("message") or "error")
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

    def _legacy_patch_end(self, msg: dict[str, Any]) -> list[Observation]:
        call_id = str(msg.get("call_id"))
        ok = bool(msg.get("success", True))
        text = "".join(str(msg.get(k) or "") for k in ("stdout", "stderr"))
        out = self.tool_result(call_id, not ok, text)
        ops = self._patches.pop(call_id, {})
        if ok:
            out += [self.file_change(path, op, call_id) for path, op in ops.items()]
        return out
