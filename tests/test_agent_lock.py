"""The agent lock: one writer per agent stream, and asking who holds it never keeps one out."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from liverunner import cli, wait_for, watchrun_bin, write_config

from watchrun.agents.streamlock import StreamBusyError, StreamLock, held_by
from watchrun.output import flocks


def test_asking_who_holds_an_agent_never_keeps_its_writer_out(tmp_path: Path) -> None:
    """`agent stop` with no runner asks whether an `agent run` holds the agent: a shared lock
    tried and let go, the kernel's answer (/proc/locks of a container shows no lock of the
    host's). An `agent run` starting in that instant was refused, "being written by another
    process (pid N)", until its exclusive lock was tried again (`flocks.take`)."""
    stream = tmp_path / "agents" / "a.jsonl"
    stream.parent.mkdir()
    StreamLock(stream, "a").release()  # (the lock file exists, as after any run)
    done, asked = threading.Event(), [0]

    def ask() -> None:
        while not done.is_set():
            held_by(stream, "a")
            asked[0] += 1
    asker = threading.Thread(target=ask)
    asker.start()
    refused = 0
    try:
        for _ in range(3000):
            try:
                StreamLock(stream, "a").release()
            except StreamBusyError:
                refused += 1
    finally:
        done.set()
        asker.join()
    assert asked[0] > 100 and refused == 0, (asked[0], refused)


def test_agent_stop_without_a_runner_names_the_agent_run_that_holds_it(tmp_path: Path) -> None:
    """No runner answers, an `agent run` has the agent: `agent stop` says who, and how."""
    (tmp_path / "agent.py").write_text(
        "import json, time\n"
        "print(json.dumps({'type': 'system', 'subtype': 'init', 'session_id': 's'}), flush=True)\n"
        "time.sleep(600)\n")
    write_config(tmp_path, {"agents": [
        {"name": "a", "provider": "claude", "command": [sys.executable, "agent.py", "{p}"]}]})
    run = subprocess.Popen([watchrun_bin(), "agent", "run", "a", "--prompt", "hi"], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stream = tmp_path / ".watchrun" / "agents" / "a.jsonl"
        wait_for(lambda: stream.exists() and b'"kind":"session"' in stream.read_bytes(),
                 "the turn under way")
        stop = cli("agent", "stop", "a", "--json", cwd=tmp_path, timeout=60)
        error = json.loads(stop.stdout or stop.stderr)["error"]
        assert (error["code"], error["pid"]) == ("agent_busy", run.pid), error
        assert f"`kill -INT {run.pid}`" in error["message"]
    finally:
        run.kill()
        run.wait()
    stop = cli("agent", "stop", "a", "--json", cwd=tmp_path, timeout=60)
    assert stop.returncode == 0 and json.loads(stop.stdout)["stopped"] is False, stop


def test_without_proc_locks_a_held_agent_is_busy_naming_no_pid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel tells a held agent from a free one; where /proc/locks does not show the
    holder (unreadable, another pid namespace) no pid is named: the one the holder wrote may
    be another process here (pid 1 of a container: init on the host)."""
    def unreadable(st: object) -> list[int]:
        raise PermissionError("/proc/locks")
    monkeypatch.setattr(flocks, "holders_of", unreadable)
    stream = tmp_path / "agents" / "a.jsonl"
    stream.parent.mkdir()
    lock = StreamLock(stream, "a")
    try:
        busy = held_by(stream, "a")
        assert busy is not None and busy.pid is None
        assert "being written by another process (pid not visible from here)" in str(busy)
    finally:
        lock.release()
    assert held_by(stream, "a") is None
    StreamLock(stream, "a").release()  # (the probe let go of its shared lock)
