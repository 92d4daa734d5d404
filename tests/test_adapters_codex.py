"""Codex `exec --json` fixtures (current and legacy envelope) through CodexAdapter."""

from __future__ import annotations

import json

import pytest
from adapter_replay import FIXTURES, Replay, replay, replay_lines

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
    assert r.of("tool-result")[0]["preview"].startswith("2025-09-11\nAGENTS.md\n")
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
    assert result["preview"] == "console.log('Hello World');\n" and result["exitCode"] == 0
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
    # the shortened aggregated_output is kept as the fixture has it (under 2000 chars)
    assert "…[fixture: 22990 more chars removed]" in r.of("tool-result")[2]["preview"]


def test_auth_failure_after_retries() -> None:
    r = run("real_2025-11_auth_failure_401.jsonl")
    # retry notices are model-retry records, never failures
    assert r.of("model-retry") == [
        {"attempt": n, "maxAttempts": 5, "error": "unknown", "message": "reconnecting"}
        for n in range(1, 6)]
    assert r.of("status") == []
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
    outputs = {x["callId"]: x["preview"] for x in r.of("tool-result")}
    assert outputs["item_5"] == "Found 3 matches." and outputs["item_6"] == "tool timeout"
    # a failed file_change touches nothing; a failed command still ran: it is a "run"
    assert [(f["callId"], f["path"], f["op"]) for f in r.of("file-change")] == [
        ("item_1", "pytest -q", "run"), ("item_2", "pytest -q", "run"),
        ("item_3", "src/compute_answer.py", "edit"), ("item_3", "README.md", "write")]
    todos = [s for s in r.of("status") if s["status"] == "todo"]
    assert [sum(i["completed"] for i in t["items"]) for t in todos] == [0, 1, 3]
    assert r.of("warning") == [{"message": "command output truncated"}]
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
    # ≤ 0.43 may end without task_complete: exit 0 after an agent message is a success
    assert r.completed == [{"ok": True, "result": "PONG",
                            "reason": "exit 0 after an agent message (no task_complete)"}]


def test_legacy_without_task_complete_fails_on_a_non_zero_exit_or_an_error() -> None:
    assert run_exit("legacy_v0.39_msg_envelope.jsonl", 1).completed == []
    assert run_exit("legacy_v0.39_msg_envelope.jsonl", None).completed == []
    lines = (FIXTURES / "codex" / "legacy_v0.39_msg_envelope.jsonl").read_text().splitlines()
    error = json.dumps({"id": "0", "msg": {"type": "error", "message": "boom"}})
    assert replay_lines(CodexAdapter(), [*lines, error]).completed == []
    retry = json.dumps({"id": "0", "msg": {"type": "stream_error", "message":
                                           "stream error: x; retrying 1/5 in 190ms…"}})
    r = replay_lines(CodexAdapter(), [*lines[:3], retry, *lines[3:]])
    assert r.of("model-retry") == [{"attempt": 1, "maxAttempts": 5, "delayMs": 190,
                                    "error": "unknown", "message": "x"}]
    assert [c["ok"] for c in r.completed] == [True]


def run_exit(name: str, exit_code: int | None) -> Replay:
    return replay(CodexAdapter(), "codex", name, exit_code)


@pytest.mark.parametrize(("message", "fields"), [
    ("Reconnecting... 2/5 (stream disconnected before completion: idle timeout)",
     {"attempt": 2, "maxAttempts": 5, "error": "network",
      "message": "stream disconnected before completion: idle timeout"}),
    ("stream error: stream disconnected before completion: Transport error: error decoding "
     "response body; retrying 1/5 in 206ms…",
     {"attempt": 1, "maxAttempts": 5, "delayMs": 206, "error": "network",
      "message": "stream disconnected before completion: Transport error: error decoding "
                 "response body"}),
    ('stream error: unexpected status 429 Too Many Requests: {"detail":"slow down"}; '
     "retrying 3/5 in 2.1s…",
     {"attempt": 3, "maxAttempts": 5, "delayMs": 2100, "error": "rate-limit",
      "message": 'unexpected status 429 Too Many Requests: {"detail":"slow down"}'}),
])
def test_retry_notices_are_model_retries(message: str, fields: dict[str, object]) -> None:
    r = replay_lines(CodexAdapter(), [json.dumps({"type": "error", "message": message})])
    assert r.of("model-retry") == [fields]
    assert r.of("failure") == [] and r.of("quota") == []


