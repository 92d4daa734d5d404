"""The pure parts of actions: `when` thresholds and `throttle` windows over given times (tables
and Hypothesis), and what a firing sends (the JSON document, Slack text, exec environment)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from watchrun.actions.payload import (
    ENV_LINES_BYTES,
    LABEL_BYTES,
    SLACK_TEXT_CHARS,
    Context,
    build,
    slack_text,
)
from watchrun.actions.windows import Firing, Gate, Suppression
from watchrun.config.model import BODY_BYTES, ThresholdSpec
from watchrun.events import MatchInfo
from watchrun.match.redact import redactor

BUDGET = BODY_BYTES


def batch(n: int, start: int = 1) -> list[MatchInfo]:
    return [MatchInfo(f"ERROR {i}", i, i, f"f:{i}", f"w:{i:016x}") for i in range(start, start + n)]


def fired(events: list[Firing | Suppression]) -> list[Firing]:
    return [e for e in events if isinstance(e, Firing)]


def test_every_batch_fires_without_when_or_throttle() -> None:
    gate = Gate(None, None, keep=2, budget=BUDGET)
    (f,) = gate.offer(0.0, batch(5))
    assert isinstance(f, Firing)
    assert (f.reason, f.count, len(f.matches)) == ("match", 5, 2)
    assert (f.first_cursor, f.last_cursor) == (f"w:{1:016x}", f"w:{5:016x}")
    assert gate.next_due() is None


# (time, matches) offered in order -> counts of the firings they cause
THRESHOLD_TABLE = [
    ([(0, 1), (5, 1), (9, 1)], [3]),  # 3 within 10 s
    ([(0, 1), (5, 1), (11, 1)], []),  # the first left the window
    ([(0, 1), (5, 1), (11, 1), (12, 1)], [3]),
    ([(0, 5)], [5]),  # one batch above the threshold
    ([(0, 3), (1, 3), (2, 3)], [3, 3, 3]),  # counting starts again after each firing
    ([(0, 2), (10, 1)], [3]),  # the window's edge is inside it
]


def test_threshold_table() -> None:
    for offers, want in THRESHOLD_TABLE:
        gate = Gate(ThresholdSpec(3, 10_000), None, keep=50, budget=BUDGET)
        got = [f.count for t, n in offers for f in fired(gate.offer(float(t), batch(n)))]
        assert got == want, offers


def test_throttle_suppresses_then_sends_what_it_held_when_the_window_ends() -> None:
    gate = Gate(None, 60_000, keep=50, budget=BUDGET)
    assert [f.count for f in fired(gate.offer(0.0, batch(1)))] == [1]
    s1, = gate.offer(10.0, batch(2, 2))
    s2, = gate.offer(20.0, batch(1, 4))
    assert isinstance(s1, Suppression) and isinstance(s2, Suppression)
    assert (s1.suppressed, s2.suppressed, s2.count, s2.window_end) == (1, 2, 1, 60.0)
    assert gate.next_due() == 60.0
    assert gate.due(59.9) is None
    held = gate.due(60.0)
    assert held is not None
    assert (held.reason, held.count, held.suppressed, held.suppressed_matches) == (
        "throttle-end", 3, 2, 3)
    assert [m.line for m in held.matches] == ["ERROR 2", "ERROR 3", "ERROR 4"]
    # the firing that went out opened the next window
    assert isinstance(gate.offer(61.0, batch(1, 5))[0], Suppression)
    assert gate.due(120.0) is not None
    assert gate.due(200.0) is None  # nothing held: the window closes
    assert fired(gate.offer(200.5, batch(1, 9)))[0].reason == "match"


def test_a_late_offer_first_sends_what_the_ended_window_held() -> None:
    gate = Gate(None, 1000, keep=5, budget=BUDGET)
    gate.offer(0.0, batch(1))
    gate.offer(0.5, batch(1, 2))
    events = gate.offer(5.0, batch(1, 3))
    assert [type(e).__name__ for e in events] == ["Firing", "Suppression"]
    assert isinstance(events[0], Firing) and events[0].reason == "throttle-end"


@given(st.lists(st.tuples(st.floats(0, 30), st.integers(1, 20)), max_size=40),
       st.sampled_from([None, 1000, 5000]), st.sampled_from([None, (1, 2000), (7, 3000)]))
def test_no_match_is_lost_and_windows_hold(offers: list[tuple[float, int]],
                                           throttle_ms: int | None,
                                           threshold: tuple[int, int] | None) -> None:
    gate = Gate(ThresholdSpec(*threshold) if threshold else None, throttle_ms, keep=3,
                budget=BUDGET)
    now, out = 0.0, []
    for delta, n in offers:
        now += delta
        out += gate.offer(now, batch(n))
    last = gate.due(float("inf"))
    firings = fired(out) + ([last] if last is not None else [])
    sent = [f for f in fired(out) if f.reason != "throttle-end"]
    if threshold is None:  # every match goes out, once: at once, or when a window ends
        assert sum(f.count for f in firings) == sum(n for _, n in offers)
        assert sum(f.suppressed_matches for f in firings) == sum(
            e.count for e in out if isinstance(e, Suppression))
    else:
        assert all(f.count >= threshold[0] for f in sent)
    assert all(len(f.matches) <= 3 for f in firings)


def _doc(lines: list[str], count: int | None = None) -> dict[str, object]:
    f = Firing("match", 50, BUDGET)
    f.add([MatchInfo(x, 1, 0, "f:1", "w:0000000000000001") for x in lines], count)
    return build(Context("w", "the label", "page", 1, "2026-01-01T00:00:00.000Z"), f,
                 redactor(), BUDGET).document


def test_slack_text_is_escaped_and_counts_what_it_leaves_out() -> None:
    text = slack_text(_doc(["<@U123> & <!here>"], count=3))
    assert "&lt;@U123&gt; &amp; &lt;!here&gt;" in text
    assert text.endswith("… and 2 more (see the watcher's JSONL from w:0000000000000001)")


def test_the_environment_is_clipped_and_has_no_nul() -> None:
    f = Firing("match", 50, BUDGET)
    f.add([MatchInfo("é" * 40_000, 1, 0, "f:1", "w:0000000000000001")])
    out = build(Context("w", "l", "a", 1, "t"), f, redactor(), BUDGET)
    env = out.environ()
    assert len(env["WATCHRUN_LINES"].encode()) <= ENV_LINES_BYTES
    assert env["WATCHRUN_LINES"].encode().decode() == env["WATCHRUN_LINES"]
    assert all("\0" not in v for v in env.values())


def test_an_execs_environment_says_what_was_suppressed_and_dropped() -> None:
    """docs/config.md's WATCHRUN_* variables, each from the firing: a throttle-end firing that
    stands for 2 suppressed firings (3 matches), after 4 dropped ones."""
    f = Firing("throttle-end", 50, BUDGET, suppressed=2, suppressed_matches=3)
    f.add([MatchInfo(x, n, 0, f"f:{n}", f"w:000000000000000{n}")
           for n, x in ((1, "ERROR a"), (2, "ERROR b"))], count=3)
    env = build(Context("w", "the app", "page", 7, "t", dropped=4, dropped_matches=9), f,
                redactor(), BUDGET).environ()
    assert env == {
        "WATCHRUN_WATCHER": "w", "WATCHRUN_LABEL": "the app", "WATCHRUN_ACTION": "page",
        "WATCHRUN_FIRING": "7", "WATCHRUN_REASON": "throttle-end", "WATCHRUN_COUNT": "3",
        "WATCHRUN_SUPPRESSED": "2", "WATCHRUN_SUPPRESSED_MATCHES": "3", "WATCHRUN_DROPPED": "4",
        "WATCHRUN_FIRST_CURSOR": "w:0000000000000001",
        "WATCHRUN_LAST_CURSOR": "w:0000000000000002",
        "WATCHRUN_LINE": "ERROR a", "WATCHRUN_LINES": "ERROR a\nERROR b"}


@given(st.lists(st.text(alphabet="`ab<\n", max_size=12), min_size=1, max_size=4))
def test_no_line_can_leave_the_slack_code_block(lines: list[str]) -> None:
    """Five backticks used to leave a ``` after the escape (a line closed the block early), and
    a line ending in a backtick ran into the closing fence."""
    text = slack_text(_doc(lines))
    block = text.split("\n```", 1)[1]
    assert block.endswith("```")
    inner = block[: -len("```")]
    assert "``" not in inner and not inner.startswith("`") and not inner.endswith("`")


