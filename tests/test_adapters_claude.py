"""Claude Code stream-json fixtures through ClaudeAdapter: transcript, tools, usage, status."""

from __future__ import annotations

import json

import pytest
from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.clean import clean_record
from watchrun.agents.providers import Usage, UsageTracker
from watchrun.agents.providers.claude import ClaudeAdapter
from watchrun.agents.providers.mock import MockAdapter


def run(name: str, tracker: UsageTracker | None = None) -> Replay:
    return replay(ClaudeAdapter(tracker), "claude", name)


def test_write_file_run_full_capture() -> None:
    r = run("v2.1.200_write_file_run.jsonl")
    assert r.of("session")[0]["sessionId"] == "ab4694a7-7cfd-41d4-9f9b-fac26ce2930d"
    assert r.final_text == (
        'Done — I created `hello.txt` in the working directory containing the word "hello".'
    )
    assert r.tools == [("toolu_01HTMVEdUan7uTDR37gZCjpX", "Write")]
    assert r.results == {"toolu_01HTMVEdUan7uTDR37gZCjpX": False}
    assert r.files == [("/private/tmp/cli-test/hello.txt", "write")]
    # modelUsage: haiku 535/0/13 + fable 9388 + 34904 read + 14392 write, 184 out.
    assert r.usage.counts() == {"input": 59219, "cached": 34904, "output": 197}
    assert r.of("usage")[-1]["complete"] is True
    limit = r.of("status")[0]
    assert limit == {"status": "rate-limit", "rateLimit": "allowed",
                     "rateLimitType": "five_hour", "resetAt": "2026-07-04T10:10:00.000Z"}
    (done,) = r.completed
    assert done["ok"] is True and done["numTurns"] == 2 and done["costUsd"] > 0.42


def test_message_usage_repeated_on_block_lines_is_counted_once() -> None:
    r = run("v2.1.63_ci_edit_commit_run.excerpt.jsonl")
    per_message = [u["messageId"] for u in r.of("usage") if u["source"] == "message"]
    # 9 assistant lines carry 5 distinct message ids; each is counted once.
    assert per_message == [
        "msg_01BaCLK81mZ9VawbaJBxQqgW", "msg_01QjL6zDu1vAqy6rnHjviPRk",
        "msg_0187XPDoKWstTRVZy91tEwgi", "msg_014QnSBhMKu3p98tmX55TimZ",
        "msg_01WtjnFqmvzwLr9ipwbJrEWw",
    ]
    first = r.of("usage")[0]
    assert (first["input"], first["cached"], first["output"]) == (3 + 7353 + 14001, 14001, 8)
    # The result total (11 + 18947 + 246839 in, 2856 out) is reached exactly, not exceeded.
    assert r.usage.counts() == {"input": 265797, "cached": 246839, "output": 2856}


def test_ci_run_tools_files_and_answer() -> None:
    r = run("v2.1.63_ci_edit_commit_run.excerpt.jsonl")
    assert r.tools == [
        ("toolu_01Q9xLgaa7tQc7YTQ4MhLupD", "Read"),
        ("toolu_01LnXcmSb4zfgU1AcZgp7RdT", "Bash"),
        ("toolu_014F1YeyoKqx7pVLYXE8w3Gm", "Bash"),
        ("toolu_014Vcuv3B48JyvAfpfETXRiL", "Edit"),
    ]
    assert set(r.results.values()) == {False} and len(r.results) == 4
    status = "/home/runner/work/agentic-org-v2/agentic-org-v2/lead/tasks/task-005/status.md"
    assert (status, "read") in r.files and (status, "edit") in r.files
    assert ("git add orchestrator.sh outbox.md && git diff --cached --stat", "run") in r.files
    assert r.texts[:2] == ["Changes look correct. Now commit and update status:",
                           "Now update the task status to `review`:"]
    assert r.final_text is not None and r.final_text.startswith("Done. Here's a summary")
    assert r.of("reasoning")[0]["text"].startswith("Let me start by reading")
    assert r.completed[-1]["ok"] is True and r.completed[-1]["numTurns"] == 11
    # result.result repeats the last text block: no duplicate text is emitted.
    assert len(r.texts) == 3


