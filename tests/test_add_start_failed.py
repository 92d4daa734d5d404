"""`add` of a watcher that cannot start or cannot read, found by hand (docs/control.md, `add` and
the error codes; docs/cli.md, `add`):

- a command watcher whose first start failed (its executable missing or not executable, its
  `cwd` missing) was answered `ok` ("started c2", exit 0) while it was already `fatal` or
  backing off; it is refused `start_failed` with the reason (exit 3), and, as an `add` that
  failed at its JSONL, nothing of it is kept: not running, not listed, its id free (its JSONL
  records the attempt: the `error` and a `stop{reason: startup-failed}`). `start` of such a
  watcher is refused the same way, and it stays listed, stopped, with its last error;
- a file watcher whose path cannot be read (a directory, a FIFO, a socket, /dev/null, a symlink
  loop, a /proc file) said a bare "started X"; it is added (a path that becomes a regular file
  later is followed), and `watchrun add` says what it is waiting for and why, exit 0;
- `--path ''` and `--cwd ''` were taken for the current directory by `watchrun add`, while the
  socket refuses an empty path (`watchers[0].path: must not be empty`): the CLI refuses them
  with that message."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, write_config


@pytest.fixture(scope="module")
def shared_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRunner]:
    """One runner for the module: each test adds watchers of ids no other test uses (a
    parametrized one, ids of its case) and asks of those alone, and of `nobin`, which one
    test alone starts."""
    folder = tmp_path_factory.mktemp("runner")
    (folder / "cfg.log").write_text("")
    config = write_config(folder, {"watchers": [
        {"id": "cfg", "path": "cfg.log", "pattern": "x"},
        {"id": "nobin", "command": ["no-such-binary-xyz"], "pattern": "x", "restart": "never"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        yield r
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr() and r.left == []


@pytest.fixture
def runner(shared_runner: LiveRunner) -> Iterator[LiveRunner]:
    """The shared runner; the watchers a test added are stopped after it (a stopped watcher
    holds no room under limits.maxWatchers)."""
    yield shared_runner
    for wid, w in listed(shared_runner).items():
        if w["origin"] == "runtime" and w["status"] != "stopped":
            reply = shared_runner.control({"cmd": "stop", "id": wid})
            assert reply["ok"] or reply["error"]["code"] == "not_found", reply


def wr(r: LiveRunner, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS -c CONFIG`, run from the config's folder, in this process
    (tests/inproc.py: the same `main`, stdout, stderr and status as the console script)."""
    return inproc(r.config.parent, *args, "-c", str(r.config))


def wr_proc(r: LiveRunner, *args: str) -> subprocess.CompletedProcess[str]:
    """`wr` as a process of its own (liverunner.cli): for `start` (inproc refuses it) and one
    real `add`."""
    return cli(*args, "-c", r.config, cwd=r.config.parent, timeout=60)


def listed(r: LiveRunner) -> dict[str, dict[str, Any]]:
    reply = r.control({"cmd": "list"})
    assert reply["ok"], reply
    return {w["id"]: w for w in reply["watchers"]}


def assert_not_kept(r: LiveRunner, wid: str, code: str) -> None:
    """Nothing of `wid` is left: not listed, no snapshot, its id free; its JSONL says why."""
    assert wid not in listed(r)
    assert wid not in r.control({"cmd": "status"})["watchers"]
    assert not (r.out / "state" / f"{wid}.status.json").exists()
    kinds = [(rec["kind"], rec.get("code") or rec.get("reason")) for rec in r.records(wid)
             if rec["kind"] in ("error", "start", "stop")]
    assert kinds[0] == ("error", code) and kinds[-1] == ("stop", "startup-failed"), kinds
    assert ("start", None) not in kinds
    again = r.control({"cmd": "add", "watcher": {"id": wid, "command": ["true"],
                                                 "pattern": "x"}})
    assert again["ok"], again  # the id is free: nothing held it