def test_a_first_line_too_long_for_a_slack_message_is_clipped_not_left_out() -> None:
    """A 4 000-character JSON log line was left out of the Slack message whole ("matched 1
    line … and 1 more", no text) while its record said it was shown. It is clipped, ending in
    `…`, and the message stays under Slack's size; what does not fit after it is counted."""
    first = '{"level":"ERROR","msg":"' + "a&b`c<d " * 500 + '"}'
    doc = _doc([first, "ERROR next"])
    out = build(Context("w", "the label", "page", 1, "t"), _firing([first, "ERROR next"]),
                redactor(), BUDGET)
    text = slack_text(doc)
    assert len(text) <= SLACK_TEXT_CHARS and out.shown(slack=True) == 1
    block = text.split("\n```", 1)[1].split("```\n")[0]
    assert block.startswith('{"level":"ERROR","msg":"a&amp;b\u200b`\u200bc&lt;d a') and \
        block.endswith("…")
    shown = block[:-1].replace("&amp;", "&").replace("&lt;", "<").replace("\u200b", "")
    assert first.startswith(shown) and len(block) > 3_000  # (no entity cut in two; the
    # message filled: 1 600 characters of this line take 3 400 escaped)
    assert text.endswith("\n… and 1 more (see the watcher's JSONL from w:0000000000000001)")
    assert out.shown(slack=False) == 2  # (the JSON body holds both)


