"""The agent lock: one writer per agent stream, and asking who holds it never keeps one out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from liverunner import cli, wait_for, watchrun_bin, write_config

from watchrun.agents.streamlock import StreamBusyError, StreamLock, held_by
from watchrun.output import flocks


def test_asking_who_holds_an_agent_never_keeps_its_writer_out(tmp_path: Path) -> None:
    """`agent stop` with no runner asks whether an `agent run` holds the agent. It took a
    shared lock to find out: an `agent run` starting in that instant was refused, "being
    written by another process (pid N)", N the pid of whoever held the lock before."""
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


def test_without_proc_locks_a_shared_lock_is_tried(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc/locks cannot be read, `held_by` still tells a held agent from a free one."""
    def unreadable(st: object) -> list[int]:
        raise PermissionError("/proc/locks")
    monkeypatch.setattr(flocks, "holders_of", unreadable)
    stream = tmp_path / "agents" / "a.jsonl"
    stream.parent.mkdir()
    lock = StreamLock(stream, "a")
    try:
        busy = held_by(stream, "a")
        assert busy is not None and busy.pid == os.getpid()
    finally:
        lock.release()
    assert held_by(stream, "a") is None
    StreamLock(stream, "a").release()  # (the probe let go of its shared lock)
