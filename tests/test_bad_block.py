"""A followed file with a bad block: on btrfs a data block whose checksum fails makes every read
that covers it fail with EIO (the explorer's real-file-system runs, explore-fs F1 and F4), and
so does a failing disk under any file system.

- When the first read of the followed file failed (at the runner's start, from its checkpoint
  or `fromStart`), the watcher went to `error` as documented, but never followed the file that
  took the path after logrotate renamed it away: no line, no gap, until a restart. Now the
  file at the path is followed, and the one renamed away is said and released as a rotated
  generation whose reads fail is: its `error`, then after rotateWait a `gap{missing}` from
  where it could not be read, its descriptor closed.
- A read of up to 1 MiB that covered the bad block failed whole: the lines before it were never
  read, and a once run said every byte of the file unread. Now the read is asked again a page
  at a time up to the bad one: the lines before it are recorded, and the error says from which
  offset on the file could not be read.

The fault is injected where the source reads (`os.pread`) for the reads of one inode that cover
one byte, as the kernel gives it; the files and their rotations are real."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest
from filehelpers import MODES, Recorder, Tail, append, notifier_for, open_fds_to

from watchrun.config.model import Limits
from watchrun.notify import Notifier
from watchrun.sources.checkpoints import CheckpointStore

BAD_AT = 100_000
"""The byte the bad block holds (the explorer's: btrfs said `csum failed … off 98304`)."""
PAGE_AT = BAD_AT - BAD_AT % 4096


class BadBlock:
    """Every `os.pread` of `path`'s inode (whatever its name now) whose range covers byte `at`
    fails with EIO; `failed` counts them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path, at: int) -> None:
        st = path.stat()
        self.inode, self.at, self.failed = (st.st_dev, st.st_ino), at, 0
        real, fstat = os.pread, os.fstat

        def pread(fd: int, n: int, offset: int) -> bytes:
            if offset <= self.at < offset + n:
                st = fstat(fd)
                if (st.st_dev, st.st_ino) == self.inode:
                    self.failed += 1
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real(fd, n, offset)

        monkeypatch.setattr(os, "pread", pread)


def numbered_lines(first: int, count: int) -> str:
    return "".join(f"{'ERROR' if n % 2 else 'INFO'} req={n} some payload text xxxxxxxx\n"
                   for n in range(first, first + count))


def before(text: str, end: int) -> list[str]:
    """The lines of `text` that end before byte `end`."""
    return text.encode()[:end].decode().split("\n")[:-1]


def test_a_once_read_records_the_lines_before_a_bad_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The once run read nothing of a 180 KB file with a bad block at 98 KiB (`181893 of its
    181893 bytes were not read`, 0 matches); now every line before the bad block's page is
    recorded, and the `error` says from which offset on it could not read."""
    log = tmp_path / "app.log"
    text = numbered_lines(1, 4000)
    log.write_text(text)
    size = log.stat().st_size
    BadBlock(monkeypatch, log, BAD_AT)

    async def body() -> Recorder:
        async with Tail(log, Notifier(20, enabled=False), CheckpointStore(tmp_path / "state"),
                        once=True) as t:
            await t.until(lambda: t.task is not None and t.task.done(), "the read")
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == before(text, PAGE_AT)
    (error,) = rec.of("error")
    lost = size - PAGE_AT
    assert error == {"code": "EIO", "path": str(log), "unread": True, "offset": PAGE_AT,
                     "unreadBytes": lost,
                     "message": f"cannot read {log} from offset {PAGE_AT} on: Input/output "
                                f"error: {lost} of its {size} bytes were not read"}


@pytest.mark.parametrize("mode", MODES)
def test_a_live_watcher_records_the_lines_before_a_bad_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """A live watcher read 0 lines of it; now the lines before the bad block's page, and its
    error says from where the file cannot be read."""
    log = tmp_path / "app.log"
    text = numbered_lines(1, 4000)
    log.write_text(text)
    bad = BadBlock(monkeypatch, log, BAD_AT)

    async def body() -> tuple[Recorder, str, str | None]:
        async with Tail(log, notifier_for(mode), CheckpointStore(tmp_path / "state"),
                        from_start=True) as t:
            await t.until(lambda: t.source.state == "error", "the error")
            return t.rec, t.source.state, t.source.cannot_read

    rec, state, why = asyncio.run(body())
    assert bad.failed
    assert rec.texts() == before(text, PAGE_AT)
    assert (state, why) == (
        "error", f"cannot read {log} from offset {PAGE_AT} on: Input/output error")
    assert [e["message"] for e in rec.of("error")] == [why]



def started(tmp_path: Path, mode: str, start: str) -> tuple[CheckpointStore, int, int]:
    """`app.log` of 140 lines, and where a runner starting now reads it from (offset, line):
    its start (`fromStart`, no checkpoint), or where a first run that read its first 40 lines
    left its checkpoint (the other 100 came while it was stopped)."""
    log, store = tmp_path / "app.log", CheckpointStore(tmp_path / "state")
    if start == "from-start":
        log.write_text(numbered_lines(1, 140))
        return store, 0, 1
    log.write_text(numbered_lines(1, 40))

    async def first() -> None:
        async with Tail(log, notifier_for(mode), store, from_start=True) as t:
            await t.lines(40)

    asyncio.run(first())
    read_to = log.stat().st_size
    append(log, numbered_lines(41, 100).rstrip("\n"))
    return store, read_to, 41


async def rotated_by_rename(t: Tail, log: Path, rotated: Path) -> None:
    """Once the watcher is in `error`: `log` renamed to `rotated`, a new `log` made and written
    to; its line is read."""
    await t.until(lambda: t.source.state == "error", "the error")
    log.rename(rotated)
    log.write_text("new ERROR 1\n")
    await t.until(lambda: "new ERROR 1" in t.rec.texts(), "the new file's line")


@pytest.mark.parametrize("start", ["from-start", "from-checkpoint"])
@pytest.mark.parametrize("mode", MODES)
def test_a_file_that_does_not_read_renamed_away_leaves_the_new_file_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, start: str) -> None:
    """The runner starts and its first read of the file fails (a bad block past its first
    bytes, in the page where reading starts); logrotate renames the file and the app makes a
    new one. The new file's lines are recorded; the old one is the watcher's error while it is
    held, then released with a gap from where it could not be read."""
    log, rotated = tmp_path / "app.log", tmp_path / "app.log.1"
    store, read_to, line_no = started(tmp_path, mode, start)
    size, inode = log.stat().st_size, log.stat().st_ino
    BadBlock(monkeypatch, log, read_to + 2000)  # (not the first bytes, nor those before the
    # checkpoint's offset: they tell the file is the one checkpointed)
    states: list[str] = []

    async def body() -> Recorder:
        async with Tail(log, notifier_for(mode), store, from_start=True,
                        limits=Limits(rotate_wait_ms=1000)) as t:
            await rotated_by_rename(t, log, rotated)
            append(log, "new ERROR 2")
            await t.until(lambda: "new ERROR 2" in t.rec.texts(), "its next line")
            states.append(t.source.state)
            await t.until(lambda: bool(t.rec.of("gap")), "the release of the old one")
            await t.until(lambda: t.source.state == "running", "running")
            assert open_fds_to(rotated) == []
            append(log, "new ERROR 3")
            await t.until(lambda: "new ERROR 3" in t.rec.texts(), "a line after the release")
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == ["new ERROR 1", "new ERROR 2", "new ERROR 3"]
    assert states == ["error"]  # (while the old one was held, the new one was read)
    (rotate,) = rec.of("rotate")
    assert (rotate["reason"], rotate["oldInode"]) == ("rename", inode), rotate
    assert [e["message"] for e in rec.of("error")] == [
        f"cannot read {log} from offset {read_to} on: Input/output error",
        f"cannot read {rotated} (inode {inode}, rotated away from {log}): Input/output error; "
        f"{log} is read on, and this one is released once it has not been read for "
        "limits.rotateWait"]
    (gap,) = rec.of("gap")
    assert (gap["reason"], gap["path"], gap["inode"], gap["offset"], gap["lineNo"],
            gap["unreadBytes"]) == ("missing", str(rotated), inode, read_to, line_no,
                                    size - read_to), gap
    assert "(Input/output error: rotated away, its reads failed until it was released)" \
        in gap["message"]


