"""A file on a remote file system whose reads stop returning holds its own watcher only: the
others go on, the stall is said while it lasts, and a stop does not wait for it forever."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import wait_for, write_config
from test_stuck_calls import seamed_runner

from watchrun import inotify

SHM = Path("/dev/shm")

HUNG_READS = """
import os, sys, time
import watchrun.offload, watchrun.runtime.lag, watchrun.runtime.watchers, watchrun.runtime.workers
import watchrun.runtime.remote
from watchrun import inotify
SHARE = {share!r}
inotify.REMOTE_FS[inotify.fs_type(os.fsencode(SHARE))] = "nfs"  # this one plays NFS
watchrun.runtime.lag.STALL_S, watchrun.runtime.remote.BEAT_S = 1.0, 0.2  # (5 s, 1 s)
watchrun.offload.STOP_CALL_S, watchrun.runtime.workers.GRACE_S = 1.5, 1.0  # (10 s, 5 s)
watchrun.runtime.watchers.AFTER_GRACE_S = 1.0
real = os.pread
def pread(fd, n, pos):
    while os.path.exists("hang") and os.readlink(f"/proc/self/fd/{{fd}}").startswith(SHARE):
        time.sleep(0.02)  # a read the server does not answer
    return real(fd, n, pos)
os.pread = pread
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` for which the file system of `share` is NFS, and whose reads of a file there do
not return while the file `hang` exists (a server that stops answering cannot be made on
demand); the stall is said after 1 s, a stop waits 1.5 s for the reads."""


@pytest.fixture
def share(tmp_path: Path) -> Iterator[Path]:
    yield from a_share(tmp_path)


def a_share(tmp_path: Path) -> Iterator[Path]:
    """A directory on another file system than the test's (tmpfs), to play the remote one."""
    if not SHM.is_dir() or inotify.fs_type(os.fsencode(SHM)) == \
            inotify.fs_type(os.fsencode(tmp_path)):
        pytest.skip("needs /dev/shm on a file system of its own")
    folder = Path(tempfile.mkdtemp(dir=SHM, prefix="watchrun-share-"))
    yield folder
    shutil.rmtree(folder)


def matched(jsonl: Path) -> list[str]:
    if not jsonl.exists():
        return []
    recs = [json.loads(x) for x in jsonl.read_text().splitlines()]
    return [r["line"] for r in recs if r["kind"] == "match"]


def test_a_hung_remote_read_holds_its_watcher_only(tmp_path: Path, share: Path) -> None:
    remote, local = share / "app.log", tmp_path / "local.log"
    remote.write_text("")
    local.write_text("")
    cfg = write_config(tmp_path, {"limits": {"pollMs": 50, "stopTimeout": "100ms"}, "watchers": [
        {"id": "share", "path": str(remote), "pattern": "ERROR"},
        {"id": "local", "path": "local.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun" / "watchers"
    hang = tmp_path / "hang"
    with seamed_runner(HUNG_READS.format(share=str(share)), cfg) as (proc, err):
        wait_for(lambda: "2 watchers, 0 agents running" in "".join(err), "the start")
        hang.touch()
        with remote.open("a") as fh:
            fh.write("ERROR on the share\n")
        wait_for(lambda: "have not returned for" in "".join(err), "the stall said")
        with local.open("a") as fh:  # the runner's loop is not held: the local file is read
            fh.write("ERROR here\n")
        wait_for(lambda: matched(out / "local.jsonl") == ["ERROR here"], "the local match")
        assert matched(out / "share.jsonl") == []
        said = "".join(err)
        assert f"[share] error: its reads of {remote} have not returned for 1 s: held in " \
            "pread" in said and "called from" in said and "(watchrun/sources/" in said
        hang.unlink()  # the server answers again
        wait_for(lambda: matched(out / "share.jsonl") == ["ERROR on the share"], "its match")
        wait_for(lambda: f"its reads of {remote} returned after a stall of" in "".join(err),
                 "the end of the stall said")
        hang.touch()
        with remote.open("a") as fh:
            fh.write("ERROR again\n")
        wait_for(lambda: "".join(err).count("have not returned for") == 2, "the second stall")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 3  # a watcher it could not stop: not a clean exit
    said = "".join(err)
    assert re.search(f"\\[share\\] error: its reads of {re.escape(str(remote))} did not end "
                     r"\d+\.\d s after the stop \(a file system that does not answer\?\)", said)
    assert said.count(" did not end ") == 1, said  # (the problem; its record is not echoed)
    assert "[local] stopped (shutdown)" in said
    kinds = [json.loads(x)["kind"] for x in (out / "share.jsonl").read_text().splitlines()]
    assert kinds[-2:] == ["error", "stop"]
