"""End to end: a `${VAR}` password in a command line or a path leaves the machine nowhere it
shows — status, list, snapshots, records, the runner's log of matches, `matches --json`,
`run --once --json`, an action's `WATCHRUN_LABEL`, an agent's prompt (cfgsec findings 8, 9, 10,
11, 14, 16). Real runner processes, real programs; the secrets are fakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from inproc import inproc
from liverunner import cli, read_records, write_config
from webhook_server import receiver

PW = "Hunter2Hunter2"
PW_Q = "it's correct horse"  # a list argument: no shell reads it, so no quoting refuses it
PIECES = ("Hunter2", "correct", "horse")
ARGV = str(Path(__file__).parent / "progs" / "argv_json.py")
LABEL_TO = "import os, sys; open(sys.argv[1], 'a').write(os.environ['WATCHRUN_LABEL'] + '\\n')"
STDIN_TO = "import sys; open(sys.argv[1], 'w').write(sys.stdin.read())"


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PW": PW, "PW_Q": PW_Q}
    return cli(*args, cwd=folder, env=env)


def _view(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`_cli` of a view, in this process (tests/inproc.py: the same `main` and output)."""
    return inproc(folder, *args, env={**os.environ, "PW": PW, "PW_Q": PW_Q})


def _clean(text: str, where: object) -> None:
    assert not any(p in text for p in PIECES), (where, text[:2000])


def _log_in_a_password_path(folder: Path, text: str) -> str:
    """`app.log` holding `text` in a folder named `db_password=PW`; the watcher's `path` for
    it, as a config writes it (`${PW}`)."""
    logs = folder / f"db_password={PW}"
    logs.mkdir()
    (logs / "app.log").write_text(text)
    return str(folder / "db_password=${PW}" / "app.log")


def test_a_placed_password_is_hidden_on_every_surface_with_output_redact(
        tmp_path: Path) -> None:
    # before: `PGPASSWORD=[REDACTED:password]Hunter2Hunter2""` in status, the `start` record
    # and WATCHRUN_LABEL; `'--password=[REDACTED:password] correct horse'`; the label in
    # clear in `run --once --json`; a path's password in every match record, the runner's log
    # of matches and `matches --json`
    path = _log_in_a_password_path(tmp_path, "FAIL one\n")
    seen = tmp_path / "labels.txt"
    write_config(tmp_path, {"output": {"dir": "out", "redact": True}, "watchers": [
        {"id": "db", "command": 'PGPASSWORD="${PW}" true; true --password=${PW}; echo FAIL',
         "pattern": "FAIL", "gate": {"maxMatches": 0},
         "actions": [{"type": "exec", "command": [sys.executable, "-c", LABEL_TO, str(seen)]}]},
        {"id": "l", "command": ["sh", "-c", "echo FAIL", "sh", "--password=${PW_Q}"],
         "pattern": "FAIL", "gate": {"maxMatches": 0}},
        {"id": "f", "path": path, "fromStart": True, "pattern": "FAIL",
         "gate": {"maxMatches": 0}}]})
    done = _cli(tmp_path, "run", "--once", "--json")
    assert done.returncode == 1, done.stderr  # the gates are crossed
    _clean(done.stdout + done.stderr, "run --once --json")
    verdicts = {v["id"]: v for v in json.loads(done.stdout)["verdicts"]}
    assert verdicts["db"]["label"] == ('PGPASSWORD="[REDACTED:password]" true; '
                                       "true --password=[REDACTED:password]; echo FAIL")
    assert verdicts["l"]["label"] == "sh -c 'echo FAIL' sh '--password=[REDACTED:password]'"
    assert verdicts["f"]["first"][0]["path"] == str(tmp_path / "db_password=[REDACTED:password]"
                                                   / "app.log")
    assert seen.read_text() == verdicts["db"]["label"] + "\n"
    out = tmp_path / "out"
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        if not path.name.endswith(".checkpoint.json"):  # (the file to resume: see decisions.md)
            _clean(path.read_text(errors="replace"), path)
    (match,) = [r for r in read_records(out / "watchers" / "f.jsonl") if r["kind"] == "match"]
    assert match["path"] == verdicts["f"]["first"][0]["path"]
    for args in (["list", "--json"], ["status", "db"], ["status", "l", "--json"], ["list"],
                 ["status", "f"], ["matches", "f", "--json"], ["matches", "f"],
                 ["validate"], ["validate", "--json"]):
        shown = _view(tmp_path, *args)
        assert shown.returncode == 0, (args, shown.stderr)
        _clean(shown.stdout, args)


def test_a_placed_password_in_a_path_or_cwd_that_fails_is_hidden_in_the_verdicts(
        tmp_path: Path) -> None:
    # before: `run --once --json`'s reason and the runner's log said `cannot read
    # /…/db_password=Hunter2Hunter2/app.log: No such file or directory`
    write_config(tmp_path, {"output": {"dir": "out", "redact": True}, "watchers": [
        {"id": "f", "path": str(tmp_path / "db_password=${PW}" / "app.log"),
         "pattern": "FAIL", "gate": {"maxMatches": 0}},
        {"id": "c", "command": "echo FAIL", "cwd": str(tmp_path / "db_password=${PW}"),
         "pattern": "FAIL", "gate": {"maxMatches": 0}}]})
    done = _cli(tmp_path, "run", "--once", "--json")
    assert done.returncode == 3, done.stderr
    _clean(done.stdout + done.stderr, "run --once --json")
    reasons = {v["id"]: v["reasons"] for v in json.loads(done.stdout)["verdicts"]}
    assert "db_password=[REDACTED:password]" in reasons["f"][0], reasons
    assert "db_password=[REDACTED:password]" in reasons["c"][0], reasons
    for path in sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file()):
        _clean(path.read_text(errors="replace"), path)


