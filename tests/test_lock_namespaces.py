"""Runners and `agent run`s in other pid namespaces (containers sharing an output dir): whether
one holds its lock is the kernel's answer, not /proc/locks' (which lists only the locks of the
processes its pid namespace can see), and a pid is named only as the caller sees it (an
explorer's F1, F3 and F6)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pidns
import pytest
from liverunner import alive, cli, processes, wait_for, write_config

pytestmark = pidns.needs_pid_namespaces


def _ns_pid(pid: int) -> str:
    """The pid of a process in its own (innermost) pid namespace."""
    status = Path(f"/proc/{pid}/status").read_text()
    return status.split("NSpid:")[1].split("\n")[0].split()[-1]


def _child_of(parent: int) -> int:
    """The host pid of the process `unshare` forked (pid 1 of its namespace)."""
    return int(wait_for(lambda: next((pid for pid, st, _ in processes()
                                      if int(st[1]) == parent), None), "unshare's child"))


def _error(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The `--json` error document of a command that failed."""
    err = json.loads(done.stdout or done.stderr)["error"]
    assert isinstance(err, dict), done
    return err


def test_a_runner_in_another_pid_namespace_is_no_answer_never_no_runner(tmp_path: Path) -> None:
    """F1: a runner in one pid namespace, its socket removed (a tmp cleaner); a CLI in a
    sibling namespace read an empty /proc/locks: `stop` said "already stopped (no runner is
    live)", exit 0, `status` `no_runner`, and the MCP server took no runner for none, while
    the runner held control.lock and ran on."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun"
    runner = pidns.start(tmp_path, "run", "-c", str(config))
    try:
        wait_for(lambda: (out / "state" / "app.status.json").exists(), "the runner's snapshot")
        (out / "control.sock").rename(out / "saved.sock")
        stop = pidns.run(tmp_path, "stop", "app", "-c", str(config), "--json")
        assert stop.returncode == 3, (stop.stdout, stop.stderr)
        err = _error(stop)
        assert err["code"] == "no_answer", err
        assert str(err["message"]).startswith(
            f"a runner (pid not visible from here) holds {out / 'control.lock'} but cannot be "
            "reached"), err
        status = pidns.run(tmp_path, "status", "-c", str(config), "--json")
        assert (status.returncode, _error(status)["code"]) == (3, "no_answer"), status
        live = pidns.run(tmp_path, sys.executable, "-c",
                         "import sys; from pathlib import Path\n"
                         "from watchrun.mcp.runners import LiveRunner\n"
                         "print(LiveRunner(Path(sys.argv[1]), None).live())",
                         str(out / "control.sock"))
        assert live.stdout.split() == ["True"], live  # (the session does not start its own)
        host = cli("stop", "app", "-c", config, "--json")  # the host sees it: named, host pid
        pid = _child_of(runner.pid)
        assert _ns_pid(pid) == "1"
        assert str(_error(host)["message"]).startswith(f"a runner (pid {pid}) holds "), host
        second = pidns.run(tmp_path, "run", "-c", str(config))
        assert second.returncode == 3, second.stderr
        assert (f"another runner is live on {out} (pid not visible from here, which holds "
                "control.lock)") in second.stderr
        (out / "saved.sock").rename(out / "control.sock")
        listed = cli("list", "-c", config, "--json")  # it ran on all along
        assert [w["status"] for w in json.loads(listed.stdout)["watchers"]] == ["running"]
    finally:
        pidns.end(runner, out / "control.lock")


class AgentRun(NamedTuple):
    config: Path
    mark: Path
    """The agent's shell has this path on its command line."""
    pid: int
    """`agent run`'s host pid (pid 1 in its namespace)."""


