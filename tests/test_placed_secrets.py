"""A `${VAR}` value the config puts where the docs say a secret goes whatever its name — a
webhook's URL path, query or credentials and its headers, an exec action's `env`, a command
watcher's `env` — is a known secret (sec findings 3 and 5): a log line that echoes it loses it
in records, `matches`, the runner's log and webhook bodies (`config/secrets.py`).

The secrets below are fakes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config
from webhook_server import receiver

from watchrun.config import load_config
from watchrun.match.redact import redactor

HOOK = "s3cretHookTok3n99"
ENV = {"HOOK": HOOK, "SLACK": "https://hooks.example.com/services/T0/B0/xyzxyzxyz",
       "Q": "abc%2Fdefghij", "HDR": "hdrvalue123", "HOST": "alerts.internal.example",
       "API": "apivalue12345", "MODE": "on", "B": "TokValue87654321", "C": "EnvValue2468",
       "PW": "PwValue12345678", "LVL": "debug", "TWO": "user1 s3cr3tpassw0rd",
       "HOME_DIR": "/home/builder"}


def _config(folder: Path) -> Any:
    cfg = write_config(folder, {"output": {"dir": "out"}, "agents": [
        {"name": "a", "provider": "mock", "env": {"CACHE": "${HOME_DIR}"}}], "watchers": [
        {"id": "f", "path": "app.log", "pattern": "ERR", "actions": [
            {"type": "webhook", "name": "h", "url": "http://127.0.0.1:9/hooks/${HOOK}?k=${Q}",
             "headers": {"X-Key": "${HDR}"}},
            {"type": "webhook", "name": "s", "url": "${SLACK}"},
            {"type": "webhook", "name": "u", "url": "https://${HOST}/x"},
            {"type": "exec", "name": "e", "command": ["true"],
             "env": {"MODE": "${MODE}", "API": "${API}"}}]},
        {"id": "c", "command": "true", "pattern": "x", "env": {
            "GITHUB_TOKEN": "${B}", "GH": "${C}", "DB_PASSWORD": "${PW}", "LVL": "${LVL}",
            "CREDS": "${TWO}"}}]})
    config = load_config([cfg], env=ENV).config
    assert config is not None
    return config


# (a log line, what every redacted surface shows of it)
LINES = [
    ("POST http://127.0.0.1:9/hooks/s3cretHookTok3n99 failed",
     "POST http://127.0.0.1:9/hooks/[REDACTED:webhook-secret] failed"),
    ("query abc%2Fdefghij decoded abc/defghij",  # (a receiver may log it either way)
     "query [REDACTED:webhook-secret] decoded [REDACTED:webhook-secret]"),
    ("header X-Key: hdrvalue123", "header X-Key: [REDACTED:webhook-secret]"),
    ("to https://hooks.example.com/services/T0/B0/xyzxyzxyz",  # a whole-URL `${SLACK}`: its path
     "to https://hooks.example.com[REDACTED:webhook-secret]"),
    ("exec API=apivalue12345 apivalue12345", "exec API=[REDACTED:exec-secret] "
                                             "[REDACTED:exec-secret]"),
    ("tok TokValue87654321 gh EnvValue2468", "tok [REDACTED:token] gh [REDACTED:env-secret]"),
    ("db PwValue12345678", "db [REDACTED:password]"),  # (named as a password: its kind, as before)
    ("creds s3cr3tpassw0rd for user1", "creds [REDACTED:env-secret] for user1"),  # a word of 8+
    ("env LVL=debug MODE=on", "env LVL=[REDACTED:env-secret] MODE=[REDACTED:exec-secret]"),
    # left alone: a host is no secret; a short value only after its name; an agent's env value
    # (its prompts would lose every path under it) only when named like a secret
    ("sent to alerts.internal.example, level debug, mode on, cache /home/builder/x", None),
]


@pytest.mark.parametrize(("line", "shown"), LINES)
def test_a_value_placed_as_a_secret_is_hidden_in_a_line_that_echoes_it(
        tmp_path: Path, line: str, shown: str | None) -> None:
    # before: every line went out as it was, but for `db` (a name the rules know)
    config = _config(tmp_path)
    red, counts = redactor(config.redact).redact(line)
    assert red == (line if shown is None else shown)
    assert sum(counts.values()) == red.count("[REDACTED:")


def test_the_config_dump_still_shows_no_rule_of_a_secret(tmp_path: Path) -> None:
    from watchrun.config.dump import config_to_dict

    config = _config(tmp_path)
    assert any(r.kind == "webhook-secret" for r in config.redact)
    assert config_to_dict(config)["redact"] == []


def _cli(folder: Path, env: dict[str, str], *args: str) -> str:
    done = cli(*args, cwd=folder, env=env)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def test_a_webhook_urls_secret_echoed_by_a_log_line_leaves_nowhere(tmp_path: Path) -> None:
    # before (sec finding 3): with output.redact the match record, `matches`, the runner's log
    # and the webhook's body all held …/hooks/s3cretHookTok3n99
    log = tmp_path / "app.log"
    with receiver(200) as rx:
        base = rx.url.rsplit("/hooks/", 1)[0]
        log.write_text(f"ERR client posted to {base}/hooks/{HOOK} and failed\n")
        env = {**os.environ, "HOOK": HOOK}
        config = write_config(tmp_path, {"output": {"redact": True}, "watchers": [
            {"id": "f", "path": "app.log", "fromStart": True, "pattern": "ERR", "actions": [
                {"type": "webhook", "name": "hook", "url": base + "/hooks/${HOOK}"}]}]})
        r = LiveRunner(config, env=env)
        try:
            wait_for(lambda: rx.count() == 1, "the POST")
            wait_for(lambda: r.matches("f"), "the match record")
            wanted = f"ERR client posted to {base}/hooks/[REDACTED:webhook-secret] and failed"
            assert [x["line"] for x in rx.bodies()[0]["lines"]] == [wanted]
            assert rx.requests[0].path == f"/hooks/{HOOK}"  # (it is still sent there)
            assert [m["line"] for m in r.matches("f")] == [wanted]
            assert wanted in _cli(tmp_path, env, "matches", "f")
            r.wait_log("[REDACTED:webhook-secret]")
            assert r.stop() == 0
        finally:
            r.close()
    assert HOOK not in r.stderr()
    for path in sorted(p for p in r.out.rglob("*") if p.is_file()):
        assert HOOK not in path.read_text(errors="replace"), path


def test_a_command_watchers_env_value_echoed_by_its_program_is_hidden(tmp_path: Path) -> None:
    # before (sec finding 5): `tok TokValue87654321` in the records and `matches`, only
    # `db [REDACTED:password]` (DB_PASSWORD is a name the rules know) was hidden
    env = {**os.environ, "A": "PwValue12345678", "B": "TokValue87654321", "C": "EnvValue2468"}
    config = write_config(tmp_path, {"output": {"redact": True}, "watchers": [
        {"id": "c", "command": 'echo "db $DB_PASSWORD"; echo "tok $GITHUB_TOKEN"; '
                               'echo "gh $GH"; exec sleep 60', "pattern": ".",
         "env": {"DB_PASSWORD": "${A}", "GITHUB_TOKEN": "${B}", "GH": "${C}"}}]})
    r = LiveRunner(config, env=env)
    try:
        wait_for(lambda: len(r.matches("c")) == 3, "the three lines")
        shown = ["db [REDACTED:password]", "tok [REDACTED:token]", "gh [REDACTED:env-secret]"]
        assert [m["line"] for m in r.matches("c")] == shown
        text = _cli(tmp_path, env, "matches", "c")
        assert all(s in text for s in shown), text
        assert r.stop() == 0
    finally:
        r.close()
    for secret in ("PwValue12345678", "TokValue87654321", "EnvValue2468"):
        assert secret not in r.stderr()
        for path in sorted(p for p in r.out.rglob("*") if p.is_file()):
            assert secret not in path.read_text(errors="replace"), path
