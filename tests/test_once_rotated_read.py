"""`run --once` and a log rotated while it reads it: the file that took the path (a rename and
a new file, a symlink swapped) is read too, after a `rotate` record, as the live tailer does."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from filehelpers import LIMITS, Recorder, Tail
from msgspec.structs import replace

from watchrun.events import Chunk
from watchrun.notify import Notifier
from watchrun.sources.checkpoints import CheckpointStore


class RotatesAtFirstChunk(Recorder):
    """A recorder that rotates the log being read as its first chunk arrives."""

    def __init__(self, rotate: Callable[[], None]) -> None:
        super().__init__()
        self.rotate = rotate

    async def chunk(self, chunk: Chunk) -> None:
        if not self.chunks:
            self.rotate()
        await super().chunk(chunk)


def _read_once(path: Path, state: Path, rec: Recorder, max_generations: int = 10) -> None:
    async def main() -> None:
        async with Tail(path, Notifier(20, enabled=False), CheckpointStore(state),
                        once=True, rec=rec, read_size=64,
                        limits=replace(LIMITS, max_generations=max_generations)) as tail:
            await tail.until(lambda: tail.task is not None and tail.task.done(), "the read")

    asyncio.run(main())


def test_a_log_renamed_and_recreated_while_a_once_run_reads_it_has_its_new_file_read(
        tmp_path: Path) -> None:
    """logrotate's `create` (rename, then a new file) while the once read was in the old file:
    the new file's `ERROR after rotate` was never read, nothing said so, and the gate passed
    (exit 0). Now it is read after a `rotate{rename}` record, as the live tailer reads it."""
    log = tmp_path / "app.log"
    log.write_text("".join(f"WARN {n}\n" for n in range(100)))

    def rotate() -> None:
        log.rename(tmp_path / "app.log.1")
        log.write_text("ERROR after rotate\n")

    rec = RotatesAtFirstChunk(rotate)
    _read_once(log, tmp_path / "state", rec)
    assert rec.texts() == [*(f"WARN {n}" for n in range(100)), "ERROR after rotate"]
    (rotated,) = rec.of("rotate")
    assert rotated["reason"] == "rename" and rotated["path"] == str(log)
    assert rec.of("error") == []
    again = Recorder()  # the next run reads on from the new file's end: nothing twice
    log.write_text("ERROR after rotate\nINFO later\n")
    _read_once(log, tmp_path / "state", again)
    assert again.texts() == ["INFO later"]


def test_a_symlink_swapped_while_a_once_run_reads_it_has_its_new_target_read(
        tmp_path: Path) -> None:
    """`path: current.log`, a symlink swapped from app-1.log to app-2.log mid-read: app-2.log's
    `ERROR in 2` was never read and the gate passed. Now it is read, after a `rotate` record."""
    one, two, link = tmp_path / "app-1.log", tmp_path / "app-2.log", tmp_path / "current.log"
    one.write_text("".join(f"WARN {n}\n" for n in range(100)))
    two.write_text("ERROR in 2\n")
    link.symlink_to(one.name)

    def swap() -> None:
        tmp = tmp_path / "current.log.tmp"
        tmp.symlink_to(two.name)
        os.replace(tmp, link)

    rec = RotatesAtFirstChunk(swap)
    _read_once(link, tmp_path / "state", rec)
    assert rec.texts()[-1] == "ERROR in 2" and len(rec.texts()) == 101
    assert [r["reason"] for r in rec.of("rotate")] == ["rename"]
    assert rec.of("error") == []


class RotatesAtEveryChunk(Recorder):
    """A recorder that rotates the log (rename, new file) as each chunk arrives."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    async def chunk(self, chunk: Chunk) -> None:
        n = len(self.chunks)
        self.log.rename(self.log.with_name(f"{self.log.name}.{n + 1}"))
        self.log.write_text(f"ERROR {n + 1}\n")
        await super().chunk(chunk)


def test_a_log_rotated_more_often_than_it_follows_while_a_once_run_reads_it_is_an_error(
        tmp_path: Path) -> None:
    """Rotated at every chunk read: the once run follows `maxGenerations` rotations, then stops
    with an `error{code: rotated, unread: true}` (the verdict's ERROR), not a silent pass."""
    log = tmp_path / "app.log"
    log.write_text("ERROR 0\n")
    rec = RotatesAtEveryChunk(log)
    _read_once(log, tmp_path / "state", rec, max_generations=2)
    assert rec.texts() == ["ERROR 0", "ERROR 1", "ERROR 2"]
    (error,) = rec.of("error")
    assert error == {"code": "rotated", "path": str(log), "unread": True, "message": (
        f"{log} was rotated while it was read, more often than limits.maxGenerations=2 "
        "generations are followed: the file at its path at the end was not read")}
