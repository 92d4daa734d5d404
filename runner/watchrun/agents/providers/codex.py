"""Codex CLI `exec --json` lines (current and legacy `msg` envelope) to observations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from watchrun.agents.providers.base import Observation, as_dict, as_list, as_str, observation
from watchrun.agents.providers.codex_legacy import KIND_OPS, CodexLegacy, command_line
from watchrun.agents.providers.toolinfo import result_text
from watchrun.agents.providers.usage import UsageTracker

__all__ = ["CodexAdapter"]

TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search",
              "collab_tool_call")
"""Items that are tool calls: their `id` is the call id, and one without it is kept `raw`."""
CURRENT = ("thread.started", "turn.started", "turn.completed", "turn.failed", "error",
           "item.started", "item.updated", "item.completed", "item.plan.delta",
           "request_user_input")
"""The current format's events: a stream that printed one is no old-envelope stream."""
NOT_A_REPOSITORY = ("codex exec runs only inside a git repository: set the agent's `cwd` to a "
                    "git repository, or add --skip-git-repo-check to the agent's command")
"""What to do when codex refused to run outside a git repository (it said `Not inside a trusted
directory and --skip-git-repo-check was not specified.` on stderr, and exited 1). watchrun does
not add the flag by itself: which folders an agent may run in is the user's to decide."""


class CodexAdapter(CodexLegacy):
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
    `Reconnecting... waiting for network (…)`, `stream error: …; retrying 1/5 in 206ms…`) are
    `model-retry`, never failures; other
    `error` lines are failures (quota when they speak of rate or usage limits); `error` items
    are warnings. The call id of a tool is `item.id`; a declined command is `tool-denied`.
    The old envelope (≤ 0.43) may end without `task_complete`: a process that exits 0 after
    an agent message and no error (an `error` or `stream_error` that is no retry notice)
    completed with that message. That rule is for a stream of the old envelope only: once a
    current-format event (`CURRENT`) was seen it is off for the process, whatever
    old-looking line (a `msg` envelope, a typeless config or prompt line) came before or
    comes after, so a current turn without `turn.completed` is never `completed` by it.

    Outside a git repository codex exits 1 before its stream starts, unless given
    `--skip-git-repo-check`: the failure says so and what to do (`NOT_A_REPOSITORY`).
    """

    provider: ClassVar[str] = "codex"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._thread: str | None = None
        self._current = False

    def exit_problem(self, reason: str) -> list[Observation]:
        if "--skip-git-repo-check" in reason:
            return self.problem(f"{reason} ({NOT_A_REPOSITORY})", code="untrusted-workspace")
        return super().exit_problem(reason)

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        kind = obj.get("type")
        old = isinstance(obj.get("msg"), dict) or (kind is None and bool(
            {"prompt", "model", "sandbox"} & obj.keys()))
        self._current = self._current or kind in CURRENT
        self._legacy = (self._legacy or old) and not self._current
        if isinstance(obj.get("msg"), dict):
            return self._legacy_msg(obj["msg"], line)
        if kind is None:
            if "prompt" in obj:
                return []  # the old format's prompt echo
            if "model" in obj or "sandbox" in obj:
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

    def _item(self, phase: str, item: dict[str, Any], line: str) -> list[Observation]:
        itype = item.get("type")
        iid = as_str(item.get("id"))
        done = phase == "completed"
        if itype == "agent_message":
            text = self.shape.text(item.get("text"), "agent_message.text", required=done)
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
        if itype in TOOL_ITEMS:
            call = self.call_id(item.get("id"), f"{itype} item.id")
            return [] if call is None else self._tool_item(itype, call, item, done)
        if done or phase == "started":
            return self.unknown(line, f"item/{itype}")
        return []

    def _tool_item(self, itype: str, iid: str, item: dict[str, Any], done: bool
                   ) -> list[Observation]:
        if itype == "command_execution":
            command = command_line(item.get("command"))
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
        # collab_tool_call
        args = {"prompt": item.get("prompt"), "receivers": item.get("receiver_thread_ids")}
        out = self.tool(iid, str(item.get("tool") or "collab"), args)
        if done:
            states = {k: as_dict(v) for k, v in as_dict(item.get("agents_states")).items()}
            text = "\n".join(f"{k}: {v.get('status')} {v.get('message') or ''}".rstrip()
                             for k, v in states.items())
            out += self.tool_result(iid, item.get("status") == "failed", text)
        return out

    def _file_change(self, iid: str, item: dict[str, Any], done: bool) -> list[Observation]:
        changes = [c for c in as_list(item.get("changes")) if isinstance(c, dict)]
        described = ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes)
        out = self.tool(iid, "file_change", {"changes": changes, "description": described})
        if done:
            ok = item.get("status") not in ("failed", "declined")
            out += self.tool_result(iid, not ok, described, status=item.get("status"))
            if ok:
                out += [self.file_change(str(c.get("path")), KIND_OPS.get(str(c.get("kind")),
                                         "edit"), iid) for c in changes if c.get("path")]
        return out