def test_two_sessions_hand_written() -> None:
    r = run("takopi_handwritten_two_sessions.jsonl")
    assert [s["sessionId"] for s in r.of("session")] == [
        "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"]
    assert r.texts == ["Sure - I-ll list the directory contents.",
                       "I see README.md, pyproject.toml, and src/."]
    assert r.tools == [("toolu_01BASH_LS_EXAMPLE", "Bash"), ("toolu_02", "Write")]
    assert r.results == {"toolu_01BASH_LS_EXAMPLE": False, "toolu_02": False}
    assert r.files == [("ls", "run"), ("notes.md", "write")]
    assert [(c["ok"], c.get("result")) for c in r.completed] == [
        (True, "I see README.md, pyproject.toml, and src/."), (False, None)]
    assert r.of("failure") == [{"message": "Permission denied: cannot write to /root/secret.txt",
                                "code": "execution"}]
    assert r.of("tool-denied") == [{
        "callId": "toolu_01WRITE_SECRET_EXAMPLE", "name": "Write", "reason": "permission",
        "input": {"file_path": "/root/secret.txt", "content": "hello\n"}}]
    # Hand-written: the two message snapshots (123/42, 130/76) exceed the first result's total
    # (130/76), so that result adds nothing; the second session's result adds its 40/12.
    assert r.usage.counts() == {"input": 123 + 130 + 40, "cached": 0, "output": 42 + 76 + 12}


def test_api_error_is_a_failure_even_with_subtype_success() -> None:
    r = run("v2.1.200_api_error_404_result_line.jsonl")
    (failure,) = r.of("failure")
    assert failure["code"] == "api-error-404"
    assert failure["message"].startswith("There's an issue with the selected model")
    assert r.texts == []
    assert r.completed[0]["ok"] is False
    assert r.usage == Usage(0, 0, 0, True)


def test_max_turns_has_no_result_text() -> None:
    r = run("v2.1.200_error_max_turns.excerpt.jsonl")
    assert r.tools == [("toolu_012kfmMRjYahv94q7PHKiQn8", "Bash")]
    assert r.results == {} and r.files == []  # no result: the command is not "touched"
    assert r.of("failure") == [{"message": "Reached maximum number of turns (1)",
                                "code": "max-turns"}]
    assert r.texts == []
    assert r.completed == [{"ok": False, "numTurns": 2, "costUsd": 0.16568400000000003,
                            "durationMs": 10895,
                            "sessionId": "b1cacbdf-32f5-479b-97ed-4a869575dda8",
                            "reason": "max_turns"}]
    assert r.usage.counts() == {"input": 9386 + 1625 + 18206, "cached": 18206, "output": 410}


def test_partial_messages_deltas_and_final_output_count() -> None:
    r = run("partial_messages_frames.excerpt.jsonl")
    assert r.of("status") == [{"status": "requesting"}]
    assert r.of("text-delta") == [{"text": "part", "messageId": "msg_011CdSnLLFRZ5pTQ22nZEFX5",
                                   "index": 0}]
    # message_start snapshot (output 1) then message_delta's final count (13).
    assert r.usage.counts() == {"input": 2 + 9358 + 15273, "cached": 15273, "output": 13}
    assert r.of("usage")[-1]["complete"] is True
    assert r.completed == []


def test_subagent_lines_keep_their_parent_call() -> None:
    r = run("subagent_frames.excerpt.jsonl")
    assert [s["status"] for s in r.of("status")] == [
        "task-started", "task-progress", "task-updated", "task-notification"]
    (result,) = r.of("tool-result")
    assert result["callId"] == "toolu_01Lk5FWepugEwseNuuYMEYi2"
    assert result["parentCallId"] == "toolu_01WpAVhnCvdR8Ywmh4rK4jed"
    assert result["preview"] == "1\tSMOKE-SUBAGENT-OK\n2\t" and result["characters"] == 22


def test_json_output_format_single_result() -> None:
    r = run("output_format_json_object.documented.jsonl")
    assert r.texts == ["Hello CLI Test"] and r.of("text")[0]["final"] is True
    assert r.completed[0]["ok"] is True
    assert r.usage.counts() == {"input": 15638, "cached": 15635, "output": 6}


def _turn(version: str, total: tuple[int, int, int]) -> list[str]:
    init = {"type": "system", "subtype": "init", "session_id": "S", "claude_code_version": version}
    result = {"type": "result", "subtype": "success", "is_error": False, "session_id": "S",
              "result": "ok", "usage": {"input_tokens": total[0], "cache_read_input_tokens":
                                        total[1], "output_tokens": total[2]}}
    return [json.dumps(init), json.dumps(result)]


