"""A secret that straddles the `limits.maxLineBytes` cut (sec findings 1, 2): the kept head of
the line ends in the head of the secret, which the rules do not match whole. It must not leave
in clear on any redacted surface (records with `output.redact`, `matches`, `logs`, the runner's
log, webhook bodies, agent prompts), and it is counted in `redacted` like any other.

The secrets below are fakes in the right shape (none is a live credential)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from liverunner import LiveRunner, cli, read_records, wait_for, write_config
from test_redact import RULES
from webhook_server import receiver

from watchrun.agents.prompt import cut_mark
from watchrun.match.redact import CUT_WINDOW, Rule, redact_tree, redactor
from watchrun.mcp.reads import read_matches

WINDOW = 6
"""No run of this many characters of a secret may be left."""


def leaks(secret: str, text: str) -> list[str]:
    return [secret[i : i + WINDOW] for i in range(len(secret) - WINDOW + 1)
            if secret[i : i + WINDOW] in text]


def sample(kind: str) -> tuple[str, str]:
    """A rule's true positive on one line (a private key as a JSON log writes it), and its
    secret."""
    text, secret, _, _ = RULES[kind]
    return text.replace("\n", "\\n"), secret


@pytest.mark.parametrize("kind", sorted(RULES))
def test_every_rule_hides_its_secret_cut_at_any_place(kind: str) -> None:
    text, secret = sample(kind)
    start = text.index(secret)
    for cut in range(start, start + len(secret) + 1):
        out, counts = redactor().redact(text[:cut], cut=True)
        assert not leaks(secret, out), (cut - start, out)
        assert redactor().redact(out, cut=True) == (out, {})  # (counted once, then left)
        if leaks(secret, text[:cut]):  # (a head that says something is counted)
            assert counts, (cut - start, out)


@given(st.sampled_from(sorted(RULES)), st.text("ab =:/\"'-_.x0", max_size=12),
       st.integers(0, 200))
def test_whatever_comes_before_a_cut_secret_it_is_hidden(kind: str, before: str,
                                                         at: int) -> None:
    text, secret = sample(kind)
    line = f"{before} {text}"
    head = line[: line.index(secret) + min(at, len(secret))]
    out, _ = redactor().redact(head, cut=True)
    assert not leaks(secret, out), out
    lines, _ = redactor().redact_lines(["ok", head], [False, True])
    assert lines[0] == "ok" and not leaks(secret, lines[1])


def test_a_line_that_was_not_cut_keeps_what_is_no_secret() -> None:
    assert redactor().redact("build ghp_ABCDEF and gh", cut=False) == ("build ghp_ABCDEF and gh",
                                                                       {})
    assert redactor().redact("x" * 80 + " debug", cut=True) == ("x" * 80 + " debug", {})
    assert redactor().redact("so ghp_ABCDEFGH", cut=True) == ("so [REDACTED:github-token]",
                                                               {"github-token": 1})


def test_the_end_of_a_long_cut_line_is_looked_at_with_what_comes_before_it() -> None:
    """The cut forms look at the last CUT_WINDOW characters, and see the one before them: a
    JWT's head that starts right at the window's edge is one after a space, none inside a
    word."""
    jwt = "eyJ" + "a" * (CUT_WINDOW - 3)
    for before in ("y" * 999 + " ", "y" * (1 << 20) + " "):
        assert redactor().redact(before + jwt, cut=True) == (before + "[REDACTED:jwt]",
                                                             {"jwt": 1})
        glued = before.strip() + jwt
        assert redactor().redact(glued, cut=True) == (glued, {})


def test_a_user_rule_and_a_known_secret_are_hidden_when_cut() -> None:
    rules = (Rule("ticket", r"\bTKT-[0-9]{12}\b"), Rule("hook", "s3cretHookTok3n99", known=True))
    hide = redactor(rules)
    assert hide.redact("see TKT-1234567", cut=True) == ("see [REDACTED:ticket]", {"ticket": 1})
    assert hide.redact("to /hooks/s3cretHoo", cut=True) == ("to /hooks/[REDACTED:hook]",
                                                            {"hook": 1})


def test_an_agent_reads_no_head_of_a_cut_secret() -> None:
    text, secret = sample("github-fine-grained-token")
    line = "ERR " + "x" * (1024 - 4 - 1 - 90) + " " + text  # 90 bytes of it before the cut
    shown = cut_mark(line[:1024], 500, 1024, redactor())
    plain = cut_mark("ERR " + "x" * 1020, 500, 1024, redactor())
    mark = plain[plain.index(" [… ") :]  # (the same bytes cut: the same mark)
    assert shown.endswith(mark) and "x [REDACTED:github-fine-" in shown, shown  # (what fits)
    assert not leaks(secret, shown) and len(shown.encode()) <= 1024


def test_an_mcp_answer_cut_to_its_budget_leaves_no_head(tmp_path: Path) -> None:
    """A `matches` answer holds at least the newest line, cut to the result's cap (1 MiB; 4 KiB
    here) when it is longer: a token that this cut splits is hidden, as the tool answers."""
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    line = "ERROR " + "x" * (4096 - 64 - 6 - 1 - 25) + f" {token} " + "y" * 100  # 25 kept
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w1.jsonl").write_text(json.dumps(
        {"schema": 1, "seq": 1, "kind": "match", "line": line}) + "\n")
    hide = redactor()
    for since in (None, 0):
        page = read_matches(tmp_path, "w1", 5, since, 4096, hide)
        (shown,) = redact_tree(page.lines, hide)
        assert shown.endswith("x [REDACTED:github-token]…[cut: the line is over the result's "
                              "4 KiB]"), shown[-80:]
        assert not leaks(token[4:], shown) and len(shown.encode()) <= 4096


GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
AWS = "AKIAIOSFODNN7EXAMPLE"
LIMIT = 1024


def cut_inside(secret: str, kept: int) -> str:
    """A matched line whose cut at LIMIT keeps the first `kept` characters of `secret`."""
    return "ERR " + "x" * (LIMIT - 4 - 1 - kept) + " " + secret + " tail"


def counted(out: Path) -> object:
    """The `redacted` counts of watcher f's status snapshot (None before it is written)."""
    try:
        return json.loads((out / "state" / "f.status.json").read_text()).get("redacted")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@pytest.mark.parametrize("redact", [True, False])