def test_waiting_for_network_is_a_retry_not_a_failure() -> None:
    """Explore-clis F5: codex 0.171 offline prints `Reconnecting... N/5 (…)`, then `Reconnecting...
    waiting for network (…)` until it is stopped. That notice was a `failure` (the turn's
    error, had it exited); every one of them is a `model-retry`."""
    r = replay(CodexAdapter(), "codex", "real_v0.171_offline_waiting_for_network.jsonl", None)
    assert r.of("failure") == [] and r.of("quota") == []
    retries = r.of("model-retry")
    assert [x.get("attempt") for x in retries] == [2, 3, 4, 5, None, None, None, None]
    assert retries[-1] == {"error": "network", "message": "waiting for network (Connection "
                           "failed: error sending request)"}
    assert [w["message"][:40] for w in r.of("warning")] == [
        "Falling back from WebSockets to HTTPS tr"]


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


def test_a_first_seen_thread_resumed_from_elsewhere_is_not_exact() -> None:
    """`complete` means the totals are exact: a fresh thread's first total is, the first total
    of a thread this runner never saw but the command resumes may include earlier runs."""
    fresh = replay_lines(CodexAdapter(UsageTracker(), ("codex", "exec", "--json", "{prompt}")),
                         _thread_run("T1", (100, 0, 1)))
    assert fresh.of("usage")[0]["complete"] is True
    argv = ("codex", "exec", "--json", "resume", "--last", "{prompt}")
    tracker = UsageTracker()
    resumed = replay_lines(CodexAdapter(tracker, argv), _thread_run("T9", (36500, 0, 75)))
    assert resumed.of("usage")[0]["complete"] is False
    # once its baseline is known, the next resumed run's increment is exact again
    again = replay_lines(CodexAdapter(tracker, argv), _thread_run("T9", (40000, 0, 90)))
    assert again.of("usage")[0]["complete"] is True
    assert again.usage.counts() == {"input": 3500, "cached": 0, "output": 15}


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
    assert obs.kind == "output" and obs.fields["text"] == "Reading prompt from stdin..."


def test_retries_that_end_in_success() -> None:
    r = run("documented_stream_error_retries.documented.jsonl")
    assert [(x["attempt"], x.get("delayMs"), x["error"]) for x in r.of("model-retry")] == [
        (1, 206, "network"), (2, None, "network")]
    assert r.of("failure") == [] and r.of("status") == []
    assert r.completed == [{"ok": True, "result": "Done: the cache TTL is now 60 s.",
                            "sessionId": "0199a213-81c0-7800-8aa1-0000000000aa"}]


def test_a_declined_command_is_denied_and_never_ran() -> None:
    item = {"id": "item_9", "type": "command_execution", "command": "rm -rf /",
            "aggregated_output": "", "exit_code": None, "status": "declined"}
    r = replay_lines(CodexAdapter(), [json.dumps({"type": "item.completed", "item": item})])
    assert r.of("tool-denied") == [{"callId": "item_9", "name": "command_execution",
                                    "reason": "declined", "message": "rm -rf /"}]
    assert r.results == {"item_9": True} and r.files == []


def _item(kind: str, item: dict[str, object]) -> dict[str, object]:
    return {"type": f"item.{kind}", "item": item}


def _legacy(msg: dict[str, object]) -> dict[str, object]:
    return {"id": "0", "msg": msg}


_NO_ID = "expected a call id, got null"


@pytest.mark.parametrize("lines", [
    [(_item("completed", {"type": "command_execution", "command": command, "exit_code": 0,
                          "aggregated_output": "done", "status": "completed"}),
      f"command_execution item.id: {_NO_ID}") for command in ("ls", "rm -rf build")],
    [(_item("completed", {"type": "file_change", "id": "", "status": "completed", "changes": [
        {"path": path, "kind": "update"}]}),
      "file_change item.id: expected a call id, got an empty string") for path in "ab"],
    [(_item("started", {"type": "mcp_tool_call", "id": 7, "server": "s", "tool": tool,
                        "arguments": {}}),
      "mcp_tool_call item.id: expected a call id, got number") for tool in ("ls", "push")],
    [(_legacy({"type": f"exec_command_{end}", "command": ["bash", "-lc", command],
               "exit_code": 0, "aggregated_output": command}),
      f"exec_command_{end}.call_id: {_NO_ID}")
     for command in ("ls", "rm -rf build") for end in ("begin", "end")],
    [(_legacy({"type": f"patch_apply_{end}", "changes": {path: {"update": {}}},
               "success": True}), f"patch_apply_{end}.call_id: {_NO_ID}")
     for path in "ab" for end in ("begin", "end")],
    [(_legacy({"type": f"mcp_tool_call_{end}", "invocation": {"server": "s", "tool": tool},
               "result": {"Ok": {"content": []}}}), f"mcp_tool_call_{end}.call_id: {_NO_ID}")
     for tool in ("ls", "push") for end in ("begin", "end")],
])  # fmt: skip
def test_tool_calls_without_an_id_are_each_kept_raw_never_dropped(
        lines: list[tuple[dict[str, object], str]]) -> None:
    """Explorer streams2 F2: a call without an id was call "?" (current) or "None" (legacy),
    and every later one without an id, its result and its file change were dropped as repeats
    of it (`rm -rf build` left no record). Each such line is kept `raw`, naming the field."""
    adapter = CodexAdapter()
    for obj, error in lines:
        line = json.dumps(obj)
        assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
                for o in adapter.parse(line)] == [("raw", line, error)]


