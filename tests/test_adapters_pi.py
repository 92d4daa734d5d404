"""pi `-p --mode json` fixtures through PiAdapter."""

from __future__ import annotations

import json

import pytest
from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.providers.pi import PiAdapter


def run(name: str) -> Replay:
    return replay(PiAdapter(), "pi", name)


def test_all_event_types_with_compaction_and_retry() -> None:
    r = run("takopi_all_event_types.jsonl")
    assert r.texts == [
        "I'll check the README for the CLI commands.",
        "Main CLI commands include `pi --mode <mode>` for output format and "
        "`pi --print` for non-interactive runs.",
        "Retry succeeded. Recent notes: 1) Added --mode json output. "
        "2) Improved session export.",
    ]
    assert [d["text"] for d in r.of("text-delta")] == [
        "I'll check the README", "Main CLI commands", "Retry succeeded"]
    assert [x["text"] for x in r.of("reasoning")] == ["Need to read README for the CLI commands."]
    # the call repeats in the toolCall block, tool_execution_*, toolResult and turn_end
    assert r.tools == [("toolu_01HXYZREAD", "read")]
    assert r.results == {"toolu_01HXYZREAD": False}
    assert r.of("tool-result")[0]["preview"].startswith("# Pi Coding Agent\n")
    assert r.files == [("README.md", "read")]
    # four assistant message_end lines; agent_end and turn_end repeats are not counted
    assert r.usage.counts() == {"input": 1240 + 680 + 320 + 410, "cached": 0,
                                "output": 182 + 128 + 0 + 96}
    assert r.of("quota") == [{"message": "Rate limit exceeded"}]
    assert [s["status"] for s in r.of("status")] == ["compacting"]
    assert r.of("compaction") == [{"trigger": "threshold", "tokensBefore": 118432}]
    assert r.of("model-retry") == [{"attempt": 1, "maxAttempts": 3, "delayMs": 2000,
                                    "error": "rate-limit", "message": "Rate limit exceeded"}]
    # the retry succeeded: the outcome is decided at the end, once
    assert r.completed == [{"ok": True, "result": r.texts[-1], "reason": "stop"}]


def test_tool_success() -> None:
    r = run("takopi_tool_success.jsonl")
    assert r.tools == [("tool_1", "bash"), ("tool_2", "write")]
    assert r.results == {"tool_1": False, "tool_2": False}
    assert r.files == [("ls -la", "run"), ("notes.md", "write")]
    assert r.final_text == "Done. Added notes.md."
    assert r.usage.counts() == {"input": 22, "cached": 0, "output": 10}
    assert r.completed[0]["ok"] is True and r.completed[0]["result"] == "Done. Added notes.md."


def test_error_stop_reason() -> None:
    r = run("takopi_error.jsonl")
    assert r.of("failure") == [{"message": "Upstream error"}]
    assert r.completed == [{"ok": False, "reason": "Upstream error"}]
    assert r.usage.counts() == {"input": 5, "cached": 0, "output": 1}


def test_session_header_and_cache_tokens() -> None:
    lines = [
        {"type": "session", "version": 3, "id": "sess-1", "timestamp": "t", "cwd": "/w"},
        {"type": "agent_start"},
        {"type": "message_end", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "hi"}], "usage": {"input": 10, "output": 4,
                                                      "cacheRead": 100, "cacheWrite": 7},
            "stopReason": "stop"}},
    ]
    r = replay_lines(PiAdapter(), [json.dumps(x) for x in lines])
    assert r.of("session") == [{"sessionId": "sess-1", "cwd": "/w", "version": 3}]
    assert r.usage.counts() == {"input": 117, "cached": 100, "output": 4}
    assert r.completed == []  # no agent_end: the stream was cut


def test_retry_pending_at_end_gives_no_completed() -> None:
    lines = [{"type": "agent_start"}, {"type": "agent_end", "messages": []},
             {"type": "auto_retry_start", "attempt": 1, "errorMessage": "overloaded"}]
    r = replay_lines(PiAdapter(), [json.dumps(x) for x in lines])
    assert r.completed == []


