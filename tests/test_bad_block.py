"""A followed file with a bad block: on btrfs a data block whose checksum fails makes every read
that covers it fail with EIO (the explorer's real-file-system runs, explore-fs F1 and F4), and
so does a failing disk under any file system.

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
from filehelpers import MODES, Recorder, Tail, notifier_for

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
