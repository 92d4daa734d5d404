"""A marker that `limits.maxLineBytes` trimmed (`password=[REDACTED:pass`: a record's line is
redacted, then clipped) is redacted already: an action does not count its secret again."""

from __future__ import annotations

import json
import re
from pathlib import Path

from liverunner import LiveRunner, read_records, wait_for, write_config
from webhook_server import receiver

from watchrun.match.redact import redactor

LIMIT = 256
HEAD = "ERR " + "x" * (LIMIT - 14 - 4 - 10) + " password="
"""Its `[REDACTED:password]` starts 14 characters before the limit: `[REDACTED:pass` is kept."""


def test_a_webhook_counts_a_secret_whose_marker_a_cut_trimmed_once(tmp_path: Path) -> None:
    """With `output.redact`, a line cut inside its password: the record says
    `password=[REDACTED:pass` (the marker clipped at maxLineBytes) and the status counts one
    password. The webhook redacted that line again, as if `[REDACTED:pass` were a password's
    head: its body carried `[REDACTED:password]` and the `action-fired` record counted
    {password: 1} more, for the secret the watcher had counted. Now the body carries the line
    as recorded and the firing counts nothing: each secret is counted once."""
    (tmp_path / "app.log").write_text(HEAD + "hunter2" * 10 + "\n" + "ERR plain\n")
    with receiver(200) as rx:
        config = write_config(tmp_path, {
            "output": {"redact": True}, "limits": {"maxLineBytes": LIMIT},
            "watchers": [{"id": "f", "path": "app.log", "fromStart": True, "pattern": "ERR",
                          "actions": [{"type": "webhook", "url": rx.url}]}]})
        r = LiveRunner(config)
        try:
            wait_for(lambda: sum(len(b["lines"]) for b in rx.bodies()) == 2, "both lines sent")
            status = r.out / "state" / "f.status.json"
            wait_for(lambda: status.exists() and json.loads(status.read_text()).get(
                "redacted") == {"password": 1}, "the status counting one password")
            fired = wait_for(lambda: [x for x in r.records("f") if x["kind"] == "action-fired"],
                             "the action-fired record")
        finally:
            assert r.stop() == 0
        bodies = rx.bodies()
    records = [x for x in read_records(r.out / "watchers" / "f.jsonl") if x["kind"] == "match"]
    assert re.fullmatch(re.escape(HEAD) + r"\[REDACTED:p\w*", records[0]["line"]), records[0]
    assert [ln["line"] for b in bodies for ln in b["lines"]] == [x["line"] for x in records]
    assert [f.get("redacted") for f in fired] == [None] * len(fired)


def test_only_a_marker_s_own_text_is_taken_for_one() -> None:
    """A cut line whose secret only looks like a marker's head is still hidden and counted:
    `[REDACTED:hunter2` is no rule's kind; a whole line (not cut) ending `[REDACTED:pass` is
    a password like any other."""
    r = redactor()
    assert r.redact("ERR password=[REDACTED:hunter2", cut=True) == (
        "ERR password=[REDACTED:password]", {"password": 1})
    assert r.redact("ERR https://u:[REDACTED:url-cred", cut=True) == (
        "ERR https://u:[REDACTED:url-cred", {})
    assert r.redact_lines(["ERR password=[REDACTED:pass"] * 2, [True, False]) == (
        ["ERR password=[REDACTED:pass", "ERR password=[REDACTED:password]"], {"password": 1})


def test_a_prompt_counts_a_secret_whose_marker_its_cut_would_trim_once(tmp_path: Path) -> None:
    """A woken agent reads a cut line shortened to make room for the prompt's cut mark; that
    shortening cut the record's `[REDACTED:password]` to `[REDACTED:p`, which the prompt's
    redaction took for a password: the `prompt` record counted {password: 1} for the secret
    the watcher had counted. Now the marker is kept whole (less of the text before it) and
    the prompt counts nothing the watcher counted."""
    (tmp_path / "app.log").write_text(
        "ERR " + "x" * 168 + " password=hunter2hunter2 " + "y" * 200 + "\n")
    config = write_config(tmp_path, {
        "output": {"redact": True}, "limits": {"maxLineBytes": LIMIT},
        "watchers": [{"id": "app", "path": "app.log", "fromStart": True, "pattern": "ERR",
                      "wake": "ag"}],
        "agents": [{"name": "ag", "provider": "mock", "prompt": "{matches}"}]})
    r = LiveRunner(config)
    try:
        prompts = wait_for(lambda: [x for x in r.records("ag", "agents")
                                    if x["kind"] == "prompt"], "the prompt record")
        status = r.out / "state" / "app.status.json"
        wait_for(lambda: status.exists() and json.loads(status.read_text()).get(
            "redacted") == {"password": 1}, "the status counting one password")
    finally:
        assert r.stop() == 0
    (prompt,) = prompts
    assert "[REDACTED:password] [… " in prompt["text"], prompt["text"]
    assert "hunter" not in prompt["text"]
    assert prompt.get("redacted") is None, prompt
