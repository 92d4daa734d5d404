"""Out of descriptors (a real RLIMIT_NOFILE, lowered in this process) while a rotation needs
rotated generations opened, or the checkpoint is loaded or first saved: an `error` record says
so with the limit, the source tries again, and once descriptors are available every line is
read, once, with no gap: no silent loss, and no watcher failed for good."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filehelpers import MODES, Tail, append, notifier_for, run

from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore

LIMIT_SAID = "Too many open files (this runner may have "


@pytest.fixture
def nofile() -> Iterator[tuple[int, int]]:
    """The soft and hard RLIMIT_NOFILE, restored after the test whatever it lowered."""
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield limits
    resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def lowest_free() -> int:
    """The lowest descriptor number free in this process: a soft limit of it leaves no open
    one to spare (a count of those open does not, in a worker that closed some below others)."""
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


class Starved(CheckpointStore):
    """A store whose first call of each kind in `starve` (`load`, `save`) runs with no
    descriptor to spare: the real open in it fails with EMFILE."""

    starve: set[str]

    def load(self, watcher_id: str) -> FileState | None:
        with self._starved("load"):
            return super().load(watcher_id)

    def save(self, watcher_id: str, state: FileState, ticket: int | None = None, *,
             first: Callable[[], None] | None = None) -> bool:
        with self._starved("save"):
            return super().save(watcher_id, state, ticket, first=first)

    @contextlib.contextmanager
    def _starved(self, what: str) -> Iterator[None]:
        if what not in self.starve:
            yield
            return
        self.starve.discard(what)
        limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free(), limits[1]))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)


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
            resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free(), nofile[1]))
            await t.until(lambda: any(e["code"] == "EMFILE" for e in t.rec.of("error")),
                          "an EMFILE error record")
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
            assert await t.lines(5) == ["a1", "a2", "m1", "m2", "b1"]
            assert t.rec.of("gap") == []
            assert [r["reason"] for r in t.rec.of("rotate")] == ["rename", "rename"]
            append(log, "b2")
            assert await t.lines(6) == ["a1", "a2", "m1", "m2", "b1", "b2"]

    run(body())


def test_a_first_checkpoint_save_short_of_descriptors_is_said_and_saved_again(
        tmp_path: Path, nofile: tuple[int, int]) -> None:
    """It escaped the source: `OSError(24, …)` in the log, `error{internal}`, the watcher
    `fatal` for good (explore-limits F2). Now an `error{EMFILE}` with the limit, the file still
    followed, and the save made again a second later with no line read meanwhile."""
    log = tmp_path / "app.log"
    log.write_text("before\n")
    store = Starved(tmp_path / "state")
    store.starve = {"save"}

    async def body() -> None:
        async with Tail(log, notifier_for("inotify"), store) as t:
            await t.until(lambda: bool(t.rec.of("error")), "an error record")
            (error,) = t.rec.of("error")
            assert error["code"] == "EMFILE"
            assert error["message"].startswith(
                f"cannot save checkpoint: {store.path('w')}: {LIMIT_SAID}"), error
            await t.until(store.path("w").exists, "the checkpoint saved again")
            append(log, "ERROR after")
            assert await t.lines(1) == ["ERROR after"]
            assert len(t.rec.of("error")) == 1

    run(body())


def test_a_checkpoint_unread_for_want_of_descriptors_is_loaded_again_not_taken_for_lost(
        tmp_path: Path, nofile: tuple[int, int]) -> None:
    """The store's load failing with EMFILE was "where the last run ended is lost": the
    watcher started at the end, skipping what came since the last run, and saved over the
    checkpoint. Now it says why it waits, loads it again, and reads on from it."""
    log = tmp_path / "app.log"
    log.write_text("")

    async def first() -> None:
        async with Tail(log, notifier_for("inotify"), CheckpointStore(tmp_path / "state")) as t:
            append(log, "a1")
            assert await t.lines(1) == ["a1"]

    run(first())
    append(log, "b1")  # while no runner ran
    store = Starved(tmp_path / "state")
    store.starve = {"load"}

    async def second() -> None:
        async with Tail(log, notifier_for("inotify"), store) as t:
            assert await t.lines(1) == ["b1"]
            (error,) = t.rec.of("error")
            assert error["code"] == "EMFILE"
            assert error["message"].startswith(
                f"cannot read checkpoint {store.path('w')}: {LIMIT_SAID}"), error

    run(second())