def test_a_cut_secret_leaves_no_head_in_records_views_log_or_webhook(tmp_path: Path,
                                                                     redact: bool) -> None:
    (tmp_path / "app.log").write_text(cut_inside(GITHUB, 25) + "\n" + cut_inside(AWS, 14) + "\n")
    with receiver(200) as rx:
        config = write_config(tmp_path, {
            "output": {"redact": redact}, "limits": {"maxLineBytes": LIMIT},
            "watchers": [{"id": "f", "path": "app.log", "fromStart": True, "pattern": "ERR",
                          "actions": [{"type": "webhook", "name": "hook", "url": rx.url}]}]})
        runner = LiveRunner(config)
        try:
            wait_for(lambda: sum(len(b["lines"]) for b in rx.bodies()) == 2, "both lines sent")
            lines = [item["line"] for b in rx.bodies() for item in b["lines"]]
            assert lines[0].endswith("x [REDACTED:github-token]"), lines  # (with
            assert "x [REDACTED:aws-" in lines[1], lines  # `output.redact` clipped at LIMIT)
            if redact:
                done = cli("-c", config, "matches", "f")
                assert done.returncode == 0, done.stderr
                shown = done.stdout
                assert " [REDACTED:github-token] [cut: 20 more bytes not kept]" in shown, shown
                assert " [REDACTED:aws- [cut: 11 more bytes not kept]" in shown
                wait_for(lambda: counted(runner.out) == {"github-token": 1,
                                                         "aws-access-key-id": 1}, "counts")
                done = cli("-c", config, "logs", "f")
                assert done.returncode == 0, done.stderr
                logs = done.stdout
                assert logs.count("x [REDACTED:") == 2, logs
                said = shown + logs
        finally:
            runner.stop()
    records = [r for r in read_records(runner.out / "watchers" / "f.jsonl")
               if r["kind"] == "match"]
    assert [r["truncated"] for r in records] == [True, True]
    if redact:
        assert records[0]["line"].endswith("x [REDACTED:github-token]")
        assert records[1]["line"].endswith("x [REDACTED:aws-")  # (the marker, clipped at LIMIT)
        said += runner.stderr() + json.dumps(records)
    else:
        said = ""
    for secret in (GITHUB[4:], AWS[4:]):
        assert not leaks(secret, said + json.dumps(rx.bodies()))
