"""A file on NFS deleted by another host: this host's open descriptor of it fails with ESTALE
(reads, and fstat once its attributes are no longer cached). When that was the generation
rotated away, or the one followed after the path got a new file, the watcher was wedged in
`error` for good: every look failed on it before the path was looked at, and the new file was
never read. Now that generation is released (a `gap{missing}` says what of it was not read) and
the new file is followed. A rotated generation whose reads fail otherwise (EIO) no longer holds
up the file at the path either. And a path-based FUSE file system (sshfs), whose fstat of a
file renamed on the server gives the attributes of the file at its path now, no longer makes a
rename look like a truncation first.

A local file system gives no ESTALE: the real file source reads real files, and the fault is
injected where it reads them (`os.pread`, `os.fstat`) for the descriptors of the generation
gone (deleted) only, as an NFS client gives it."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filehelpers import MODES, Recorder, Tail, append, notifier_for, open_fds_to
from liverunner import cli, read_records, wait_for, write_config
from recordcheck import validate_records
from test_stuck_calls import seamed_runner

from watchrun.config.model import Limits
from watchrun.sources.checkpoints import CheckpointStore

LONG_WAIT = Limits(rotate_wait_ms=60_000)
"""The rotated generation stays open for the whole test (unless it is found gone)."""


def where(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def failing(monkeypatch: pytest.MonkeyPatch, folder: Path, code: int,
            which: Callable[[str], bool], *, fstat: bool = False) -> None:
    """Reads (and with `fstat` fstats) of a descriptor open on a file of `folder` for which
    `which(its name now)` fail with `code`."""
    pread, real_fstat = os.pread, os.fstat

    def hit(fd: int) -> bool:
        name = where(fd)
        return name.startswith(str(folder)) and which(name)

    def faulty_pread(fd: int, n: int, offset: int) -> bytes:
        if hit(fd):
            raise OSError(code, os.strerror(code))
        return pread(fd, n, offset)

    def faulty_fstat(fd: int) -> os.stat_result:
        if hit(fd):
            raise OSError(code, os.strerror(code))
        return real_fstat(fd)

    monkeypatch.setattr(os, "pread", faulty_pread)
    if fstat:
        monkeypatch.setattr(os, "fstat", faulty_fstat)


def deleted(name: str) -> bool:
    return name.endswith(" (deleted)")


def kinds(rec: Recorder) -> list[str]:
    return [k for k, _ in rec.events if k in ("gap", "rotate", "error")]


@pytest.mark.parametrize("cached", [True, False], ids=["attributes-cached", "fstat-fails"])
@pytest.mark.parametrize("mode", MODES)
def test_a_followed_file_deleted_by_another_host_and_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, cached: bool) -> None:
    """Delete-and-recreate on the server, a line appended just before the delete: the file
    followed is gone before that line was read. It is a `gap{missing}` from its line on (its
    bytes known when an fstat still answers, else 0: not known), then the new file is read."""
    log = tmp_path / "app.log"
    log.write_text("old ERROR 1\n")
    failing(monkeypatch, tmp_path, errno.ESTALE, deleted, fstat=not cached)

    async def body() -> tuple[Recorder, str]:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, CheckpointStore(tmp_path / "state"),
                        from_start=True) as t:
            await t.lines(1)
            append(log, "old ERROR 2")  # (no await in between: read by no look)
            log.unlink()
            log.write_text("new ERROR 1\n")
            await t.until(lambda: "new ERROR 1" in t.rec.texts(), "the new file's line")
            append(log, "new ERROR 2")
            await t.lines(3)
            state = t.source.state
        notifier.close()
        return t.rec, state

    rec, state = asyncio.run(body())
    assert rec.texts() == ["old ERROR 1", "new ERROR 1", "new ERROR 2"]
    assert state == "running"
    assert kinds(rec) == ["gap", "rotate"], rec.events
    gap, = rec.of("gap")
    unread = len("old ERROR 2\n") if cached else 0
    inode = rec.of("start")[0]["inode"]
    assert gap == {
        "reason": "missing", "path": str(log), "inode": inode, "offset": 12, "lineNo": 2,
        "unreadBytes": unread,
        "message": f"the generation being read (inode {inode}) can no longer be read (Stale "
                   "file handle: its file was deleted, by another host of its network file "
                   f"system) from line 2 (offset 12) on: {unread} bytes of it seen were not "
                   "read, nor what was written to it after the runner last looked"}
    assert rec.of("rotate")[0]["reason"] == "recreate"


@pytest.mark.parametrize("mode", MODES)
def test_a_rotated_generation_deleted_by_another_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Rename rotation followed, then the rotated file is written to once more and deleted
    (logrotate's `rotate 0`, a cleanup job) before the runner read that: a `gap{missing}` for
    those bytes, and the new file is read on."""
    log, rotated = tmp_path / "app.log", tmp_path / "app.log.1"
    log.write_text("old ERROR 1\n")
    failing(monkeypatch, tmp_path, errno.ESTALE, deleted)

    async def body() -> tuple[Recorder, str, list[str]]:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, CheckpointStore(tmp_path / "state"),
                        from_start=True, limits=LONG_WAIT) as t:
            await t.lines(1)
            log.rename(rotated)
            log.write_text("new ERROR 1\n")
            await t.lines(2)
            append(rotated, "old ERROR 2")  # its writer had not reopened yet
            rotated.unlink()
            await t.until(lambda: bool(t.rec.of("gap")), "the gap")
            append(log, "new ERROR 2")
            await t.lines(3)
            state, held = t.source.state, open_fds_to(rotated)
        notifier.close()
        return t.rec, state, held

    rec, state, held = asyncio.run(body())
    assert rec.texts() == ["old ERROR 1", "new ERROR 1", "new ERROR 2"]
    assert state == "running"
    assert held == []  # released: its descriptor closed
    assert kinds(rec) == ["rotate", "gap"], rec.events
    assert rec.of("rotate")[0]["reason"] == "rename"
    gap, = rec.of("gap")
    assert (gap["reason"], gap["path"], gap["lineNo"], gap["offset"], gap["unreadBytes"]) == (
        "missing", str(log), 2, 12, len("old ERROR 2\n"))
    assert gap["inode"] == rec.of("rotate")[0]["oldInode"]
    assert "(Stale file handle: its file was deleted, by another host of its network file " \
        "system) from line 2 (offset 12) on: 12 bytes of it seen were not read" in gap["message"]


