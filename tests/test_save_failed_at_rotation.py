"""A checkpoint save that fails while the followed file rotates (the output disk full: ENOSPC on
`state/<id>.checkpoint.json`, explore-fs F3) was said as `cannot read <the log>: <checkpoint
path>: No space left on device`: an error of the log, which was fine, the watcher `error` with
it as `lastError`, sending the operator to the wrong file; and the rotation's reads stopped at
it. Now it is said as the saver says it (`cannot save checkpoint: …`, once while it lasts), the
watcher stays `running`, and the rotation's lines are read on.

The store's save is the seam (it fails as the real one does on a full disk, naming the
checkpoint); the file and its rotations are real."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filehelpers import MODES, Recorder, Tail, append, notifier_for

from watchrun.config.model import Limits
from watchrun.sources.checkpoint_doc import FileState
from watchrun.sources.checkpoints import CheckpointStore


class Full(CheckpointStore):
    """A store whose output disk is full while `full` is set: each save fails there."""

    full = False

    def save(self, watcher_id: str, state: FileState, ticket: int | None = None, *,
             first: Callable[[], None] | None = None) -> bool:
        if self.full:
            raise OSError(errno.ENOSPC, f"{self.path(watcher_id)}: {os.strerror(errno.ENOSPC)}")
        return super().save(watcher_id, state, ticket, first=first)


def rotate(how: str, log: Path) -> None:
    """`log` rotated (`rename`, `copytruncate`, `recreate`: deleted and made again), the new
    content one line."""
    rotated = log.with_name("app.log.1")
    if how == "rename":
        log.rename(rotated)
    elif how == "copytruncate":
        shutil.copyfile(log, rotated)
        os.truncate(log, 0)
    else:
        log.unlink()
    with log.open("a") as f:
        f.write("new ERROR 1\n")


@pytest.mark.parametrize("how", ["rename", "copytruncate", "recreate"])
@pytest.mark.parametrize("mode", MODES)
def test_a_checkpoint_save_that_fails_at_a_rotation_is_no_read_error(
        tmp_path: Path, mode: str, how: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("old ERROR 1\n")
    store = Full(tmp_path / "state")
    states: list[str | None] = []

    async def body() -> Recorder:
        async with Tail(log, notifier_for(mode), store, from_start=True,
                        limits=Limits(rotate_wait_ms=300)) as t:
            await t.lines(1)
            await t.until(lambda: not t.source.saving and store.load("w") is not None,
                          "the first save")
            store.full = True
            rotate(how, log)
            await t.until(lambda: "new ERROR 1" in t.rec.texts(), "the new content's line")
            states.extend([t.source.state, t.source.cannot_read])
            append(log, "new ERROR 2")
            await t.until(lambda: "new ERROR 2" in t.rec.texts(), "its next line")
            store.full = False
            append(log, "new ERROR 3")
            await t.until(lambda: "new ERROR 3" in t.rec.texts(), "a line once there is room")
            inode = log.stat().st_ino

            def saved() -> bool:
                state = store.load("w")
                return state is not None and state.generations[-1].inode == inode and \
                    state.generations[-1].offset == log.stat().st_size
            await t.until(saved, "the checkpoint saved again, of the new content")
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == ["old ERROR 1", "new ERROR 1", "new ERROR 2", "new ERROR 3"]
    assert states == ["running", None]
    assert rec.of("error") == [{
        "code": "ENOSPC", "path": str(log),
        "message": f"cannot save checkpoint: {store.path('w')}: No space left on device"}]
    assert [r["reason"] for r in rec.of("rotate")] == [
        "recreate" if how == "recreate" else "truncate" if how == "copytruncate" else "rename"]
