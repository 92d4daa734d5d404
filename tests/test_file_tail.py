"""FileSource follows a path like `tail -F`: real files, real inotify, and forced polling."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from filehelpers import (
    MODES,
    Recorder,
    Tail,
    append,
    notifier_for,
    numbered,
    open_fds_to,
    run,
    wait_for,
    write_fd,
)
from tmpfs import mount_tmpfs, umount

from watchrun.config.model import Limits
from watchrun.events import Chunk
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.identity import birth_ns

pytestmark = pytest.mark.parametrize("mode", MODES)


def store_in(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / "state")


def test_follows_from_the_end(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("old1\nold2\n")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            inode = log.stat().st_ino
            assert t.rec.of("start") == [{"path": str(log), "inode": inode, "offset": 10}]
            append(log, "new1", "new2")
            assert await t.lines(2) == ["new1", "new2"]
            first = t.rec.chunks[0]
            assert (first.line_no, first.offset, first.inode, first.path) == (
                3, 10, log.stat().st_ino, str(log),
            )  # fmt: skip

    run(body())


def test_from_end_keeps_an_unterminated_last_line_whole(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("old\npart")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            assert t.rec.of("start")[0]["offset"] == 4
            append(log, "ial", "next")
            assert await t.lines(2) == ["partial", "next"]

    run(body())


def test_from_start_scans_existing_content_first(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("a\nb\n")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path), from_start=True) as t:
            assert await t.lines(2) == ["a", "b"]
            append(log, "c")
            assert await t.lines(3) == ["a", "b", "c"]

    run(body())


@pytest.mark.parametrize("missing", ["file", "dirs"])
def test_missing_at_start_is_waiting_not_an_error_then_all_lines(tmp_path: Path, mode: str,
                                                                 missing: str) -> None:
    """A file that is not there yet is waited for: the start record says so (inode null), the
    source's state is `waiting` (what `list` shows), and no `error` record is written (a
    missing log is not a failure of the runner while it follows; once mode is another
    matter)."""
    log = tmp_path / "app.log" if missing == "file" else tmp_path / "a" / "b" / "app.log"

    async def body() -> None:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, store_in(tmp_path)) as t:
            assert t.rec.of("start") == [{"path": str(log), "inode": None, "offset": 0}]
            for _ in range(5):  # wake-ups (polls, or spurious) change nothing
                before = notifier.wakeups
                for w in notifier.watches:
                    w.poke()
                await t.until(lambda b=before: notifier.wakeups > b)  # type: ignore[misc]
            assert t.source.state == "waiting" and t.rec.of("error") == []
            log.parent.mkdir(parents=True, exist_ok=True)
            append(log, "one", "two", "three")
            assert await t.lines(3) == ["one", "two", "three"]
            assert t.source.state == "running" and t.rec.of("error") == []

    run(body())


def test_missing_dirs_created_one_by_one(tmp_path: Path, mode: str) -> None:
    """Each level appears separately, the watcher re-resolving in between."""
    log = tmp_path / "a" / "b" / "c" / "app.log"

    async def body() -> None:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, store_in(tmp_path)) as t:
            for d in (log.parents[2], log.parents[1], log.parent):
                before = notifier.wakeups
                d.mkdir()
                await t.until(lambda b=before: notifier.wakeups > b and all(  # type: ignore[misc]
                    w.waiting for w in notifier.watches))  # fmt: skip
            append(log, "hello")
            assert await t.lines(1) == ["hello"]

    run(body())


def test_rename_and_create_drains_old_file_including_late_writes(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    rotated = tmp_path / "app.log.1"

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            old_inode = log.stat().st_ino
            fd = os.open(log, os.O_WRONLY | os.O_APPEND)
            try:
                write_fd(fd, "a1\na2\n")
                await t.lines(2)
                os.rename(log, rotated)
                append(log, "b1")  # the new file
                write_fd(fd, "late1\n")  # an old writer has not reopened yet
                assert await t.lines(4) == ["a1", "a2", "late1", "b1"]
                # after the switch, a late line through the old descriptor is still read
                write_fd(fd, "late2\n")
                assert await t.lines(5) == ["a1", "a2", "late1", "b1", "late2"]
            finally:
                os.close(fd)
            assert t.rec.of("rotate") == [
                {"reason": "rename", "path": str(log), "inode": log.stat().st_ino,
                 "oldInode": old_inode} | numbered(log)
            ]  # fmt: skip
            # the old generation is released after the rotate-wait
            await t.until(lambda: not open_fds_to(rotated), "old file closed")
            append(log, "b2")
            assert (await t.lines(6))[-1] == "b2"

    run(body())


def test_copytruncate(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            append(log, "a1", "a2", "a3")
            await t.lines(3)
            shutil.copy(log, tmp_path / "app.log.1")
            os.truncate(log, 0)
            append(log, "b1")
            assert await t.lines(4) == ["a1", "a2", "a3", "b1"]
            assert [r["reason"] for r in t.rec.of("rotate")] == ["truncate"]
            assert t.rec.chunks[-1].line_no == 1 and t.rec.chunks[-1].offset == 0

    run(body())


def test_a_truncation_to_a_non_zero_size_is_read_again_from_the_start(
        tmp_path: Path, mode: str) -> None:
    """README: as `tail -F`, a file truncated to a size other than 0 is read from its start
    after `rotate{truncate}`: its kept lines are recorded again (a file truncated to 0 and
    written anew with the same first lines looks the same; skipping would lose those)."""
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            append(log, "a1", "a2", "a3", "a4")
            await t.lines(4)
            os.truncate(log, 6)
            append(log, "b1")
            assert await t.lines(7) == ["a1", "a2", "a3", "a4", "a1", "a2", "b1"]
            assert [(r["reason"], r["oldSize"], r["unreadBytes"])
                    for r in t.rec.of("rotate")] == [("truncate", 12, 0)]
            numbers = [n for c in t.rec.chunks for n in range(c.line_no,
                                                               c.line_no + c.data.count(b"\n"))]
            assert numbers == [1, 2, 3, 4, 1, 2, 3]  # numbered from the start again

    run(body())


def test_truncate_and_rewrite_bigger_is_detected_by_fingerprint(tmp_path: Path, mode: str) -> None:
    """The new content is longer than the old offset: size alone cannot tell."""
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            append(log, "old1", "old2")
            await t.lines(2)
            with open(log, "w") as f:  # same inode, truncated, rewritten in one go
                f.write("".join(f"new{i}\n" for i in range(10)))
            await t.lines(12)
            assert t.rec.texts() == ["old1", "old2"] + [f"new{i}" for i in range(10)]
            assert [r["reason"] for r in t.rec.of("rotate")] == ["truncate"]

    run(body())


@pytest.mark.parametrize("fs", ["disk", "tmpfs"])
def test_truncate_and_rewrite_bigger_while_stopped(tmp_path: Path, mode: str, fs: str) -> None:
    """Rewritten in place with other first bytes, read from its start: a `truncate` of the
    file read to its end (it was said as a `recreate` and a `gap` for a generation that was not
    lost). Where the file system keeps inode generation numbers (ext4) the same number says the
    same file; where it keeps none (tmpfs) the same birth time does (without it, nothing told
    it from a new file given the inode number: `recreate` and a `gap`, until 2026-12-08)."""
    if fs == "tmpfs":
        mount_tmpfs(tmp_path / "mnt", "1m")
        tmp_path = tmp_path / "mnt"
    try:
        truncated_and_rewritten_while_stopped(tmp_path, mode, fs)
    finally:
        if fs == "tmpfs":
            umount(tmp_path)


def truncated_and_rewritten_while_stopped(tmp_path: Path, mode: str, fs: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("".join(f"old-{i:04d}\n" for i in range(100)))
    store = store_in(tmp_path)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store, from_start=True) as t:
            await t.lines(100)
        state = store.load("w")
        assert state is not None and state.current.offset == 900
        inode = log.stat().st_ino
        with open(log, "w") as f:
            f.write("".join(f"new-{i:04d}\n" for i in range(200)))
        assert log.stat().st_ino == inode
        async with Tail(log, notifier_for(mode), store) as t:
            assert await t.lines(200) == [f"new-{i:04d}" for i in range(200)]
            said = {"path": str(log), "inode": inode, "oldInode": inode} | numbered(log)
            gaps = [(g["reason"], g["offset"], g["unreadBytes"]) for g in t.rec.of("gap")]
            assert fs == "disk" or not numbered(log)  # (tmpfs keeps no generation numbers)
            assert t.rec.of("rotate") == [
                {"reason": "truncate", "oldSize": 900, "unreadBytes": 0} | said]
            assert gaps == []

    run(body())


def test_delete_and_recreate(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            append(log, "a1")
            await t.lines(1)
            old = log.stat().st_ino
            log.unlink()
            await t.until(lambda: not open_fds_to(log), "deleted file released")
            append(log, "b1", "b2")
            assert await t.lines(3) == ["a1", "b1", "b2"]
            assert t.rec.of("rotate") == [
                {"reason": "recreate", "path": str(log), "inode": log.stat().st_ino,
                 "oldInode": old} | numbered(log)
            ]  # fmt: skip

    run(body())


def test_a_new_file_given_the_checkpointed_inode_is_read_from_its_start(
        tmp_path: Path, mode: str) -> None:
    """Deleted and created again while stopped, and ext4 hands the freed inode number to the
    new file (tried until it does). The fingerprints tell them apart: the new file is read from
    its first line with a `recreate` record, not resumed at the old offset, and a `gap` record
    names the old generation from its first line not read."""
    new = [f"second-generation-line-{i:02d}" for i in range(10)]  # more bytes than the old

    async def attempt(d: Path) -> tuple[Path, int] | None:
        log, store = d / "app.log", store_in(d)
        log.write_text("")
        notifier = notifier_for(mode)  # (closed here: where no number comes back, 20 s of tries)
        async with Tail(log, notifier, store) as t:
            append(log, "first-generation-line-1", "first-generation-line-2")
            await t.lines(2)
        notifier.close()
        old = log.stat().st_ino
        append(log, "written-after-the-runner-stopped")  # lost: deleted before it looks
        log.unlink()
        append(log, *new)
        return (log, old) if log.stat().st_ino == old else None

    async def body() -> None:
        deadline, tries, found = time.monotonic() + 20, 0, None
        while found is None:
            if time.monotonic() > deadline:
                pytest.skip(f"{tries} new files in {tmp_path} never got a deleted file's inode "
                            "number (this filesystem does not reuse them at once)")
            tries += 1
            (tmp_path / str(tries)).mkdir()
            found = await attempt(tmp_path / str(tries))
        log, old = found
        async with Tail(log, notifier_for(mode), store_in(log.parent)) as t:
            assert await t.lines(10) == new
            assert t.rec.of("rotate") == [
                {"reason": "recreate", "path": str(log), "inode": old, "oldInode": old}
                | numbered(log)]
            (gap,) = t.rec.of("gap")
            assert (gap["reason"], gap["inode"], gap["offset"], gap["lineNo"]) == (
                "missing", old, 48, 3)

    run(body())


def test_rename_rotation_while_stopped_finishes_the_rotated_file(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    store = store_in(tmp_path)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store) as t:
            append(log, "a1")
            await t.lines(1)
        append(log, "a2")
        os.rename(log, tmp_path / "app.log.1")
        append(log, "b1")
        async with Tail(log, notifier_for(mode), store) as t:
            assert await t.lines(2) == ["a2", "b1"]
            assert [r["reason"] for r in t.rec.of("rotate")] == ["rename"]

    run(body())


def test_symlink_target_swap(tmp_path: Path, mode: str) -> None:
    t1, t2, link = tmp_path / "t1.log", tmp_path / "t2.log", tmp_path / "current.log"
    t1.write_text("t1-old\n")
    link.symlink_to(t1)

    async def body() -> None:
        async with Tail(link, notifier_for(mode), store_in(tmp_path)) as t:
            append(t1, "t1-a")
            await t.lines(1)
            append(t1, "t1-b")
            t2.write_text("t2-a\n")
            (tmp_path / "tmp-link").symlink_to(t2)
            os.replace(tmp_path / "tmp-link", link)  # ln -sfn
            assert await t.lines(3) == ["t1-a", "t1-b", "t2-a"]
            append(t2, "t2-b")
            assert (await t.lines(4))[-1] == "t2-b"
            (rot,) = t.rec.of("rotate")
            assert (rot["reason"], rot["inode"], rot["oldInode"]) == (
                "rename", t2.stat().st_ino, t1.stat().st_ino,
            )  # fmt: skip

    run(body())


def test_partial_line_waits_and_checkpoint_stays_before_it(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    store = store_in(tmp_path)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store) as t:
            append(log, "abc", end="")
            await t.until(lambda: t.source.pending_bytes == 3)
            assert t.rec.lines() == []
            append(log, "def")
            assert await t.lines(1) == ["abcdef"]
            append(log, "ghi", end="")
            await t.until(lambda: t.source.pending_bytes == 3)
        state = store.load("w")
        assert state is not None and (state.current.offset, state.current.line_no) == (7, 2)
        async with Tail(log, notifier_for(mode), store) as t:
            append(log, "jkl")
            assert await t.lines(1) == ["ghijkl"]
            assert t.rec.chunks[0].line_no == 2

    run(body())


def test_resume_from_checkpoint_reads_exactly_what_came_while_stopped(
    tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "app.log"
    log.write_text("before\n")
    store = store_in(tmp_path)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store) as t:
            append(log, "a1", "a2", "a3")
            await t.lines(3)
        append(log, *[f"down{i}" for i in range(5)])
        async with Tail(log, notifier_for(mode), store) as t:
            append(log, "end")
            assert await t.lines(6) == [f"down{i}" for i in range(5)] + ["end"]
            assert t.rec.of("rotate") == [] and t.rec.of("error") == []
            assert t.rec.of("start")[0]["offset"] == 16
            assert t.rec.chunks[0].line_no == 5

    run(body())


@pytest.mark.parametrize(
    "content", [b'{"version":1,"dev":1,"ino', b"\x00" * 200, b'{"version":99}'],
    ids=["truncated-json", "nul-bytes", "unknown-version"],
)  # fmt: skip
def test_corrupt_checkpoint_is_set_aside(tmp_path: Path, mode: str, content: bytes) -> None:
    log = tmp_path / "app.log"
    log.write_text("old\n")
    store = store_in(tmp_path)
    store.dir.mkdir()
    store.path("w").write_bytes(content)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store) as t:
            (err,) = t.rec.of("error")
            assert err["code"] == "checkpoint-corrupt"
            assert str(store.path("w")) in err["message"] and "set aside" in err["message"]
            append(log, "new")
            assert await t.lines(1) == ["new"]
        assert [p.name.split(".corrupt-")[0] for p in store.dir.glob("*.corrupt-*")] == [
            "w.checkpoint.json"
        ]
        assert store.load("w") is not None  # a fresh, valid checkpoint replaced it

    run(body())


def test_once_reads_to_the_end_and_returns(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("a\nb\nlast-without-newline")
    store = store_in(tmp_path)

    async def body() -> None:
        t = Tail(log, notifier_for(mode), store, from_start=True, once=True)
        await t.source.run(t.rec)
        assert t.rec.texts() == ["a", "b", "last-without-newline"]
        state = store.load("w")
        assert state is not None and state.current.offset == 4  # not the unterminated line
        append(log, "", "c")  # completes it, adds c
        t2 = Tail(log, notifier_for(mode), store, once=True)  # from the checkpoint
        await t2.source.run(t2.rec)
        assert t2.rec.texts() == ["last-without-newline", "c"]
        missing = Tail(tmp_path / "nope.log", notifier_for(mode), store, once=True)
        await missing.source.run(missing.rec)
        assert [k for k, _ in missing.rec.events] == ["start", "error"]

    run(body())


def test_unreadable_path_reports_once_then_recovers(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.mkdir()  # a directory where the file should be: EISDIR

    async def body() -> None:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, store_in(tmp_path)) as t:
            await t.until(lambda: len(t.rec.of("error")) == 1)
            assert t.rec.of("error")[0]["code"] == "EISDIR"
            assert t.source.state == "error"  # what `list` shows
            before = notifier.wakeups
            os.utime(log)
            await t.until(lambda: notifier.wakeups > before)
            assert t.source.state == "error"
            log.rmdir()
            append(log, "x")
            assert await t.lines(1) == ["x"]
            assert len(t.rec.of("error")) == 1 and t.source.state == "running"

    run(body())


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_permission_denied_reports_once_then_recovers(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("old\n")
    log.chmod(0)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            await t.until(lambda: len(t.rec.of("error")) == 1)
            assert t.rec.of("error")[0]["code"] == "EACCES"
            append(log, "new")
            log.chmod(0o644)
            assert await t.lines(1) == ["new"]

    run(body())


def test_long_line_is_cut_and_marked(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        limits = Limits(max_line_bytes=256)
        async with Tail(log, notifier_for(mode), store_in(tmp_path), limits=limits) as t:
            append(log, "x" * 1000, "ok")
            lines = await t.lines(2)
            assert lines == ["x" * 256, "ok"]
            chunk = t.rec.chunks[0]
            assert chunk.cut_at(0) == 744 and chunk.end == 1004

    run(body())


def test_reads_are_fair_between_watchers(tmp_path: Path, mode: str) -> None:
    """A big backlog is read read_size at a time, yielding in between: the small file's line
    is delivered long before the big file is done."""
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    big.write_bytes(b"")
    small.write_text("first\n")
    order: list[str] = []

    class Ordered(Recorder):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        async def chunk(self, chunk: Chunk) -> None:
            order.append(self.name)
            await super().chunk(chunk)

    async def body() -> None:
        notifier, store = notifier_for(mode), store_in(tmp_path)
        b = Tail(big, notifier, store, from_start=True, read_size=16 * 1024, wid="big",
                 rec=Ordered("big"))  # fmt: skip
        s = Tail(small, notifier, store, from_start=True, rec=Ordered("small"))
        tasks = [asyncio.create_task(t.source.run(t.rec)) for t in (b, s)]
        await wait_for(lambda: b.source.ready.is_set() and len(s.rec.lines()) == 1)
        order.clear()
        append(big, *(f"{i:07d} big line" for i in range(100_000)))  # the big one's first
        append(small, "hello")
        await wait_for(lambda: bool(b.rec.chunks) and b.rec.chunks[-1].end == big.stat().st_size)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert order.count("big") > 50
        assert order.index("small") < 5

    run(body())


def test_queue_overflow_wakes_every_watch(tmp_path: Path, mode: str) -> None:
    if mode == "poll":
        pytest.skip("inotify only")
    log, noise = tmp_path / "app.log", tmp_path / "noise"
    log.write_text("")
    noise.write_text("")
    (tmp_path / "noise2").write_text("")

    async def body() -> None:
        notifier = notifier_for(mode)
        async with Tail(log, notifier, store_in(tmp_path)) as t:
            await wait_for(lambda: all(w.waiting for w in notifier.watches))
            # without yielding to the loop: fill the kernel queue (16384 events), then write
            for i in range(17_000):  # alternate names: identical events would be merged
                os.utime(noise if i % 2 else log.parent / "noise2")
            append(log, "after-overflow")
            assert await t.lines(1) == ["after-overflow"]
            assert notifier.overflows >= 1

    run(body())


def _voluntary_switches() -> int:
    """Voluntary context switches of this (the event loop's) thread."""
    with open(f"/proc/self/task/{threading.get_native_id()}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc")


def test_a_started_watcher_looks_once_before_it_waits(tmp_path: Path, mode: str) -> None:
    """A file source's start arms its watches (the path, the descriptor) and then looks: the
    wake-ups of its own arming are answered by that look, not by a second one; a write after
    it still wakes it (500 watchers restarting pay one look each, not two)."""

    async def body() -> None:
        notifier, store = notifier_for(mode), store_in(tmp_path)
        if notifier.mode != "inotify":
            pytest.skip("inotify only: a polling watch wakes on its timer")
        log = tmp_path / "app.log"
        log.write_text("x\n")
        async with Tail(log, notifier, store) as tail:
            (watch,) = notifier.watches
            await tail.until(lambda: watch.waiting, "parked in wait()")
            assert notifier.wakeups == 0
            append(log, "ERROR after the start")
            assert await tail.lines(1) == ["ERROR after the start"]
            assert notifier.wakeups >= 1

    run(body())


def test_idle_watchers_cost_no_wakeups(tmp_path: Path, mode: str) -> None:
    """20 idle files under inotify: no wake-ups and no timers for a whole second."""

    async def body() -> None:
        notifier, store = notifier_for(mode), store_in(tmp_path)
        tails: list[Tail] = []
        async with contextlib.AsyncExitStack() as stack:
            for i in range(20):
                (tmp_path / f"f{i}.log").write_text("x\n")
                tail = Tail(tmp_path / f"f{i}.log", notifier, store, wid=f"w{i}")
                await stack.enter_async_context(tail)
                tails.append(tail)
            await wait_for(lambda: len(notifier.watches) == 20 and all(
                w.waiting for w in notifier.watches))  # fmt: skip
            await wait_for(lambda: all(store.path(f"w{i}").exists() for i in range(20))
                           and not any(t.source.saving for t in tails))  # no thread at work
            for _ in range(10):  # (a window in which no file system was mounted or unmounted
                # on this host: each such change wakes every watch, and other tests mount)
                mounts = notifier.mount_changes
                wakeups, switches = notifier.wakeups, _voluntary_switches()
                await asyncio.sleep(1.0)  # the measurement window itself
                if notifier.mount_changes == mounts:
                    break
            else:
                pytest.skip("the mount table changed in every window of ten")
            if mode == "inotify":
                assert notifier.wakeups == wakeups
                assert _voluntary_switches() - switches <= 3  # only the end of this sleep
            else:  # the control: polling does wake up (20 watches x 50/s)
                assert notifier.wakeups - wakeups >= 100

    run(body())


def unopenable_at_first(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Opens of the watched path fail with EACCES (even as root) until the event is set."""
    from watchrun.sources import file as file_source

    opened = threading.Event()
    real = file_source.open_at_path

    def open_at_path(path: str) -> Any:
        if not opened.is_set():
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(file_source, "open_at_path", open_at_path)
    return opened


def test_a_file_unreadable_at_start_is_read_from_where_it_was(
        tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """config.md (`path`): a file that cannot be read at start is followed, once it can be,
    from where it ended at start (what came since, as from the end of a readable one)."""
    log = tmp_path / "app.log"
    log.write_text("old-1\nold-2\n")
    opened = unopenable_at_first(monkeypatch)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            await t.until(lambda: len(t.rec.of("error")) == 1)
            assert t.rec.of("error")[0]["code"] == "EACCES"
            opened.set()
            append(log, "new")
            assert await t.lines(1) == ["new"]

    run(body())


def test_a_new_file_given_the_unreadable_ones_inode_number_is_read_whole(
        tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file unreadable at start, then deleted, and a new file given its inode number (ext4
    hands numbers out again) moved in, already longer than the old one: it is a new file, read
    from its first line. It was taken for the old one by its device and inode, and its first
    bytes, as long as the old file was, were skipped without a record."""
    log = tmp_path / "app.log"
    log.write_text("old-1\nold-2\n")
    if birth_ns(log) is None:
        pytest.skip(f"no birth time (statx) on the file system of {tmp_path}")
    inode = log.stat().st_ino
    opened = unopenable_at_first(monkeypatch)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            await t.until(lambda: len(t.rec.of("error")) == 1)
            log.unlink()
            for i in range(200):  # ext4 gives the lowest free number of the group to a new file
                new = tmp_path / f"new-{i}"
                new.write_text("fresh-1\nfresh-2\n")
                if new.stat().st_ino == inode:
                    break
            else:
                pytest.skip(f"no new file in {tmp_path} got the freed inode number back")
            opened.set()
            new.rename(log)
            assert await t.lines(2) == ["fresh-1", "fresh-2"]

    run(body())


def test_a_source_not_started_yet_says_starting_not_waiting(tmp_path: Path, mode: str) -> None:
    """`list` said `waiting` (a file not there yet) for a watcher restarted by a reload whose
    file was there: its source had not opened it yet (a loaded CI run caught it between)."""
    log = tmp_path / "app.log"
    log.write_text("one\n")

    async def body() -> None:
        notifier = notifier_for(mode)
        t = Tail(log, notifier, store_in(tmp_path), from_start=True)
        assert t.source.state == "starting"
        async with t:
            await t.lines(1)
            assert t.source.state == "running"
        notifier.close()

    run(body())
