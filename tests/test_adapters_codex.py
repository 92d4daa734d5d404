"""Codex `exec --json` fixtures (current and legacy envelope) through CodexAdapter."""

from __future__ import annotations

import json

from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.providers import UsageTracker
from watchrun.agents.providers.codex import CodexAdapter


def run(name: str, tracker: UsageTracker | None = None) -> Replay:
    return replay(CodexAdapter(tracker), "codex", name)


def test_docs_sample() -> None:
    r = run("docs_exec_sample.jsonl")
    assert r.of("session") == [{"sessionId": "0199a213-81c0-7800-8aa1-bbab2a035a53"}]
    assert [x["text"] for x in r.of("reasoning")] == [
        "**Searching for README files**", "**Checking repository root for README**"]
    assert r.tools == [("item_1", "command_execution")]
    assert r.of("tool")[0]["input"] == {"command": "bash -lc ls"}
    assert r.results == {"item_1": False}
    assert r.of("tool-result")[0]["output"].startswith("2025-09-11\nAGENTS.md\n")
    assert r.files == [("bash -lc ls", "run")]
    assert r.final_text == "Yep — there\u2019s a `README.md` in the repository root."
    # input_tokens already includes cached_input_tokens: not added twice.
    assert r.usage.counts() == {"input": 24763, "cached": 24448, "output": 122}
    assert r.completed == [{"ok": True, "result": r.final_text,
                            "sessionId": "0199a213-81c0-7800-8aa1-bbab2a035a53"}]


def test_real_cat_file() -> None:
    r = run("real_v0.46_cat_file.jsonl")
    assert r.tools == [("item_1", "command_execution")]
    (result,) = r.of("tool-result")
    assert result["output"] == "console.log('Hello World');\n" and result["exitCode"] == 0
    assert r.final_text is not None and r.final_text.startswith("`test.js` simply contains")
    assert r.usage.counts() == {"input": 6087, "cached": 5120, "output": 204}
    assert r.completed[0]["ok"] is True


def test_real_simple_answer() -> None:
    r = run("real_v0.46_simple_answer.jsonl")
    assert r.texts == ["4"] and r.tools == []
    assert r.usage.counts() == {"input": 2946, "cached": 0, "output": 7}


def test_real_long_session() -> None:
    r = run("real_v0.7x_session_shortened.jsonl")
    ids = [f"item_{n}" for n in (*range(14), 17)]
    assert r.tools == [(i, "command_execution") for i in ids]
    assert r.results == dict.fromkeys(ids, False)
    assert len(r.of("reasoning")) == 3
    assert r.final_text is not None
    assert r.final_text.startswith("- This is a small Python CLI (`takopi`)")
    assert r.usage.counts() == {"input": 76296, "cached": 57728, "output": 2682}
    # the shortened aggregated_output is kept as the fixture has it (under 4000 chars)
    assert "…[fixture: 22990 more chars removed]" in r.of("tool-result")[2]["output"]


def test_auth_failure_after_retries() -> None:
    r = run("real_2025-11_auth_failure_401.jsonl")
    retries = r.of("status")
    assert [s["message"] for s in retries] == [f"Reconnecting... {n}/5" for n in range(1, 6)]
    assert {s["status"] for s in retries} == {"retrying"}
    message = ("exceeded retry limit, last status: 401 Unauthorized, "
               "request id: 99cdbf27ee0ea01a-AMS")
    # the error line and turn.failed repeat one message: one failure
    assert r.of("failure") == [{"message": message, "code": "auth"}]
    assert [c["ok"] for c in r.completed] == [False]
    assert r.of("usage") == []


def test_all_item_types() -> None:
    r = run("takopi_handwritten_all_item_types.jsonl")
    assert r.tools == [
        ("item_1", "command_execution"), ("item_2", "command_execution"),
        ("item_3", "file_change"), ("item_4", "file_change"),
        ("item_5", "github.search_issues"), ("item_6", "github.search_issues"),
        ("item_7", "web_search"),
    ]
    assert r.results == {"item_1": False, "item_2": True, "item_3": False, "item_4": True,
                         "item_5": False, "item_6": True, "item_7": False}
    outputs = {x["callId"]: x["output"] for x in r.of("tool-result")}
    assert outputs["item_5"] == "Found 3 matches." and outputs["item_6"] == "tool timeout"
    # a failed file_change touches nothing; a failed command is not a "run"
    assert r.files == [("pytest -q", "run"), ("src/compute_answer.py", "edit"),
                       ("README.md", "write")]
    todos = [s for s in r.of("status") if s["status"] == "todo"]
    assert [sum(i["completed"] for i in t["items"]) for t in todos] == [0, 1, 3]
    assert {"status": "warning", "message": "command output truncated"} in r.of("status")
    assert r.texts == ["Updated src/compute_answer.py and tests pass."]
    assert [c["ok"] for c in r.completed] == [True, False]
    assert [f["message"] for f in r.of("failure")] == [
        "Aborted: required dependency `npm` is missing; cannot continue.",
        "codex exec exited non-zero after turn.failed"]
    assert r.usage.counts() == {"input": 1840, "cached": 256, "output": 732}