@pytest.mark.parametrize(("fields", "code", "said"), [
    ({"command": "pwd", "cwd": "/nonexistent-watchrun-dir"}, "ENOENT",
     "working directory /nonexistent-watchrun-dir does not exist"),
    ({"command": ["no-such-binary-xyz"]}, "ENOENT", "no-such-binary-xyz"),
    ({"command": ["no-such-binary-xyz"], "restart": "always", "restartDelay": "100ms"},
     "ENOENT", "no-such-binary-xyz"),
    ({"command": ["no-such-binary-xyz"], "restart": "never"}, "ENOENT", "no-such-binary-xyz"),
    ({"command": ["{noexec}"]}, "EACCES", "noexec"),
], ids=["missing-cwd", "missing-binary", "missing-binary-restart-always",
        "missing-binary-restart-never", "not-executable"])
def test_an_added_command_that_cannot_start_is_refused_and_not_kept(
        runner: LiveRunner, tmp_path: Path, fields: dict[str, Any], code: str,
        said: str, request: pytest.FixtureRequest) -> None:
    wid = f"c7.{request.node.callspec.id}"  # (its own id on the module's runner)
    noexec = tmp_path / "noexec"
    noexec.write_text("#!/bin/sh\necho hi\n")
    noexec.chmod(0o644)
    if fields["command"] == ["{noexec}"]:
        fields = {**fields, "command": [str(noexec)]}
    reply = runner.control({"cmd": "add", "watcher": {"id": wid, "pattern": "x", **fields}})
    assert reply["ok"] is False, reply
    err = reply["error"]
    assert (err["code"], err["id"]) == ("start_failed", wid), err
    assert said in err["message"] and "nothing was added" in err["message"], err
    assert_not_kept(runner, wid, code)


def test_watchrun_add_of_a_command_in_a_missing_cwd_exits_3(runner: LiveRunner) -> None:
    p = wr(runner, "add", "c2", "--command", "pwd", "--pattern", "ERR", "--cwd", "/nonexistent")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "started" not in p.stdout
    assert p.stderr.startswith("watchrun: error: c2 could not be started: ") and \
        "working directory /nonexistent does not exist" in p.stderr, p.stderr
    p = wr(runner, "add", "c3", "--command", "pwd", "--pattern", "ERR", "--cwd", "/nonexistent",
           "--json")
    assert p.returncode == 3, (p.stdout, p.stderr)
    err = json.loads(p.stdout)["error"]
    assert err["code"] == "start_failed" and "/nonexistent" in err["message"], err
    assert_not_kept(runner, "c2", "ENOENT")
    assert_not_kept(runner, "c3", "ENOENT")


def test_start_of_a_command_that_cannot_start_is_refused_and_it_stays_listed(
        runner: LiveRunner) -> None:
    """A config watcher (or a stopped runtime one) is known before `start`: a start that fails
    leaves it listed, stopped, with the reason as its last error."""
    wait_for(lambda: listed(runner)["nobin"]["status"] == "fatal", "the config's watcher fatal")
    p = wr_proc(runner, "start", "nobin")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "started" not in p.stdout and "no-such-binary-xyz" in p.stderr, p.stderr
    reply = runner.control({"cmd": "restart", "id": "nobin"})
    assert reply["error"]["code"] == "start_failed", reply
    rec = listed(runner)["nobin"]
    assert rec["status"] == "stopped" and "no-such-binary-xyz" in rec["lastError"], rec
    stops = [r["reason"] for r in runner.records("nobin") if r["kind"] == "stop"]
    assert stops[-2:] == ["startup-failed", "startup-failed"], stops


def _unreadable(tmp_path: Path, kind: str) -> tuple[str, str]:
    """A path of `kind` that a file watcher cannot read, and what its error says."""
    if kind == "directory":
        (tmp_path / "adir").mkdir()
        return str(tmp_path / "adir"), "is a directory, not a regular file"
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return str(tmp_path / "fifo"), "is a named pipe (FIFO), not a regular file"
    if kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(tmp_path / "sock"))
        return str(tmp_path / "sock"), "is a socket, not a regular file"
    if kind == "symlink-loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop2")
        (tmp_path / "loop2").symlink_to(tmp_path / "loop")
        return str(tmp_path / "loop"), "symbolic links"
    if kind == "proc":
        return "/proc/self/status", "is a procfs pseudo-file"
    return "/dev/null", "is a character device, not a regular file"


