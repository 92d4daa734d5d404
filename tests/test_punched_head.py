"""A hole punched in the head of a followed log (`fallocate --punch-hole -o 0 -l N`, to free a
log's space under a writer that keeps it open): the size and every byte past the hole stay as
they were, the first bytes read as NUL. It was taken for a truncation and everything past the
hole read again (637 duplicate match records on XFS and btrfs, explore-fs F5, 2026-12-08). Now
a head that changed only to NUL bytes, the bytes before the read position unchanged, is the same
file read on, live and at a restart; a truncation whose writer goes on at its old offset (a
hole of NULs up to new bytes: copytruncate without O_APPEND) is still one."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest
from filehelpers import MODES, Tail, append, notifier_for, run

from watchrun.sources.checkpoints import CheckpointStore

FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
OLD = [f"old line {n:05d} {'.' * 40}" for n in range(2000)]  # ~110 KB: past a 64 KiB hole
NEW = [f"new line {n:03d}" for n in range(200)]

pytestmark = pytest.mark.parametrize("mode", MODES)


def punch(path: Path, length: int) -> None:
    """fallocate(2) FALLOC_FL_PUNCH_HOLE over `path`'s first `length` bytes (the size kept)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    fd = os.open(path, os.O_WRONLY)
    try:
        if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 0, length) != 0:
            pytest.skip(f"no hole punching here: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
    with path.open("rb") as f:
        assert f.read(length) == b"\0" * length  # (the premise)


def test_a_hole_punched_in_the_head_of_a_followed_log_reads_nothing_again(
        tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), CheckpointStore(tmp_path / "state")) as t:
            append(log, *OLD)
            assert await t.lines(len(OLD)) == OLD
            size = log.stat().st_size
            punch(log, 65536)
            assert log.stat().st_size == size
            append(log, *NEW)
            assert await t.lines(len(OLD) + len(NEW)) == OLD + NEW
            assert t.rec.of("rotate") == [] and t.rec.of("gap") == []

    run(body())


def test_a_hole_punched_while_the_runner_was_stopped_reads_nothing_again(
        tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("\n".join(OLD) + "\n")
    store = CheckpointStore(tmp_path / "state")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store, from_start=True) as t:
            assert await t.lines(len(OLD)) == OLD
        punch(log, 65536)
        append(log, *NEW)
        async with Tail(log, notifier_for(mode), store) as t:
            assert await t.lines(len(NEW)) == NEW
            assert t.rec.of("rotate") == [] and t.rec.of("gap") == []

    run(body())


def test_a_truncation_whose_writer_goes_on_at_its_old_offset_is_still_one(
        tmp_path: Path, mode: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), CheckpointStore(tmp_path / "state")) as t:
            fd = os.open(log, os.O_WRONLY)  # (a writer without O_APPEND)
            try:
                os.write(fd, ("\n".join(OLD) + "\n").encode())
                assert await t.lines(len(OLD)) == OLD
                os.truncate(log, 0)  # (copytruncate's truncation; the copy is not kept)
                os.write(fd, ("\n".join(NEW) + "\n").encode())  # at its old offset
            finally:
                os.close(fd)
            await t.until(lambda: len(t.rec.of("rotate")) == 1, "the truncation said")
            assert t.rec.of("rotate")[0]["reason"] == "truncate"

    run(body())