def test_a_line_cut_at_max_line_bytes_ends_in_an_ellipsis_in_slack() -> None:
    f = Firing("match", 50, BUDGET)
    f.add([MatchInfo("ERROR the start of it", 1, 0, "f:1", "w:0000000000000001", cut=9)])
    text = slack_text(build(Context("w", "l", "a", 1, "t"), f, redactor(), BUDGET).document)
    assert "```ERROR the start of it…```" in text


@given(st.lists(st.tuples(st.text(alphabet="`a&<>", min_size=1, max_size=12),
                          st.integers(SLACK_TEXT_CHARS, 6000)), min_size=1, max_size=3))
def test_no_clipped_line_can_leave_the_slack_code_block(units: list[tuple[str, int]]) -> None:
    """Lines too long for the message, made of what Slack's escape widens (repeated units)."""
    text = slack_text(_doc([(unit * n)[:n] for unit, n in units]))
    assert len(text) <= SLACK_TEXT_CHARS
    block = text.split("\n```", 1)[1]
    inner = block[: block.index("```\n") if "```\n" in block else len(block) - 3]
    assert inner.endswith("…") and "``" not in inner and not inner.startswith("`")


def _firing(lines: list[str]) -> Firing:
    f = Firing("match", 50, BUDGET)
    f.add([MatchInfo(x, 1, 0, "f:1", "w:0000000000000001") for x in lines])
    return f


KEY = ["-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
       "QyNTUxOQAAACBFakeFakeFakeFake", "-----END OPENSSH PRIVATE KEY-----"]


