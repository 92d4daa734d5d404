"""Paths a file watcher cannot follow, found by hand (docs/config.md, `path`):

- a pseudo-file of procfs or sysfs mounted anywhere but /proc and /sys (a host's /proc at
  /host/proc, cgroupfs, tracefs, ...) was followed as an empty file: a `--once` gate over it
  passed, a live watcher was `running` on nothing; a sysfs attribute (its size 4096, not 0)
  was read once and then "truncated while it was read". Each is refused by its file system's
  type, as a /proc file is;
- a socket at the path was said as `No such device or address`, a FIFO or a device as `not a
  regular file`: each is said as what it is;
- a file that opens but cannot be read (a read denied, EIO, ESPIPE) failed the whole runner's
  start with a message naming no path; it is that watcher's `error`, the others run. And every
  look at it kept one more descriptor open."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config
from readdenied import read_denied
from test_once import once, table_row

REFUSED = "pseudo-file, not a regular file: its size says nothing of what it holds"


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Any]:
    """`mount(fstype)`: a fresh mount of that file system under `tmp_path` (the test is skipped
    where this process may not mount it), unmounted at the end."""
    done: list[Path] = []

    def mounted(fstype: str) -> Path:
        at = tmp_path / f"mnt-{fstype}"
        at.mkdir()
        p = subprocess.run(["mount", "-t", fstype, fstype, str(at)], capture_output=True,
                           text=True, check=False)
        if p.returncode != 0:
            pytest.skip(f"cannot mount {fstype} here: {p.stderr.strip()}")
        done.append(at)
        return at

    yield mounted
    for at in done:
        subprocess.run(["umount", "-l", str(at)], check=True)


def _sysfs_attribute() -> str:
    """A sysfs attribute of the system's /sys, whose size is not 0 (4096) whatever it holds."""
    for path in ("/sys/kernel/mm/transparent_hugepage/enabled", "/sys/class/net/lo/operstate",
                 "/sys/kernel/profiling"):
        if os.path.exists(path) and os.stat(path).st_size > 0:
            return path
    pytest.skip("no sysfs attribute of a size other than 0 here")


def _gated(wid: str, path: str) -> dict[str, Any]:
    return {"id": wid, "path": path, "pattern": ".", "fromStart": True,
            "gate": {"maxMatches": 0}}


def test_a_pseudo_file_of_any_mount_fails_a_gate_closed(tmp_path: Path, mount: Any) -> None:
    """Each holds lines the pattern matches; each gate passed with nothing read (but the sysfs
    attribute, read once as a 4096-byte file "truncated while it was read"). Now each is an
    ERROR saying which pseudo file system it is on."""
    proc, trace = mount("proc"), mount("tracefs")
    files = {"hostproc": (str(proc / "self" / "status"), "procfs"),
             "tracefs": (str(trace / "trace_pipe"), "tracefs"),
             "sysfs": (_sysfs_attribute(), "sysfs")}
    run = once(tmp_path, {"watchers": [_gated(w, p) for w, (p, _) in files.items()]})
    assert run.rc == 3, run.out + run.err
    for wid, (path, fstype) in files.items():
        assert table_row(run.out, wid)[1:] == ["0", "0", "-", "ERROR"], run.out
        assert f"cannot read {path}: is a {fstype} {REFUSED}" in run.out, run.out


def test_a_live_watcher_of_a_cgroup_file_is_an_error_not_running(tmp_path: Path,
                                                                 mount: Any) -> None:
    """It was `running`, 0 lines read, forever; now `error`, and `list` says why."""
    cg = mount("cgroup2")
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "cg", "path": str(cg / "cgroup.procs"), "pattern": "[0-9]"},
        {"id": "app", "path": "app.log", "pattern": "ERR"}]})
    runner = LiveRunner(config)
    try:
        runner.wait_running()
        listed = {w["id"]: w for w in runner.control({"cmd": "list"})["watchers"]}
        assert listed["cg"]["status"] == "error", listed["cg"]
        assert f"is a cgroup2 {REFUSED}" in listed["cg"]["lastError"], listed["cg"]
        assert listed["app"]["status"] == "running", listed["app"]
    finally:
        runner.stop()


