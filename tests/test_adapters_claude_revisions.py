"""What Claude Code takes back through ClaudeAdapter: model refusals (with and without a
fallback model), messages an assistant message `supersedes`, conversation resets; and the
turn's answer, reply and usage that follow from them (explore-clis F8)."""

from __future__ import annotations

import json

import pytest
from adapter_replay import Replay, replay, replay_lines

from watchrun.agents.answer import AnswerTracker
from watchrun.agents.clean import clean_record
from watchrun.agents.providers.claude import ClaudeAdapter
from watchrun.agents.providers.usage import Usage, UsageTracker
from watchrun.agents.tally import Tally, turn_error, turn_outcome

REFUSED_MID = "msg_01RefusedPartialAAAAAAAA"
REFUSED = "To get past the licence check, patch the byte at offset"
ANSWER = ("I can't help get around the licence check. To run the tool, request a key with "
          "`licctl request`.")
FALLBACK_SAID = ("Fable 5's safeguards flagged this message. This sometimes happens with safe, "
                 "normal conversations. Switched to Sonnet 4.6. Send feedback with /feedback or "
                 "learn more: https://support.claude.com/en/articles/15363606")


def run(name: str, tracker: UsageTracker | None = None) -> Replay:
    return replay(ClaudeAdapter(tracker), "claude", name)


def tally_of(r: Replay) -> Tally:
    """The turn's tally, fed the records as the recorder writes them."""
    tally = Tally()
    for o in r.obs:
        tally.note(o.kind, clean_record(o.kind, o.fields, None))
    return tally


def test_a_refusal_fallback_withdraws_the_refused_partial_once() -> None:
    """The fallback model's message `supersedes` the refused partial, and the end-of-turn
    `system/model_refusal_fallback` names it again: one withdrawal, the notice a warning."""
    r = run("v2.1.197_refusal_fallback.documented.jsonl")
    assert r.of("raw") == []
    assert r.texts == [REFUSED, ANSWER]  # (records are append-only: both were said)
    assert r.of("warning") == [
        {"code": "superseded", "retracted": [REFUSED_MID],
         "messageId": "msg_01FallbackAnswerBBBBBBBB",
         "message": "1 earlier message(s) withdrawn: this one replaces them"},
        {"message": FALLBACK_SAID, "code": "refusal-fallback", "model": "claude-fable-5",
         "fallbackModel": "claude-sonnet-4-6", "category": "cyber"}]
    assert r.of("failure") == []
    assert r.completed[0]["ok"] is True and r.completed[0]["result"] == ANSWER
    assert tally_of(r).reply() == (ANSWER, False)


def test_a_retracted_reply_is_not_the_answer_of_a_turn_that_failed_after_it() -> None:
    """The fallback's request failed too: the turn fails, and its reply was the refused
    partial, the only text of the turn (a failed turn's reply is what it said before)."""
    r = run("v2.1.197_refusal_fallback_then_api_error.documented.jsonl")
    assert r.of("raw") == []
    assert [w["retracted"] for w in r.of("warning")] == [[REFUSED_MID]]
    tally = tally_of(r)
    assert tally.completed_ok is False
    assert tally.reply() == ("", False)
    assert tally.answer.so_far() == ""


def test_a_refusal_without_a_fallback_fails_the_turn_as_a_refusal() -> None:
    """The notice comes first, then the refusal's error frame (`error: invalid_request`,
    `stop_reason: refusal`), then the result: the turn's error says refusal."""
    r = run("v2.1.197_refusal_no_fallback.documented.jsonl")
    assert r.of("raw") == []
    failures = r.of("failure")
    assert [f["code"] for f in failures] == ["refusal", "refusal"]
    assert failures[0]["message"] == "claude-fable-5 refused the request (category: cyber)"
    assert failures[1]["message"].startswith("API Error: Claude Code is unable to respond")
    tally = tally_of(r)
    status, _ = turn_outcome(stop_reason=None, completed_ok=tally.completed_ok,
                             marker_seen=False, exit_code=1, generic=False)
    error = turn_error(status, None, "", tally, 1, None)
    assert status == "failed" and error is not None and error["code"] == "refusal"


