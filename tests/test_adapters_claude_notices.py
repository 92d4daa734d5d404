"""Claude Code's messages beside the conversation through ClaudeAdapter: tool heartbeats and
summaries, denials as they happen, auth and system notices."""

from __future__ import annotations

import json

import pytest
from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.providers.claude import ClaudeAdapter


def run(name: str) -> Replay:
    return replay(ClaudeAdapter(), "claude", name)


def claude_line(obj: dict[str, object]) -> str:
    return json.dumps(obj)


def test_sdk_notices_of_a_current_run() -> None:
    """Explorer providers F2: `tool_progress`, `tool_use_summary`, `system/permission_denied`
    and `prompt_suggestion` were each a `raw` unknown-event (a heartbeat every few seconds
    while a tool ran), and a denial was a `tool-denied` only once `result` came."""
    r = run("v2.1.290_sdk_notices.documented.jsonl")
    assert r.of("raw") == []
    assert [(x["callId"], x.get("heartbeats"), x.get("elapsedS")) for x in r.of("tool-result")
            ] == [("toolu_01", 2, 6), ("toolu_02", None, None)]
    assert r.of("tool-denied") == [{  # at once, and once: permission_denials names it again
        "callId": "toolu_02", "name": "Write", "reason": "permission",
        "message": "Permission to use Write has been denied.",
        "decisionReason": "dontAsk mode", "decisionReasonType": "mode"}]
    assert r.files == [("make test", "run")]
    statuses = [x for x in r.of("status") if x["status"] in ("tool-summary", "prompt-suggestion")]
    assert statuses == [
        {"status": "tool-summary", "description": "Ran the test suite", "callIds": ["toolu_01"]},
        {"status": "prompt-suggestion", "description": "Fix the permission and retry"}]
    assert r.completed[0]["result"] == "Tests pass; I could not write x.txt."