@pytest.mark.parametrize("start", ["from-start", "from-checkpoint"])
@pytest.mark.parametrize("mode", MODES)
def test_a_file_whose_first_bytes_do_not_read_renamed_away_leaves_the_new_file_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, start: str) -> None:
    """The bad block holds the file's first bytes, which tell it from another: the start
    holds nothing open (`start` with no inode, its `error`). After the rename the new file is
    followed; from a checkpoint the renamed one, found by its inode and not read, is said as a
    generation that cannot be read, with the lines from its checkpoint on (looked for again at
    every start, as one the runner may not open is)."""
    log, rotated = tmp_path / "app.log", tmp_path / "app.log.1"
    store, read_to, line_no = started(tmp_path, mode, start)
    size, inode = log.stat().st_size, log.stat().st_ino
    BadBlock(monkeypatch, log, 100)

    async def body() -> Recorder:
        async with Tail(log, notifier_for(mode), store, from_start=True) as t:
            await rotated_by_rename(t, log, rotated)
            await t.until(lambda: t.source.state == "running", "running")
            append(log, "new ERROR 2")
            await t.until(lambda: "new ERROR 2" in t.rec.texts(), "its next line")
            assert open_fds_to(rotated) == []
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == ["new ERROR 1", "new ERROR 2"]
    assert rec.of("start")[0]["inode"] is None
    assert not rec.of("gap")
    errors = rec.of("error")
    assert errors[0]["message"] == f"cannot read {log}: Input/output error"
    if start == "from-start":  # (said at the start: a file that took the path is a new one)
        assert len(errors) == 1 and not rec.of("rotate")
        return
    assert errors[1:] == [{
        "code": "EIO", "path": str(rotated), "inode": inode, "offset": read_to,
        "lineNo": line_no, "unread": True, "unreadBytes": size - read_to,
        "message": f"cannot read {rotated} (a generation of {log}, inode {inode}, rotated "
                   f"away): Input/output error; its lines from line {line_no} (offset "
                   f"{read_to}) on were not read ({size - read_to} bytes known)"}]
    (rotate,) = rec.of("rotate")
    assert rotate["oldInode"] == inode


