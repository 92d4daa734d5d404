"""Never hang, never fail open (issue #10), through a real `watchrun` process: a failed start is
undone and exits 3 in one line; an interrupted once run starts nothing more and fails closed;
children die with a SIGKILLed runner; a reload error never ends the runner."""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from liverunner import (
    LiveRunner,
    alive,
    cli,
    guardian_of,
    read_records,
    session_pids,
    wait_for,
    watchrun_bin,
    write_config,
)
from recordcheck import validate_records

TIMEOUT_S = 60


def run_cli(folder: Path, config: dict[str, Any],
            *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    path = write_config(folder, config)
    started = time.monotonic()
    p = cli("run", "-c", path, *args, timeout=TIMEOUT_S, cwd=folder)
    return p, time.monotonic() - started


def errors(stderr: str) -> list[str]:
    """The error lines of a run's log, without the timestamp a log off a terminal carries."""
    return [re.sub(r"^\d{4}-\d\d-\d\dT[\d:.]+Z ", "", ln) for ln in stderr.splitlines()
            if "error:" in ln]


def test_a_port_in_use_exits_3_in_one_line_and_leaves_nothing_behind(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p, took = run_cli(tmp_path, {"watchers": [
            {"id": "c", "command": f"touch {marker}; exec sleep 1000", "pattern": "x"}]},
            "--metrics", f"127.0.0.1:{port}")
    assert p.returncode == 3, p.stderr
    assert errors(p.stderr) == [f"watchrun: error: could not start: --metrics 127.0.0.1:{port}: "
                                "cannot listen: Address already in use"]
    assert "Traceback" not in p.stderr
    assert took < 5.0  # stopTimeout
    assert not (tmp_path / ".watchrun" / "control.sock").exists()
    assert not marker.exists()  # nothing was spawned


def test_an_unopenable_jsonl_fails_the_start_before_any_command_runs(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    (tmp_path / ".watchrun" / "watchers" / "log.jsonl").mkdir(parents=True)  # not a file
    p, took = run_cli(tmp_path, {"watchers": [
        {"id": "cmd", "command": f"echo $$$$ > {pidfile}; exec sleep 1000", "pattern": "x"},
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    assert p.returncode == 3, p.stderr
    out = tmp_path / ".watchrun"
    assert errors(p.stderr) == [f"watchrun: error: could not start: watcher log: EPERM: cannot "
                                f"open {out}/watchers/log.jsonl: is not a regular file"]
    assert "Traceback" not in p.stderr and took < 5.0
    assert not pidfile.exists()  # every sink opens before any source starts
    assert read_records(out / "watchers" / "cmd.jsonl") == []  # never started: no stop either
    assert not (out / "control.sock").exists()
    assert json.loads((out / "state" / "processes.json").read_text())["groups"] == []


def test_once_with_an_unopenable_jsonl_fails_closed(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("all fine\n")
    (tmp_path / ".watchrun" / "watchers" / "log.jsonl").mkdir(parents=True)
    p, _ = run_cli(tmp_path, {"watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}]},
        "--once", "--junit", "report.xml")
    assert p.returncode == 3, p.stdout + p.stderr
    assert "no gated watchers" not in p.stdout
    row = next(ln.split() for ln in p.stdout.splitlines() if ln.startswith("log "))
    assert row[-1] == "ERROR"
    assert "  - it never ran: could not start: watcher log: EPERM" in p.stdout
    assert 'errors="1"' in (tmp_path / "report.xml").read_text()


def test_sigterm_during_once_starts_nothing_more_and_stops_what_started(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("ERROR already there\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "build", "command": "echo started; exec sleep 60", "pattern": "z",
         "gate": {"exitCode": True}},
        {"id": "log", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 5}}]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(config)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 3, out.decode() + err.decode()
    text = out.decode()
    assert "  - the command did not run to its exit (the run was interrupted)" in text
    assert "  - it never started: the run was stopped before it" in text
    watchers = tmp_path / ".watchrun" / "watchers"
    assert read_records(watchers / "log.jsonl") == []  # never started after "stopping"
    build = validate_records(watchers / "build.jsonl")
    assert build[0]["kind"] == "start" and build[-1]["kind"] == "stop"
    assert "Traceback" not in err.decode()


def _tree_command(pids: Path) -> str:
    return (f"echo $$$$ >> {pids}; sleep 1000 & echo $! >> {pids}; "
            f"sleep 1001 & echo $! >> {pids}; echo up; wait")


def _three(pids: Path) -> list[int]:
    return [int(x) for x in pids.read_text().split()] if pids.exists() else []


def test_sigkill_of_the_runner_ends_every_process_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    config = write_config(tmp_path, {"watchers": [
        {"id": "tree", "command": _tree_command(pids), "pattern": "up"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("tree") and len(_three(pids)) == 3, "the tree to be up")
        r.proc.kill()  # SIGKILL: no shutdown, no finally
        r.proc.wait()
        wait_for(lambda: not any(alive(p) for p in _three(pids)), "the tree to die", 10)
    finally:
        r.close()


def test_a_new_runner_ends_what_a_sigkilled_runner_and_its_guardian_left(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    config = write_config(tmp_path, {"watchers": [
        {"id": "tree", "command": _tree_command(pids), "pattern": "up"}]})
    first = LiveRunner(config)
    second: LiveRunner | None = None
    try:
        wait_for(lambda: first.matches("tree") and len(_three(pids)) == 3, "the tree to be up")
        leader, *kids = _three(pids)
        first.send(signal.SIGSTOP)  # (a runner that ran on would start another guardian)
        os.kill(guardian_of(first.pid), signal.SIGKILL)
        first.proc.kill()
        first.proc.wait()
        wait_for(lambda: not alive(leader), "PR_SET_PDEATHSIG to end the group leader", 10)
        assert all(alive(k) for k in kids)  # orphans of the leader: only a runner can end them
        pids.unlink()
        second = LiveRunner(config)
        second.wait_log("ended 2 processes left running by a previous runner "
                        f"(pid {first.pid}) of this output dir")
        assert not any(alive(k) for k in kids)
        wait_for(lambda: len(_three(pids)) == 3, "the watcher to start again")
        assert len(session_pids(_three(pids)[0])) == 3  # one copy, not two side by side
        second.assert_lag_ok()
        assert second.stop() == 0
        assert second.left == []
    finally:
        if second is not None:
            second.close()
        first.close()  # only now: it kills what the first runner left, if a check failed


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "exec sleep 1000", "pattern": "x"}]})
    import resource

    def low_soft() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    r = LiveRunner(config, preexec_fn=low_soft)
    try:
        r.wait_log("running")
        soft, hard = resource.prlimit(r.pid, resource.RLIMIT_NOFILE)
        assert soft == hard and soft > 256
    finally:
        assert r.stop() == 0


def test_a_reload_that_cannot_start_a_watcher_is_reported_and_the_runner_goes_on(
        tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    conf: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        (r.out / "watchers" / "new.jsonl").mkdir()
        conf["watchers"].append({"id": "new", "command": "echo hi", "pattern": "hi"})
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded")
        assert r.proc.poll() is None
        status = r.control({"cmd": "status"})
        assert status["state"] == "running" and status["watchers"] == ["app"]
        assert any("new: reload: could not be started: EPERM" in x for x in status["problems"])
        with open(log, "a") as fh:
            fh.write("ERROR still watched\n")
        wait_for(lambda: r.matches("app"), "the kept watcher's match")
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


@pytest.mark.parametrize("depth", [40, 100_000])
def test_the_control_socket_refuses_deep_or_huge_requests(tmp_path: Path, depth: int) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "exec sleep 1000", "pattern": "x"}]})
    r = LiveRunner(config)
    sock = r.out / "control.sock"
    try:
        r.wait_log("running")
        deep = _raw(sock, b'{"cmd": "status", "x": ' + b"[" * depth + b"]" * depth + b"}\n")
        assert deep["error"]["code"] == "bad_request" and "nested" in deep["error"]["message"]
        big = _raw(sock, b'{"cmd": "' + b"x" * (2 << 20) + b'"}\n')
        assert big["error"]["code"] == "request_too_large"
        assert r.control({"cmd": "status"})["ok"] is True
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


def _raw(path: Path, data: bytes) -> dict[str, Any]:
    """Send raw bytes; read the reply (the runner may stop reading a refused request early)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(path))
        with contextlib.suppress(OSError):
            s.sendall(data)
        buf = b""
        with contextlib.suppress(ConnectionResetError):
            while not buf.endswith(b"\n") and (part := s.recv(65536)):
                buf += part
    return dict(json.loads(buf))


def test_commands_get_the_descriptor_limit_the_runner_started_with(tmp_path: Path) -> None:
    """The runner raises its own soft RLIMIT_NOFILE to the hard limit; the programs it starts
    get the limit it was started with back (systemd's rule), not the hard limit."""
    soft, hard = 256, min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    assert soft < hard
    path = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "echo nofile $(ulimit -Sn) $(ulimit -Hn)", "pattern": "nofile"}]})
    done = subprocess.run(
        [watchrun_bin(), "run", "--once", "--quiet", "-c", str(path)], capture_output=True,
        text=True, timeout=TIMEOUT_S, cwd=tmp_path,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    assert done.returncode == 0, done.stderr
    lines = [r["line"] for r in read_records(tmp_path / ".watchrun" / "watchers" / "c.jsonl")
             if r["kind"] == "match"]
    assert lines == [f"nofile {soft} {hard}"]  # before: the hard limit twice


def test_a_start_short_of_descriptors_says_the_limit_and_where_to_raise_it(
        tmp_path: Path) -> None:
    watchers = []
    for i in range(60):
        (tmp_path / f"f{i}.log").write_text("ERROR x\n")
        watchers.append({"id": f"w{i}", "path": f"f{i}.log", "pattern": "ERROR"})
    path = write_config(tmp_path, {"limits": {"maxWatchers": 100}, "watchers": watchers})
    done = subprocess.run(
        [watchrun_bin(), "run", "--once", "-c", str(path)], capture_output=True, text=True,
        timeout=TIMEOUT_S, cwd=tmp_path,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48)))
    assert done.returncode == 3, done.stderr
    failed = [e for e in errors(done.stderr) if "could not start" in e]
    assert len(failed) == 1 and "EMFILE" in failed[0], done.stderr
    assert failed[0].endswith("(this runner may have 48 files open; each watcher needs a few: "
                              "raise the limit with `ulimit -n`, or LimitNOFILE= in its "
                              "systemd unit)")
    assert "Traceback" not in done.stderr
