"""Pure parts of turns: prompt/argv rendering, deliveries, the maxTurns window, outcomes, tally."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from watchrun.agents.prompt import (
    REPLY_BYTES,
    Delivery,
    Tally,
    TurnWindow,
    clean_fields,
    format_matches,
    render_command,
    render_prompt,
    render_turn_prompt,
    turn_error,
    turn_outcome,
)
from watchrun.agents.providers.base import Observation, observation
from watchrun.agents.providers.usage import UsageTracker

VALUES = {"matches": "E1\nE2", "watcher": "server", "label": "API {label}", "count": "2"}


@pytest.mark.parametrize(("template", "expected"), [
    ("{matches}", "E1\nE2"),
    ("In {label} ({watcher}, {count}):\n{matches}\n", "In API {label} (server, 2):\nE1\nE2\n"),
    ("json {\"a\": 1} {prompt} {0} {unknown} {", "json {\"a\": 1} {prompt} {0} {unknown} {"),
    ("{{matches}}", "{E1\nE2}"),
    ("{Matches} { matches }", "{Matches} { matches }"),
    ("", ""),
])
def test_render_prompt(template: str, expected: str) -> None:
    assert render_prompt(template, VALUES) == expected


@pytest.mark.parametrize(("lines", "total", "limit", "expected"), [
    (["a", "b"], 2, 50, "a\nb"),
    (["a", "b", "c"], 3, 2, "a\nb\n… and 1 more"),
    (["a", "b"], 1000, 50, "a\nb\n… and 998 more"),
    ([], 0, 50, ""),
    (["a"], 1, 0, "… and 1 more"),
])
def test_format_matches(lines: list[str], total: int, limit: int, expected: str) -> None:
    assert format_matches(lines, total, limit) == expected


@pytest.mark.parametrize(("command", "prompt", "expected"), [
    (("claude", "-p", "{prompt}"), 'x"; rm -rf / #', ["claude", "-p", 'x"; rm -rf / #']),
    (("tool", "--message={prompt}", "--"), "--flag a b", ["tool", "--message=--flag a b", "--"]),
    (("cat",), "ignored", ["cat"]),
    (("echo", "{prompt}{prompt}"), "$(id)", ["echo", "$(id)$(id)"]),
])
def test_render_command(command: tuple[str, ...], prompt: str, expected: list[str]) -> None:
    assert render_command(command, prompt) == expected


def test_delivery_keeps_the_first_lines_and_counts_the_rest() -> None:
    d = Delivery("d-7", "API", keep=3, watcher="server", seq=7)
    d.add(["a", "b"])
    d.add(["c", "d", "e"])
    assert (d.count, d.lines, d.overflow) == (5, ["a", "b", "c"], 2)
    assert d.record("delivered", 2, turnId="turn-9", reason=None) == {
        "deliveryId": "d-7", "delivery_state": "delivered", "label": "API", "count": 5,
        "lines": ["a", "b"], "overflow": 2, "watcher": "server", "turnId": "turn-9"}
    send = Delivery("d-8", "send", keep=1, source="send")
    send.add(["hello"])
    assert send.record("queued", 50)["source"] == "send" and "watcher" not in send.record(
        "queued", 50)


def test_turn_prompt_of_several_watchers() -> None:
    a = Delivery("d-1", "API", keep=10, watcher="api")
    a.add(["E1", "E2"])
    b = Delivery("d-2", "DB", keep=1, watcher="db")
    b.add(["F1", "F2"])
    text = render_turn_prompt("{label}|{watcher}|{count}\n{matches}", [a, b], 2)
    assert text == "API, DB|api, db|4\n[API] E1\n[API] E2\n… and 2 more"
    assert render_turn_prompt("{label}: {matches}", [a], 50) == "API: E1\nE2"


def test_turn_window_slides() -> None:
    w = TurnWindow(2, window_s=100)
    assert w.allow(0) and w.allow(10)
    assert not w.allow(50) and w.retry_in(50) == 50
    assert w.allow(100) and w.used(100) == 2
    assert not w.allow(109) and w.allow(110.5)
    w.max_turns = 5
    assert w.allow(111) and w.retry_in(111) == 0


@pytest.mark.parametrize(("kw", "expected"), [
    ({"completed_ok": True}, ("done", True)),
    ({"completed_ok": True, "exit_code": 1}, ("done", True)),
    ({"completed_ok": False, "exit_code": 1}, ("failed", False)),
    ({"completed_ok": None, "exit_code": 0}, ("failed", False)),
    ({"stop_reason": "aborted"}, ("cancelled", False)),
    ({"stop_reason": "aborted", "completed_ok": True}, ("cancelled", True)),
    ({"stop_reason": "completion"}, ("done", True)),
    ({"marker_seen": True, "exit_code": 0}, ("done", True)),
    ({"stop_reason": "deadline", "marker_seen": True}, ("failed", True)),
    ({"stop_reason": "deadline"}, ("failed", False)),
    ({"stop_reason": "idle-timeout", "completed_ok": True}, ("failed", True)),
    ({"stop_reason": "oversized-event"}, ("failed", False)),
    ({"generic": True, "exit_code": 0}, ("done", True)),
    ({"generic": True, "exit_code": 2}, ("failed", False)),
    ({"generic": True, "exit_code": None}, ("failed", False)),
])
def test_turn_outcome(kw: dict[str, Any], expected: tuple[str, bool]) -> None:
    args: dict[str, Any] = {"stop_reason": None, "completed_ok": None, "marker_seen": False,
                            "exit_code": None, "generic": False, **kw}
    assert turn_outcome(**args) == expected


@pytest.mark.parametrize(("value", "limit", "expected"), [
    ("\x1b[31mred\x1b[0m", 100, ("red", False)),
    ({"a": ["x\x07y", {"b": "\x9b1mz"}], "n": 3, "ok": True}, 100,
     ({"a": ["xy", {"b": "z"}], "n": 3, "ok": True}, False)),
    ({"t": "abcdef"}, 3, ({"t": "abc"}, True)),
    (["é" * 3], 5, (["éé"], True)),
    (None, 1, (None, False)),
])
def test_clean_fields(value: Any, limit: int, expected: tuple[Any, bool]) -> None:
    assert clean_fields(value, limit) == expected


class Scripted:
    """An adapter whose every line is a JSON list of [kind, fields] observations."""

    provider: ClassVar[str] = "scripted"

    def __init__(self, tracker: UsageTracker | None = None) -> None:
        self.finished = False

    def parse(self, line: str) -> list[Observation]:
        return [Observation(kind, fields) for kind, fields in json.loads(line)]

    def finish(self) -> list[Observation]:
        self.finished = True
        return [observation("status", status="ended")]


def tally(lines: list[list[tuple[str, dict[str, Any]]]], until: str | None = None) -> Tally:
    t = Tally(Scripted(), until)
    for line in lines:
        t.line(json.dumps(line))
    return t


@pytest.mark.parametrize(("lines", "reply"), [
    ([[("text", {"text": "a"})], [("text", {"text": "b"})]], "a\nb"),
    ([[("text", {"text": "plan"})], [("tool", {"name": "Bash"})], [("text", {"text": "end"})]],
     "end"),
    ([[("text", {"text": "x"})], [("completed", {"ok": True, "result": "final"})]], "final"),
    ([[("text", {"text": "x"})], [("completed", {"ok": False, "result": "no"})]], "x"),
    ([[("text", {"text": "x"})], [("text", {"text": "F", "final": True})]], "F"),
    ([[("text", {"text": "sub", "parentCallId": "c1"})], [("text", {"text": "main"})]], "main"),
    ([[("text-delta", {"text": "he"})], [("text-delta", {"text": "llo"})]], "hello"),
    ([[("text-delta", {"text": "he"})], [("text", {"text": "hello"})]], "hello"),
    ([[("reasoning", {"text": "hmm"})], [("output", {"text": "log"})]], ""),
])
def test_tally_reply(lines: list[list[tuple[str, dict[str, Any]]]], reply: str) -> None:
    assert tally(lines).reply() == (reply, False)


def test_tally_reply_is_bounded() -> None:
    t = tally([[("text", {"text": "a" * REPLY_BYTES})], [("text", {"text": "more"})]])
    text, cut = t.reply()
    assert cut and len(text) == REPLY_BYTES


def test_tally_usage_and_completion_facts() -> None:
    t = tally([])
    assert t.usage.complete is False and t.usage.tokens == 0
    t = tally([[("usage", {"input": 10, "cached": 2, "output": 5, "complete": True})],
               [("usage", {"input": 1, "cached": 0, "output": 1, "complete": False})],
               [("failure", {"message": "boom", "code": "auth"})],
               [("completed", {"ok": False, "reason": "error_during_execution"})]])
    assert t.usage.counts() == {"input": 11, "cached": 2, "output": 6}
    assert t.usage.complete is False
    assert (t.failure, t.failure_code) == ("boom", "auth")
    assert (t.completed_ok, t.completed_reason) == (False, "error_during_execution")
    assert t.finish() == [("status", {"status": "ended"})]


def test_tally_renames_reserved_fields() -> None:
    records = Tally(Scripted()).line(json.dumps([("output", {"text": "x", "kind": "k",
                                                             "seq": 1})]))
    assert records == [("output", {"text": "x", "provider_kind": "k", "provider_seq": 1})]


@pytest.mark.parametrize(("until", "lines", "seen"), [
    ("output:DONE", [[("text", {"text": "all DONE"})]], True),
    ("output:DONE", [[("output", {"text": "DONE."})]], True),
    ("output:DONE", [[("text-delta", {"text": "xDO"})], [("text-delta", {"text": "NEy"})]], True),
    ("output:DONE", [[("text", {"text": "DO"})], [("text", {"text": "NE"})]], False),
    ("output:DONE", [[("reasoning", {"text": "DONE"})]], False),
    ("event:tool", [[("text", {"text": "x"})], [("tool", {"name": "Bash"})]], True),
    ("event:tool", [[("tool-result", {"isError": False})]], False),
    ("status:compacted", [[("status", {"status": "compacted"})]], True),
    ("status:compacted", [[("status", {"status": "idle"})]], False),
    (None, [[("text", {"text": "DONE"})]], False),
])
def test_tally_completion_marker(until: str | None, lines: list[list[tuple[str, dict[str, Any]]]],
                                 seen: bool) -> None:
    assert tally(lines, until).marker_seen is seen


@pytest.mark.parametrize(("status", "stop", "lines", "exit_code", "signal", "code"), [
    ("done", None, [], 0, None, None),
    ("cancelled", "aborted", [], None, "SIGTERM", "aborted"),
    ("failed", "deadline", [[("failure", {"message": "x"})]], None, "SIGKILL", "deadline"),
    ("failed", None, [[("failure", {"message": "no auth", "code": "auth"})]], 1, None, "auth"),
    ("failed", None, [[("failure", {"message": "boom"})]], 1, None, "failure"),
    ("failed", None, [[("completed", {"ok": False, "reason": "max_turns"})]], 1, None,
     "provider"),
    ("failed", None, [], None, "SIGSEGV", "signal"),
    ("failed", None, [], 2, None, "exit"),
    ("failed", None, [], 0, None, "incomplete"),
])
def test_turn_error(status: str, stop: str | None, lines: list[list[tuple[str, dict[str, Any]]]],
                    exit_code: int | None, signal: str | None, code: str | None) -> None:
    error = turn_error(status, stop, "why", tally(lines), exit_code, signal)
    assert (error or {}).get("code") == code
    assert error is None or error["message"]
