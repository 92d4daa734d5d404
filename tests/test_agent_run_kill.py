"""`agent run` owns the agent's processes as a runner owns its children: SIGKILLed, its
guardian ends them (those that left the group with setsid too); when the guardian was killed
as well, the next `agent run` of the agent, or the next runner of the output dir, ends what
was left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from liverunner import (
    DEADLINE_S,
    LiveRunner,
    alive,
    cli,
    guardian_of,
    wait_for,
    watchrun_bin,
    write_config,
)


def _tree(pids: Path) -> str:
    """A leader, a child in its group and one that left it (setsid), each pid written down."""
    return (f"echo $$$$ >> {pids}; sleep 1000 & echo $! >> {pids}; "
            f"setsid sleep 1001 & echo $! >> {pids}; echo up; wait")


def _three(pids: Path) -> list[int]:
    return [int(x) for x in pids.read_text().split()] if pids.exists() else []


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    pids = tmp_path / "pids"
    config = write_config(tmp_path, {"agents": [
        {"name": "work", "provider": "generic", "command": ["sh", "-c", _tree(pids)]}]})
    return pids, config


def _recorded(config: Path) -> bool:
    """The agent's group is in `agent run`'s groups file (written just after the spawn: a kill
    before that is the one moment nothing names the group, as for a runner)."""
    path = config.parent / ".watchrun" / "state" / "agent-work.processes.json"
    try:
        return bool(json.loads(path.read_text())["groups"])
    except (OSError, ValueError):
        return False


def _end(proc: subprocess.Popen[bytes], pids: Path) -> None:
    """Whatever a failed check left: `agent run` and the agent's tree."""
    proc.kill()
    proc.wait()
    for pid in _three(pids):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def _agent_run(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([watchrun_bin(), "agent", "run", "work", "-c", str(config),
                             "--prompt", "go"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=config.parent)


def test_sigkill_of_agent_run_ends_the_agents_processes(tmp_path: Path) -> None:
    pids, config = _setup(tmp_path)
    proc = _agent_run(config)
    try:
        wait_for(lambda: len(_three(pids)) == 3 and _recorded(config), "the agent's tree")
        guardian_of(proc.pid)
        proc.kill()
        proc.wait()
        wait_for(lambda: not any(alive(p) for p in _three(pids)), "the tree to end", 10)
    finally:
        _end(proc, pids)


@pytest.mark.parametrize("next_one", ["agent run", "runner"])
def test_what_a_killed_agent_run_and_its_guardian_left_is_ended_next_time(
        tmp_path: Path, next_one: str) -> None:
    pids, config = _setup(tmp_path)
    first = _agent_run(config)
    try:
        wait_for(lambda: len(_three(pids)) == 3 and _recorded(config), "the agent's tree")
        leader, *kids = _three(pids)
        first.send_signal(signal.SIGSTOP)  # (one that ran on would start another guardian)
        os.kill(guardian_of(first.pid), signal.SIGKILL)
        first.kill()
        first.wait()
        wait_for(lambda: not alive(leader), "PR_SET_PDEATHSIG to end the leader", 10)
        assert all(alive(k) for k in kids)  # (orphans: only the next owner can end them)
        said = (f"ended 2 processes left running by a previous `agent run` (pid {first.pid})")
        if next_one == "agent run":
            pids.unlink()
            second = _agent_run(config)
            try:
                wait_for(lambda: len(_three(pids)) == 3, "the next turn's tree")
                assert not any(alive(k) for k in kids)
            finally:
                second.send_signal(signal.SIGTERM)
                _, err = second.communicate(timeout=DEADLINE_S)
            assert f"[work] warning: {said} of work" in err.decode(), err.decode()
        else:
            runner = LiveRunner(write_config(tmp_path, {"agents": []}, "other.yaml"))
            try:
                runner.wait_log(f"{said} of this output dir")
                assert not any(alive(k) for k in kids)
            finally:
                assert runner.stop() == 0
    finally:
        _end(first, pids)


def test_agent_stop_names_the_agent_run_that_runs_the_turn(tmp_path: Path) -> None:
    """With no runner, `agent stop` said "no running turn" (exit 0) while an `agent run` was
    in the middle of one: a script took it for nothing running. It names that process."""
    pids, config = _setup(tmp_path)
    proc = _agent_run(config)
    try:
        wait_for(lambda: len(_three(pids)) == 3 and _recorded(config), "the agent's tree")
        stop = cli("agent", "stop", "work", "-c", config)
        assert stop.returncode == 3, stop.stderr
        assert (f"work's turn is run by another process (pid {proc.pid}), not a runner: stop it "
                f"with Ctrl-C there, or `kill -INT {proc.pid}`") in stop.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE_S) == 130
        stop = cli("agent", "stop", "work", "-c", config)
        assert (stop.returncode, stop.stdout) == (
            0, "work has no running turn (no runner is live on this output dir)\n"), stop.stderr
    finally:
        proc.kill()
        proc.wait()
