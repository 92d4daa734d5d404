"""GitHub Copilot CLI `-p --output-format json` fixtures through CopilotAdapter."""

from __future__ import annotations

import json

import pytest
from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.clean import clean_record
from watchrun.agents.providers.copilot import CopilotAdapter
from watchrun.agents.tally import Tally, turn_error, turn_outcome

SESSION = "0199d2f0-7c1f-7000-8000-00000000c0de"


def run(name: str, exit_code: int | None = 0) -> Replay:
    return replay(CopilotAdapter(), "copilot", name, exit_code)


def test_third_party_lines() -> None:
    r = run("thirdparty_fixture_lines.documented.jsonl")
    assert [d["text"] for d in r.of("text-delta")] == ["wor"]
    assert r.tools == [("call_1", "bash")] and r.results == {"call_1": False}
    assert r.files == [("pytest -q", "run")]
    assert r.texts == ["work done"]  # the empty tool-request message is not text
    assert r.completed == [{"ok": True, "result": "work done", "sessionId": "sess-fixture",
                            "exitCode": 0, "premiumRequests": 1, "durationMs": 8717}]


def test_tools_usage_denial_compaction_and_the_final_answer() -> None:
    r = run("documented_tools_usage_denied.documented.jsonl")
    assert r.of("session") == [{"sessionId": SESSION, "model": "gpt-5", "version": "1.0.83"}]
    final = "test_ttl fails because store.py sets ttl = 0. Editing it was denied; change it to " \
            "ttl = 60."
    assert r.texts == ["Running the tests first.", final]
    assert [t["messageId"] for t in r.of("text")] == ["a-1", "a-3"]
    assert r.tools == [("call_1", "bash"), ("call_2", "edit")]
    assert r.results == {"call_1": False, "call_2": True}
    assert r.of("tool-result")[0]["preview"].startswith("FAILED test_store.py::test_ttl")
    assert r.of("tool-denied") == [{
        "callId": "call_2", "name": "edit", "reason": "denied",
        "message": "Permission denied and could not request permission from user"}]
    assert r.files == [("pytest -q", "run")]  # the denied edit changed nothing
    assert r.of("model-error") == [{"message": "Too many requests: rate limited", "status": 429,
                                    "error": "rate-limit", "model": "gpt-5"}]
    assert r.of("compaction") == [{"trigger": "auto", "tokensBefore": 120000,
                                   "tokensAfter": 30000}]
    assert r.usage.counts() == {"input": 5200 + 5600 + 6000, "cached": 4096 + 5120 + 5500,
                                "output": 40 + 80 + 60}
    assert r.usage.complete is True
    assert r.of("failure") == [] and r.of("raw") == []
    assert r.completed[0]["ok"] is True and r.completed[0]["result"] == final


def test_provider_error_fails_the_run() -> None:
    r = run("documented_provider_error.documented.jsonl", exit_code=1)
    assert [e["status"] for e in r.of("model-error")] == [500, 500]
    (failure,) = r.of("failure")
    assert failure["code"] == "query" and failure["message"].startswith("Failed to get response")
    assert r.completed[0]["ok"] is False and "result" not in r.completed[0]


def test_auth_error_has_advice_and_unknown_events_are_kept() -> None:
    lines = [json.dumps({"type": "session.error", "data": {
                 "errorType": "authentication", "message": "Not authorized: no token"}}),
             json.dumps({"type": "brand.new_event", "data": {}}),
             json.dumps({"type": "brand.ephemeral", "data": {}, "ephemeral": True}),
             json.dumps({"type": "session.title_changed", "data": {"title": "x"}}),
             json.dumps({"type": "result", "sessionId": "s", "exitCode": 1, "usage": {}})]
    r = replay_lines(CopilotAdapter(), lines, exit_code=1)
    (failure,) = r.of("failure")
    assert failure["code"] == "auth" and "copilot login" in failure["hint"]
    assert [x["type"] for x in r.of("raw")] == ["brand.new_event"]
    assert r.completed[0]["reason"] == "Not authorized: no token"


def test_subagent_messages_are_not_the_answer() -> None:
    msg = {"messageId": "m", "content": "sub says hi", "parentToolCallId": "call_task"}
    lines = [json.dumps({"type": "assistant.message", "data": {"messageId": "r",
                                                               "content": "root answer"}}),
             json.dumps({"type": "assistant.message", "data": msg}),
             json.dumps({"type": "result", "sessionId": "s", "exitCode": 0})]
    r = replay_lines(CopilotAdapter(), lines)
    assert r.texts == ["root answer"] and r.completed[0]["result"] == "root answer"


