"""Pure parts of turns: prompt/argv rendering, deliveries, the maxTurns window."""

from __future__ import annotations

import pytest

from watchrun.agents.prompt import (
    Delivery,
    TurnWindow,
    format_matches,
    render_command,
    render_prompt,
    render_turn_prompt,
)

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
        "deliveryId": "d-7", "deliveryState": "delivered", "label": "API", "count": 5,
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
