"""`list` and `status ID` without a live runner: a snapshot is live only while the runner that
wrote it holds the output dir's `control.lock`, not while some process has its pid."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, watchrun_bin, write_config

from watchrun.output import flocks


def wr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, cwd=cwd, timeout=60)


def listed(cwd: Path, run: Callable[..., subprocess.CompletedProcess[str]] = wr,
           ) -> dict[str, dict[str, object]]:
    """`list --json`'s watchers by id, as a process (`inproc`: read in this one)."""
    p = run(cwd, "list", "--json", "--output-dir", ".watchrun")
    assert p.returncode == 0, p.stderr
    return {w["id"]: w for w in json.loads(p.stdout)["watchers"]}


def test_a_sigkilled_runner_not_yet_reaped_is_not_live(tmp_path: Path) -> None:
    """helper-87's repro: with the runner SIGKILLed and its parent slow to wait() (a zombie),
    `list` said `running` and `status ticker` `live yes` with the pid of a command the guardian
    had killed, while `status` said there was no live runner."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "ticker", "command": "while true; do echo tick ERROR; sleep 0.2; done",
         "pattern": "ERROR"}]})
    runner = LiveRunner(config, forked=False)  # (this process must leave it unreaped)
    try:
        runner.wait_running()
        wait_for(lambda: (tmp_path / ".watchrun/state/ticker.status.json").exists() and json.loads(
            (tmp_path / ".watchrun/state/ticker.status.json").read_text()).get("pid"),
            "ticker's snapshot with its command's pid")
        before = listed(tmp_path, inproc)
        assert before["ticker"]["status"] == "running" and before["ticker"]["live"] is True
        runner.send(signal.SIGKILL)
        # a zombie leader, and no thread left that still holds its files (the lock, the socket)
        wait_for(lambda: _state(runner.pid) == "Z" and len(os.listdir(
            f"/proc/{runner.pid}/task")) == 1, "the runner to be a zombie with no thread left")
        assert runner.proc.returncode is None  # not reaped: its pid is still taken
        after = listed(tmp_path)
        for wid in ("app", "ticker"):
            assert (after[wid]["status"], after[wid]["live"], after[wid].get("pid")) == (
                "stopped", False, None), after[wid]
        status = wr(tmp_path, "status", "ticker", "-c", "watch.yaml")
        assert status.returncode == 0, status.stderr
        lines = dict(ln.split(None, 1) for ln in status.stdout.splitlines() if " " in ln)
        assert lines["status"].strip() == "stopped" and lines["live"].strip() == "no", status.stdout
    finally:
        runner.close()


def test_a_snapshot_whose_runner_pid_another_process_took_is_not_live(tmp_path: Path) -> None:
    """A pid reused by another process (here: this test's own) made the snapshot live."""
    state = tmp_path / ".watchrun" / "state"
    state.mkdir(parents=True)
    (state / "app.status.json").write_text(json.dumps({
        "id": "app", "kind": "file", "status": "running", "pid": None, "runnerPid": os.getpid()}))
    assert listed(tmp_path)["app"]["status"] == "stopped"
    with open(tmp_path / ".watchrun" / "control.lock", "w") as lock:  # the runner's own lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert flocks.holders(tmp_path / ".watchrun" / "control.lock") == [os.getpid()]
        got = listed(tmp_path)["app"]
        assert (got["status"], got["live"]) == ("running", True)


def test_a_lock_held_by_another_process_is_not_this_snapshots_runner(tmp_path: Path) -> None:
    """A second runner holding the lock does not make the first one's snapshots live."""
    lock = tmp_path / "control.lock"
    lock.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "time.sleep(600)", str(lock)])
    try:
        found = wait_for(lambda: flocks.holders(lock), "the other process to hold the lock")
        assert found == [holder.pid]
        assert not flocks.is_process(found[0], os.getpid())
        assert flocks.is_process(os.getpid(), os.getpid())
    finally:
        holder.kill()
        holder.wait()
    assert flocks.holders(lock) == []
    assert flocks.holders(tmp_path / "absent.lock") == []


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_without_proc_locks_a_snapshot_is_live_while_its_pid_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc/locks cannot be read, `kill(pid, 0)` remains the test (decisions.md)."""
    from watchrun.views.watchers import load_statuses

    def unreadable(path: Path) -> list[int]:
        raise PermissionError("/proc/locks")
    monkeypatch.setattr(flocks, "holders", unreadable)
    state = tmp_path / "state"
    state.mkdir()
    for wid, pid in (("mine", os.getpid()), ("gone", 2**22 + 1)):
        (state / f"{wid}.status.json").write_text(json.dumps({
            "id": wid, "kind": "file", "status": "running", "runnerPid": pid}))
    got = {s["id"]: (s["status"], s["live"]) for s in load_statuses(tmp_path)}
    assert got == {"mine": ("running", True), "gone": ("stopped", False)}


def _pid_namespaces() -> bool:
    try:
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _pid_namespaces(), reason="no pid namespace can be made here")
def test_a_runner_in_a_pid_namespace_is_live_seen_from_outside(tmp_path: Path) -> None:
    """A runner in a container writes its own pid (1 there) into its snapshots, and the host's
    /proc/locks names it by its host pid: the snapshot is that runner's when the holder's
    `NSpid` line ends in it (flocks.is_process). This branch had no test."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", watchrun_bin(), "run",
                             "-c", str(config)], cwd=tmp_path, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    from watchrun.views.watchers import load_statuses

    try:
        snap = wait_for(lambda: next((s for s in load_statuses(tmp_path / ".watchrun")
                                      if s.get("status") == "running"), None),
                        "its running snapshot")
        holder = wait_for(lambda: flocks.holders(tmp_path / ".watchrun" / "control.lock"),
                          "the lock's holder")[0]
        assert snap["runnerPid"] != holder  # (its own pid in the namespace, not the host's)
        assert snap["live"] is True and flocks.is_process(holder, snap["runnerPid"])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