def test_tool_executions_without_an_id_are_each_kept_raw_never_dropped() -> None:
    """As explorer streams2 F2 found for the other adapters: a `tool_execution_*` without
    `toolCallId` was call "None", and every later one was dropped as a repeat of it."""
    adapter = PiAdapter()
    for name, args in (("bash", {"command": "ls"}), ("write", {"path": "/etc/x"})):
        for kind in ("tool_execution_start", "tool_execution_end"):
            line = json.dumps({"type": kind, "toolName": name, "args": args, "isError": False,
                               "result": {"content": [{"type": "text", "text": name}]}})
            assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
                    for o in adapter.parse(line)] == [
                ("raw", line, f"{kind}.toolCallId: expected a call id, got null")]


@pytest.mark.parametrize(("message", "kinds", "error"), [
    ({"content": [{"type": "output_text", "text": "THE ANSWER"}]}, ["raw"],
     "content block.type: expected a known one, got 'output_text'"),
    ({"content": [{"type": "text", "content": "THE ANSWER"}]}, ["raw"],
     "text.text: expected a string, got null"),
    ({"text": "THE ANSWER"}, ["raw"], "message.content: expected an array, got null"),
    ({"content": [{"type": "text", "text": "hi"}, {"text": "more"}]}, ["text", "raw"],
     "content block.type: expected a known one, got None"),
    ({"content": [], "stopReason": "aborted"}, ["failure"], None),
    ({"content": [{"type": "image", "data": "…"}, {"type": "text", "text": ""}]}, [], None),
])  # fmt: skip
def test_a_message_whose_text_is_not_where_it_should_be_is_kept_raw(
        message: dict[str, object], kinds: list[str], error: str | None) -> None:
    """Explorer streams2 F1: an assistant `message_end` whose text sat in a block of another
    type (or under another key) left no record and the turn ended done with an empty reply.
    Its line is kept `raw` (after what the rest of it gave), naming what was expected."""
    line = json.dumps({"type": "message_end", "message": {"role": "assistant", **message}})
    out = PiAdapter().parse(line)
    assert [o.kind for o in out] == kinds
    assert [(o.fields["value"], o.fields["error"]) for o in out if o.kind == "raw"] == (
        [(line, error)] if error else [])


def test_pi_0_73_compaction_events_are_a_status_and_a_compaction() -> None:
    """explore-clis F4: pi 0.73 prints `compaction_start`/`compaction_end` (no longer
    `auto_compaction_*`); both were `raw` unknown-events, so `until: status:compacting` never
    fired and no `compaction` was recorded."""
    r = run("v0.73.1_threshold_compaction.documented.jsonl")
    assert r.of("raw") == []
    assert r.of("status") == [{"status": "compacting", "reason": "threshold"}]
    assert r.of("compaction") == [{"trigger": "threshold", "tokensBefore": 180012}]
    assert r.completed == [{"ok": True, "result": "The build passes.",
                            "sessionId": "01a2530f-c4bc-7500-9b53-51e54038b079",
                            "reason": "stop"}]


def test_a_failed_compaction_is_a_warning_not_a_compaction() -> None:
    """The real pi 0.73.1 lines of a manual compaction that could not reach the model."""
    r = run("v0.73.1_rpc_compaction_failed.excerpt.jsonl")
    assert r.of("raw") == []
    assert r.of("status") == [{"status": "compacting", "reason": "manual"}]
    assert r.of("compaction") == []
    assert r.of("warning") == [{"message": "Compaction failed: Summarization failed: "
                                "Connection error.", "code": "compaction-failed"}]


@pytest.mark.parametrize("prefix", ["", "auto_"])
def test_both_names_of_an_aborted_compaction(prefix: str) -> None:
    lines = [{"type": f"{prefix}compaction_start", "reason": "overflow"},
             {"type": f"{prefix}compaction_end", "reason": "overflow", "aborted": True,
              "willRetry": False}]
    r = replay_lines(PiAdapter(), [json.dumps(x) for x in lines])
    assert r.of("status") == [{"status": "compacting", "reason": "overflow"}]
    assert r.of("compaction") == [{"trigger": "overflow", "aborted": True}]
