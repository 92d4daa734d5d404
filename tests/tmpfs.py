"""Test helper: a real, small tmpfs to make a full (or read-only) disk, and a way to fill it."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from liverunner import LiveRunner, write_config


def mount_tmpfs(where: Path, size: str) -> None:
    """A tmpfs of `size` (mount's syntax: `256k`) at `where`, mode 0755; the test is skipped
    where no tmpfs can be mounted (a real full disk cannot be made without one)."""
    where.mkdir()
    try:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                              str(where)], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no `mount` command here: a real full disk cannot be made")
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip()}): a real full disk "
                    "cannot be made without it")


def grow(where: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True, timeout=30)


def umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


def tiny(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs for one test (the body of a `tiny_fs` fixture)."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "256k")
    yield mnt
    umount(mnt)


def fill(fs: Path, leave: int = 0) -> Path:
    """Take every free byte of `fs`, then give `leave` bytes back."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def immutable(path: Path) -> None:
    """Make the file at `path` immutable (`chattr +i`): not even root may open it to write;
    skipped where the file system cannot (tmpfs can since Linux 6.0)."""
    try:
        res = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True,
                             timeout=30)
    except FileNotFoundError:
        pytest.skip("no `chattr` command here: no file can be made unwritable to root")
    if res.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {res.stderr.strip()}")


class FullDiskRunner(NamedTuple):
    mnt: Path
    """The tmpfs; the runner's output dir is its `out`."""
    log: Path
    """app.log (empty at the start), followed by the watcher `app` (pattern ERROR)."""
    port: int
    """Where the runner serves `--metrics`."""
    runner: LiveRunner


@contextlib.contextmanager
def full_disk_runner(tmp_path: Path, size: str = "512k") -> Iterator[FullDiskRunner]:
    """A runner (running, with `--metrics`) whose output dir is on a tmpfs of `size` at
    `tmp_path/mnt`, its config `tmp_path/watch.yaml`; stopped (exit 0) and unmounted after."""
    from test_metrics import free_port

    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, size)
    try:
        log = tmp_path / "app.log"
        log.write_text("")
        port = free_port()
        config = write_config(tmp_path, {"output": {"dir": str(mnt / "out")}, "watchers": [
            {"id": "app", "path": str(log), "pattern": "ERROR"}]})
        r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
        r.out = mnt / "out"
        try:
            r.wait_running()
            yield FullDiskRunner(mnt, log, port, r)
        finally:
            assert r.stop() == 0, r.stderr()
    finally:
        umount(mnt)
