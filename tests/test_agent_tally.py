"""Pure parts of a turn's end: the recorder's cleaning, the answer rule, the tally, outcomes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.agents.answer import REPLY_CHARS, AnswerTracker
from watchrun.agents.clean import clean_record, clean_text, unreserved
from watchrun.agents.tally import Tally, turn_error, turn_outcome

Lines = list[tuple[str, dict[str, Any]]]
CONTROLS = {chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}


@pytest.mark.parametrize(("text", "clean"), [
    ("\x1b[31mred\x1b[0m", "red"),
    ("title\x1b]0;pwned\x07 after", "title after"),
    ("copy\x1b]52;c;ZWNobyBwd25lZA==\x07 me", "copy me"),
    ("bell\x07 and del\x7f", "bell and del"),
    # a decoded U+009D (mojibake of a right quote) is removed alone, never an OSC start
    ("â€\u009d is great", "â€ is great"),
    ("8-bit \u009b31mCSI and \u009d0;title\u0007 OSC", "8-bit 31mCSI and 0;title OSC"),
    ("progress 10%\r100%", "100%"),
    ("a\r\nb", "a\nb"),
])
def test_clean_text(text: str, clean: str) -> None:
    assert clean_text(text, None) == (clean, False)


@given(st.text())
def test_clean_text_leaves_no_control_character_and_is_idempotent(text: str) -> None:
    clean, _ = clean_text(text, None)
    assert not set(clean) & CONTROLS
    assert clean_text(clean, None) == (clean, False)


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@given(st.sampled_from(["text", "tool", "raw", "output"]), st.dictionaries(st.text(), _values))
def test_clean_record_leaves_controls_only_in_raw_fields(kind: str, fields: dict[str, Any]
                                                         ) -> None:
    rec = clean_record(kind, fields, 4096)
    kept = {k for k in ("raw", "value") if k == "raw" or kind == "raw"}
    shown = {k: v for k, v in rec.items() if not (k in kept and isinstance(v, str))}
    assert not [x for x in _strings(shown) if set(x) & CONTROLS]


def test_clean_record_cleans_every_string_at_any_depth_keys_too() -> None:
    fields = {"text": "\x1b[1mhi\x1b[0m", "input": {"k\x1b[2J": ["x\x07y", {"b": "\u009b1mz"}]},
              "n": 3, "ok": True, "none": None}
    assert clean_record("tool", fields, None) == {
        "text": "hi", "input": {"k": ["xy", {"b": "1mz"}]}, "n": 3, "ok": True, "none": None}


def test_clean_record_clips_and_marks_truncated_with_the_bytes_left_out() -> None:
    """A clipped record said only `truncated`: not how much of it was cut (explorer agents
    U2). `omittedBytes` counts the cleaned bytes the clips left out, across its strings, and
    adds to what its fields said (a tool result's own count stays)."""
    assert clean_record("text", {"text": "é" * 4}, 5) == {
        "text": "éé", "truncated": True, "omittedBytes": 4}
    assert clean_record("tool", {"input": {"a": "x" * 10, "b": ["y" * 7, "z"]}}, 5) == {
        "input": {"a": "xxxxx", "b": ["yyyyy", "z"]}, "truncated": True, "omittedBytes": 7}
    assert clean_record("output", {"text": "\x1b[1m" + "x" * 9, "omittedBytes": 100}, 4) == {
        "text": "xxxx", "truncated": True, "omittedBytes": 105}  # (escapes are no text)
    assert clean_record("text", {"text": "short"}, 5) == {"text": "short"}


def test_only_a_raw_field_or_a_raw_records_value_keeps_what_was_printed() -> None:
    line = "\x1b[31mERR\x1b[0m"
    assert clean_record("output", {"text": line, "raw": line}, None) == {"text": "ERR",
                                                                         "raw": line}
    assert clean_record("output", {"text": "plain", "raw": "plain\r"}, None) == {"text": "plain"}
    assert clean_record("raw", {"value": line, "reason": "unparseable"}, None) == {
        "value": line, "reason": "unparseable"}
    # anywhere else the same text is cleaned, also a field named value
    assert clean_record("text", {"text": "x", "value": line}, None)["value"] == "ERR"


def test_unreserved_renames_envelope_fields() -> None:
    assert unreserved({"text": "x", "kind": "k", "seq": 1, "turnId": "t"}) == {
        "text": "x", "provider_kind": "k", "provider_seq": 1, "provider_turnId": "t"}


def tally(lines: Lines, until: str | None = None) -> Tally:
    t = Tally(until)
    for kind, fields in lines:
        t.note(kind, fields)
    return t


@pytest.mark.parametrize(("lines", "reply"), [
    ([("text", {"text": "a"}), ("text", {"text": "b"})], "a\nb"),
    ([("text", {"text": "plan"}), ("tool", {"name": "Bash"}), ("text", {"text": "end"})], "end"),
    ([("text", {"text": "plan"}), ("tool-result", {"isError": False}), ("text", {"text": "e"})],
     "e"),
    ([("text", {"text": "plan"}), ("tool-denied", {"reason": "permission"})], ""),
    ([("text", {"text": "m1", "messageId": "1"}), ("text", {"text": "m2", "messageId": "2"})],
     "m2"),
    ([("text", {"text": "a", "messageId": "1"}), ("text", {"text": "b", "messageId": "1"})],
     "a\nb"),
    ([("text", {"text": "x"}), ("completed", {"ok": True, "result": "final"})], "final"),
    ([("text", {"text": "x"}), ("completed", {"ok": False, "result": "no"})], "x"),
    # a later failed `completed` does not take back an earlier successful one's answer
    ([("completed", {"ok": True, "result": "first"}),
      ("completed", {"ok": False, "result": "second"})], "first"),
    ([("text", {"text": "x"}), ("text", {"text": "F", "final": True})], "F"),
    ([("text", {"text": "sub", "parentCallId": "c1"}), ("text", {"text": "main"})], "main"),
    ([("text", {"text": "main"}), ("tool", {"name": "Task", "parentCallId": "c1"})], "main"),
    ([("text-delta", {"text": "he"}), ("text-delta", {"text": "llo"})], "hello"),
    ([("text-delta", {"text": "he"}), ("text", {"text": "hello"})], "hello"),
    ([("text-delta", {"text": "x"}), ("tool", {"name": "Bash"})], ""),
    ([("reasoning", {"text": "hmm"}), ("output", {"text": "log"})], ""),
])
def test_answer_rule(lines: Lines, reply: str) -> None:
    assert tally(lines).reply() == (reply, False)
    tracker = AnswerTracker()
    for kind, fields in lines:
        tracker.feed(kind, fields)
    assert tracker.text() == (reply, False)


def test_answer_is_bounded() -> None:
    text, cut = tally([("text", {"text": "a" * REPLY_CHARS}), ("text", {"text": "more"})]).reply()
    assert cut and text.startswith("a" * REPLY_CHARS) and "more" not in text


def test_usage_sum_and_completion_facts() -> None:
    t = tally([])
    assert t.usage.complete is False and t.usage.tokens == 0
    t = tally([("usage", {"input": 10, "cached": 2, "output": 5, "complete": True}),
               ("usage", {"input": 1, "cached": 0, "output": 1, "complete": False}),
               ("failure", {"message": "boom", "code": "auth"}),
               ("completed", {"ok": False, "reason": "error_during_execution"})])
    assert t.usage.counts() == {"input": 11, "cached": 2, "output": 6}
    assert t.usage.complete is False
    assert (t.failure, t.failure_code) == ("boom", "auth")
    assert (t.completed_ok, t.completed_reason) == (False, "error_during_execution")
    assert (tally([("quota", {"message": "limit"})]).failure_code) == "quota"


def test_a_cumulative_total_settles_the_snapshots_of_its_session() -> None:
    """Claude: per-message snapshots are provisional; the result total of the same session
    makes the turn's usage exact — but not an unrelated session's, nor an unkeyed one."""
    snap = {"input": 10, "cached": 0, "output": 1, "complete": False, "sessionKey": "claude:S"}
    rest = {"input": 5, "cached": 0, "output": 9, "complete": True, "sessionKey": "claude:S",
            "total": {"input": 15, "cached": 0, "output": 10}}
    assert tally([("usage", snap), ("usage", rest)]).usage.complete is True
    other = {**rest, "sessionKey": "claude:T"}
    assert tally([("usage", snap), ("usage", other)]).usage.complete is False
    unkeyed = {"input": 1, "cached": 0, "output": 1, "complete": False}
    assert tally([("usage", unkeyed), ("usage", rest)]).usage.complete is False
    inexact = {**rest, "complete": False}
    assert tally([("usage", snap), ("usage", inexact)]).usage.complete is False
    assert tally([("usage", {"input": -1})]).usage.complete is False


@pytest.mark.parametrize(("until", "lines", "seen"), [
    ("output:DONE", [("text", {"text": "all DONE"})], True),
    ("output:DONE", [("output", {"text": "DONE."})], True),
    ("output:DONE", [("text-delta", {"text": "xDO"}), ("text-delta", {"text": "NEy"})], True),
    ("output:DONE", [("text", {"text": "DO"}), ("text", {"text": "NE"})], False),
    ("output:DONE", [("reasoning", {"text": "DONE"})], False),
    ("event:tool", [("text", {"text": "x"}), ("tool", {"name": "Bash"})], True),
    ("event:tool", [("tool-result", {"isError": False})], False),
    ("event:compaction", [("compaction", {"trigger": "auto"})], True),
    ("status:compacting", [("status", {"status": "compacting"})], True),
    ("status:compacting", [("status", {"status": "idle"})], False),
    (None, [("text", {"text": "DONE"})], False),
])
def test_completion_marker(until: str | None, lines: Lines, seen: bool) -> None:
    assert tally(lines, until).marker_seen is seen


@pytest.mark.parametrize(("kw", "expected"), [
    ({"completed_ok": True}, ("done", True)),
    ({"completed_ok": True, "exit_code": 1}, ("done", True)),
    ({"completed_ok": False, "exit_code": 1}, ("failed", False)),
    ({"completed_ok": None, "exit_code": 0}, ("failed", False)),
    ({"stop_reason": "aborted"}, ("cancelled", False)),
    ({"stop_reason": "aborted", "completed_ok": True}, ("cancelled", True)),
    ({"stop_reason": "completion"}, ("done", True)),
    # stopped silent after the provider's final result: judged by that result
    ({"stop_reason": "completion", "completed_ok": True}, ("done", True)),
    ({"stop_reason": "completion", "completed_ok": False}, ("failed", False)),
    ({"stop_reason": "completion", "completed_ok": False, "marker_seen": True}, ("done", True)),
    ({"marker_seen": True, "exit_code": 0}, ("done", True)),
    ({"stop_reason": "deadline", "marker_seen": True}, ("failed", True)),
    ({"stop_reason": "deadline"}, ("failed", False)),
    ({"stop_reason": "idle-timeout", "completed_ok": True}, ("failed", True)),
    ({"stop_reason": "oversized-event"}, ("failed", False)),
    ({"stop_reason": "reader-failed", "completed_ok": True}, ("failed", True)),
    ({"generic": True, "exit_code": 0}, ("done", True)),
    ({"generic": True, "exit_code": 2}, ("failed", False)),
    ({"generic": True, "exit_code": None}, ("failed", False)),
])
def test_turn_outcome(kw: dict[str, Any], expected: tuple[str, bool]) -> None:
    args: dict[str, Any] = {"stop_reason": None, "completed_ok": None, "marker_seen": False,
                            "exit_code": None, "generic": False, **kw}
    assert turn_outcome(**args) == expected


def test_the_last_completed_decides_the_status_and_an_earlier_success_keeps_its_answer() -> None:
    """records.md "The answer": `completed{ok}` then `completed{ok: false}` is a failed turn
    whose reply is the first one's answer."""
    t = tally([("completed", {"ok": True, "result": "first"}),
               ("completed", {"ok": False, "result": "second"})])
    assert t.completed_ok is False and t.reply() == ("first", False)
    assert turn_outcome(stop_reason="completion", completed_ok=t.completed_ok, marker_seen=False,
                        exit_code=0, generic=False) == ("failed", False)


@pytest.mark.parametrize(("status", "stop", "lines", "exit_code", "signal", "code"), [
    ("done", None, [], 0, None, None),
    ("cancelled", "aborted", [], None, "SIGTERM", "aborted"),
    ("failed", "deadline", [("failure", {"message": "x"})], None, "SIGKILL", "deadline"),
    ("failed", None, [("failure", {"message": "no auth", "code": "auth"})], 1, None, "auth"),
    ("failed", None, [("failure", {"message": "boom"})], 1, None, "failure"),
    ("failed", None, [("completed", {"ok": False, "reason": "max_turns"})], 1, None,
     "provider"),
    ("failed", None, [], None, "SIGSEGV", "signal"),
    ("failed", None, [], 2, None, "exit"),
    ("failed", None, [], 0, None, "incomplete"),
    ("failed", "completion", [("completed", {"ok": False, "reason": "max_turns"})], None,
     "SIGTERM", "provider"),  # stopped silent after its final result: that result's failure
])
def test_turn_error(status: str, stop: str | None, lines: Lines, exit_code: int | None,
                    signal: str | None, code: str | None) -> None:
    error = turn_error(status, stop, "why", tally(lines), exit_code, signal)
    assert (error or {}).get("code") == code
    assert error is None or error["message"]


def test_records_round_trip_through_json() -> None:
    rec = clean_record("text", {"text": "\u2028 line sep \u009d", "messageId": "m"}, None)
    assert json.loads(json.dumps(rec)) == {"text": "\u2028 line sep ", "messageId": "m"}