_BASH = claude_line({"type": "assistant", "session_id": "s", "message": {
    "id": "m1", "role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "rm -rf x"}}]}})
_DENIAL = claude_line({"type": "system", "subtype": "permission_denied", "tool_name": "Bash",
                       "tool_use_id": "t1", "message": "Blocked by a PreToolUse hook"})
_END = claude_line({"type": "result", "subtype": "success", "is_error": False, "session_id": "s",
                    "result": "done", "permission_denials": [
                        {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {}}]})


def _bash_result(text: str) -> str:
    return claude_line({"type": "user", "session_id": "s", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": text}]}})


DONT_ASK = ("Permission to use Bash has been denied because Claude Code is running in don't ask "
            "mode. IMPORTANT: You *may* attempt to accomplish this action using other tools")


@pytest.mark.parametrize(("lines", "denied", "files"), [
    # the structural notice: whatever its result says, the call never ran
    ([_BASH, _DENIAL, _bash_result("Blocked by a PreToolUse hook"), _END],
     "Blocked by a PreToolUse hook", []),
    # no notice (builds before 2.1.136): Claude's words for a refusal
    ([_BASH, _bash_result(DONT_ASK), _END], DONT_ASK, []),
    # a command that ran and failed on a file's mode is no refusal
    ([_BASH, _bash_result("rm: cannot remove 'x': Permission denied"),
      claude_line({"type": "result", "subtype": "success", "is_error": False,
                   "session_id": "s", "result": "done"})], None, [("rm -rf x", "run")]),
])  # fmt: skip
def test_a_denied_command_never_ran(lines: list[str], denied: str | None,
                                    files: list[tuple[str, str]]) -> None:
    """Explorer providers F2: "Permission to use Bash has been denied …" did not match the
    refusal wording, so a denied command was a `file-change {op: run}` as if it had run."""
    r = replay_lines(ClaudeAdapter(), lines)
    assert [x.get("message") for x in r.of("tool-denied")] == ([denied] if denied else [])
    assert r.results == {"t1": True} and r.files == files


def test_heartbeats_of_a_call_without_a_result_are_counted_at_the_end() -> None:
    beat = {"type": "tool_progress", "tool_use_id": "t1", "tool_name": "Bash",
            "parent_tool_use_id": None, "session_id": "s"}
    r = replay_lines(ClaudeAdapter(), [_BASH, *(claude_line(beat | {"elapsed_time_seconds": s})
                                                 for s in (3, 6, 9))], exit_code=None)
    assert r.of("status") == [{"status": "tool-progress", "callId": "t1", "heartbeats": 3,
                               "name": "Bash", "elapsedS": 9}]


@pytest.mark.parametrize(("line", "records"), [
    ({"type": "auth_status", "isAuthenticating": True, "output": ["Opening browser"]},
     [("status", {"status": "authenticating", "description": "Opening browser"})]),
    ({"type": "auth_status", "isAuthenticating": False, "output": [], "error": "login expired"},
     [("failure", {"message": "login expired", "code": "auth"})]),
    ({"type": "system", "subtype": "local_command_output", "content": "Total cost: $0.01"},
     [("text", {"text": "Total cost: $0.01", "source": "local-command"})]),
    ({"type": "system", "subtype": "plugin_install", "status": "failed", "name": "lint",
      "error": "no such plugin"},
     [("status", {"status": "plugin-install", "description": "lint", "state": "failed"}),
      ("warning", {"message": "no such plugin", "code": "plugin-install"})]),
    ({"type": "system", "subtype": "files_persisted", "files": [{"filename": "a.txt",
      "file_id": "f1"}], "failed": [{"filename": "b.txt", "error": "too big"}]},
     [("status", {"status": "files-persisted", "description": "a.txt"}),
      ("warning", {"message": "b.txt: too big", "code": "files-persisted"})]),
    ({"type": "system", "subtype": "notification", "key": "k", "text": "Update ready",
      "priority": "low"},
     [("status", {"status": "notification", "description": "Update ready", "state": "low"})]),
    ({"type": "system", "subtype": "elicitation_complete", "mcp_server_name": "db",
      "elicitation_id": "e1"},
     [("status", {"status": "elicitation-complete", "description": "db"})]),
    ({"type": "system", "subtype": "brand_new", "x": 1}, [("raw", "system/brand_new")]),
    ({"type": "brand_new", "x": 1}, [("raw", "brand_new")]),
])  # fmt: skip
def test_sdk_messages_beside_the_conversation(line: dict[str, object],
                                              records: list[tuple[str, object]]) -> None:
    """Each known one is a record of what it says; any other type stays `raw`: never dropped."""
    out = ClaudeAdapter().parse(json.dumps(line))
    assert [(o.kind, o.fields["type"] if o.kind == "raw" else dict(o.fields)) for o in out] == \
        records


def _call(call_id: str) -> str:
    return claude_line({"type": "assistant", "session_id": "s", "message": {
        "id": f"m-{call_id}", "role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": "Bash",
             "input": {"command": "rm -rf x"}}]}})


def _result_of(call_id: str, text: str, is_error: bool = True) -> str:
    return claude_line({"type": "user", "session_id": "s", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "is_error": is_error, "content": text}]}})


def _beat(call_id: str, elapsed: int) -> str:
    return claude_line({"type": "tool_progress", "tool_use_id": call_id, "tool_name": "Bash",
                        "parent_tool_use_id": None, "elapsed_time_seconds": elapsed,
                        "session_id": "s"})


def _notice(call_id: str | None, message: str = "Permission to use Bash has been denied.") -> str:
    return claude_line({"type": "system", "subtype": "permission_denied", "tool_name": "Bash",
                        "message": message, "session_id": "s"}
                       | ({"tool_use_id": call_id} if call_id else {}))


def _end(*denied: str) -> str:
    return claude_line({"type": "result", "subtype": "success", "is_error": False,
                        "session_id": "s", "result": "done", "permission_denials": [
                            {"tool_name": "Bash", "tool_use_id": c, "tool_input": {}}
                            for c in denied]})