@pytest.mark.parametrize("mode", MODES)
def test_a_rotated_generation_whose_reads_fail_holds_up_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """After a rename rotation the rotated file's reads fail (EIO) and go on failing: the new
    file is read meanwhile, the watcher's error names the rotated file, and once it has not
    been read for rotateWait it is released, what of it was seen and not read a `gap`."""
    log, rotated = tmp_path / "app.log", tmp_path / "app.log.1"
    log.write_text("old ERROR 1\n")
    broken = [False]
    failing(monkeypatch, tmp_path, errno.EIO, lambda name: broken[0] and name == str(rotated))
    states: list[str] = []

    async def body() -> Recorder:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, CheckpointStore(tmp_path / "state"), from_start=True,
                        limits=Limits(rotate_wait_ms=3000)) as t:
            await t.lines(1)
            log.rename(rotated)
            log.write_text("new ERROR 1\n")
            await t.lines(2)
            broken[0] = True
            append(rotated, "old ERROR 2")
            await t.until(lambda: t.source.state == "error", "the error")
            append(log, "new ERROR 2")
            await t.lines(3)
            states.append(t.source.state)
            await t.until(lambda: bool(t.rec.of("gap")), "the release")
            await t.until(lambda: t.source.state == "running", "running again")
            append(log, "new ERROR 3")
            await t.lines(4)
        notifier.close()
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == ["old ERROR 1", "new ERROR 1", "new ERROR 2", "new ERROR 3"]
    assert states == ["error"]  # (while the rotated one failed, the new one was read)
    error, = rec.of("error")
    inode = rec.of("rotate")[0]["oldInode"]
    assert error == {"code": "EIO", "path": str(log), "message": (
        f"cannot read {rotated} (inode {inode}, rotated away from {log}): Input/output error; "
        f"{log} is read on, and this one is released once it has not been read for "
        "limits.rotateWait")}
    gap, = rec.of("gap")
    assert (gap["reason"], gap["path"], gap["inode"], gap["lineNo"], gap["unreadBytes"]) == (
        "missing", str(rotated), inode, 2, len("old ERROR 2\n"))
    assert "(Input/output error: rotated away, its reads failed until it was released)" \
        in gap["message"]


