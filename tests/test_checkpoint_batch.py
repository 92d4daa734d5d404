"""The checkpoint saves of many watchers go in batches (`sources/savebatch.py`): those asked for
in one turn of the loop are written by one worker-thread job that fsyncs state/ once, after its
last rename, and the keepers' periodic saves fall on ticks they share. Each save still comes
after the records it covers are durable (its `first` job, run before its file is written), and
none counts as saved before the directory's fsync: a failed one fails every save it covered."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from watchrun.sources.checkpoint_doc import Checkpoint, FileState, encode
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.keeper import Keeper
from watchrun.sources.savebatch import Ask, Outcome


def state(seq: int) -> FileState:
    return FileState((Checkpoint(1, 2, "f", 10, 1, "/var/log/app.log", 0),), seq,
                     "/var/log/app.log")


class Counted(CheckpointStore):
    """A store whose batches are counted."""

    batches: list[list[str]]

    def save_all(self, asks: Sequence[Ask]) -> list[Outcome]:
        self.batches.append([a.watcher_id for a in asks])
        return super().save_all(asks)


def test_saves_asked_in_one_turn_are_one_job_and_one_fsync_of_state(tmp_path: Path) -> None:
    """Ten watchers' saves in one turn: one job; each save's `first` (the fdatasync of the
    records it covers) ran before its file was there, and state/ was fsynced once, after every
    file was renamed in."""
    trail: list[tuple[str, object]] = []
    store = Counted(tmp_path, fsync_dir=lambda fd: trail.append(("fsync", sorted(
        p.name for p in tmp_path.glob("*.checkpoint.json")))))
    store.batches = []
    keepers = [Keeper(store, f"w{i}", 1.0) for i in range(10)]

    def first(wid: str) -> Callable[[], None]:
        return lambda: trail.append(("first", (wid, store.path(wid).exists())))

    async def body() -> None:
        await asyncio.gather(*(store.batch.save(Ask(k.id, state(5), None, first(k.id)))
                               for k in keepers))

    asyncio.run(body())
    assert store.batches == [[f"w{i}" for i in range(10)]]
    assert trail[:10] == [("first", (f"w{i}", False)) for i in range(10)]
    assert trail[10:] == [("fsync", sorted(f"w{i}.checkpoint.json" for i in range(10)))]
    assert store.path("w3").read_bytes() == encode(state(5))


def test_a_failed_fsync_of_state_fails_every_save_of_its_batch(tmp_path: Path) -> None:
    """The renames are not durable before the directory's fsync: when it fails, each save of
    the batch fails, naming its checkpoint, and no keeper takes its state for saved; the next
    save writes it again."""
    failing = [True]

    def fsync_dir(fd: int) -> None:
        if failing[0]:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)

    store = CheckpointStore(tmp_path, fsync_dir=fsync_dir)
    keepers = [Keeper(store, f"w{i}", 1.0) for i in range(3)]

    async def body() -> None:
        got = await asyncio.gather(*(k.save(state(7)) for k in keepers), return_exceptions=True)
        for k, exc in zip(keepers, got, strict=True):
            assert isinstance(exc, OSError) and exc.errno == errno.EIO
            assert str(store.path(k.id)) in str(exc)
            assert k.saved is None
        failing[0] = False
        await asyncio.gather(*(k.save(state(7)) for k in keepers))
        assert all(k.saved == state(7) for k in keepers)

    asyncio.run(body())


def test_one_save_failing_leaves_the_others_of_its_batch_written(tmp_path: Path) -> None:
    """A save whose records could not be made durable (its `first` raised) is not written, and
    says so; the other saves of its batch are."""
    store = CheckpointStore(tmp_path)

    def broken() -> None:
        raise OSError(errno.ENOSPC, "cannot sync w1.jsonl: No space left on device")

    async def body() -> list[bool | BaseException]:
        return await asyncio.gather(
            store.batch.save(Ask("w0", state(3), None, None)),
            store.batch.save(Ask("w1", state(3), None, broken)),
            store.batch.save(Ask("w2", state(3), None, None)), return_exceptions=True)

    got = asyncio.run(body())
    assert got[0] is True and got[2] is True
    assert isinstance(got[1], OSError) and got[1].errno == errno.ENOSPC
    assert not store.path("w1").exists() and store.path("w2").exists()


class Shifted(asyncio.SelectorEventLoop):
    """A loop whose clock the test moves forward (timers fall due when it does)."""

    ahead = 0.0

    def time(self) -> float:
        return super().time() + self.ahead


def test_keepers_that_moved_within_one_interval_save_at_the_same_tick() -> None:
    """Two keepers waiting for their next save, one half an interval after the other, wake at
    the same tick (the second before a whole interval of its own has passed), so their saves
    go in one batch."""
    interval = 1.0
    with asyncio.Runner(loop_factory=Shifted) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, Shifted)
        store = CheckpointStore(Path("/nonexistent"))

        async def body() -> None:
            now = loop.time()  # the start of an interval, plus a tenth of one
            loop.ahead += (now // interval + 1.1) * interval - now
            a = asyncio.ensure_future(store.batch.tick(interval))
            await asyncio.sleep(0)
            loop.ahead += interval / 2
            b = asyncio.ensure_future(store.batch.tick(interval))
            await asyncio.sleep(0)
            assert not a.done() and not b.done()
            loop.ahead += interval / 2  # a's interval is over, half of b's
            await asyncio.wait_for(a, 30)
            assert b.done()  # (woken in a's turn: its own interval would end half one later)

        runner.run(body())


def test_a_turn_of_many_saves_is_split_into_jobs_of_64(tmp_path: Path) -> None:
    """130 saves in one turn: three jobs (64, 64, 2), run in parallel, every save written."""
    store = Counted(tmp_path)
    store.batches = []

    async def body() -> list[bool]:
        return await asyncio.gather(*(store.batch.save(Ask(f"w{i}", state(2), None, None))
                                      for i in range(130)))

    assert asyncio.run(body()) == [True] * 130
    assert sorted(len(b) for b in store.batches) == [2, 64, 64]
