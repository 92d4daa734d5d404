"""The inotify binding (ctypes, the process's own libc): events with names, nothing queued is an
empty read, a wait up to a timeout, and errors as OSError naming the path; and the notifier's
first arm of a watch."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from liverunner import wait_for, write_config
from test_stuck_calls import seamed_runner

from watchrun import inotify
from watchrun.inotify import INotify
from watchrun.notify import Notifier

IN_MODIFY, IN_CREATE, IN_DELETE = 0x2, 0x100, 0x200


def test_events_carry_their_watch_mask_and_name(tmp_path: Path) -> None:
    ino = INotify()
    try:
        assert ino.read() == []  # non-blocking: nothing queued
        wd = ino.add_watch(tmp_path, IN_CREATE | IN_DELETE | IN_MODIFY)
        (tmp_path / "a.log").write_text("x\n")
        (tmp_path / "a.log").unlink()
        events = ino.read(timeout=5)
        assert {(e.wd, e.name) for e in events} == {(wd, "a.log")}
        assert any(e.mask & IN_CREATE for e in events) and any(e.mask & IN_DELETE for e in events)
        started = time.monotonic()
        assert ino.read(timeout=0.05) == []  # waited, then nothing
        assert time.monotonic() - started >= 0.04
        ino.rm_watch(wd)
        with pytest.raises(OSError) as err:
            ino.add_watch(tmp_path / "missing", IN_MODIFY)
        assert err.value.errno == errno.ENOENT and "missing" in str(err.value)
    finally:
        ino.close()
    assert ino.fd == -1


def test_a_burst_is_read_in_one_call(tmp_path: Path) -> None:
    ino = INotify()
    try:
        ino.add_watch(tmp_path, IN_CREATE)
        for i in range(3000):  # more than one 64 KiB read of events
            os.close(os.open(tmp_path / f"file-with-a-long-name-{i:06d}", os.O_CREAT, 0o600))
        names = {e.name for e in ino.read()}
        assert len(names) == 3000
    finally:
        ino.close()


def test_a_first_arm_that_found_the_file_is_not_redone(tmp_path: Path) -> None:
    """A watch armed on an existing file wakes its owner for a first look but is not stale (a
    file watcher's start arms it once); a rename of the file afterwards is an event in its
    directory that makes it stale. On a missing path the first arm asks for a re-resolve: the
    file may have appeared before its directory was watched."""
    log = tmp_path / "app.log"
    log.write_text("")

    async def main() -> None:
        notifier = Notifier(500)
        try:
            if notifier.mode != "inotify":
                pytest.skip("inotify only")
            watch = notifier.watch(log)
            assert not watch.stale
            await asyncio.wait_for(watch.wait(), 5)  # the first look
            os.rename(log, tmp_path / "app.log.1")
            await asyncio.wait_for(watch.wait(), 30)
            assert watch.stale
            assert notifier.watch(tmp_path / "later.log").stale
        finally:
            notifier.close()

    asyncio.run(main())


def test_a_disabled_notifier_opens_no_inotify_and_its_watches_poll(tmp_path: Path) -> None:
    """`enabled=False` (the runner's once mode, whose sources read to the end): no inotify
    instance is opened, nothing is armed, and a watch waited on anyway wakes by polling."""
    log = tmp_path / "app.log"
    log.write_text("")

    def inotify_fds() -> int:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # closed since the listing
                n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        return n

    async def main() -> None:
        before = inotify_fds()
        notifier = Notifier(20, enabled=False)
        try:
            assert notifier.mode == "none" and inotify_fds() == before
            watch = notifier.watch(log)
            assert watch.polling and not watch.stale
            started = time.monotonic()
            await asyncio.wait_for(watch.wait(), 5)  # a poll interval, not forever
            assert time.monotonic() - started >= 0.015
            assert inotify_fds() == before
        finally:
            notifier.close()

    asyncio.run(main())


def test_statfs_reads_the_file_system_type_stat_f_prints(tmp_path: Path) -> None:
    """`remote_fs` reads statfs(2)'s f_type through ctypes: the struct's layout is the one
    coreutils' `stat -f` reads (the same number), also for a path that does not exist yet."""
    shown = subprocess.run(["stat", "-f", "-c", "%t", str(tmp_path)], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert inotify.fs_type(os.fsencode(tmp_path)) == int(shown, 16)
    assert inotify.remote_fs(tmp_path / "not" / "yet" / "app.log") is None  # a local one


TAIL_POLLS = {
    "acfs": 0x61636673, "afs": 0x5346414F, "aufs": 0x61756673, "ceph": 0x00C36400,
    "cifs": 0xFF534D42, "coda": 0x73757245, "fhgfs": 0x19830326, "fuse": 0x65735546,
    "fusectl": 0x65735543, "gfs/gfs2": 0x01161970, "gpfs": 0x47504653, "ibrix": 0x013111A8,
    "k-afs": 0x6B414653, "lustre": 0x0BD00BD0, "novell": 0x564C, "nfs": 0x6969,
    "nfsd": 0x6E667364, "ocfs2": 0x7461636F, "overlayfs": 0x794C7630, "panfs": 0xAAD7AAEA,
    "pipefs": 0x50495045, "prl_fs": 0x7C7C6673, "smb": 0x517B, "smb2": 0xFE534D42,
    "snfs": 0xBEEFDEAD, "vboxsf": 0x786F4256, "vmhgfs": 0xBACBACBC, "vxfs": 0xA501FCF5,
}
"""The statfs types coreutils' src/stat.c (`human_fstype`) marks "remote", so that tail polls a
file there: its names and magic numbers."""


def test_the_remote_file_systems_are_those_gnu_tail_polls() -> None:
    """docs/decisions.md says the list is GNU tail's: it lacked VirtualBox, Parallels and VMware
    shared folders, BeeGFS, VxFS, ACFS, IBRIX, aufs… (a vboxsf synced folder the host writes
    to never woke its watcher, and no warning said why). All of them but overlayfs (a write
    through the overlay is seen: documented), and 9p, which tail takes for local (WSL's drives,
    a VM's share of its host's files)."""
    missing = [name for name, magic in TAIL_POLLS.items()
               if name != "overlayfs" and magic not in inotify.REMOTE_FS]
    assert missing == []
    assert TAIL_POLLS["overlayfs"] not in inotify.REMOTE_FS
    assert set(inotify.REMOTE_FS) - set(TAIL_POLLS.values()) == {0x01021997}  # 9p
    assert inotify.REMOTE_FS[0x786F4256] == "vboxsf"  # (the name its warning gives)


def test_a_path_on_a_remote_file_system_is_polled(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """On NFS (and SMB, 9p, FUSE, cluster file systems) inotify sees only this host's own
    writes: a file appended to by another host never woke its watcher, and the README asked
    the user to know it and set WATCHRUN_FORCE_POLL=1. Such a path is polled by itself now,
    as GNU tail does, and the notifier says why. (This test's own file system plays NFS.)"""
    magic = inotify.fs_type(os.fsencode(tmp_path))
    assert magic is not None
    monkeypatch.setitem(inotify.REMOTE_FS, magic, "nfs")
    log = tmp_path / "app.log"
    log.write_text("")

    async def main() -> None:
        notifier = Notifier(20)
        try:
            if notifier.mode != "inotify":
                pytest.skip("inotify only")
            watch = notifier.watch(log)
            assert watch.polling and watch._path_subs == {}  # no inotify watch was added
            fd = os.open(log, os.O_RDONLY)
            try:
                watch.track(fd)
                assert watch._fd_subs == {}
            finally:
                os.close(fd)
            assert notifier.problems == [
                f"{log} is on nfs, where inotify does not see what other hosts write; "
                f"polling {log} every 20 ms"]
            await asyncio.wait_for(watch.wait(), 5)  # the first look
            started = time.monotonic()
            await asyncio.wait_for(watch.wait(), 5)  # then every poll interval
            assert time.monotonic() - started >= 0.015
        finally:
            notifier.close()

    asyncio.run(main())


REMOTE = """
import os, sys
from watchrun import inotify
inotify.REMOTE_FS[inotify.fs_type(os.fsencode("."))] = "nfs"  # this one plays NFS
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""


def test_the_runner_polls_a_file_on_a_remote_file_system_and_says_so(tmp_path: Path) -> None:
    """The warning names it, and the ready line counts it among the file watchers that poll
    (it counted 0: the file is polled on a thread of its own, by a notifier of its own)."""
    log = tmp_path / "app.log"
    log.write_text("")
    cfg = write_config(tmp_path, {"limits": {"pollMs": 50}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    with seamed_runner(REMOTE, cfg) as (proc, err):
        wait_for(lambda: "1 watcher, 0 agents running" in "".join(err), "the start")
        with log.open("a") as fh:
            fh.write("ERROR on the share\n")
        jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
        wait_for(lambda: b'"line":"ERROR on the share"' in jsonl.read_bytes(), "the match")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert f"[app] warning: {log} is on nfs, where inotify does not see what other hosts " \
        "write; polling it every 50 ms, on a thread of its own" in "".join(err)
    ready = [x for x in err if "agents running" in x]
    assert ready[0].endswith("1 watcher, 0 agents running (change notification: inotify, "
                             "1 polling)\n") or "(change notification: poll)" in ready[0], ready
