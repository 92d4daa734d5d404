"""Gemini CLI stream-json and json fixtures through GeminiAdapter."""

from __future__ import annotations

import json

from adapter_replay import FIXTURES, Replay, replay, replay_lines

from watchrun.agents.providers.gemini import AUTH_ADVICE, GeminiAdapter


def run(name: str) -> Replay:
    return replay(GeminiAdapter(), "gemini", name)


def test_docs_stream_example() -> None:
    r = run("docs_stream_json_example.jsonl")
    assert r.of("session") == [{"sessionId": "abc123", "model": "gemini-2.0-flash-exp"}]
    assert r.tools == [("bash-123", "Bash")] and r.results == {"bash-123": False}
    assert r.of("tool-result")[0]["preview"] == "file1.txt\nfile2.txt"
    assert r.files == [("ls -la", "run")]
    assert r.of("text-delta") == [{"text": "Here are the files..."}]
    assert r.texts == ["Here are the files..."]  # the user prompt echo is not text
    # no `cached` in these stats (before v0.22): counts known, record incomplete
    (usage,) = r.of("usage")
    assert (usage["input"], usage["cached"], usage["output"], usage["complete"]) == (
        50, 0, 200, False)
    assert r.completed == [{"ok": True, "result": "Here are the files...",
                            "sessionId": "abc123", "reason": "success"}]


def test_turn_limit_is_a_failure() -> None:
    r = run("real_v0.17_turn_limit.assembled.jsonl")
    assert r.tools == [("list_directory-1764041274691-eabd3cbcdee66", "list_directory"),
                       ("read_file-1764041274691-e1084c2fd73dc", "read_file")]
    assert r.results == {"list_directory-1764041274691-eabd3cbcdee66": False}
    assert r.files == [(".", "list")]  # read_file never got a result
    assert r.of("failure") == [{"message": "Reached max session turns...", "code": "max-turns"}]
    assert r.completed[0]["ok"] is False
    assert r.completed[0]["reason"] == "FatalTurnLimitedError"
    # total 8255 = 7862 prompt + 90 candidates + 303 thoughts: thoughts count as output
    assert r.usage.counts() == {"input": 7862, "cached": 0, "output": 393}


def test_answer_tail() -> None:
    r = run("real_v0.17_answer_tail.assembled.jsonl")
    assert r.texts == ["2 + 2 = 4."]
    assert r.completed[0] == {"ok": True, "result": "2 + 2 = 4.", "reason": "success"}
    assert r.usage.counts() == {"input": 7854, "cached": 0, "output": 8064 - 7854}


def test_tool_result_line_samples() -> None:
    r = run("real_v0.17_tool_result_lines.assembled.jsonl")
    assert r.results == {
        "read_file-1764015160012-767cb93e436f3": False,
        "write_file-1764015234674-0581b9629931a": False,
        "run_shell_command-1764015194969-e79bcda1d6e9": False,
        "write_todos-1764013031965-70bbdf7c35856": True,
        "read_file-1764041293170-fd5f6da4bd4a1": True,
    }
    outputs = [x["preview"] for x in r.of("tool-result")]
    assert outputs[0] == "" and outputs[1] == ""  # a successful read shows nothing
    assert outputs[3] == 'Invalid parameters: Only one task can be "in_progress" at a time.'
    assert r.of("tool-result")[4]["errorType"] == "invalid_tool_params"


def test_tool_call_snapshot() -> None:
    r = run("unit_snapshot_tool_call.documented.jsonl")
    assert r.texts == ["Thinking...", "Final answer"]
    assert r.tools == [("tool-1", "testTool")] and r.results == {"tool-1": False}
    assert r.completed[0]["ok"] is True and r.completed[0]["result"] == "Final answer"
    assert r.usage.counts() == {"input": 0, "cached": 0, "output": 0}
    assert r.of("usage")[0]["complete"] is True  # v0.34 stats have `cached`


def test_max_turns_error_event_overrides_success_result() -> None:
    r = run("unit_snapshot_max_turns.documented.jsonl")
    assert r.of("failure") == [{"message": "Maximum session turns exceeded"}]
    assert r.completed[0]["ok"] is False


def test_loop_detected_warning_is_not_a_failure() -> None:
    r = run("unit_snapshot_loop_detected.documented.jsonl")
    assert r.of("warning") == [{"message": "Loop detected, stopping execution"}]
    assert r.of("failure") == [] and r.completed[0]["ok"] is True


def test_json_output_object_on_one_line() -> None:
    r = run("docs_json_output_compacted.jsonl")
    assert r.texts == ["The capital of France is Paris."]
    # pro: 24939 prompt, 21263 cached, 20 + 154 out; flash: 8965 + 28 tool, 10 + 30 out
    assert r.usage.counts() == {"input": 24939 + 8965 + 28, "cached": 21263,
                                "output": 20 + 154 + 10 + 30}
    assert r.completed[0]["ok"] is True


def test_json_output_pretty_printed_across_lines() -> None:
    text = (FIXTURES / "gemini" / "docs_json_output_compacted.jsonl").read_text()
    pretty = json.dumps(json.loads(text), indent=2).splitlines()
    r = replay_lines(GeminiAdapter(), ["Loaded cached credentials.", *pretty])
    assert r.of("output") == [{"text": "Loaded cached credentials."}]
    assert r.texts == ["The capital of France is Paris."]
    assert r.completed[0]["ok"] is True


def test_unfinished_pretty_object_is_kept_as_raw() -> None:
    r = replay_lines(GeminiAdapter(), ["{", '  "response": "cut off'])
    (raw,) = r.of("raw")
    assert raw["reason"] == "unparseable" and raw["value"].startswith("{\n")