@pytest.mark.parametrize(("version", "second"), [
    ("2.1.280", (50, 20, 5)),  # resumed totals restored: subtract the first run's total
    ("2.1.63", (150, 60, 25)),  # older builds restart at zero: the total is the increment
])
def test_resumed_session_counts_only_the_new_run(version: str, second: tuple[int, ...]) -> None:
    tracker = UsageTracker()
    first = replay_lines(ClaudeAdapter(tracker), _turn(version, (100, 40, 20)))
    assert first.usage.counts() == {"input": 140, "cached": 40, "output": 20}
    restored = UsageTracker()  # a restarted runner: baselines from the history's records
    for record in first.of("usage"):
        restored.learn(json.loads(json.dumps(record)))
    again = replay_lines(ClaudeAdapter(restored), _turn(version, (150, 60, 25)))
    assert tuple(again.usage.counts().values()) == (second[0] + second[1], second[1], second[2])


@pytest.mark.parametrize(("line", "kind", "fields"), [
    ("Error: When using --print, --output-format=stream-json requires --verbose", "output",
     {"text": "Error: When using --print, --output-format=stream-json requires --verbose"}),
    ('{"type":"brand_new_event","x":1}', "raw",
     {"value": '{"type":"brand_new_event","x":1}', "reason": "unknown-event", "bytes": 32,
      "type": "brand_new_event"}),
    ('{"type":"result",', "raw", {"value": '{"type":"result",', "reason": "unparseable",
                                  "bytes": 17}),
    ('"just a string"', "output", {"text": '"just a string"'}),
    ("[WARNING] Skipping unreadable directory", "output",
     {"text": "[WARNING] Skipping unreadable directory"}),
    ("[1, 2]", "raw", {"value": "[1, 2]", "reason": "unparseable", "bytes": 6,
                       "error": "not a JSON object"}),
    ("\x1b[31mred\x1b[0m banner", "output", {"text": "red banner",
                                            "raw": "\x1b[31mred\x1b[0m banner"}),
])
def test_lines_outside_the_protocol(line: str, kind: str, fields: dict[str, object]) -> None:
    """As written: a terminal line keeps its raw form only when cleaning changed it."""
    (obs,) = ClaudeAdapter().parse(line)
    assert (obs.kind, clean_record(obs.kind, obs.fields, None)) == (kind, fields)


def test_blank_lines_and_carriage_returns_are_ignored() -> None:
    adapter = ClaudeAdapter()
    assert adapter.parse("") == [] and adapter.parse("  \r") == []
    (obs,) = adapter.parse('{"type":"system","subtype":"status","status":"requesting"}\r')
    assert obs.fields == {"status": "requesting"}


def test_verbose_json_array_is_read_message_by_message() -> None:
    lines = [json.loads(x) for x in _turn("2.1.200", (10, 0, 2))]
    (obs_session, *rest) = ClaudeAdapter().parse(json.dumps(lines))
    assert obs_session.kind == "session"
    assert [o.kind for o in rest] == ["usage", "text", "completed"]


def test_rejected_rate_limit_is_a_quota_with_reset_time() -> None:
    line = ('{"type":"rate_limit_event","rate_limit_info":{"status":"rejected",'
            '"resetsAt":1783159800,"rateLimitType":"five_hour"}}')
    (obs,) = ClaudeAdapter().parse(line)
    assert obs.kind == "quota"
    assert obs.fields["resetAt"] == "2026-07-04T10:10:00.000Z"


def test_mock_provider_uses_the_claude_parser() -> None:
    r = replay(MockAdapter(), "claude", "v2.1.200_write_file_run.jsonl")
    assert MockAdapter.provider == "mock"
    assert r.tools == [("toolu_01HTMVEdUan7uTDR37gZCjpX", "Write")]


def test_synthetic_api_error_message_is_one_auth_failure() -> None:
    text = 'API Error: 401 {"type":"error","error":{"type":"authentication_error"}}'
    lines = [
        {"type": "assistant", "session_id": "s", "error": "authentication_failed",
         "is_api_error_message": True, "message": {
             "id": "msg_x", "model": "<synthetic>", "role": "assistant",
             "content": [{"type": "text", "text": text}]}},
        {"type": "result", "subtype": "success", "is_error": True, "session_id": "s",
         "result": text, "usage": {"input_tokens": 0, "output_tokens": 0}},
    ]
    r = replay_lines(ClaudeAdapter(), [json.dumps(x) for x in lines])
    assert r.of("failure") == [{"message": text, "code": "auth"}]
    assert r.texts == [] and [c["ok"] for c in r.completed] == [False]