def test_a_result_without_an_exit_code_says_so_not_none() -> None:
    """Claude-format lines given to the copilot adapter (a wrong `provider`): the turn failed
    with "exit code None", a Python literal as its reason (found by an agents explorer)."""
    lines = [json.dumps({"type": "result", "subtype": "success", "result": "ok"})]
    r = replay_lines(CopilotAdapter(), lines)
    (done,) = r.completed
    assert done["ok"] is False
    assert done["reason"] == ("its result event has no exitCode (not Copilot's JSON output? "
                              "`copilot -p … --output-format json`)")


def test_tool_calls_without_an_id_are_each_kept_raw_never_dropped() -> None:
    """Explorer streams2 F2: a call without `toolCallId` was call "?", and the next one (an
    edit), its result and its file change were dropped as repeats of it. Each is kept `raw`."""
    adapter = CopilotAdapter()
    for tool, args, call in (("bash", {"command": "ls"}, None), ("edit", {"path": "/x/y.py"}, "")):
        for line in (
            json.dumps({"type": "tool.execution_start", "data": {
                "toolCallId": call, "toolName": tool, "arguments": args}}),
            json.dumps({"type": "tool.execution_complete", "data": {
                "toolCallId": call, "success": True, "result": {"content": f"{tool} ok"}}}),
        ):
            error = "data.toolCallId: expected a call id, got " + (
                "null" if call is None else "an empty string")
            assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
                    for o in adapter.parse(line)] == [("raw", line, error)]


@pytest.mark.parametrize(("data", "error"), [
    ({"messageId": "m", "text": "THE ANSWER"}, "data.content: expected a string, got null"),
    ({"messageId": "m", "content": "", "toolRequests": [{"toolCallId": "c", "name": "bash"}]},
     None),
])
def test_a_message_without_its_content_is_kept_raw(data: dict[str, object],
                                                   error: str | None) -> None:
    """Explorer streams2 F1: an `assistant.message` whose text sat under another key left no
    record and the turn ended done with an empty reply. Its line is kept `raw`; a message that
    only requests tools (empty `content`) is nothing."""
    line = json.dumps({"type": "assistant.message", "data": data})
    assert [(o.kind, o.fields.get("value"), o.fields.get("error"))
            for o in CopilotAdapter().parse(line)] == ([("raw", line, error)] if error else [])


def test_abort_subagent_failure_and_notification() -> None:
    """explore-clis F9: `abort`, `subagent.failed` and `system.notification` (copilot-sdk
    1.0.14's session events) were each a `raw` unknown-event, and an aborted turn whose
    `result` said exit 0 was `done` with the narration before the abort as its answer."""
    r = run("sdk1.0.14_abort_subagent_failed_notification.documented.jsonl")
    assert r.of("raw") == []
    assert r.of("warning") == [{"message": "Explore failed: Model call failed: 503 Service "
                                "Unavailable", "code": "subagent-failed", "callId": "call_1"}]
    assert r.results == {"call_1": True}  # the call's own result, from execution_complete
    assert r.of("status") == [{
        "status": "notification", "state": "shell_completed",
        "description": "<system_notification>Shell command \"make nightly\" completed with exit "
                       "code 0</system_notification>"}]
    assert r.of("failure") == [{"message": "the user aborted the turn (Ctrl+C)",
                                "code": "aborted"}]
    (done,) = r.completed
    assert done["ok"] is False and "result" not in done
    assert done["reason"] == "the user aborted the turn (Ctrl+C)"
    tally = Tally()
    for o in r.obs:
        tally.note(o.kind, clean_record(o.kind, o.fields, None))
    status, _ = turn_outcome(stop_reason=None, completed_ok=tally.completed_ok,
                             marker_seen=False, exit_code=0, generic=False)
    assert status == "failed"
    assert turn_error(status, None, "", tally, 0, None) == {
        "code": "aborted", "message": "the user aborted the turn (Ctrl+C)"}


@pytest.mark.parametrize(("event", "kind", "message"), [
    ({"type": "abort", "data": {"reason": "autopilot_credit_limit"}}, "failure",
     "autopilot stopped the run: its objective reached the --max-ai-credits limit"),
    ({"type": "abort", "data": {"reason": "new_reason"}}, "failure",
     "the turn was aborted (new_reason)"),
    ({"type": "abort", "data": {}}, "failure", "the turn was aborted (no reason given)"),
    # a sub-agent's abort (`agentId`): its parent goes on
    ({"type": "abort", "agentId": "agent-7", "data": {"reason": "user_abort"}}, "warning",
     "a sub-agent was aborted (user_abort)"),
    ({"type": "subagent.failed", "data": {"toolCallId": "c", "agentName": "explore",
                                          "error": "boom"}}, "warning", "explore failed: boom"),
])  # fmt: skip
def test_aborts_and_failed_subagents(event: dict[str, object], kind: str, message: str) -> None:
    (obs,) = CopilotAdapter().parse(json.dumps(event))
    assert (obs.kind, obs.fields["message"]) == (kind, message)
