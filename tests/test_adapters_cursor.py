"""Cursor agent `-p --output-format stream-json` fixtures through CursorAdapter."""

from __future__ import annotations

import json

import pytest
from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.providers.cursor import CursorAdapter

SESSION = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"


def run(name: str, exit_code: int | None = 0) -> Replay:
    return replay(CursorAdapter(), "cursor", name, exit_code)


def test_success_hand_written() -> None:
    r = run("takopi_success.jsonl")
    assert r.of("session") == [{"sessionId": SESSION, "model": "Claude 4.6 Opus (Thinking)",
                                "cwd": "/home/user/project"}]
    assert [x["text"] for x in r.of("reasoning")] == [
        "Let me list the directory contents. I will use the ls tool."]
    assert r.tools == [("call_read_001", "read")]
    assert r.of("tool")[0]["input"] == {"path": "/home/user/project/README.md"}
    assert r.results == {"call_read_001": False}
    assert r.of("tool-result")[0]["preview"] == "Project README"
    assert r.files == [("/home/user/project/README.md", "read")]
    answer = "I found README.md. Here is the content: Project README"
    assert r.texts == [answer]
    assert r.completed == [{"ok": True, "result": answer, "sessionId": SESSION,
                            "durationMs": 2500}]
    assert r.of("usage") == []  # this capture has none: unknown, never a made-up zero


def test_error_result() -> None:
    r = run("takopi_error.jsonl", exit_code=1)
    assert r.of("failure") == [{"message": "Request failed due to upstream error."}]
    assert r.texts == []
    assert r.completed == [{"ok": False, "sessionId": "b2c3d4e5-f6a7-8901-bcde-f12345678901",
                            "durationMs": 500, "reason": "error"}]


def test_partial_output_tools_rejection_and_the_last_message_as_answer() -> None:
    r = run("documented_partial_tools_rejected.documented.jsonl")
    final = ("The build failed on a missing ';' in main.c line 3; I added it. "
             "Cleaning build/ was rejected.")
    # partial deltas, then the repeated whole message: one text, not the message twice
    assert r.texts == ["I'll read the Makefile.", final]
    assert [d["text"] for d in r.of("text-delta")] == ["I'll read ", "the Makefile.", final]
    assert [x["text"] for x in r.of("reasoning")] == ["Check the build script."]
    assert r.tools == [("call-read-0", "read"), ("call-shell-1", "shell"),
                       ("call-shell-2", "shell"), ("call-edit-3", "edit")]
    # exit code 2 is a failed command; the rejected one is an error result and a tool-denied
    assert r.results == {"call-read-0": False, "call-shell-1": True, "call-shell-2": True,
                         "call-edit-3": False}
    assert r.of("tool-denied") == [{"callId": "call-shell-2", "name": "shell",
                                    "reason": "rejected", "message": "rejected: rm -rf build"}]
    edit = next(x for x in r.of("tool-result") if x["callId"] == "call-edit-3")
    assert edit["preview"].startswith("--- a\n+++ b\n")  # the diff, not the whole files
    # the failed command still ran (`run`); the rejected one never did
    assert r.files == [("/srv/app/Makefile", "read"), ("make build", "run"),
                       ("/srv/app/main.c", "edit")]
    # `result.result` concatenates every message; the answer is the last one
    (done,) = r.completed
    assert done["ok"] is True and done["result"] == final
    assert r.usage.counts() == {"input": 14948 + 12000, "cached": 12000, "output": 103}
    assert r.of("usage")[0]["complete"] is True


def test_failure_without_a_result_line_is_read_from_stderr_and_the_exit_status() -> None:
    init = '{"type":"system","subtype":"init","session_id":"s","model":"Auto"}'
    r = replay_lines(CursorAdapter(), [init], exit_code=1, stderr=[
        "Error: Authentication required. Please run 'cursor-agent login' first, or set "
        "CURSOR_API_KEY"])
    (failure,) = r.of("failure")
    assert failure["code"] == "auth" and "cursor-agent login" in failure["hint"]
    assert r.completed == []
    trust = replay_lines(CursorAdapter(), [init], exit_code=1, stderr=[
        "Workspace Trust Required: Pass --trust, --yolo, or -f if you trust this directory"])
    assert "--trust" in trust.of("failure")[0]["hint"]
    bare = replay_lines(CursorAdapter(), [init], exit_code=3)  # (stderr said nothing: the
    assert bare.of("failure") == []  # turn's error is "the process exited with code 3")
    assert replay_lines(CursorAdapter(), [init], exit_code=0).of("failure") == []


def test_a_message_only_in_result_and_self_answered_queries() -> None:
    lines = [json.dumps({"type": "interaction_query", "subtype": "request", "session_id": "s"}),
             json.dumps({"type": "result", "subtype": "success", "is_error": False,
                         "result": "only here", "session_id": "s"})]
    r = replay_lines(CursorAdapter(), lines)
    assert r.texts == ["only here"] and r.completed[0]["result"] == "only here"
    assert r.of("raw") == []


