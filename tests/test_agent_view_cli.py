"""`watchrun agent watch | transcript | list` as real `watchrun` processes: config or output
dir, JSON and text forms, errors as JSON with exit codes, and `--until` in a separate process
woken by records this test appends. Most reads run the script's `main` in this process
(`here`, tests/inproc.py: the same output and exit status, ~0.1 s of CPU less each); each
command's first test, every `--until … --timeout` and the waiters stay real processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from agentrecords import AgentLog, History, standard_history
from inproc import inproc
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from liverunner import cli, wait_for

from watchrun.cli.agent_views import AgentRef
from watchrun.views.agent_watch import build_watch, parse_include

WATCHRUN = str(Path(sys.executable).parent / "watchrun")
CONFIG = "output:\n  dir: out\nagents:\n  - {name: triage, provider: claude}\n" \
         "  - {name: coder, provider: codex}\n"


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, History]:
    """watch.yaml naming two agents, and triage's standard history in its output dir."""
    (tmp_path / "watch.yaml").write_text(CONFIG)
    return tmp_path, standard_history(tmp_path / "out")


def watchrun(cwd: Path, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS`, a process of its own (liverunner.cli)."""
    return cli(*args, cwd=cwd, timeout=timeout)


def here(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The same command in this process (a read: nothing waits, nothing is killed)."""
    return inproc(cwd, *args)


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(
        resources.files("watchrun.schemas").joinpath(f"{name}.schema.json").read_text()))


def ok_json(p: subprocess.CompletedProcess[str], schema_name: str | None = None) -> Any:
    assert (p.returncode, p.stderr) == (0, "")
    doc = json.loads(p.stdout)
    if schema_name is not None:
        assert [e.message for e in schema(schema_name).iter_errors(doc)] == []
    return doc


def error(p: subprocess.CompletedProcess[str], code: int) -> dict[str, Any]:
    assert p.returncode == code, p.stderr
    doc = json.loads(p.stdout)
    assert [e.message for e in schema("agent-watch").iter_errors(doc)] == []
    return dict(doc["error"])


def test_watch_prints_the_default_view(site: tuple[Path, History]) -> None:
    cwd, h = site
    v = ok_json(watchrun(cwd, "agent", "watch", "triage", "-c", "watch.yaml"), "agent-watch")
    assert v == build_watch(h.path, AgentRef("triage", "claude"))
    assert list(v) == ["schema", "agent", "cursor", "events", "output", "transcript", "delivery"]
    assert v["cursor"] == h.log.cursor and v["transcript"]["latest_text"] == "Final answer"


def test_watch_include_and_raw(site: tuple[Path, History]) -> None:
    cwd, h = site
    v = ok_json(here(cwd, "agent", "watch", "triage", "-c", "watch.yaml", "--include",
                     "raw_output", "--raw"), "agent-watch")
    assert list(v) == ["schema", "agent", "cursor", "events", "output", "raw_output", "delivery"]
    assert "\x1b[33mdone\x1b[0m\r\n" in v["raw_output"]["text"]
    v = ok_json(here(cwd, "agent", "watch", "triage", "-c", "watch.yaml", "--include",
                     "events", "--include", "transcript", "--since", h.failed.last,
                     "--tail", "5"))
    assert v == build_watch(h.path, AgentRef("triage", "claude"), since=h.failed.last, tail=5,
                            include=parse_include(["events", "transcript"]))
    assert v["output"] == {"cursor": h.log.cursor, "text": "swer\n", "truncated": True,
                           "omitted_bytes": len("● starting é\ndone\nFinal an".encode())}


def test_watch_text_form_never_writes_escapes(site: tuple[Path, History]) -> None:
    cwd, h = site
    p = here(cwd, "agent", "watch", "triage", "-c", "watch.yaml", "--raw", "--format",
             "text")
    assert p.returncode == 0 and "\x1b" not in p.stdout and "\r" not in p.stdout
    lines = p.stdout.splitlines()
    since = build_watch(h.path, AgentRef("triage", "claude"))["agent"]["last_status_at"]
    assert lines[:2] == [f"triage (claude): idle since {since}", f"cursor {h.log.cursor}"]
    assert "  \\x1b[33mdone\\x1b[0m\\r" in lines
    assert f"  {h.d2}  queued  worker  1 match(es)" in lines


@pytest.mark.parametrize(("args", "code", "exit_status"), [
    (["--since", "triage:zz"], "invalid_cursor", 2),
    (["--since", "coder:0000000000000001"], "invalid_cursor", 2),
    (["--include", "everything"], "not_supported", 2),
    (["--until", "colour:red"], "not_supported", 2),
    (["--tail", "-5"], "invalid_argument", 2),
    (["--until", "status:idle", "--timeout", "soon"], "invalid_argument", 2),
    (["--until", "status:idle", "--timeout", "200ms"], "watch_timeout", 1),
])
def test_watch_errors(site: tuple[Path, History], args: list[str], code: str,
                      exit_status: int) -> None:
    cwd, _ = site
    run = watchrun if "--timeout" in args else here  # (a wait with a timeout: a process)
    e = error(run(cwd, "agent", "watch", "triage", "-c", "watch.yaml", *args), exit_status)
    assert e["code"] == code and e["message"]


@pytest.mark.parametrize("form", [[], ["--format", "text"]], ids=["json", "text"])
def test_a_timeout_that_is_no_duration_is_refused_without_until(
        site: tuple[Path, History], form: list[str]) -> None:
    """An explorer's F7: `--timeout` was read only with `--until`, so a typo (`5min`) printed
    the view, exit 0, until someone added `--until`; it is a usage error whatever else is
    given, naming the value and the forms a duration takes."""
    cwd, _ = site
    p = watchrun(cwd, "agent", "watch", "triage", "-c", "watch.yaml", "--timeout", "5min", *form)
    said = "--timeout '5min': '5min' is not a duration: use a number of milliseconds or a " \
        "string like 250ms, 10s, 5m, 2h (or 1h30m)"
    if form:
        assert (p.returncode, p.stdout) == (2, ""), p.stdout
        assert p.stderr == f"watchrun: error: invalid_argument: {said}\n", p.stderr
    else:
        e = error(p, 2)
        assert (e["code"], e["message"]) == ("invalid_argument", said), e


def test_unknown_agent_lists_the_known_ones(site: tuple[Path, History]) -> None:
    cwd, _ = site
    e = error(here(cwd, "agent", "transcript", "nope", "-c", "watch.yaml"), 2)
    assert e == {"code": "not_found", "name": "nope", "known": ["coder", "triage"],
                 "message": "no agent named 'nope' (known agents: coder, triage)"}
    p = here(cwd, "agent", "watch", "nope", "-c", "watch.yaml", "--format", "text")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith("watchrun: error: not_found: no agent named 'nope'")


def test_invalid_config_prints_diagnostics_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("agents:\n  - {name: triage, provider: clippy}\n")
    p = here(tmp_path, "agent", "watch", "triage", "-c", "bad.yaml", "--format", "text")
    assert (p.returncode, p.stdout) == (2, "")
    assert "error: agents[0].provider" in p.stderr
    e = error(here(tmp_path, "agent", "watch", "triage", "-c", "bad.yaml"), 2)  # JSON
    assert e["code"] == "config_invalid"
    assert [d["path"] for d in e["diagnostics"]] == ["agents[0].provider"]


def test_expired_cursor_exits_1(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text(CONFIG)
    log = AgentLog(tmp_path / "out", "triage", max_bytes=500, keep=1)
    for i in range(20):
        log.status("idle", message=f"n{i}")
    log.close()
    e = error(here(tmp_path, "agent", "watch", "triage", "-c", "watch.yaml", "--since",
                   "triage:0000000000000001"), 1)
    assert e["code"] == "cursor_expired" and e["cursor"] == "triage:0000000000000001"


def test_until_in_another_process_is_woken_by_appended_records(
        site: tuple[Path, History]) -> None:
    cwd, h = site
    proc = subprocess.Popen([WATCHRUN, "agent", "watch", "triage", "-c", "watch.yaml",
                             "--since", h.log.cursor, "--until", "delivery:delivered",
                             "--timeout", "20s", "--include", "events"],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = AgentLog(cwd / "out", "triage")
    turn = log.turn("later", [], deliveries=(h.d2,), finish=False, trigger="wake")
    log.close()
    out, err = proc.communicate(timeout=20)
    assert (proc.returncode, err) == (0, "")
    v = json.loads(out)
    delivered = next(r for r in turn.records if r["kind"] == "delivery")
    assert delivered["cursor"] in [e["cursor"] for e in v["events"]]
    assert v["events"][0]["cursor"] == turn.first
    assert v["delivery"]["delivery"] == [{
        "id": h.d2, "state": "delivered", "label": "worker", "count": 1, "overflow": 0,
        "lines": ["FATAL oom"], "watcher": "worker", "turn_id": turn.turn_id,
        "cursor": delivered["cursor"], "updated_at": v["events"][3]["ts"]}]


def test_transcript_json_and_text(site: tuple[Path, History]) -> None:
    cwd, h = site
    doc = ok_json(watchrun(cwd, "agent", "transcript", "triage", "-c", "watch.yaml"),
                  "transcript")
    assert [t["run_id"] for t in doc["turns"]] == [h.done.turn_id, h.failed.turn_id,
                                                   h.pty.turn_id]
    assert doc["workspace"] == str(cwd)
    p = here(cwd, "agent", "transcript", "triage", "-c", "watch.yaml", "--format", "text")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0] == "triage (claude): 3 turn(s)"
    assert f"{h.done.turn_id}  wake  done  2076 tokens  4.1 s" in lines
    assert "    ✓ Read  app/store.py" in lines and "    ✗ Bash  pytest -q" in lines
    assert "  files: read app/store.py" in lines and "  error: pytest failed" in lines


def test_agent_list_table_and_json(site: tuple[Path, History]) -> None:
    cwd, h = site
    p = watchrun(cwd, "agent", "list", "-c", "watch.yaml")
    cells = [re.split(r" {2,}", x) for x in p.stdout.splitlines()]
    assert (p.returncode, cells) == (0, [
        ["NAME", "PROVIDER", "STATUS", "TURNS", "TOKENS", "LAST TURN", "LAST ACTIVITY",
         "LAST REPLY"],
        ["triage", "claude", "idle", "3", "2125", "done", cells[1][6], "Final answer"],
        ["coder", "codex", "idle", "0", "0", "-", "-", "-"],
    ])
    assert re.fullmatch(r"\d+d ago", cells[1][6])  # the history's fixed timestamps
    rows = ok_json(here(cwd, "agent", "list", "-c", "watch.yaml", "--json"))["agents"]
    assert [(r["name"], r["turns"], r["tokens"], r["cursor"]) for r in rows] == [
        ("triage", 3, 2125, h.log.cursor), ("coder", 0, 0, None)]
    p = here(cwd, "agent", "list", "--output-dir", "out")  # no config: the files there
    assert [re.split(r" {2,}", x) for x in p.stdout.splitlines()[1:]] == [
        ["triage", "claude", "idle", "3", "2125", "done", cells[1][6], "Final answer"]]


def test_an_agent_mid_rotation_is_still_known_by_its_files(tmp_path: Path) -> None:
    """With only the output dir, agents are known by their JSONL files. A rotation renames
    `<name>.jsonl` to `.1` and only then creates the next one: an agent read in between must
    not vanish from `agent list` nor be `not_found` to `agent watch`."""
    h = standard_history(tmp_path / "out")
    h.path.rename(f"{h.path}.1")  # the rotation is half done: no live file yet
    rows = ok_json(here(tmp_path, "agent", "list", "--output-dir", "out", "--json"))
    assert [(r["name"], r["turns"], r["cursor"]) for r in rows["agents"]] == [
        ("triage", 3, h.log.cursor)]
    view = ok_json(here(tmp_path, "agent", "watch", "triage", "--output-dir", "out",
                        "--json"))
    assert view["cursor"] == h.log.cursor


def blocked_in_select(pid: int) -> bool:
    """Whether `pid` sleeps in select(2)/poll(2) (its kernel wait channel says so)."""
    try:
        return "poll" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def test_until_with_a_timeout_longer_than_select_takes_still_waits(
        site: tuple[Path, History]) -> None:
    """`--timeout 100000000d` (longer than a time_t of select(2) holds): the wait is as long
    as asked, not an OverflowError traceback at once (exit 1 before this was fixed)."""
    cwd, h = site
    proc = subprocess.Popen([WATCHRUN, "agent", "watch", "triage", "-c", "watch.yaml",
                             "--since", h.log.cursor, "--until", "status:idle",
                             "--timeout", "100000000d", "--include", "events"],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: proc.poll() is not None or blocked_in_select(proc.pid),
                 "the waiter to block in select")  # (the record must come after it waits)
        log = AgentLog(cwd / "out", "triage")
        log.status("idle")
        log.close()
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, err) == (0, ""), err[-600:]
    assert json.loads(out)["events"][-1]["kind"] == "status"