def test_the_line_a_bad_block_cuts_is_no_line_when_its_file_is_released(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines before the bad block are read; the one it cuts was recorded, once the file
    was renamed away and released, as a line of the bytes before the block (its rest is
    there, unread), and the gap began after it. Now that line is none: the gap begins with it."""
    log, rotated = tmp_path / "app.log", tmp_path / "app.log.1"
    text = numbered_lines(1, 4000)
    log.write_text(text)
    size, inode = log.stat().st_size, log.stat().st_ino
    BadBlock(monkeypatch, log, BAD_AT)
    read = before(text, PAGE_AT)
    cut_at = sum(len(line) + 1 for line in read)

    async def body() -> Recorder:
        async with Tail(log, notifier_for("inotify"), CheckpointStore(tmp_path / "state"),
                        from_start=True, limits=Limits(rotate_wait_ms=300)) as t:
            await rotated_by_rename(t, log, rotated)
            await t.until(lambda: bool(t.rec.of("gap")), "the release of the old one")
            append(log, "new ERROR 2")
            await t.until(lambda: "new ERROR 2" in t.rec.texts(), "its next line")
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == [*read, "new ERROR 1", "new ERROR 2"]
    (gap,) = rec.of("gap")
    assert (gap["inode"], gap["offset"], gap["lineNo"], gap["unreadBytes"]) == (
        inode, cut_at, len(read) + 1, size - cut_at), gap