def test_tool_calls_without_an_id_are_each_kept_raw_never_dropped() -> None:
    """Explorer streams2 F2: a call without `call_id` was call "?", and the next one (an edit)
    was dropped as a repeat of it, its result and file change too. Each is kept `raw`."""
    adapter = CursorAdapter()
    for sub, call in (("started", None), ("completed", None), ("started", 3), ("completed", 3)):
        body = {"args": {"path": "/x/y.py"}, "result": {"success": {"diffString": "d"}}}
        line = json.dumps({"type": "tool_call", "subtype": sub, "call_id": call,
                           "tool_call": {"editToolCall" if call else "shellToolCall": body}})
        error = f"tool_call.call_id: expected a call id, got {'number' if call else 'null'}"
        assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
                for o in adapter.parse(line)] == [("raw", line, error)]


@pytest.mark.parametrize(("message", "kinds", "error"), [
    ({"content": [{"type": "output_text", "text": "THE ANSWER"}]}, ["raw"],
     "content block.type: expected a known one, got 'output_text'"),
    ({"content": [{"type": "text", "content": "THE ANSWER"}]}, ["raw"],
     "text block.text: expected a string, got null"),
    ({"text": "THE ANSWER"}, ["raw"], "message.content: expected an array, got null"),
    ({"content": [{"type": "text", "text": "hi"}, {"type": "x", "text": "more"}]},
     ["text-delta", "raw"], "content block.type: expected a known one, got 'x'"),
    ({"content": [{"type": "text", "text": ""}, {"type": "thinking", "thinking": "t"}]}, [],
     None),
])  # fmt: skip
def test_a_message_whose_text_is_not_where_it_should_be_is_kept_raw(
        message: dict[str, object], kinds: list[str], error: str | None) -> None:
    """Explorer streams2 F1: an `assistant` line whose text sat in a block of another type (or
    under another key) left no record and the turn ended done with an empty reply. Its line
    is kept `raw` (after what the rest of it gave), naming what was expected."""
    line = json.dumps({"type": "assistant", "message": {"role": "assistant", **message}})
    out = CursorAdapter().parse(line)
    assert [o.kind for o in out] == kinds
    assert [(o.fields["value"], o.fields["error"]) for o in out if o.kind == "raw"] == (
        [(line, error)] if error else [])


def test_partial_output_the_whole_runs_text_at_the_end_is_no_new_message() -> None:
    """Explorer providers F1: with `--stream-partial-output` the CLI ends with a line without
    `timestamp_ms` holding the text of every message of the run; it was read as a new delta,
    so the transcript said the reply twice and the answer was the whole run's text."""
    r = run("partial_output_four_forms.documented.jsonl")
    assert r.texts == ["Reading the file...", "The file says hello."]
    assert [d["text"] for d in r.of("text-delta")] == [
        "Reading the file...", "The file ", "says hello."]
    assert r.completed[0]["result"] == "The file says hello."
    assert r.of("raw") == []


def _said(text: str, stamp: bool) -> str:
    line = {"type": "assistant", "message": {"role": "assistant",
                                             "content": [{"type": "text", "text": text}]}}
    return json.dumps(line | ({"timestamp_ms": 1} if stamp else {}))


_CALL = json.dumps({"type": "tool_call", "subtype": "started", "call_id": "c1",
                    "tool_call": {"readToolCall": {"args": {"path": "x"}}}})
_END = json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "?"})


@pytest.mark.parametrize(("lines", "texts"), [
    # the run's text again while the last message's deltas are pending: they are the message
    ([_said("Look.", True), _CALL, _said("It ", True), _said("is x.", True),
      _said("Look.It is x.", False)], ["Look.", "It is x."]),
    # a streamed run's only message, said again whole at the end
    ([_said("Hi ", True), _said("there.", True), _CALL, _said("Hi there.", False)],
     ["Hi there."]),
    # a streamed run: a new message that repeats one earlier message of two is a message
    ([_said("A.", True), _CALL, _said("B.", True), _CALL, _said("A.", False)],
     ["A.", "B.", "A."]),
    # no partial output: every line is a message, one said twice too
    ([_said("Done.", False), _CALL, _said("Done.", False)], ["Done.", "Done."]),
    ([_said("A.", False), _CALL, _said("B.", False), _CALL, _said("A.B.", False)],
     ["A.", "B.", "A.B."]),
])  # fmt: skip
def test_which_assistant_line_repeats_the_run(lines: list[str], texts: list[str]) -> None:
    r = replay_lines(CursorAdapter(), [*lines, _END])
    assert r.texts == texts
    assert r.completed[0]["result"] == texts[-1]
