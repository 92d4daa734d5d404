"""Whether a lock is held is the kernel's answer (a shared lock tried and let go), which no
lock taker is kept out by; /proc/locks only names a holder, and never a stranger's lock on
another file system whose inode number is the same (an explorer's F1 and F7)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import cli, write_config
from tmpfs import mount_tmpfs, umount

from watchrun.output import flocks
from watchrun.runtime.client import NotListening, Unreachable, request
from watchrun.runtime.control import _hold

_HOLD = "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\n" \
        "print('held', flush=True)\ntime.sleep(600)\n"


_PROBE = "import os, sys\nfrom watchrun.output import flocks\nfd = os.open(sys.argv[1], " \
         "os.O_RDONLY)\nprint('probing', flush=True)\nwhile True:\n    flocks.probe(fd)\n"
"""Another process asking whether `argv[1]` is held, as fast as it can (as clients may)."""


def _holder(path: Path) -> subprocess.Popen[str]:
    """Another process holding an exclusive flock on `path`, once this returns."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_holder_proc_locks_does_not_show_is_a_runner_never_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A /proc of another pid namespace lists none of a runner's locks: `request` said
    NotListening ("no runner": `stop` "already stopped") while it held control.lock."""
    monkeypatch.setattr(flocks, "holders_of", lambda st: [])  # (as a sibling namespace's)
    lock, sock = tmp_path / "control.lock", tmp_path / "control.sock"
    holder = _holder(lock)
    try:
        assert flocks.held(lock)
        with pytest.raises(Unreachable, match=r"^a runner \(pid not visible from here\) holds "):
            request(sock, {"cmd": "status"}, timeout=0.2)
    finally:
        holder.kill()
        holder.wait()
    assert not flocks.held(lock)
    assert not flocks.held(tmp_path / "absent.lock")
    with pytest.raises(NotListening):
        request(sock, {"cmd": "status"}, timeout=0.2)


def test_a_lock_this_user_cannot_open_is_asked_of_proc_locks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's `control.lock` (0600) cannot be opened to probe it: /proc/locks, which
    anyone may read, still names its holder, and a runner is never "none" for that."""
    def unopenable(path: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(flocks, "held", unopenable)
    lock, sock = tmp_path / "control.lock", tmp_path / "control.sock"
    holder = _holder(lock)
    try:
        with pytest.raises(Unreachable, match=rf"^a runner \(pid {holder.pid}\) holds "):
            request(sock, {"cmd": "status"}, timeout=0.2)
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(NotListening):
        request(sock, {"cmd": "status"}, timeout=0.2)


def test_probing_a_runners_lock_never_keeps_a_runner_out(tmp_path: Path) -> None:
    """A probe holds the lock shared for an instant: a runner starting then was refused,
    `another runner is live`, unless its exclusive lock is tried again (`flocks.take`)."""
    lock = tmp_path / "control.lock"
    os.close(_hold(lock))
    prober = subprocess.Popen([sys.executable, "-c", _PROBE, str(lock)], stdout=subprocess.PIPE,
                              text=True)
    refused = 0
    try:
        assert prober.stdout is not None and prober.stdout.readline() == "probing\n"
        for _ in range(2000):
            try:
                os.close(_hold(lock))
            except OSError:
                refused += 1
    finally:
        prober.kill()
        prober.wait()
    assert refused == 0, refused


@pytest.fixture
def two_tmpfs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two fresh tmpfs mounts: their inode numbers start alike."""
    one, two = tmp_path / "one", tmp_path / "two"
    mount_tmpfs(one, "4m")
    try:
        mount_tmpfs(two, "4m")
        try:
            yield one, two
        finally:
            umount(two)
    finally:
        umount(one)


def test_a_strangers_lock_with_the_same_inode_elsewhere_is_no_runner(
        two_tmpfs: tuple[Path, Path]) -> None:
    """F7: /proc/locks names a file by device and inode, and an entry with the inode alone
    counted (for btrfs): a stranger's flock on another tmpfs made `stop` say "a runner (pid N)
    holds control.lock but cannot be reached", exit 3, and the MCP server never start its own
    runner, with no runner anywhere."""
    one, two = two_tmpfs
    (one / "app.log").write_text("")
    config = write_config(one, {"watchers": [
        {"id": "app", "path": str(one / "app.log"), "pattern": "ERROR"}]})
    assert cli("run", "--once", "-c", config).returncode == 0
    lock = one / ".watchrun" / "control.lock"
    inode = lock.stat().st_ino
    n = 0
    while True:
        twin = two / f"f{n}"
        twin.touch()
        if twin.stat().st_ino >= inode:
            break
        n += 1
    if twin.stat().st_ino != inode:
        pytest.skip("this tmpfs gives no file the lock's inode number")
    stranger = _holder(twin)
    try:
        assert flocks.holders(lock) == []
        stop = cli("stop", "app", "-c", config)
        assert (stop.returncode, stop.stdout.strip()) == (
            0, "app is already stopped (no runner is live on this output dir)"), stop
        from watchrun.mcp.runners import LiveRunner

        assert not LiveRunner(one / ".watchrun" / "control.sock", None).live()
    finally:
        stranger.kill()
        stranger.wait()
