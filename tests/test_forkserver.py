"""The test harness's fork servers (tests/forkserver.py, tests/forkedmcp.py) make the process
the console script makes: the same signal dispositions, mask, umask, descriptor limit, session,
working directory, open descriptors and exit statuses, the environment it was given (not its
own), and they decline what a new interpreter would read differently."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import anyio
import forkserver
import pytest
from liverunner import DEADLINE_S, LiveRunner, wait_for, watchrun_bin, write_config
from mcpclient import alive, mcp_session

from watchrun.process.spawn import become_subreaper


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


def test_an_mcp_server_is_forked_from_the_server_that_imported_the_sdk(tmp_path: Path) -> None:
    """tests/forkedmcp.py: the SDK's `stdio_client` talks to a `watchrun mcp` the `mcp` server
    forked, as to one it started itself."""
    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            assert c.pid is not None
            stat = Path(f"/proc/{c.pid}/stat").read_text()
            assert int(stat.rsplit(")", 1)[1].split()[1]) == forkserver.server_pid("mcp")
            assert os.getsid(c.pid) == c.pid
            assert (await c.ok(action="list"))["watches"] == []
        assert not alive(c.pid)
    anyio.run(body)


def test_a_forked_mcp_server_exits_and_says_what_the_console_scripts_says(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "a", "path": "x", "pattern": "("}]})
    argv = [watchrun_bin(), "mcp", "-c", str(config), "--log-format", "json"]
    forked = forkserver.run(argv, env=dict(os.environ), cwd=tmp_path, timeout=DEADLINE_S,
                            kind="mcp")
    real = subprocess.run(argv, env=dict(os.environ), cwd=tmp_path, capture_output=True,
                          timeout=DEADLINE_S, stdin=subprocess.DEVNULL, check=False)
    assert forked is not None
    assert forked.returncode == real.returncode == 2
    assert forked.stdout == real.stdout == b""

    def said(text: bytes) -> list[str]:
        return [re.sub(r'"ts":"[^"]*"', "", line) for line in text.decode().splitlines()]
    assert said(forked.stderr) == said(real.stderr)
    assert "invalid regex" in forked.stderr.decode()


def test_a_server_started_while_this_process_is_a_subreaper_is_no_child_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An MCP session served in the test process makes it a subreaper: a server started after
    that was re-parented to it, and the next in-process runner's end stopped it (every child
    after it started the usual way)."""
    monkeypatch.setattr(forkserver, "_servers", {})  # (a new server; this one ends with it)
    before = forkserver.subreaper()
    assert become_subreaper(True)
    try:
        done = forkserver.run([watchrun_bin(), "--version"], env=dict(os.environ), cwd=tmp_path,
                              timeout=DEADLINE_S)
        server = forkserver.server_pid()
        assert done is not None and done.returncode == 0 and server is not None
        stat = Path(f"/proc/{server}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[1]) != os.getpid()
    finally:
        become_subreaper(before)