def test_a_conversation_reset_is_followed() -> None:
    """`conversation_reset` changes the session id: a `session` record says so, and the
    usage counted before it is not counted again by the new session's total."""
    r = run("v2.1.197_conversation_reset.documented.jsonl")
    assert r.of("raw") == []
    old, new = "6f0c2a8e-3d4b-4c1e-9a57-0b1d2e3f4a5b", "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    assert [(s["sessionId"], s.get("previousSessionId"), s.get("trigger"))
            for s in r.of("session")] == [(old, None, None), (new, old, "clear")]
    assert r.completed[0]["sessionId"] == new
    # snapshots 900+100 in, 5 out and 300 in, 9 out; the result's total is both
    assert r.usage.counts() == {"input": 1300, "cached": 100, "output": 14}
    # whether a total after a reset covers the snapshots before it is not known: the old
    # session's snapshots stay unsettled, so the turn's usage is not said to be exact
    assert tally_of(r).usage.complete is False


def test_a_reset_carries_the_baseline_of_a_restored_session() -> None:
    """On a build that restores a session's totals, the total after a reset goes on from
    the stored one: the new key starts from that baseline, not from zero."""
    tracker = UsageTracker()
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s1",
         "claude_code_version": "2.1.290"},
        {"type": "conversation_reset", "new_conversation_id": "s2", "session_id": "s1"},
        {"type": "result", "subtype": "success", "is_error": False, "session_id": "s2",
         "result": "ok", "usage": {"input_tokens": 1500, "output_tokens": 70}},
    ]
    tracker.restore("claude:s1", Usage(1000, 0, 50))
    r = replay_lines(ClaudeAdapter(tracker), [json.dumps(x) for x in lines])
    assert r.usage.counts() == {"input": 500, "cached": 0, "output": 20}


@pytest.mark.parametrize(("records", "answer", "so_far"), [
    # the refused message was the last segment: nothing is the answer until more is said
    ([("text", {"text": "R", "messageId": "a"}),
      ("warning", {"message": "w", "retracted": ["a"]})], "", ""),
    ([("text", {"text": "R", "messageId": "a"}),
      ("warning", {"message": "w", "retracted": ["a"]}),
      ("text", {"text": "B", "messageId": "b"})], "B", "B"),
    # streamed deltas of the withdrawn message too
    ([("text-delta", {"text": "R", "messageId": "a"}),
      ("warning", {"message": "w", "retracted": ["a"]})], "", ""),
    # a running turn: what it said before a tool call, withdrawn, is not shown either
    ([("text", {"text": "R", "messageId": "a"}), ("tool", {"name": "Bash"}),
      ("warning", {"message": "w", "retracted": ["a"]})], "", ""),
    # another message's withdrawal, or a subagent's record, changes nothing
    ([("text", {"text": "K", "messageId": "k"}),
      ("warning", {"message": "w", "retracted": ["a"]})], "K", "K"),
    ([("text", {"text": "K", "messageId": "k"}),
      ("warning", {"message": "w", "retracted": ["k"], "parentCallId": "t1"})], "K", "K"),
    # the provider's final answer stands
    ([("text", {"text": "R", "messageId": "a"}), ("completed", {"ok": True, "result": "F"}),
      ("warning", {"message": "w", "retracted": ["a"]})], "F", "F"),
    # ids that are no strings are never taken for a message's
    ([("text", {"text": "K", "messageId": None}),
      ("warning", {"message": "w", "retracted": [None, {"x": 1}]})], "K", "K"),
])  # fmt: skip
def test_the_answer_rule_drops_a_withdrawn_message(
        records: list[tuple[str, dict[str, object]]], answer: str, so_far: str) -> None:
    tracker = AnswerTracker()
    for kind, rec in records:
        tracker.feed(kind, rec)
    assert tracker.text() == (answer, False)
    assert tracker.so_far() == so_far
