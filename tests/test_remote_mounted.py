"""A network file system mounted over a watched path after its watcher started (boot order, an
automount, an admin's remount): the watcher's reads move to a thread of their own, as those of
a file on such a file system from the start, so a server that stops answering holds that
watcher only; its lines are each recorded once across the move."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import cli, wait_for, write_config
from test_stuck_calls import seamed_runner

from watchrun import inotify

RAMFS = 0x858458F6

MOUNTED_LATER = f"""
import os, sys, time
import watchrun.runtime.lag, watchrun.runtime.remote
from watchrun import inotify
inotify.REMOTE_FS[{RAMFS}] = "nfs"  # a ramfs mounted over the share plays NFS
watchrun.runtime.lag.STALL_S, watchrun.runtime.remote.BEAT_S = 1.0, 0.2  # (5 s, 1 s)
real = os.pread
def pread(fd, n, pos):
    while os.path.exists("hang") and inotify.fs_type(fd) == {RAMFS}:
        time.sleep(0.02)  # a read the server does not answer
    return real(fd, n, pos)
os.pread = pread
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` for which a ramfs is NFS (a real NFS mount cannot be made here, and a mount looks
remote only by its type), and whose reads of a file there do not return while the file `hang`
exists; a stall is said after 1 s."""


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip()})")


@pytest.fixture
def share(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a local directory to watch in, a ramfs holding `app.log` to bind-mount over it later:
    the file is there when the mount comes, as on a share mounted with its logs)."""
    if inotify.fs_type(os.fsencode(tmp_path)) == RAMFS:
        pytest.skip("the test's own directory is a ramfs: the mount would not look remote")
    local, stage = tmp_path / "share", tmp_path / "stage"
    local.mkdir()
    stage.mkdir()
    mount("-t", "ramfs", "ramfs", str(stage))
    try:
        yield local, stage
    finally:
        for where in (local, stage):
            subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


def records(jsonl: Path) -> list[dict[str, object]]:
    if not jsonl.exists():
        return []
    return [json.loads(x) for x in jsonl.read_text().splitlines()]


def matched(jsonl: Path) -> list[object]:
    return [r["line"] for r in records(jsonl) if r["kind"] == "match"]


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "polling"])
def test_a_path_mounted_over_by_a_remote_file_system_is_read_on_a_thread_of_its_own(
        tmp_path: Path, share: tuple[Path, Path], poll: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It was polled, but read on the runner's loop: a server that stopped answering held
    every watcher, `list` and `status` (the loop's stall guard only said so). With inotify the
    mount table's change says so; polling, the rotation to the file on the share does (it is
    opened, not read, before the move)."""
    if poll:
        monkeypatch.setenv("WATCHRUN_FORCE_POLL", "1")
    folder, stage = share
    log, local = folder / "app.log", tmp_path / "local.log"
    log.write_text("INFO on the local disk\n")
    local.write_text("")
    (stage / "app.log").write_text("INFO on the share\nERROR on the share\n")
    inodes = [log.stat().st_ino, *2 * [(stage / "app.log").stat().st_ino]]
    cfg = write_config(tmp_path, {"limits": {"pollMs": 50, "stopTimeout": "100ms"}, "watchers": [
        {"id": "share", "path": "share/app.log", "pattern": "ERROR"},
        {"id": "local", "path": "local.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun" / "watchers"
    hang = tmp_path / "hang"
    with seamed_runner(MOUNTED_LATER, cfg) as (proc, err):
        wait_for(lambda: "2 watchers, 0 agents running" in "".join(err), "the start")
        with log.open("a") as fh:
            fh.write("ERROR before the mount\n")
        wait_for(lambda: matched(out / "share.jsonl") == ["ERROR before the mount"], "a match")
        mount("--bind", str(stage), str(folder))
        wait_for(lambda: len(matched(out / "share.jsonl")) == 2, "the share's line recorded")
        hang.touch()  # the server stops answering
        with (stage / "app.log").open("a") as fh:
            fh.write("ERROR while it hangs\n")
        wait_for(lambda: f"its reads of {log} have not returned for" in "".join(err),
                 "the stall said, of that watcher")
        with local.open("a") as fh:  # the runner's loop is not held: the local file is read
            fh.write("ERROR here\n")
        wait_for(lambda: matched(out / "local.jsonl") == ["ERROR here"], "the local match")
        status = cli("status", "-c", cfg, timeout=10)
        assert status.returncode == 0, status.stderr
        assert f"its reads of {log} have not returned for" in status.stdout
        assert len(matched(out / "share.jsonl")) == 2
        hang.unlink()  # the server answers again
        wait_for(lambda: len(matched(out / "share.jsonl")) == 3, "the held line recorded")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(err)
    assert f"[share] warning: {log} is on nfs now, where inotify does not see what other " \
        "hosts write; polling it every 50 ms, on a thread of its own" in "".join(err)
    assert matched(out / "share.jsonl") == [
        "ERROR before the mount", "ERROR on the share", "ERROR while it hangs"]
    recs = records(out / "share.jsonl")
    assert [r["reason"] for r in recs if r["kind"] == "rotate"] == ["rename"]  # (no `recreate`)
    assert not [r for r in recs if r["kind"] == "gap"]  # the hidden file was read to its end
    assert [r["inode"] for r in recs if r["kind"] == "match"] == inodes
