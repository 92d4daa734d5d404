"""OpenCode `run --format json` fixtures through OpenCodeAdapter."""

from __future__ import annotations

import json

from adapter_replay import FIXTURES, Replay, replay, replay_lines

from watchrun.agents.providers.opencode import OpenCodeAdapter

SESSION = "ses_494719016ffe85dkDMj0FPRbHK"


def run(name: str) -> Replay:
    return replay(OpenCodeAdapter(), "opencode", name)


def test_tool_then_text_sums_steps() -> None:
    r = run("tool_then_text.jsonl")
    assert r.of("session") == [{"sessionId": SESSION}]
    assert r.tools == [("r9bQWsNLvOrJGIOz", "bash")]
    assert r.results == {"r9bQWsNLvOrJGIOz": False}
    assert r.of("tool-result")[0]["preview"] == "hello\n"
    assert r.files == [("echo hello", "run")]
    assert r.final_text == "```\nhello\n```"
    # step 1: 21772 in, 110 out; step 2: 671 in + 21415 cache read, 8 out
    assert r.usage.counts() == {"input": 21772 + 671 + 21415, "cached": 21415,
                                "output": 110 + 8}
    assert [u["costUsd"] for u in r.of("usage")] == [0, 0.001]
    assert r.completed == [{"ok": True, "result": "```\nhello\n```", "sessionId": SESSION,
                            "reason": "stop"}]


def test_error_after_finish_fails_the_turn() -> None:
    r = run("tool_text_finish_then_error.jsonl")
    assert r.tools == [("01J3Z2K7S0XQ9Y8W7V6U5T4R3S", "bash")]
    assert r.results == {"01J3Z2K7S0XQ9Y8W7V6U5T4R3S": False}
    assert r.of("tool-result")[0]["exitCode"] == 0
    assert r.final_text == "Found ripgrep 13.0.0."
    assert r.of("failure") == [{"message": "Upstream timeout while calling provider",
                                "code": "APIError"}]
    assert [c["ok"] for c in r.completed] == [False]
    # 128 output + 64 reasoning
    assert r.usage.counts() == {"input": 534, "cached": 0, "output": 192}


def test_rate_limit_error_is_a_quota() -> None:
    r = run("api_error.jsonl")
    assert r.of("quota") == [{"message": "Rate limit exceeded", "code": "APIError"}]
    assert r.texts == [] and r.of("usage") == []
    assert r.completed == [{"ok": False, "sessionId": "ses_error123",
                            "reason": "Rate limit exceeded"}]


def test_step_finish_without_reason_still_completes() -> None:
    r = run("step_finish_without_reason.jsonl")
    assert r.final_text == "All done."
    assert r.usage.counts() == {"input": 12, "cached": 0, "output": 3}
    assert r.completed[0]["ok"] is True


def test_reasoning_errored_tool_and_done() -> None:
    r = run("reasoning_tool_error_done.documented.jsonl")
    assert [x["text"] for x in r.of("reasoning")] == [
        "The user wants the command output echoed back."]
    assert r.tools == [("doc_call_err_1", "read")]
    assert r.results == {"doc_call_err_1": True}
    assert r.of("tool-result")[0]["preview"] == "File not found: /nonexistent.txt"
    assert r.files == []  # the read failed
    assert r.completed == [{"ok": True, "result": "```\nhello\n```", "sessionId": SESSION,
                            "reason": "idle"}]  # from `done`, not repeated at the end


def test_stream_cut_mid_step_has_no_completed() -> None:
    r = replay_lines(OpenCodeAdapter(), ['{"type":"step_start","sessionID":"s","part":{}}'])
    assert r.of("session") == [{"sessionId": "s"}] and r.completed == []


def test_bash_with_nonzero_exit_is_an_error_result() -> None:
    part = {"type": "tool", "callID": "c1", "tool": "bash", "state": {
        "status": "completed", "input": {"command": "false"}, "output": "",
        "metadata": {"exit": 1}}}
    r = replay_lines(OpenCodeAdapter(), [json.dumps({"type": "tool_use", "part": part})])
    # the command failed, but it ran: it is in the files touched as `run`
    assert r.results == {"c1": True} and r.files == [("false", "run")]


def test_ui_warning_lines_are_output() -> None:
    line = "permission requested: bash (rm -rf build); auto-rejecting"
    (obs,) = OpenCodeAdapter().parse(line)
    assert obs.kind == "output" and obs.fields["text"] == line


def test_auto_rejected_permissions_are_denied_calls() -> None:
    r = run("documented_permission_rejected.documented.jsonl")
    rejected = "The user rejected permission to use this specific tool call."
    assert r.of("tool-denied") == [
        {"callId": "call_rm", "name": "bash", "reason": "rejected", "message": rejected},
        # `done.rejected` adds only the permission not already reported by a tool part
        {"name": "webfetch", "reason": "rejected",
         "message": "permission 'webfetch' was rejected (non-interactive run)"}]
    assert r.results == {"call_rm": True} and r.files == []  # it never ran
    assert r.completed[0]["ok"] is True
    assert r.completed[0]["result"] == "I could not delete build/: the permission was rejected."


def test_tool_parts_without_an_id_are_each_kept_raw_never_dropped() -> None:
    """Explorer streams F2: a completed tool part without `callID` or `id` was call "?", and the
    next one (an edit) was dropped as a repeat of it, its file change too. Each is kept `raw`."""
    adapter = OpenCodeAdapter()
    out = [o for tool, path in (("bash", None), ("edit", "/x/y.py")) for o in adapter.parse(
        json.dumps({"type": "tool_use", "part": {"type": "tool", "tool": tool, "state": {
            "status": "completed", "input": {"filePath": path} if path else {"command": "ls"},
            "output": "ok"}}}))]
    assert [o.kind for o in out] == ["raw", "raw"]
    assert "/x/y.py" in str(out[1].fields["value"])
    assert out[1].fields["error"] == "tool part.callID: expected a call id, got null"


def test_a_text_part_without_its_text_is_kept_raw() -> None:
    """Explorer streams2 F1: a `text` part whose text sat under another key left no record and
    the turn ended done with an empty reply. Its line is kept `raw`; an empty text is none."""
    line = json.dumps({"type": "text", "part": {"type": "text", "content": "THE ANSWER"}})
    assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
            for o in OpenCodeAdapter().parse(line)] == [
        ("raw", line, "part.text: expected a string, got null")]
    assert OpenCodeAdapter().parse(json.dumps({"type": "text", "part": {"text": ""}})) == []


def test_a_rejected_call_without_done_as_opencode_1_18_33_prints_it() -> None:
    """explore-clis F10: opencode 1.18.33's `--format json` writes no `done` (only
    step_start, step_finish, text, reasoning, tool_use, error); its rejection notice is a
    plain stderr line. The rejected call is still a denial, and the last `step_finish` ends
    the turn."""
    path = FIXTURES / "opencode" / "documented_permission_rejected.documented.jsonl"
    lines = [x for x in path.read_text().splitlines() if '"type":"done"' not in x]
    r = replay_lines(OpenCodeAdapter(), lines, stderr=[
        "! permission requested: bash (rm -rf build); auto-rejecting"])
    assert [(d.get("callId"), d["name"]) for d in r.of("tool-denied")] == [("call_rm", "bash")]
    assert r.completed == [{"ok": True, "sessionId": "ses_4e1f2a9b7ffeAbCdEfGhIjKl",
                            "result": "I could not delete build/: the permission was rejected.",
                            "reason": "stop"}]
