"""Claude Code's messages beside the conversation (tool progress and summaries, denials as they
happen, authentication, notices) to observations."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from watchrun.agents.providers.base import (
    JsonAdapter,
    Observation,
    as_dict,
    as_list,
    as_str,
    observation,
)
from watchrun.agents.providers.usage import UsageTracker

__all__ = ["DENIED", "ClaudeNotices"]

DENIED = re.compile(r"\A\s*(?:Claude requested permissions to \S.*?, but you haven't granted "
                    r"it yet|Permission to use \S.*? has been denied)")
"""Claude's sentences for a call its permissions refused (it never ran), which are the whole
result: "Claude requested permissions to use Bash (write to /x, read from /x), but you haven't
granted it yet.", "Permission to use Bash has been denied because …". A command's own error
("cat: x: Permission denied", "ERROR: requested permission to write …") is no refusal: it ran."""

_NOTICES = {"plugin_install": "name", "notification": "text",
            "elicitation_complete": "mcp_server_name", "files_persisted": ""}
"""System notices recorded as a `status` named after the subtype; this field is its
`description` (`files_persisted`: the files' names)."""


class ClaudeNotices(JsonAdapter):
    """The Agent SDK's messages that are not the conversation itself.

    `tool_progress` is a heartbeat while a tool runs (every few seconds): its line is output,
    so it keeps the turn from its idle timeout, but it is no record of its own. The beats of a
    call are folded into its `tool-result` (`heartbeats`: how many, `elapsedS`: the last
    elapsed time); those of a call that got no result are one `status` `tool-progress` per call
    at the end of the process, so every beat is counted in a record. A beat after its call's
    result (the stream's order) is of a call that has ended: it is no record.

    `system/permission_denied` (Claude Code ≥ 2.1.136) is a `tool-denied` at once, keyed by
    `tool_use_id` (the `result.permission_denials` entry of that call adds none), and the
    call's `tool_result` after it is the refusal: the call never ran, so it touched no file (a
    refused command is no `op: run`). A `tool_result` is also a refusal when its text is one
    in Claude's words (`DENIED`), for builds without that message. A notice without
    `tool_use_id` is of the one call of its tool that is still open (no result, or one held,
    below); when none or several are, its record has no `callId`, and it stands for the next
    denial of a call of that tool (its result's words, `permission_denials`), so one refusal
    is one record. The denial is authoritative: a call whose result came first is refused all
    the same, so the `op: run` of a failed call (`tool_result`) is held for one line and
    dropped when that line denies the call (the notice and result swapped); a denial later
    than that finds the `op: run` written.

    `tool_use_summary` is a `status` `tool-summary` (`description`, `callIds` of the calls it
    sums up), `prompt_suggestion` a `status` `prompt-suggestion` (the next prompt suggested),
    `auth_status` an `authenticating`/`authenticated` status or, with an `error`, a failure
    (`code: auth`); `system/local_command_output` is assistant `text` (`source:
    local-command`: a slash command's output); the `system` notices in `_NOTICES` are a
    `status` named after the subtype, and what they report failed (a plugin, a file not
    persisted) a `warning`. Any other type stays `raw` (`unknown-event`).
    """

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(tracker, argv)
        self._last_text: str | None = None
        """The last root assistant text (the result's answer repeats it)."""
        self._refused: set[str] = set()
        self._beats: dict[str, dict[str, Any]] = {}
        self._held: dict[str, list[Observation]] = {}
        """A failed call's `file-change` records, held until the next line (class docstring)."""
        self._line_before: dict[str, list[Observation]] = {}
        """Those the line before held, while a line is read."""
        self._unplaced: dict[str | None, int] = {}
        """Tool name: denial notices recorded without a call id, not yet matched to a call."""

    def parse(self, line: str) -> list[Observation]:
        """The base's, with the `file-change` records held by the line before first, unless
        this line denied their call."""
        self._line_before, self._held = self._held, {}
        out = super().parse(line)
        return [o for call_id, obs in self._line_before.items() if call_id not in self._refused
                for o in obs] + out

    def notice(self, obj: dict[str, Any], line: str) -> list[Observation]:
        """A top-level message of a type that is no part of the conversation."""
        kind = obj.get("type")
        if kind == "tool_progress":
            return self._progress(obj)
        if kind == "tool_use_summary":
            ids = [i for i in as_list(obj.get("preceding_tool_use_ids")) if isinstance(i, str)]
            return [observation("status", status="tool-summary",
                                description=as_str(obj.get("summary")), callIds=ids or None)]
        if kind == "prompt_suggestion":
            return [observation("status", status="prompt-suggestion",
                                description=as_str(obj.get("suggestion")))]
        if kind == "auth_status":
            if error := as_str(obj.get("error")):
                return self.problem(error, code="auth")
            said = "\n".join(str(o) for o in as_list(obj.get("output")))
            return [observation("status", status="authenticating" if obj.get("isAuthenticating")
                                is True else "authenticated", description=said or None)]
        return self.unknown(line, kind)

    def system_notice(self, obj: dict[str, Any], sub: Any, line: str) -> list[Observation]:
        """A `system` message of a subtype that is no part of the session's course."""
        if sub == "permission_denied":
            name = as_str(obj.get("tool_name"))
            call_id = as_str(obj.get("tool_use_id")) or self._open_call(name)
            if call_id:
                self._refused.add(call_id)
            else:
                self._unplaced[name] = self._unplaced.get(name, 0) + 1
            return super().denied(call_id, name, "permission", as_str(obj.get("message")),
                                  decisionReason=as_str(obj.get("decision_reason")),
                                  decisionReasonType=as_str(obj.get("decision_reason_type")))
        if sub == "local_command_output":
            text = self.shape.text(obj.get("content"), "local_command_output.content")
            if not text:
                return []
            self._last_text = text
            return [observation("text", text=text, source="local-command")]
        if isinstance(sub, str) and sub in _NOTICES:
            return self._notice(sub, obj)
        return self.unknown(line, f"system/{sub}")

    def _notice(self, sub: str, obj: dict[str, Any]) -> list[Observation]:
        name = sub.replace("_", "-")
        files = [as_dict(f) for f in as_list(obj.get("files"))]
        described = (", ".join(n for f in files if (n := as_str(f.get("filename")))) if
                     sub == "files_persisted" else as_str(obj.get(_NOTICES[sub])))
        out = [observation("status", status=name, description=described or None,
                           state=as_str(obj.get("status")) or as_str(obj.get("priority")))]
        failed = [as_dict(f) for f in as_list(obj.get("failed"))]
        problems = [as_str(obj.get("error")), *(
            f"{as_str(f.get('filename')) or '?'}: {as_str(f.get('error')) or 'failed'}"
            for f in failed)]
        return out + [observation("warning", message=p, code=name) for p in problems if p]

    def _progress(self, obj: dict[str, Any]) -> list[Observation]:
        call_id = self.call_id(obj.get("tool_use_id"), "tool_progress.tool_use_id")
        if call_id is None or call_id in self._results:
            return []
        beat = self._beats.setdefault(call_id, {
            "heartbeats": 0, "name": as_str(obj.get("tool_name")),
            "parentCallId": as_str(obj.get("parent_tool_use_id"))})
        beat["heartbeats"] += 1
        beat["elapsedS"] = obj.get("elapsed_time_seconds")
        return []

    def _open_call(self, name: str | None) -> str | None:
        """The one call of this tool still open (no result, or its records held), if one."""
        open_calls = [c for c, tool in self._tools.items() if tool == name and (
            c not in self._results or c in self._held or c in self._line_before)
            and c not in self._refused]
        return open_calls[0] if len(open_calls) == 1 else None

    def denied(self, call_id: str | None, name: str | None, reason: str,
               message: str | None = None, **extra: Any) -> list[Observation]:
        """The base's, but none for a call a notice without its id already denied."""
        tool = name or (self._tools.get(call_id) if call_id else None)
        if call_id and f"denied:{call_id}" not in self._results and self._unplaced.get(tool):
            self._unplaced[tool] -= 1
            self._results[f"denied:{call_id}"] = (True, 0)
            return []
        return super().denied(call_id, name, reason, message, **extra)

    def refused(self, call_id: str, is_error: bool, text: str) -> bool:
        """Whether a call's result is the permissions' refusal (the call never ran)."""
        return call_id in self._refused or (is_error and DENIED.search(text) is not None)

    def tool_result(
        self, call_id: str, is_error: bool, output: str, *, ran: bool = True, **extra: Any
    ) -> list[Observation]:
        """The base's, with the call's heartbeats folded in, and a failed call's `file-change`
        records held for one line (class docstring)."""
        first = call_id not in self._results
        beat = self._beats.pop(call_id, {}) if first else {}
        out = super().tool_result(call_id, is_error, output, ran=ran,
                                  heartbeats=beat.get("heartbeats"),
                                  elapsedS=beat.get("elapsedS"), **extra)
        if first and is_error:
            self._held[call_id] = [o for o in out if o.kind == "file-change"]
            out = [o for o in out if o.kind != "file-change"]
        return out

    def end(self, exit_code: int | None) -> list[Observation]:
        out = [observation("status", status="tool-progress", callId=call_id, name=beat["name"],
                           heartbeats=beat["heartbeats"], elapsedS=beat["elapsedS"],
                           parentCallId=beat["parentCallId"])
               for call_id, beat in self._beats.items()]
        self._beats.clear()
        held = [o for call_id, obs in self._held.items() if call_id not in self._refused
                for o in obs]
        self._held.clear()
        return held + out + super().end(exit_code)