@pytest.mark.parametrize("kind", ["directory", "fifo", "socket", "dev-null", "symlink-loop",
                                  "proc"])
def test_watchrun_add_of_a_file_it_cannot_read_says_so(runner: LiveRunner, tmp_path: Path,
                                                       kind: str) -> None:
    """Added (exit 0: the watcher is held and tries again), but never a bare "started X": the
    line says it cannot read the path yet, and why."""
    path, why = _unreadable(tmp_path, kind)
    f1, f2 = f"f1.{kind}", f"f2.{kind}"  # (their own ids on the module's runner)
    p = wr(runner, "add", f1, "--path", path, "--pattern", "x")
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip()
    assert line.startswith(f"added {f1}: cannot read {path} yet: ") and why in line, line
    p = wr(runner, "add", f2, "--path", path, "--pattern", "x", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["added"] is True and doc["watcher"]["status"] == "error", doc
    assert doc["message"].startswith(f"added {f2}: cannot read") and why in doc["message"], doc
    assert {listed(runner)[w]["status"] for w in (f1, f2)} == {"error"}


def test_a_directory_that_becomes_a_regular_file_is_followed(runner: LiveRunner,
                                                             tmp_path: Path) -> None:
    """Not refused: the path is tried again, and followed once it is a regular file."""
    path = tmp_path / "later.log"
    path.mkdir()
    p = wr(runner, "add", "lt", "--path", str(path), "--pattern", "boom", "--from-start")
    assert p.returncode == 0 and "cannot read" in p.stdout, (p.stdout, p.stderr)
    path.rmdir()
    path.write_text("boom one\n")
    wait_for(lambda: [m["line"] for m in runner.matches("lt")] == ["boom one"], "the match")
    assert listed(runner)["lt"]["status"] == "running"


def test_watchrun_add_of_a_missing_file_says_it_waits(runner: LiveRunner,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "not-yet.log"
    p = wr(runner, "add", "mf", "--path", str(path), "--pattern", "x")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith(f"added mf: waiting for {path}"), p.stdout
    assert listed(runner)["mf"]["status"] == "waiting"


def test_watchrun_add_of_a_readable_file_says_started(runner: LiveRunner) -> None:
    p = wr_proc(runner, "add", "ok", "--path", str(runner.config.parent / "cfg.log"),
           "--pattern", "x")
    assert (p.returncode, p.stdout.strip()) == (0, "started ok"), p.stderr


@pytest.mark.parametrize(("args", "key"), [
    (["--path", ""], "path"),
    (["--command", "pwd", "--cwd", ""], "cwd"),
])
def test_an_empty_path_or_cwd_is_refused_as_the_socket_refuses_it(
        runner: LiveRunner, args: list[str], key: str) -> None:
    """`--path ''` watched the current directory ("started c5"): '' was made absolute before
    it was sent. The socket, and `validate`, refuse it: so does `watchrun add`, exit 2."""
    p = wr(runner, "add", "c5", *args, "--pattern", "x")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"watchers[0].{key}: must not be empty" in p.stderr, p.stderr
    assert "started" not in p.stdout
    p = wr(runner, "add", "c5", *args, "--pattern", "x", "--json")
    err = json.loads(p.stdout)["error"]
    assert (p.returncode, err["code"]) == (2, "invalid"), err
    assert [(d["path"], d["message"]) for d in err["diagnostics"]] == [
        (f"watchers[0].{key}", "must not be empty")]
    socket_err = runner.control({"cmd": "add", "watcher": {
        "id": "c5", "pattern": "x", **({"path": ""} if key == "path" else
                                       {"command": "pwd", "cwd": ""})}})["error"]
    assert socket_err["diagnostics"] == err["diagnostics"]
    assert "c5" not in listed(runner)