def test_a_private_key_block_leaves_as_markers_line_for_line() -> None:
    """Each matched line used to be redacted alone, so the block's body lines left as they were
    (only its BEGIN line matched the rule)."""
    f = Firing("match", 50, BUDGET)
    f.add([MatchInfo(x, i, 0, f"f:{i}", f"w:{i:016x}")
           for i, x in enumerate(["ERROR dumping the config:", *KEY, "ERROR done"], 1)])
    out = build(Context("w", "l", "a", 1, "t"), f, redactor(), BUDGET)
    assert [x["line"] for x in out.lines] == [
        "ERROR dumping the config:", *["[REDACTED:private-key]"] * 4, "ERROR done"]
    assert [x["cursor"] for x in out.lines] == [f"w:{i:016x}" for i in range(1, 7)]
    assert out.redacted == {"private-key": 1}
    for sent in (out.json_body(), out.stdin(), str(out.environ()).encode(),
                 out.slack_body()):
        assert b"b3BlbnNz" not in sent and b"QyNTUx" not in sent


def test_the_label_is_redacted_before_it_leaves() -> None:
    """A command watcher's label is its command line: a `${VAR}` password in it left in the
    body, the Slack headline and WATCHRUN_LABEL."""
    f = Firing("match", 50, BUDGET)
    f.add(batch(1))
    label = "psql postgres://app:Tr0ub4dor-and-3@db.internal/app"
    out = build(Context("w", label, "a", 1, "t"), f, redactor(), BUDGET)
    for sent in (out.json_body(), out.slack_body(), out.environ()["WATCHRUN_LABEL"].encode()):
        assert b"Tr0ub4dor" not in sent and b"[REDACTED:url-credentials]" in sent
    assert out.redacted == {"url-credentials": 1}


SMALL = 16 * 1024  # the least maxBodyBytes


def _fire(lines: list[str], limit: int = SMALL, cut: int | None = None) -> dict[str, object]:
    f = Firing("match", 2000, limit)
    f.add([MatchInfo(x, n, 0, f"f:{n}", f"w:{n:016x}", cut) for n, x in enumerate(lines, 1)])
    return build(Context("w", "l" * 10_000, "a", 1, "t"), f, redactor(), limit).document


def test_a_body_keeps_to_max_body_bytes_and_counts_what_it_leaves_out() -> None:
    """2000 lines of 1 KiB (matchLines at its most) were a 2 MiB body, past what receivers
    take (nginx: 1 MiB), and 2000 lines of 16 MiB would have been 32 GiB in memory."""
    doc = _fire([f"ERROR {n} " + "x" * 1024 for n in range(2000)])
    out = Firing("match", 2000, SMALL)
    out.add([MatchInfo("x" * 1024, 1, 0, "f:1", "w:1")] * 2000)
    assert len(out.matches) == 16  # held in memory: what the budget takes, not 2000 lines
    body = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(body) <= SMALL
    assert 10 <= doc["shown"] < 16 and doc["omitted"] == 2000 - doc["shown"]  # type: ignore
    assert len(doc["watcher"]["label"].encode()) == LABEL_BYTES  # type: ignore[index]


def test_a_line_too_long_for_the_body_alone_is_clipped_and_marked() -> None:
    doc = _fire(["\x01" * 100_000, "ERROR next"])
    lines = doc["lines"]
    assert isinstance(lines, list) and len(lines) == 1 and lines[0]["truncated"] is True
    assert 0 < len(lines[0]["line"]) < SMALL // 6 + 1  # each \x01 is 6 bytes escaped
    assert doc["shown"] == 1 and doc["omitted"] == 1


def test_a_line_cut_at_max_line_bytes_is_marked_in_the_body() -> None:
    assert _fire(["ERROR a"], cut=500)["lines"] == [
        {"line": "ERROR a", "lineNo": 1, "offset": 0, "where": "f:1", "cursor": f"w:{1:016x}",
         "truncated": True}]
    assert "truncated" not in _fire(["ERROR a"])["lines"][0]  # type: ignore[index]


@given(st.lists(st.text(alphabet="a\x00\"\\é\U0001f600\x1b", min_size=1, max_size=6000),
                min_size=1, max_size=30))
def test_no_body_is_over_its_limit(lines: list[str]) -> None:
    doc = _fire(lines)
    body = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(body) <= SMALL
    assert doc["shown"] >= 1 and doc["shown"] + doc["omitted"] == len(lines)  # type: ignore
