"""Pure parts of turns: prompt/argv rendering, deliveries, the maxTurns window."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.agents.prompt import (
    ARG_BYTES,
    Delivery,
    TurnWindow,
    fit_argument,
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


def test_a_prompt_that_fits_in_an_argument_is_left_as_it_is() -> None:
    prompt = "x" * (ARG_BYTES - 10)
    assert fit_argument(["agent", "-p", "{prompt}"], prompt) == (prompt, 0)
    assert fit_argument(["agent", "-p", "say: {prompt}"], prompt) == (prompt, 0)
    assert fit_argument(["agent"], prompt * 3) == (prompt * 3, 0)  # (on stdin: no bound)


def test_the_middle_of_a_prompt_too_big_for_an_argument_is_cut_and_said() -> None:
    """A wake prompt of many long matched lines passed Linux's 128 KiB for one argument, and
    the agent's start failed with E2BIG every time it was woken. Its middle is cut (the head
    and the template's instructions after the matches kept, whole lines), and a line says
    how much and why."""
    lines = [f"ERROR {i} " + "z" * 5000 for i in range(60)]
    prompt = "Fix these:\n" + "\n".join(lines) + "\nThen run the tests."
    fitted, cut = fit_argument(["agent", "-p", "{prompt}"], prompt)
    assert len(fitted.encode()) <= ARG_BYTES
    assert fitted.startswith("Fix these:\nERROR 0 ") and fitted.endswith("\nThen run the tests.")
    (note,) = [x for x in fitted.split("\n") if x.startswith("[… ")]
    assert note == (f"[… {cut} bytes of this prompt cut here: one command-line argument holds "
                    "at most 128 KiB …]")
    kept = [x for x in fitted.split("\n") if x.startswith("ERROR")]
    assert all(x in lines for x in kept) and 15 < len(kept) < 60  # whole lines only
    assert cut == len(prompt.encode()) - len(fitted.encode()) + len(note.encode()) + 1


@given(st.text(min_size=0, max_size=3000), st.text(max_size=40), st.integers(1, 3))
def test_every_argument_fits_and_only_the_middle_goes(prompt: str, around: str,
                                                      times: int) -> None:
    arg = around + "{prompt}" * times
    limit = 600 + len(around.replace("{prompt}", "").encode())
    fitted, cut = fit_argument(["a", arg], prompt, limit)
    (made,) = [x for x in render_command(["a", arg], fitted) if x != "a"] or [""]
    if cut == 0:
        assert fitted == prompt
    else:
        assert len(made.encode()) <= limit
        note = fitted.index("[… ")
        head, tail = fitted[:note].rstrip("\n"), fitted[fitted.index("…]\n") + 3:]
        assert prompt.startswith(head) and prompt.endswith(tail)
        assert cut == len(prompt.encode()) - len(head.encode()) - len(tail.encode()) or \
            prompt.startswith(head + "\n")
