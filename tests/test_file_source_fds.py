"""Out of descriptors (a real RLIMIT_NOFILE, lowered in this process) while a rotation needs
rotated generations opened: an `error` record says so, the source looks again, and once
descriptors are available every generation is read, once, with no gap: no silent loss."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest
from filehelpers import MODES, Tail, append, notifier_for, run

from watchrun.sources.checkpoints import CheckpointStore


@pytest.fixture
def nofile() -> Iterator[tuple[int, int]]:
    """The soft and hard RLIMIT_NOFILE, restored after the test whatever it lowered."""
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield limits
    resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def in_use() -> int:
    """Descriptors open in this process (the listing's own one not counted)."""
    return len(os.listdir("/proc/self/fd")) - 1


@pytest.mark.parametrize("mode", MODES)
def test_rotated_generations_are_read_once_descriptors_are_back(
        tmp_path: Path, mode: str, nofile: tuple[int, int]) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with Tail(log, notifier_for(mode), CheckpointStore(tmp_path / "state")) as t:
            append(log, "a1")
            await t.lines(1)
            # two rotations, all between two looks of the source (it runs on this loop, which
            # this code does not yield to): `app.log.1` is the file followed, `app.log.2` a
            # generation never opened, and a new `app.log`
            append(log, "a2")
            os.rename(log, tmp_path / "app.log.1")
            append(log, "m1", "m2")
            os.rename(log, tmp_path / "app.log.2")
            append(log, "b1")
            resource.setrlimit(resource.RLIMIT_NOFILE, (in_use(), nofile[1]))
            await t.until(lambda: any(e["code"] == "EMFILE" for e in t.rec.of("error")),
                          "an EMFILE error record")
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
            assert await t.lines(5) == ["a1", "a2", "m1", "m2", "b1"]
            assert t.rec.of("gap") == []
            assert [r["reason"] for r in t.rec.of("rotate")] == ["rename", "rename"]
            append(log, "b2")
            assert await t.lines(6) == ["a1", "a2", "m1", "m2", "b1", "b2"]

    run(body())