@pytest.mark.parametrize("mode", MODES)
def test_a_rename_on_a_path_based_fuse_file_system_is_no_truncation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """sshfs-like: after a rename on the server, fstat of the renamed file's descriptor gives
    the attributes of the (shorter) file now at the path. That was taken for a truncation of
    the followed file (a false `rotate{truncate}`) before the rename was seen."""
    log, rotated = tmp_path / "app.log", tmp_path / "app.log.1"
    log.write_text("old ERROR 1\n")
    real_fstat = os.fstat

    def path_based(fd: int) -> os.stat_result:
        return os.stat(log) if where(fd) == str(rotated) else real_fstat(fd)

    monkeypatch.setattr(os, "fstat", path_based)

    async def body() -> Recorder:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, CheckpointStore(tmp_path / "state"), from_start=True,
                        limits=LONG_WAIT) as t:
            await t.lines(1)
            log.rename(rotated)
            log.write_text("n\n")
            await t.lines(2)
            append(log, "new ERROR 2")
            await t.lines(3)
        notifier.close()
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == ["old ERROR 1", "n", "new ERROR 2"]
    rotates: list[dict[str, Any]] = rec.of("rotate")
    assert [r["reason"] for r in rotates] == ["rename"], rotates


NFS_READS = """
import errno, os, sys
SHARE = {share!r}
real = os.pread
def pread(fd, n, pos):  # as an NFS client reads a file another host deleted
    try:
        name = os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:
        name = ""
    if name.startswith(SHARE) and name.endswith(" (deleted)"):
        raise OSError(errno.ESTALE, os.strerror(errno.ESTALE))
    return real(fd, n, pos)
os.pread = pread
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose reads of a deleted file under `share` fail with ESTALE."""


def stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


def test_the_runner_goes_on_after_a_rotated_file_is_deleted_on_the_server(
        tmp_path: Path) -> None:
    """The report's reproduction, the real runner: rename rotation followed, then the rotated
    file is written to and deleted by another host while the runner is not looking. It used to
    write `error{ESTALE}` and stay in `error` for good, the new file's later lines unread."""
    share = tmp_path / "share"
    share.mkdir()
    log, rotated = share / "app.log", share / "app.log.1"
    log.write_text("old ERROR 1\n")
    cfg = write_config(tmp_path, {"limits": {"rotateWait": "60s"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"

    def matched() -> list[str]:
        return [r["line"] for r in read_records(jsonl) if r["kind"] == "match"]

    with seamed_runner(NFS_READS.format(share=str(share)), cfg) as (proc, err):
        wait_for(lambda: matched() == ["old ERROR 1"], "the first match")
        log.rename(rotated)
        log.write_text("new ERROR 1\n")
        wait_for(lambda: matched()[1:] == ["new ERROR 1"], "the new file's match")
        os.kill(proc.pid, signal.SIGSTOP)  # (not looking while the other host writes)
        try:
            wait_for(lambda: stopped(proc.pid), "the runner stopped")
            append(rotated, "old ERROR 2")
            rotated.unlink()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_for(lambda: any(r["kind"] == "gap" for r in read_records(jsonl)), "the gap")
        append(log, "new ERROR 2")
        wait_for(lambda: matched()[2:] == ["new ERROR 2"], "the new file's next match")
        listed = cli("list", "--json", "-c", cfg, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)["watchers"]
        assert (row["status"], row["lastError"]) == ("running", None), row
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(err)
    recs = validate_records(jsonl)
    assert [r["kind"] for r in recs] == [
        "start", "match", "rotate", "match", "gap", "match", "stop"], recs
    gap = recs[4]
    assert (gap["reason"], gap["lineNo"], gap["unreadBytes"]) == ("missing", 2, 12), gap
    assert f"[app] warning: gap (missing): the generation being read (inode {gap['inode']}) " \
        "can no longer be read (Stale file handle: " in "".join(err)
