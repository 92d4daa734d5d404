"""A file system mounted or unmounted on a followed path's way, with inotify: no inotify event
says so, so the runner watches the mount table (`inotify.MountTable`) and looks at every path
again at each change. Real tmpfs mounts (root), a real runner."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from liverunner import LiveRunner, wait_for, write_config
from tmpfs import mount_tmpfs, umount

SOON_S = 10.0
"""How long a test waits for the fixed runner to see a new file (at once; the unfixed one never
did)."""


def follow(folder: Path, path: str) -> LiveRunner:
    config = write_config(folder, {"limits": {"rotateWait": "300ms"}, "watchers": [
        {"id": "app", "path": path, "pattern": "ERR"}]})
    r = LiveRunner(config)
    r.wait_running()
    return r


def matched(r: LiveRunner) -> list[tuple[str, int]]:
    """The lines matched, with the inode each was read from."""
    return [(m["line"], m["inode"]) for m in r.matches("app")]


def mount_over(where: Path) -> None:
    """A tmpfs mounted over the directory `where`; the test is skipped where none can be."""
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()})")


def holding(pid: int, target: str) -> bool:
    """The process holds a descriptor whose link reads `target`."""
    fds = Path(f"/proc/{pid}/fd")
    found = []
    for fd in os.listdir(fds):
        try:
            found.append(os.readlink(fds / fd))
        except OSError:
            continue
    return target in found


def test_a_file_system_unmounted_from_under_the_file_is_noticed(tmp_path: Path) -> None:
    """`umount -l` of the file system a followed file is on: the path leads to the directory
    under it now, and a file made there was never read (the runner stayed `running` on the
    detached file, and kept that file system alive). Now it is read, after a `rotate` record,
    and the detached file is let go after rotateWait, as a file renamed away is."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "1m")
    try:
        (mnt / "app.log").write_text("INFO on the mount\n")
        r = follow(tmp_path, "mnt/app.log")
        try:
            with open(mnt / "app.log", "a") as f:
                f.write("ERR on the mount\n")
            wait_for(lambda: matched(r), "the line on the mount recorded")
            old = (mnt / "app.log").stat().st_ino
            subprocess.run(["umount", "-l", str(mnt)], check=True, timeout=30)
            (mnt / "app.log").write_text("ERR in the directory under it\n")
            new = (mnt / "app.log").stat().st_ino
            wait_for(lambda: len(matched(r)) == 2, "the new file's line recorded", SOON_S)
            wait_for(lambda: not holding(r.pid, "/app.log"), "the detached file let go")
            assert r.stop() == 0, r.stderr()
        finally:
            r.close()
    finally:
        umount(mnt)
    assert matched(r) == [("ERR on the mount", old), ("ERR in the directory under it", new)]
    (rotated,) = [x for x in r.records("app") if x["kind"] == "rotate"]
    assert (rotated["oldInode"], rotated["inode"]) == (old, new)


def test_a_file_system_mounted_over_a_directory_on_the_way_is_noticed(tmp_path: Path) -> None:
    """A file system mounted over the followed file's directory hides the file: a file made at
    the path on the new file system was never read. Now it is, after a `rotate` record."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("INFO before the mount\n")
    r = follow(tmp_path, "logs/app.log")
    try:
        with open(logs / "app.log", "a") as f:
            f.write("ERR before the mount\n")
        wait_for(lambda: matched(r), "the line before the mount recorded")
        old = (logs / "app.log").stat().st_ino
        mount_over(logs)
        try:
            (logs / "app.log").write_text("ERR on the new file system\n")
            new = (logs / "app.log").stat().st_ino
            wait_for(lambda: len(matched(r)) == 2, "the new file's line recorded", SOON_S)
            assert r.stop() == 0, r.stderr()
        finally:
            umount(logs)
    finally:
        r.close()
    assert matched(r) == [("ERR before the mount", old), ("ERR on the new file system", new)]
    assert [x["reason"] for x in r.records("app") if x["kind"] == "rotate"] == ["rename"]