def _other(tmp_path: Path, kind: str) -> str:
    """A path to something of `kind` other than a regular file."""
    path = tmp_path / kind
    if kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/null")
    return str(path)


@pytest.mark.parametrize(("kind", "said"), [
    ("socket", "is a socket, not a regular file"),
    ("fifo", "is a named pipe (FIFO), not a regular file"),
    ("directory", "is a directory, not a regular file"),
    ("dev-null", "is a character device, not a regular file")])
def test_what_is_at_the_path_instead_of_a_file_is_said(tmp_path: Path, kind: str,
                                                        said: str) -> None:
    """A socket was "No such device or address" (open(2)'s ENXIO), the others "not a regular
    file"; each is said as the config loader says a config path that is no file."""
    path = _other(tmp_path, kind)
    run = once(tmp_path, {"watchers": [_gated("w", path)]})
    assert run.rc == 3, run.out + run.err
    assert f"  - cannot read {path}: {said}\n" in run.out, run.out


@pytest.fixture
def denied(tmp_path: Path) -> Iterator[Any]:
    """`denied.log`, holding a line, that opens but cannot be read while the test runs."""
    log = tmp_path / "denied.log"
    log.write_text("ERR before\n")
    with read_denied(log) as d:
        yield d


def test_a_file_that_opens_but_cannot_be_read_is_its_watchers_error(tmp_path: Path,
                                                                    denied: Any) -> None:
    """The runner did not start (exit 3, `could not start: watcher den: EPERM: Operation not
    permitted`, no path named): now that watcher is an `error` naming its path, the other one
    runs; `run --once` judges it an ERROR naming the path, the other gate as it holds."""
    (tmp_path / "app.log").write_text("")
    watchers = [{"id": "den", "path": "denied.log", "pattern": "ERR", "fromStart": True},
                {"id": "app", "path": "app.log", "pattern": "ERR"}]
    runner = LiveRunner(write_config(tmp_path, {"watchers": watchers}))
    try:
        runner.wait_running()
        with (tmp_path / "app.log").open("a") as f:
            f.write("ERR after\n")
        wait_for(lambda: [m["line"] for m in runner.matches("app")] == ["ERR after"],
                 "the other watcher's match")
        listed = {w["id"]: w for w in runner.control({"cmd": "list"})["watchers"]}
        assert listed["den"]["status"] == "error", listed["den"]
        assert listed["den"]["lastError"] == \
            f"cannot read {tmp_path / 'denied.log'}: Operation not permitted", listed["den"]
    finally:
        assert runner.stop() == 0, runner.stderr()
    run = once(tmp_path, {"watchers": [{**w, "gate": {"maxMatches": 5}} for w in watchers]})
    assert run.rc == 3, run.out + run.err
    assert (table_row(run.out, "den")[-1], table_row(run.out, "app")[-1]) == ("ERROR", "pass")
    assert f"  - cannot read {tmp_path / 'denied.log'}: Operation not permitted\n" in run.out


@pytest.mark.parametrize("from_start", [True, False])
def test_looking_again_at_a_file_that_cannot_be_read_keeps_no_descriptor(
        tmp_path: Path, denied: Any, from_start: bool) -> None:
    """Each look at the path (a write to it) opened it and kept the descriptor when its read
    failed: 50 writes, 50 descriptors held by the runner. Now none is held."""
    log = tmp_path / "denied.log"
    config = write_config(tmp_path, {"watchers": [
        {"id": "den", "path": "denied.log", "pattern": "ERR", "fromStart": from_start}]})
    runner = LiveRunner(config)
    try:
        runner.wait_running()
        for i in range(50):
            seen = denied.denied
            with log.open("a") as f:
                f.write(f"ERR {i}\n")
            wait_for(lambda: denied.denied > seen, "the runner's look at the file")  # noqa: B023

        def held() -> list[str]:
            fds = Path(f"/proc/{runner.pid}/fd")
            return [n for n in os.listdir(fds) if _points_at(fds / n, log)]
        wait_for(lambda: not held(), "no descriptor of the file held by the runner", 5)
    finally:
        runner.stop()


def _points_at(fd: Path, target: Path) -> bool:
    try:
        return os.readlink(fd) == str(target)
    except OSError:
        return False