def test_phase_collab_and_unknown_item() -> None:
    r = run("takopi_handwritten_phase_and_unknown.jsonl")
    assert [(t["text"], t["phase"]) for t in r.of("text")] == [
        ("Inspecting repository state.", "commentary"),
        ("Implemented the requested changes.", "final_answer")]
    assert r.tools == [("item_3", "spawn_agent")] and r.results == {"item_3": False}
    (raw,) = r.of("raw")
    assert raw["reason"] == "unknown-event" and raw["type"] == "item/future_item"
    assert r.completed[0]["result"] == "Implemented the requested changes."
    assert r.usage.counts() == {"input": 10, "cached": 0, "output": 5}


def test_legacy_v039_envelope() -> None:
    r = run("legacy_v0.39_msg_envelope.jsonl")
    assert r.of("status") == [{"status": "config", "model": "gpt-5-codex",
                               "sandbox": "read-only"}]
    assert r.texts == ["PONG"]
    assert r.usage.counts() == {"input": 6717, "cached": 0, "output": 4}
    assert r.completed == []  # the capture ends without task_complete


def test_legacy_exec_command_and_task_complete() -> None:
    r = run("legacy_mid2025_msg_envelope_exec_command.jsonl")
    assert r.tools == [("call_I1o1QnQDtlLjGMg4Vd9HXJLd", "exec_command")]
    assert r.of("tool")[0]["input"] == {"command": "ls -1", "cwd": "/Users/user/dev/vk-wip"}
    assert r.results == {"call_I1o1QnQDtlLjGMg4Vd9HXJLd": False}
    assert r.files == [("ls -1", "run")]
    assert r.of("reasoning")[0]["text"].startswith("**Inspecting the directory tree**")
    assert r.final_text is not None
    assert r.final_text.startswith("I can see the directory structure of your project.")
    assert r.completed[0]["ok"] is True and r.completed[0]["result"] == r.final_text


def _thread_run(thread: str, totals: tuple[int, int, int]) -> list[str]:
    usage = {"input_tokens": totals[0], "cached_input_tokens": totals[1],
             "output_tokens": totals[2]}
    return [json.dumps({"type": "thread.started", "thread_id": thread}),
            json.dumps({"type": "turn.started"}),
            json.dumps({"type": "turn.completed", "usage": usage})]


def test_resumed_thread_counts_the_difference() -> None:
    tracker = UsageTracker()
    first = replay_lines(CodexAdapter(tracker), _thread_run("T1", (18000, 0, 40)))
    assert first.usage.counts() == {"input": 18000, "cached": 0, "output": 40}
    # `codex exec resume T1`: the new turn.completed counts the whole thread.
    second = replay_lines(CodexAdapter(tracker), _thread_run("T1", (36500, 17900, 75)))
    assert second.usage.counts() == {"input": 18500, "cached": 17900, "output": 35}
    (record,) = second.of("usage")
    assert record["sessionKey"] == "codex:T1"
    assert record["total"] == {"input": 36500, "cached": 17900, "output": 75}
    other = replay_lines(CodexAdapter(tracker), _thread_run("T2", (100, 0, 1)))
    assert other.usage.counts() == {"input": 100, "cached": 0, "output": 1}


def test_legacy_token_counts_within_one_process() -> None:
    lines = [json.dumps({"id": "0", "msg": {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": n, "cached_input_tokens": 0, "output_tokens": o}}}})
        for n, o in ((100, 5), (250, 9))]
    tracker = UsageTracker()
    assert replay_lines(CodexAdapter(tracker), lines).usage.counts() == {
        "input": 250, "cached": 0, "output": 9}
    # a new process starts its own count: the stored baseline is not subtracted
    assert replay_lines(CodexAdapter(tracker), lines[:1]).usage.counts() == {
        "input": 100, "cached": 0, "output": 5}


def test_stderr_banner_lines_are_output() -> None:
    (obs,) = CodexAdapter().parse("Reading prompt from stdin...")
    assert obs.kind == "output" and obs.fields == {"text": "Reading prompt from stdin..."}