def test_a_placed_password_never_reaches_a_prompt_or_an_action_without_output_redact(
        tmp_path: Path) -> None:
    # before: the default prompt's `{label}` gave the agent
    # `PGPASSWORD=[REDACTED:password]Hunter2Hunter2"" ...`, and WATCHRUN_LABEL the same
    seen = tmp_path / "labels.txt"
    write_config(tmp_path, {
        "output": {"dir": "out"},
        "agents": [{"name": "t", "provider": "generic",
                    "command": [sys.executable, ARGV, "{prompt}"]}],
        "watchers": [{"id": "db", "command": 'PGPASSWORD="${PW}" true; echo ERROR connecting',
                      "pattern": "ERROR", "wake": "t", "actions": [
                          {"type": "exec", "command": [sys.executable, "-c", LABEL_TO,
                                                       str(seen)]}]}]})
    done = _cli(tmp_path, "run", "--once")
    assert done.returncode == 0, done.stderr
    prompts = [r for r in read_records(tmp_path / "out" / "agents" / "t.jsonl")
               if r["kind"] == "prompt"]
    label = 'PGPASSWORD="[REDACTED:password]" true; echo ERROR connecting'
    assert [p["text"] for p in prompts] == [
        f"These lines appeared in {label}:\nERROR connecting\n"]
    given = [json.loads(r["text"]) for r in read_records(tmp_path / "out" / "agents" / "t.jsonl")
             if r["kind"] in ("text", "output")]
    assert given == [[prompts[0]["text"]]]  # what the agent process was given
    assert seen.read_text() == label + "\n"


def test_a_password_in_a_watched_path_never_reaches_an_action_without_output_redact(
        tmp_path: Path) -> None:
    # before: the label was redacted, each line's `where` was not: the webhook's JSON body and
    # the exec action's stdin said `…/db_password=Hunter2Hunter2/app.log:1` (security audit F1)
    path = _log_in_a_password_path(tmp_path, "FAIL one\nFAIL two\n")
    stdin = tmp_path / "stdin.jsonl"
    where = str(tmp_path / "db_password=[REDACTED:password]" / "app.log")
    with receiver() as rx:
        write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
            {"id": "f", "path": path, "fromStart": True, "pattern": "FAIL", "actions": [
                 {"type": "webhook", "name": "hook", "url": rx.url},
                 {"type": "exec", "name": "ex",
                  "command": [sys.executable, "-c", STDIN_TO, str(stdin)]}]}]})
        done = _cli(tmp_path, "run", "--once")
        assert done.returncode == 0, done.stderr
        (sent,) = rx.requests
    _clean(sent.body.decode(), "the webhook's body")
    assert [ln["where"] for ln in sent.json()["lines"]] == [f"{where}:1", f"{where}:2"]
    assert sent.json()["watcher"]["label"] == where
    given = [json.loads(ln) for ln in stdin.read_text().splitlines()]
    assert [ln["where"] for ln in given] == [f"{where}:1", f"{where}:2"]


def test_a_secret_split_by_an_escape_sequence_or_a_control_is_redacted_whole(
        tmp_path: Path) -> None:
    """Sanitizing runs before redaction: `pass\\e[0mword=…`, a NUL inside a token, a DEL in the
    name and a zero-width space after `user:` are the secret a terminal shows, and are hidden as
    such in the records, the runner's log and an agent's prompt (the security.md audit U4)."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    printed = (f"ERROR pass\\033[0mword={PW} tok={token[:10]}\\000{token[10:]} "
               f"api\\177_key=Sup3rS3cr3tV4lu3 https://user:\\342\\200\\213{PW}@db.example/x")
    write_config(tmp_path, {
        "output": {"dir": "out", "redact": True},
        "agents": [{"name": "t", "provider": "generic",
                    "command": [sys.executable, ARGV, "{prompt}"]}],
        "watchers": [{"id": "c", "command": ["printf", printed + "\\n"], "pattern": "ERROR",
                      "wake": "t", "label": "printer"}]})  # (the command line holds them as
    # the config's text, `\\033`, not split: its own words, not a log line's)
    done = _cli(tmp_path, "run", "--once")
    assert done.returncode == 0, done.stderr
    secrets = (PW, token[10:], "Sup3rS3cr3tV4lu3")
    (match,) = [r for r in read_records(tmp_path / "out" / "watchers" / "c.jsonl")
                if r["kind"] == "match"]
    prompts = [r["text"] for r in read_records(tmp_path / "out" / "agents" / "t.jsonl")
               if r["kind"] == "prompt"]
    for shown, where in ((json.dumps(match), "the match record"), (done.stderr, "the log"),
                         ("".join(prompts), "the prompt")):
        assert not any(s in shown for s in secrets), (where, shown)
    assert match["line"].count("[REDACTED:") == 4, match["line"]
    assert len(prompts) == 1
