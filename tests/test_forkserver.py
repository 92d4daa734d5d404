"""The test harness's fork server (tests/forkserver.py) makes the process the console script
makes: the same signal dispositions, mask, umask, descriptor limit, session, working directory,
open descriptors and exit statuses, the environment it was given (not its own), and it declines
what a new interpreter would read differently."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import forkserver
import pytest
from liverunner import DEADLINE_S, LiveRunner, wait_for, watchrun_bin, write_config


def _status(pid: int) -> dict[str, str]:
    fields = ("Umask", "SigBlk", "SigIgn", "SigCgt")
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (x.partition(":") for x in lines) if k in fields}


def _inodes(pid: int) -> set[str]:
    """The pipes and sockets process `pid` holds open (each names its inode)."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):
            target = os.readlink(fd)
            if target.startswith(("pipe:", "socket:")):
                found.add(target)
    return found


def _stdio(pid: int) -> list[str]:
    """What descriptors 0-2 are: a path by its name, a pipe as `pipe`."""
    return [os.readlink(f"/proc/{pid}/fd/{fd}").split(":")[0].rsplit("/", 1)[-1][:6]
            for fd in range(3)]


def _started(tmp: Path, fork: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.setenv("WATCHRUN_TEST_FORK", "1" if fork else "0")
    tmp.mkdir()
    (tmp / "app.log").write_text("fine\n")
    config = write_config(tmp, {"watchers": [
        {"id": "app", "path": str(tmp / "app.log"), "pattern": "ERROR ${WORD}"}]})
    r = LiveRunner(config, env={"WORD": "here"})
    try:
        assert isinstance(r.proc, forkserver.Forked) == fork
        r.wait_running()
        with (tmp / "app.log").open("a") as f:
            f.write("ERROR here\n")
        wait_for(lambda: r.matches("app"), "the match")
        if fork:  # none of the server's descriptors (its sockets, its wake-up pipe)
            server = forkserver.server_pid()
            assert server is not None and not _inodes(r.pid) & _inodes(server)
        seen: dict[str, object] = {
            **_status(r.pid), "stdio": _stdio(r.pid),
            "sid": os.getsid(r.pid) == r.pid, "cwd": os.readlink(f"/proc/{r.pid}/cwd"),
            "nofile": Path(f"/proc/{r.pid}/limits").read_text().split("Max open files")[1]
            .split()[:2]}
        seen["rc"] = r.stop(signal.SIGTERM)
    finally:
        r.close()
    seen["left"] = r.left
    return seen


def test_a_forked_runner_is_the_process_the_console_script_makes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forked = _started(tmp_path / "forked", True, monkeypatch)
    started = _started(tmp_path / "started", False, monkeypatch)
    assert Path(str(forked.pop("cwd"))) == tmp_path / "forked"
    assert Path(str(started.pop("cwd"))) == tmp_path / "started"
    assert forked == started
    assert forked["rc"] == 0 and forked["sid"] is True


@pytest.mark.parametrize("gate", [{"maxMatches": 0}, {"maxMatches": 5}])
def test_a_forked_once_run_exits_and_prints_as_the_console_script(
        tmp_path: Path, gate: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHRUN_TEST_FORK", "1")
    done = []
    for how in ("forked", "started"):
        (tmp_path / how).mkdir()
        (tmp_path / how / "app.log").write_text("ERROR a\nfine\n")
        config = write_config(tmp_path / how, {"watchers": [
            {"id": "app", "path": "app.log", "pattern": "ERROR", "gate": gate}]})
        argv = [watchrun_bin(), "run", "--once", "-c", str(config)]
        env, cwd = dict(os.environ), tmp_path / how
        done.append(forkserver.run(argv, env=env, cwd=cwd, timeout=DEADLINE_S) if how == "forked"
                    else subprocess.run(argv, env=env, cwd=cwd, capture_output=True,
                                        timeout=DEADLINE_S, stdin=subprocess.DEVNULL, check=False))
    forked, real = done
    assert forked is not None
    assert forked.returncode == real.returncode == (1 if gate["maxMatches"] == 0 else 0)
    assert forked.stdout == real.stdout

    def log(text: bytes, how: str) -> list[str]:
        return [re.sub(r"^\S+Z ", "", line).replace(str(tmp_path / how), "DIR")
                for line in text.decode().splitlines()]
    assert log(forked.stderr, "forked") == log(real.stderr, "started")


def test_a_child_of_other_interpreter_settings_is_left_to_the_console_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHRUN_TEST_FORK", "1")
    argv = [watchrun_bin(), "--version"]
    for var in ("PYTHONIOENCODING", "PYTHONUNBUFFERED", "LC_ALL"):
        env = {**os.environ, var: os.environ.get(var, "") + "x"}
        assert forkserver.spawn(argv, env=env, cwd=tmp_path, stdout=None, stderr=None) is None
    done = forkserver.run(argv, env=dict(os.environ), cwd=tmp_path, timeout=DEADLINE_S)
    assert done is not None and done.returncode == 0 and done.stdout.startswith(b"watchrun ")
