"""An agent whose command cannot be started (ENOENT) is a problem in `watchrun status` until a
turn's process starts, `agent list` says its last turn failed and why, and the turns that never
started do not use up its `maxTurns` (docs/decisions.md): a real runner, a real agent script."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from inproc import inproc
from liverunner import LiveRunner, read_records, wait_for, write_config

AGENT = """\
#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s1"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"fixed","session_id":"s1"}'
"""
WHY = "cannot start './nope': executable ./nope: not found (ENOENT)"


def watchrun(cwd: Path, *args: str) -> str:
    """`watchrun ARGS -c watch.yaml` from `cwd`, a read (in this process: tests/inproc.py)."""
    p = inproc(cwd, *args, "-c", "watch.yaml")
    assert (p.returncode, p.stderr) == (0, "")
    return p.stdout


def finished(tmp_path: Path, n: int) -> list[dict[str, Any]]:
    recs = read_records(tmp_path / ".watchrun" / "agents" / "ag.jsonl")
    ends = [r for r in recs if r["kind"] == "dispatch-finished"]
    return ends if len(ends) >= n else []


def test_an_agent_that_cannot_start_is_a_problem_and_keeps_its_turns(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "ag"}],
        "agents": [{"name": "ag", "provider": "claude", "command": ["./nope", "{prompt}"],
                    "maxTurns": 2}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert json.loads(watchrun(tmp_path, "status", "--json"))["problems"] == []
        for n in (1, 2, 3):  # one more than maxTurns: none of them used a turn
            with log.open("a") as fh:
                fh.write(f"ERROR {n}\n")
            wait_for(lambda n=n: finished(tmp_path, n), f"turn {n}")
        assert [e["status"] for e in finished(tmp_path, 3)] == ["failed"] * 3
        assert "maxTurns reached" not in r.stderr()
        problem = f"agent ag: 3 turn(s) in a row could not start its command: {WHY}"
        assert json.loads(watchrun(tmp_path, "status", "--json"))["problems"] == [problem]
        assert f"problems: 1\n  - {problem}" in watchrun(tmp_path, "status")
        (row,) = json.loads(watchrun(tmp_path, "agent", "list", "--json"))["agents"]
        assert (row["status"], row["lastTurn"], row["lastError"]) == (
            "idle", "failed", {"code": "ENOENT", "message": WHY})
        table = [re.split(r" {2,}", x) for x in watchrun(tmp_path, "agent", "list").splitlines()]
        assert table[0][5] == "LAST TURN" and table[1][:6] == [
            "ag", "claude", "idle", "3", "0", "failed (ENOENT)"]

        (tmp_path / "nope").write_text(AGENT)  # fixed: its next turn starts, and is allowed
        (tmp_path / "nope").chmod(0o755)
        with log.open("a") as fh:
            fh.write("ERROR 4\n")
        wait_for(lambda: finished(tmp_path, 4), "turn 4")
        assert finished(tmp_path, 4)[-1]["status"] == "done"
        assert json.loads(watchrun(tmp_path, "status", "--json"))["problems"] == []
        (row,) = json.loads(watchrun(tmp_path, "agent", "list", "--json"))["agents"]
        assert (row["lastTurn"], row["lastError"], row["lastReply"]) == ("done", None, "fixed")
    finally:
        assert r.stop() == 0
    again = LiveRunner(config)  # its history: one turn of 2 used in the hour, not 4
    try:
        again.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR 5\n")
        wait_for(lambda: finished(tmp_path, 5), "turn 5")
        assert finished(tmp_path, 5)[-1]["status"] == "done"
    finally:
        assert again.stop() == 0


def test_a_reload_that_changes_the_agent_clears_its_could_not_start_problem(
        tmp_path: Path) -> None:
    """docs/control.md (`status`): the "N turn(s) in a row could not start its command" line
    stays until a turn's process starts *or a reload changes the agent*: a reload that leaves
    the agent as it was keeps it; one that fixes its command clears it at once, before any
    turn of the new command (none runs: nothing is sent)."""
    conf: dict[str, Any] = {"watchers": [], "agents": [
        {"name": "ag", "provider": "claude", "command": ["./nope", "{prompt}"]}]}
    config = write_config(tmp_path, conf)
    (tmp_path / "fixed").write_text(AGENT)
    (tmp_path / "fixed").chmod(0o755)
    r = LiveRunner(config)
    problem = f"agent ag: 2 turn(s) in a row could not start its command: {WHY}"
    try:
        r.wait_running()
        for n in (1, 2):
            assert r.control({"cmd": "agent-send", "name": "ag", "text": f"hi {n}"})["ok"]
            wait_for(lambda n=n: finished(tmp_path, n), f"turn {n}")
        assert json.loads(watchrun(tmp_path, "status", "--json"))["problems"] == [problem]
        r.send(signal.SIGHUP)  # the same config: the agent is not changed
        wait_for(lambda: r.stderr().count("reloaded:") == 1, "the first reload")
        assert json.loads(watchrun(tmp_path, "status", "--json"))["problems"] == [problem]
        conf["agents"][0]["command"] = ["./fixed", "{prompt}"]
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.stderr().count("reloaded:") == 2, "the second reload")
        r.wait_log("[ag] config changed: restarted")
        assert json.loads(watchrun(tmp_path, "status", "--json"))["problems"] == []
        assert "problems: none\n" in watchrun(tmp_path, "status")
        assert [e["status"] for e in finished(tmp_path, 2)] == ["failed"] * 2  # no turn since
    finally:
        assert r.stop() == 0
    assert r.left == []