def test_an_item_or_msg_type_that_is_no_string_is_an_unknown_event() -> None:
    """Not `TypeError: unhashable type` (a type looked up in a set of tool kinds)."""
    for obj in (_item("completed", {"id": "i", "type": []}), _legacy({"type": {}})):
        (raw,) = CodexAdapter().parse(json.dumps(obj))
        assert (raw.kind, raw.fields["reason"]) == ("raw", "unknown-event")


@pytest.mark.parametrize(("obj", "error"), [
    (_item("completed", {"id": "i", "type": "agent_message",
                         "content": [{"type": "output_text", "text": "THE ANSWER"}]}),
     "agent_message.text: expected a string, got null"),
    (_item("completed", {"id": "i", "type": "agent_message", "message": "THE ANSWER"}),
     "agent_message.text: expected a string, got null"),
    (_legacy({"type": "agent_message", "text": "THE ANSWER"}),
     "agent_message.message: expected a string, got null"),
    (_item("started", {"id": "i", "type": "agent_message"}), None),
    (_item("completed", {"id": "i", "type": "agent_message", "text": ""}), None),
    (_legacy({"type": "agent_message", "message": ""}), None),
])  # fmt: skip
def test_a_message_without_its_text_where_it_should_be_is_kept_raw(
        obj: dict[str, object], error: str | None) -> None:
    """Explorer streams2 F1: an agent message whose text sat under another key left no record
    and the turn ended done with an empty reply. Its line is kept `raw`, naming the field; a
    message that is empty, or not done yet, is nothing."""
    line = json.dumps(obj)
    assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
            for o in CodexAdapter().parse(line)] == ([("raw", line, error)] if error else [])


@pytest.mark.parametrize(("before", "after", "ok"), [
    ([_legacy({"type": "stream_error", "message": "stream error: fatal model failure"})], [],
     None),
    ([], [_legacy({"type": "stream_error", "message": "stream disconnected, giving up"})], None),
    ([_legacy({"type": "stream_error"})], [], True),  # no message: a retry, as before
    ([], [_legacy({"type": "error", "message": "boom"})], None),
    ([_legacy({"type": "stream_error", "message": "stream error: x; retrying 2/5 in 1s…"})], [],
     True),
])  # fmt: skip
def test_legacy_exit_0_after_a_message_completes_only_with_no_error(
        before: list[dict[str, object]], after: list[dict[str, object]], ok: bool | None) -> None:
    """Explorer streams2 F4: a `stream_error` that is no retry notice was recorded as a failure
    and the exit-0 rule still made the turn `completed{ok:true}` ("no error" excludes it)."""
    message = _legacy({"type": "agent_message", "message": "PONG"})
    r = replay_lines(CodexAdapter(), [json.dumps(o) for o in (*before, message, *after)])
    assert [c["ok"] for c in r.completed] == ([] if ok is None else [ok])
    assert len(r.of("failure")) == (0 if ok else 1)


_THREAD = {"type": "thread.started", "thread_id": "t"}
_ANSWER = _item("completed", {"id": "item_0", "type": "agent_message", "text": "answer"})


@pytest.mark.parametrize("objs", [
    [{"model": "gpt-5-codex", "sandbox": "read-only"}, _THREAD, {"type": "turn.started"},
     _ANSWER],
    [_THREAD, {"type": "turn.started"}, _ANSWER,
     _legacy({"type": "agent_message", "message": "legacy answer"})],
    [{"prompt": "hi"}, {"type": "turn.started"}, _ANSWER],
    [_legacy({"type": "task_started"}), {"type": "item.updated", "item": {"id": "x",
                                                                          "type": "todo_list"}},
     _legacy({"type": "agent_message", "message": "legacy answer"})],
])  # fmt: skip
def test_a_current_format_stream_never_takes_the_legacy_exit_0_rule(
        objs: list[dict[str, object]]) -> None:
    """Explorer streams2 F5: one old-looking line (a typeless config line, a `msg` envelope)
    switched the ≤ 0.43 exit-0 rule on for a current-format turn, so one without
    `turn.completed` that exited 0 was `completed{ok:true}` (done), not incomplete."""
    r = replay_lines(CodexAdapter(), [json.dumps(o) for o in objs])
    assert r.completed == [] and r.texts[-1] in ("answer", "legacy answer")