def test_deltas_are_joined_into_one_text_at_the_end_of_the_stream() -> None:
    chunks = [{"type": "message", "role": "assistant", "content": c, "delta": True}
              for c in ("Hel", "lo")]
    r = replay_lines(GeminiAdapter(), [json.dumps(c) for c in chunks])
    assert [d["text"] for d in r.of("text-delta")] == ["Hel", "lo"]
    assert r.texts == ["Hello"] and r.completed == []


def test_fatal_auth_json_on_stderr_is_an_auth_failure_with_advice() -> None:
    """No credentials: gemini writes a pretty-printed error object to stderr and exits 41."""
    stderr = (FIXTURES / "gemini" / "documented_auth_failure_exit41.stderr.txt").read_text()
    r = replay_lines(GeminiAdapter(), [], exit_code=41, stderr=stderr.splitlines())
    (failure,) = r.of("failure")
    assert failure["code"] == "auth" and failure["message"].startswith("Please set an Auth")
    assert "GEMINI_API_KEY" in failure["hint"]
    assert r.completed == []


def test_quota_json_on_stderr_is_a_quota() -> None:
    error = {"error": {"type": "Error", "code": 1, "message": "[API Error: You exceeded your "
                       "current quota (RESOURCE_EXHAUSTED, 429)]"}}
    r = replay_lines(GeminiAdapter(), [], exit_code=1, stderr=[json.dumps(error)])
    (quota,) = r.of("quota")
    assert "quota" in quota["message"] and "reset" in quota["hint"]
    assert r.of("failure") == []


def test_a_known_exit_code_without_a_result_says_why() -> None:
    r = replay_lines(GeminiAdapter(), ["Loaded cached credentials."], exit_code=41)
    assert r.of("failure") == [{"message": "gemini exited with code 41: authentication failed",
                                "code": "auth", "hint": AUTH_ADVICE}]
    ended = run("unit_snapshot_tool_call.documented.jsonl")
    assert ended.of("failure") == []  # a stream with its result needs no exit-code guess
    assert replay_lines(GeminiAdapter(), ["x"], exit_code=7).of("failure") == []


def test_the_answer_is_the_text_after_the_last_tool_result() -> None:
    lines = [json.dumps(x) for x in [
        {"type": "message", "role": "assistant", "content": "Let me look.", "delta": True},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "t1",
         "parameters": {"file_path": "a.py"}},
        {"type": "tool_result", "tool_id": "t1", "status": "success", "output": ""},
        {"type": "message", "role": "assistant", "content": "It is ", "delta": True},
        {"type": "error", "severity": "warning", "message": "slow"},
        {"type": "message", "role": "assistant", "content": "fine.", "delta": True},
        {"type": "result", "status": "success", "stats": {}}]]
    r = replay_lines(GeminiAdapter(), lines)
    assert r.texts == ["Let me look.", "It is fine."]
    assert r.completed[0]["result"] == "It is fine."


def test_a_result_without_a_status_says_so() -> None:
    """Claude-format lines given to the gemini adapter: the turn failed with the generic "the
    provider reported that the turn failed" (found by an agents explorer)."""
    lines = [json.dumps({"type": "result", "subtype": "success", "result": "ok"})]
    r = replay_lines(GeminiAdapter(), lines)
    (done,) = r.completed
    assert done["ok"] is False
    assert done["reason"] == ("its result event has no status (not Gemini CLI's stream-json? "
                              "`gemini -p … --output-format stream-json`)")


def test_a_message_of_the_models_role_is_text_and_one_it_does_not_know_is_kept_raw() -> None:
    """Explorer streams F1: a message whose role was not `assistant` (`model`, the Gemini API's
    name for it) left no record and the turn ended done with an empty reply. `model` is the
    assistant; a role it does not know keeps its line `raw`; a user's message is none."""
    def parse(role: object) -> list[tuple[str, dict[str, object]]]:
        line = json.dumps({"type": "message", "role": role, "content": "the whole answer"})
        return [(o.kind, dict(o.fields)) for o in GeminiAdapter().parse(line)]

    assert parse("model") == parse("assistant") == [("text", {"text": "the whole answer"})]
    assert parse("user") == []
    ((kind, fields),) = parse("narrator")
    assert kind == "raw" and "the whole answer" in str(fields["value"])
    assert fields["error"] == "message.role: expected assistant, model or user, got 'narrator'"


def test_tool_calls_without_an_id_are_each_kept_raw_never_dropped() -> None:
    """Explorer streams F2: a call without `tool_id` was recorded as call "None", and every later
    one without an id, its result and its file change were dropped as repeats of it. Each such
    line is kept `raw` (malformed-event, naming the field), so none vanishes."""
    adapter = GeminiAdapter()
    out = [o for line in (
        {"type": "tool_use", "tool_name": "read_file", "parameters": {"file_path": "a"}},
        {"type": "tool_result", "status": "success", "output": "A body"},
        {"type": "tool_use", "tool_name": "write_file", "parameters": {"file_path": "b"}},
        {"type": "tool_result", "status": "success", "output": "B body"},
    ) for o in adapter.parse(json.dumps(line))]
    assert [o.kind for o in out] == ["raw"] * 4
    assert ["write_file" in str(o.fields["value"]) for o in out] == [False, False, True, False]
    assert "B body" in str(out[3].fields["value"])
    assert out[0].fields["error"] == "tool_use.tool_id: expected a call id, got null"