def test_api_retries_and_compaction_are_their_own_events() -> None:
    r = run("documented_api_retry_compaction.documented.jsonl")
    assert r.of("model-retry") == [
        {"attempt": 1, "maxAttempts": 10, "delayMs": 600, "status": 529, "error": "overloaded",
         "message": "overloaded (HTTP 529)"},
        {"attempt": 2, "maxAttempts": 10, "delayMs": 1200, "status": 429, "error": "rate-limit",
         "message": "rate_limit (HTTP 429)"}]
    assert r.of("failure") == [] and r.of("quota") == [] and r.of("raw") == []
    assert r.of("compaction") == [{"trigger": "auto", "tokensBefore": 155025}]
    assert r.completed[0]["ok"] is True


def _session_run(version: str, total: tuple[int, int, int]) -> list[str]:
    return [*_turn(version, total)[:1],
            json.dumps({"type": "assistant", "session_id": "S", "message": {
                "id": "m1", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            *_turn(version, total)[1:]]


@pytest.mark.parametrize(("version", "argv", "exact"), [
    ("2.1.280", ("claude", "-p", "{prompt}"), True),  # a fresh session: its total is exact
    ("2.1.280", ("claude", "-p", "{prompt}", "--resume", "S"), False),  # may include others
    ("2.1.63", ("claude", "-p", "{prompt}", "--continue"), True),  # old builds count from 0
    # a shell's `-c` is not claude's (`-c` is --continue): a fresh session, exact
    ("2.1.280", ("sh", "-c", 'claude -p "$1"', "sh", "{prompt}"), True),
    ("2.1.280", ("sh", "-c", 'claude -p "$1" -r "$2"', "sh", "{prompt}", "-r"), False),
])
def test_result_totals_make_the_turn_usage_exact(version: str, argv: tuple[str, ...],
                                                 exact: bool) -> None:
    """The per-message snapshot is provisional (`complete: false`); the result's remainder is
    exact unless the session was first seen here while the command resumes one."""
    r = replay_lines(ClaudeAdapter(UsageTracker(), argv), _session_run(version, (100, 0, 20)))
    snapshot, rest = r.of("usage")
    assert snapshot["complete"] is False and rest["complete"] is exact
    assert r.usage.counts() == {"input": 100, "cached": 0, "output": 20}


def test_a_permission_refusal_is_a_denied_call_that_never_ran() -> None:
    refusal = "Claude requested permissions to use Bash, but you haven't granted it yet."
    lines = [claude_line({"type": "assistant", "session_id": "s", "message": {
                 "id": "m1", "role": "assistant", "content": [
                     {"type": "tool_use", "id": "t1", "name": "Bash",
                      "input": {"command": "rm -rf /tmp/x"}}]}}),
             claude_line({"type": "user", "session_id": "s", "message": {"role": "user",
                          "content": [{"type": "tool_result", "tool_use_id": "t1",
                                       "is_error": True, "content": refusal}]}}),
             claude_line({"type": "result", "subtype": "success", "is_error": False,
                          "session_id": "s", "result": "could not", "permission_denials": [
                              {"tool_name": "Bash", "tool_use_id": "t1",
                               "tool_input": {"command": "rm -rf /tmp/x"}}]})]
    r = replay_lines(ClaudeAdapter(), lines)
    assert r.of("tool-denied") == [{"callId": "t1", "name": "Bash", "reason": "permission",
                                    "message": refusal}]  # once, though reported twice
    assert r.results == {"t1": True} and r.files == []  # refused: nothing ran


def claude_line(obj: dict[str, object]) -> str:
    return json.dumps(obj)


@pytest.mark.parametrize(("block", "kinds"), [
    ({"type": "output_text", "text": "the whole answer"}, ["raw"]),
    ({"type": "citation_text", "text": "cited"}, ["raw"]),
    ({"type": "mcp_tool_use", "id": "t1", "name": "search", "input": {"q": 1}}, ["tool"]),
    ({"type": "redacted_thinking", "data": "opaque"}, []),
    ({"type": "text", "text": ""}, []),
])  # fmt: skip
def test_a_content_block_it_does_not_know_is_recorded_raw(block: dict[str, object],
                                                         kinds: list[str]) -> None:
    """Explorer streams F1: a block type it did not know (a renamed `text`, say) left no record
    and the turn ended done with an empty reply. Its line is kept `raw` (malformed-event,
    naming the type); an MCP tool call is a tool call; a block that holds no text is none."""
    line = json.dumps({"type": "assistant", "message": {"id": "m1", "content": [block]}})
    out = ClaudeAdapter().parse(line)
    assert [o.kind for o in out] == kinds
    if kinds == ["raw"]:
        assert out[0].fields["value"] == line and repr(block["type"]) in out[0].fields["error"]
