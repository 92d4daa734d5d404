"""An `agent run` SIGKILLed mid-turn: its guardian ends the agent, and nothing closes the turn
until the next run. The views said `running` all that while (LAST ACTIVITY growing, an
`--until status:idle` waiting out its timeout); they now say `interrupted`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from inproc import inproc
from liverunner import LiveRunner, cli, guardian_of, wait_for, watchrun_bin, write_config

_AGENT = ("import json, sys, time\n"
          "print(json.dumps({'type': 'system', 'subtype': 'init', 'session_id': 's1'}), "
          "flush=True)\n"
          "if sys.argv[1] == 'hang':\n"
          "    time.sleep(600)\n"
          "print(json.dumps({'type': 'result', 'subtype': 'success', 'result': 'ok'}))\n")


def wr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` as a process: `agent run` (a turn)."""
    return cli(*args, cwd=cwd, timeout=60)


def view(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A view (`agent list`, `agent watch`, `transcript`…): read in this process."""
    return inproc(cwd, *args)


def agent_status(cwd: Path) -> tuple[str, str]:
    """(`agent list --json`'s status, `agent watch`'s status) of agent `a`."""
    listed = view(cwd, "agent", "list", "--json")
    watched = view(cwd, "agent", "watch", "a")
    assert listed.returncode == 0 and watched.returncode == 0, listed.stderr + watched.stderr
    return (json.loads(listed.stdout)["agents"][0]["status"],
            json.loads(watched.stdout)["agent"]["status"])


def transcribed(cwd: Path) -> tuple[str, str | None, str | None]:
    """(status, outcome, error) of agent `a`'s only turn in `agent transcript` and
    `watchrun transcript`, which must agree."""
    seen = set()
    for args in (("agent", "transcript", "a"), ("transcript",)):
        p = view(cwd, *args)
        assert p.returncode == 0, p.stderr
        (turn,) = json.loads(p.stdout)["turns"]
        seen.add((turn["agents"][0]["status"], turn["outcome"],
                  (turn.get("error") or {}).get("error")))
    (one,) = seen
    return one


def test_a_turn_whose_agent_run_was_killed_is_interrupted_not_running(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(_AGENT)
    write_config(tmp_path, {"agents": [
        {"name": "a", "provider": "claude", "command": [sys.executable, "agent.py", "{prompt}"]}]})
    proc = subprocess.Popen([watchrun_bin(), "agent", "run", "a", "--prompt", "hang"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stream = tmp_path / ".watchrun" / "agents" / "a.jsonl"
        wait_for(lambda: stream.exists() and b'"kind":"session"' in stream.read_bytes(),
                 "the agent's first event recorded")
        guardian_of(proc.pid)
        assert agent_status(tmp_path) == ("running", "running")
        assert transcribed(tmp_path) == ("running", None, None)
    finally:
        proc.kill()
        proc.wait()
    assert agent_status(tmp_path) == ("interrupted", "interrupted")
    assert transcribed(tmp_path) == ("interrupted", "interrupted",
                                     "the turn is open, but its runner is gone: nothing runs it")
    shown = view(tmp_path, "agent", "transcript", "a", "--format", "text").stdout
    assert "turn-1  manual  interrupted" in shown and "  outcome: interrupted" in shown, shown
    text = view(tmp_path, "agent", "list")
    assert "interrupted" in text.stdout, text.stdout
    again = wr(tmp_path, "agent", "run", "a", "--prompt", "answer", "--json")
    assert again.returncode == 0, again.stderr
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    closed = [(r["turnId"], r["status"]) for r in records if r["kind"] == "dispatch-finished"]
    assert [c[1] for c in closed] == ["cancelled", "done"] and closed[0][0] == "turn-1", closed
    assert agent_status(tmp_path) == ("idle", "idle")


def test_a_plan_whose_runner_was_killed_is_interrupted_not_running(tmp_path: Path) -> None:
    """`watchrun transcript` showed the plan, and its step whose turn nothing runs any more,
    `running` after the runner was SIGKILLed, while `agent list` said `interrupted`."""
    (tmp_path / "agent.py").write_text(_AGENT)
    (tmp_path / "app.log").write_text("")
    command = [sys.executable, "agent.py", "hang"]
    config = write_config(tmp_path, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": ["fix"]}],
        "agents": [{"name": "review", "provider": "claude", "command": command},
                   {"name": "fix", "provider": "claude", "command": command,
                    "dependsOn": ["review"]}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR one\n")
        stream = tmp_path / ".watchrun" / "agents" / "review.jsonl"
        wait_for(lambda: b'"kind":"session"' in stream.read_bytes(), "review's turn")
    finally:
        r.stop(signal.SIGKILL)
    wait_for(lambda: "interrupted" in view(tmp_path, "agent", "list").stdout, "`interrupted`")
    for args in (("transcript",), ("agent", "transcript", "review")):
        p = view(tmp_path, *args)
        (plan,) = json.loads(p.stdout)["turns"]
        assert (plan["outcome"], [a["status"] for a in plan["agents"]]) == (
            "interrupted", ["interrupted"]), args
        assert [(s["id"], s["reason"]) for s in plan["skipped"]] == [("fix", "interrupted")]
        text = view(tmp_path, *args, "--format", "text").stdout
        assert "  agent review: interrupted" in text and "  outcome: interrupted" in text, text