_REFUSAL = "Permission to use Bash has been denied."


@pytest.mark.parametrize(("lines", "records"), [
    # a heartbeat after its call's result is of a call that has ended: no "got no result"
    ([_call("t1"), _beat("t1", 2), _result_of("t1", "ok", False), _beat("t1", 4), _end()],
     [("tool-result", "t1", 1), ("file-change", "t1", "run")]),
    # a notice without tool_use_id is of the one open call of its tool: one record, with it
    ([_call("t1"), _notice(None), _result_of("t1", _REFUSAL), _end("t1")],
     [("tool-denied", "t1", _REFUSAL), ("tool-result", "t1", None)]),
    # ... and of no call when several are open, standing for the next denial of that tool
    ([_call("t1"), _call("t2"), _notice(None), _result_of("t1", _REFUSAL),
      _result_of("t2", "done", False), _end("t1")],
     [("tool-denied", None, _REFUSAL), ("tool-result", "t1", None), ("tool-result", "t2", None),
      ("file-change", "t2", "run")]),
    # the notice after the call's result (the stream swapped them): still refused, no op: run
    ([_call("t1"), _result_of("t1", "blocked by hook"), _notice("t1", "Blocked by a hook"),
      _end("t1")],
     [("tool-result", "t1", None), ("tool-denied", "t1", "Blocked by a hook")]),
    ([_call("t1"), _result_of("t1", "blocked by hook"), _notice(None, "Blocked by a hook"),
      _end("t1")],
     [("tool-result", "t1", None), ("tool-denied", "t1", "Blocked by a hook")]),
    # a failed command no denial follows ran: its op: run, after the next line or at the end
    ([_call("t1"), _result_of("t1", "rm: x: Is a directory")],
     [("tool-result", "t1", None), ("file-change", "t1", "run")]),
])  # fmt: skip
def test_interleavings_record_each_call_once(lines: list[str],
                                             records: list[tuple[str, str | None, object]]) -> None:
    """Explorer fresh5 F6: a beat after the result was a false "got no result" status, a
    notice without an id or after the result a second record, or an `op: run` of a refused call."""
    r = replay_lines(ClaudeAdapter(), lines)
    seen = [(o.kind, o.fields.get("callId"), o.fields.get("heartbeats") if o.kind == "tool-result"
             else o.fields.get("op") if o.kind == "file-change" else o.fields.get("message"))
            for o in r.obs if o.kind in ("tool-result", "tool-denied", "file-change", "status")]
    assert seen == records


@pytest.mark.parametrize(("text", "refused"), [
    # Claude's own sentences, the whole result
    ("Claude requested permissions to use Bash, but you haven't granted it yet.", True),
    ("Claude requested permissions to write to /w/x.txt, but you haven't granted it yet.", True),
    ("Claude requested permissions to read from /w/a.md, but you haven't granted it yet.", True),
    ("Permission to use Bash has been denied.", True),
    (DONT_ASK, True),
    # a command's own error text: the command ran
    ("ERROR: requested permission to write is not granted by role", False),
    ("rm: cannot remove 'x': Permission denied", False),
    ("remote: Permission to org/repo.git denied to bob.", False),
    ("psql: error: permission denied for table users", False),
    ("Error: Permission to use the camera has been denied by policy", False),
    ("curl: (22) The requested URL returned error: 403 (you haven't granted it)", False),
    ("log: Claude requested permissions to use Bash, but you haven't granted it yet.", False),
])  # fmt: skip
def test_only_claudes_sentences_are_a_refusal(text: str, refused: bool) -> None:
    """Explorer fresh5 F6: `requested permissions? to` matched a command's own error, so a
    command that ran was a refusal and its `op: run` was dropped."""
    r = replay_lines(ClaudeAdapter(), [_call("t1"), _result_of("t1", text)])
    assert (len(r.of("tool-denied")), r.files) == ((1, []) if refused else
                                                   (0, [("rm -rf x", "run")]))