@pytest.fixture
def agent_run(tmp_path: Path) -> Iterator[AgentRun]:
    """`agent run slow` in a pid namespace of its own, its turn under way (its processes
    recorded in `state/agent-slow.processes.json`)."""
    mark = tmp_path / "mark"
    config = write_config(tmp_path, {"agents": [
        {"name": "slow", "provider": "generic",
         "command": ["sh", "-c", 'touch "$0.up"; sleep 600; :', str(mark)]}]})
    state = tmp_path / ".watchrun" / "state"
    proc = pidns.start(tmp_path, "agent", "run", "slow", "--prompt", "hi", "-c", str(config))

    def recorded() -> bool:
        try:
            return bool(json.loads((state / "agent-slow.processes.json").read_text())["groups"])
        except (OSError, ValueError):
            return False
    try:
        wait_for(lambda: Path(f"{mark}.up").exists() and recorded(), "the turn under way")
        yield AgentRun(config, mark, _child_of(proc.pid))
    finally:
        pidns.end(proc, state / "agents-slow.lock")


def test_agent_views_in_a_sibling_namespace_see_the_turn_running(agent_run: AgentRun,
                                                                 tmp_path: Path) -> None:
    """F1 (views): from a sibling namespace nobody seemed to hold the agent's lock, so a
    running turn was `interrupted`, "its runner is gone: nothing runs it"."""
    listed = pidns.run(tmp_path, "agent", "list", "-c", str(agent_run.config), "--json")
    assert [a["status"] for a in json.loads(listed.stdout)["agents"]] == ["running"], listed
    watch = pidns.run(tmp_path, "agent", "transcript", "slow", "-c", str(agent_run.config))
    assert "nothing runs it" not in watch.stdout + watch.stderr, watch


def test_agent_stop_of_an_agent_run_in_another_namespace_is_agent_busy(agent_run: AgentRun,
                                                                       tmp_path: Path) -> None:
    """F6: `agent stop` said "slow has no running turn", exit 0, of a turn an `agent run` in
    another pid namespace ran (its written pid, 1, was not among the holders the host sees).
    Now `agent_busy`, exit 3, naming the pid as the caller sees it — never `kill -INT 1`, init
    on a host — or none where it cannot see it."""
    host = cli("agent", "stop", "slow", "-c", agent_run.config, "--json")
    assert host.returncode == 3, host
    err = _error(host)
    assert (err["code"], err["pid"]) == ("agent_busy", agent_run.pid), err
    assert f"`kill -INT {agent_run.pid}`" in str(err["message"]), err
    sibling = pidns.run(tmp_path, "agent", "stop", "slow", "-c", str(agent_run.config), "--json")
    assert sibling.returncode == 3, sibling
    err = _error(sibling)
    assert (err["code"], err["pid"]) == ("agent_busy", None), err
    assert "(pid not visible from here)" in str(err["message"]), err
    assert "kill -INT 1`" not in str(err["message"]), err
    again = pidns.run(tmp_path, "agent", "run", "slow", "--prompt", "x", "-c",
                      str(agent_run.config), "--json")
    assert again.returncode == 3, again
    err = _error(again)
    assert (err["code"], err["pid"]) == ("agent_busy", None), err
    assert "being written by another process (pid not visible from here)" in str(
        err["message"]), err
    assert alive(agent_run.pid)


def _agent_shell(mark: Path) -> list[int]:
    return [pid for pid, st, (cmdline,) in processes("cmdline")
            if str(mark).encode() in cmdline and st[0] != b"Z"]


def test_a_runner_started_beside_a_live_agent_run_of_another_namespace_ends_nothing(
        agent_run: AgentRun, tmp_path: Path) -> None:
    """F3: `run --once` on the host judged the `agent run` dead by its pid (1, its own
    namespace's) and ended its live turn: "ended 2 processes left running by a previous
    `agent run` (pid 1)", and the turn failed, killed by SIGTERM."""
    shell = _agent_shell(agent_run.mark)
    assert len(shell) == 1
    (tmp_path / "app.log").write_text("")
    host = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]}, "host.yaml")
    once = cli("run", "--once", "-c", host)
    assert once.returncode == 0, once.stderr
    assert "ended" not in once.stderr, once.stderr
    assert alive(shell[0]) and alive(agent_run.pid)
    listed = json.loads(cli("agent", "list", "-c", agent_run.config, "--json").stdout)
    assert [a["status"] for a in listed["agents"]] == ["running"], listed
