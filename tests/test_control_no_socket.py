"""An output dir on a file system that cannot hold a Unix socket (sshfs, SMB/CIFS, FUSE: bind
says EPERM, ENOSYS or EOPNOTSUPP): a once run goes on without its control socket and says so,
still the output dir's only runner; a live runner, which commands must reach, does not start
and says why and what to do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from liverunner import cli, wait_for, write_config

NO_SOCKETS = """
import errno, socket, sys
real = socket.socket.bind
def bind(self, address):
    if self.family == socket.AF_UNIX and str(address).endswith("control.sock"):
        raise OSError(errno.EPERM, "Operation not permitted")  # as sshfs says
    return real(self, address)
socket.socket.bind = bind
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose output dir's file system refuses to hold its control socket."""

SAID = "the output dir's file system does not take a Unix socket (sshfs, SMB/CIFS and other " \
    "FUSE file systems cannot hold one)"


def no_sockets(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", NO_SOCKETS, *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def matched(jsonl: Path) -> list[str]:
    recs = [json.loads(x) for x in jsonl.read_text().splitlines()]
    return [r["line"] for r in recs if r["kind"] == "match"]


def test_a_once_run_goes_on_without_its_control_socket(tmp_path: Path) -> None:
    """It stopped with `could not start: control socket …: Operation not permitted`, though a
    once run needs no socket to judge a log. It still holds the output dir's lock: a second
    runner is refused, and a command is told a runner holds it, not that none is there."""
    (tmp_path / "app.log").write_text("INFO up\nERROR once\n")
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "build", "command": "touch started; while [ ! -e go ]; do sleep 0.02; done",
         "pattern": "ERROR"},
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True,
         "gate": {"maxMatches": 5}}]})
    proc = no_sockets("run", "--once", "-c", cfg, cwd=tmp_path)
    try:
        wait_for(lambda: (tmp_path / "started").exists() or proc.poll() is not None,
                 "the once run's command")
        assert proc.poll() is None, proc.communicate()
        status = cli("status", "-c", cfg, timeout=30)
        assert status.returncode == 3
        assert "control.lock but cannot be reached" in status.stderr, status.stderr
        assert "a `run --once` whose output dir cannot hold one has none" in status.stderr
        second = cli("run", "--once", "-c", cfg, timeout=30)
        assert second.returncode == 3
        assert "another runner is live on" in second.stderr, second.stderr
        (tmp_path / "go").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    sock = tmp_path / ".watchrun" / "control.sock"
    assert err.count(f"warning: control socket {sock}: Operation not permitted: {SAID}; this "
                     "run goes on without one, so `watchrun status` and the other commands "
                     "cannot reach it") == 1, err
    assert matched(tmp_path / ".watchrun" / "watchers" / "app.jsonl") == ["ERROR once"]
    assert "watchrun: passed: the 1 gate holds" in out, out


def test_a_live_runner_says_why_it_cannot_start_and_what_to_do(tmp_path: Path) -> None:
    """It said only `control socket …: Operation not permitted`."""
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                "pattern": "ERROR"}]})
    proc = no_sockets("run", "-c", cfg, cwd=tmp_path)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    sock = tmp_path / ".watchrun" / "control.sock"
    assert f"error: could not start: control socket {sock}: Operation not permitted: {SAID}, " \
        "which `watchrun status`, `list`, `stop` and the other commands reach the runner " \
        "through; give it an output dir on a local disk (`--output-dir`, or `output.dir` in " \
        "the config)" in err, err
    again = cli("run", "--once", "-c", cfg, timeout=30)  # nothing is left held
    assert again.returncode == 0, again.stderr
