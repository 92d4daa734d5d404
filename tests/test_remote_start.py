"""A share that does not answer when the runner starts holds its own watcher only: the stall
is said after 5 s (the log, `status`), as a running watcher's is, the runner gets ready (its
ready line and READY=1 name the held watcher) and the other watchers read on; once the share
answers, the held watcher starts and reads its file once."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import cli, wait_for, write_config
from test_nothing_blocks_e2e import Notifications
from test_remote_reads import a_share, matched
from test_stuck_calls import seamed_runner

SHM = Path("/dev/shm")

HELD_START = """
import os, sys, time
import watchrun.runtime.lag, watchrun.runtime.remote
from watchrun import inotify
SHARE = {share!r}
inotify.REMOTE_FS[inotify.fs_type(os.fsencode(SHARE))] = "nfs"  # this one plays NFS
watchrun.runtime.lag.STALL_S, watchrun.runtime.remote.BEAT_S = 1.0, 0.2  # (5 s, 1 s)
real_stat, real_fs_type = os.stat, inotify.fs_type
def hold(path):
    if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith(SHARE):
        while True:  # a call the server does not answer while the file `hang` exists
            try:
                real_stat("hang")
            except FileNotFoundError:
                return
            time.sleep(0.02)
def fs_type(at):
    hold(at)
    return real_fs_type(at)
def stat(path, *args, **kwargs):
    hold(path)
    return real_stat(path, *args, **kwargs)
if {call!r} == "statfs":
    inotify.fs_type = fs_type  # which file system the path is on (`remote_fs`)
else:
    os.stat = stat  # the source's first look at the file
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` for which the file system of `share` is NFS, and whose statfs (or stat) of a path
there does not return while the file `hang` exists; a stall is said after 1 s."""

HELD_IN = {"statfs": r"held in statfs \(which file system it is on\), in hold \(<string>:\d+\), "
                     r"called from remote_fs \(watchrun/inotify\.py:\d+\);",
           "stat": r"held in hold \(<string>:\d+\), called from \w+ "
                   r"\(watchrun/sources/\w+\.py:\d+\);"}
"""Where the stall says the watcher is held: in the call (the seam's `hold` here), called from
the look at which file system the path is on, or from the source's first look at its file."""


@pytest.fixture
def share(tmp_path: Path) -> Iterator[Path]:
    yield from a_share(tmp_path)


@pytest.mark.parametrize("call", sorted(HELD_IN))
def test_a_share_that_does_not_answer_at_the_start_holds_its_watcher_only(
        tmp_path: Path, share: Path, call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner stayed `starting` (no ready line, no READY=1: systemd's start timeout killed
    it, every watcher with it) for as long as the share did not answer, and nothing said why."""
    notify = Notifications(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify.path))
    remote, local = share / "app.log", tmp_path / "local.log"
    remote.write_text("ERROR before the start\n")
    local.write_text("")
    cfg = write_config(tmp_path, {"limits": {"pollMs": 50, "stopTimeout": "100ms"}, "watchers": [
        {"id": "share", "path": str(remote), "pattern": "ERROR", "fromStart": True},
        {"id": "local", "path": "local.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun" / "watchers"
    hang = tmp_path / "hang"
    hang.touch()  # the server does not answer from before the start
    try:
        with seamed_runner(HELD_START.format(share=str(share), call=call), cfg) as (proc, err):
            wait_for(lambda: "2 watchers, 0 agents running" in "".join(err), "the ready line")
            said = "".join(err)
            assert "; not ready yet: share (its reads have not returned: `watchrun status` " \
                "says where)" in said
            assert re.search(f"\\[share\\] error: its reads of {re.escape(str(remote))} have not "
                             f"returned for 1 s: {HELD_IN[call]}", said), said
            assert said.index("have not returned") < said.index("2 watchers, 0 agents running")
            wait_for(lambda: notify.count("READY=1"), "READY=1")
            assert any("not ready yet: share" in m for _, m in notify.seen if "READY=1" in m)
            with local.open("a") as fh:  # the other watcher reads on
                fh.write("ERROR here\n")
            wait_for(lambda: matched(out / "local.jsonl") == ["ERROR here"], "the local match")
            status = cli("status", "-c", cfg, timeout=10)
            assert status.returncode == 0, status.stderr
            assert "runner running: 2 watchers" in status.stdout
            assert f"share: its reads of {remote} have not returned for" in status.stdout
            listed = cli("list", "-c", cfg, timeout=10)
            assert [ln.split()[:2] for ln in listed.stdout.splitlines()
                    if ln.startswith("share ")] == [["share", "starting"]], listed.stdout
            assert matched(out / "share.jsonl") == []
            hang.unlink()  # the server answers again
            wait_for(lambda: matched(out / "share.jsonl") == ["ERROR before the start"],
                     "the held watcher's file read")
            wait_for(lambda: f"its reads of {remote} returned after a stall of" in "".join(err),
                     "the end of the stall said")
            with remote.open("a") as fh:
                fh.write("ERROR after\n")
            wait_for(lambda: len(matched(out / "share.jsonl")) == 2, "a line appended after")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, "".join(err)
    finally:
        notify.close()
    assert matched(out / "share.jsonl") == ["ERROR before the start", "ERROR after"]
    assert matched(out / "local.jsonl") == ["ERROR here"]


def test_many_watchers_held_at_the_start_hold_no_other(tmp_path: Path, share: Path) -> None:
    """Each look that hangs holds a thread of its own: more of them than the loop's worker
    threads (four) left none for the local watcher's start, which waited behind them."""
    held = [f"share{i}" for i in range(6)]
    for wid in held:
        (share / f"{wid}.log").write_text("")
    (tmp_path / "local.log").write_text("")
    cfg = write_config(tmp_path, {"limits": {"pollMs": 50, "stopTimeout": "100ms"}, "watchers": [
        *({"id": wid, "path": str(share / f"{wid}.log"), "pattern": "ERROR"} for wid in held),
        {"id": "local", "path": "local.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun" / "watchers"
    hang = tmp_path / "hang"
    hang.touch()
    with seamed_runner(HELD_START.format(share=str(share), call="statfs"), cfg) as (proc, err):
        wait_for(lambda: "7 watchers, 0 agents running" in "".join(err), "the ready line")
        assert f"; not ready yet: {', '.join(held)} (their reads have not returned: " \
            "`watchrun status` says where)" in "".join(err)
        with (tmp_path / "local.log").open("a") as fh:
            fh.write("ERROR here\n")
        wait_for(lambda: matched(out / "local.jsonl") == ["ERROR here"], "the local match")
        hang.unlink()
        wait_for(lambda: "".join(err).count("returned after a stall of") == len(held),
                 "every held watcher's look returned")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(err)
