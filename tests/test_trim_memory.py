"""The heap trimmer (`runtime/trim.py`): a live runner gives glibc's freed heap pages back once a
minute, in a worker thread; a real trim returns the memory freed below a chunk still in use."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from insupervisor import Running, until

from watchrun.runtime import supervisor, trim
from watchrun.runtime.trim import Trimmer


class Sleeps:
    """An injected sleep: records each interval asked and returns only when let go."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.go: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self.go.get()


def test_it_trims_once_per_interval_off_the_loop_and_ends_when_cancelled() -> None:
    async def main() -> None:
        loop_thread, threads, sleeps = threading.get_ident(), [], Sleeps()
        trimmer = Trimmer(60.0, trim=lambda: threads.append(threading.get_ident()), sleep=sleeps)
        task = asyncio.create_task(trimmer.run(), name="heap-trim")
        await until(lambda: sleeps.asked, "the first interval")
        assert threads == []  # nothing before an interval has passed
        for n in (1, 2, 3):
            sleeps.go.put_nowait(None)
            await until(lambda n=n: len(sleeps.asked) == n + 1, f"interval {n + 1}")
            assert len(threads) == n == trimmer.trims
        assert sleeps.asked == [60.0] * 4
        assert loop_thread not in threads
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(threads) == 3

    asyncio.run(main())


def test_a_trim_under_way_does_not_hold_up_the_cancel() -> None:
    async def main() -> None:
        started, release, sleeps = threading.Event(), threading.Event(), Sleeps()

        def slow_trim() -> None:
            started.set()
            release.wait(10)

        task = asyncio.create_task(Trimmer(trim=slow_trim, sleep=sleeps).run())
        await until(lambda: sleeps.asked, "the first interval")
        sleeps.go.put_nowait(None)
        await until(started.is_set, "the trim to start")
        task.cancel()
        try:
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 5)
        finally:
            release.set()

    asyncio.run(main())


def test_without_a_glibc_malloc_trim_it_ends_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trim, "glibc_trim", lambda: None)  # (musl, macOS)
    sleeps = Sleeps()

    async def main() -> Trimmer:
        trimmer = Trimmer(sleep=sleeps)
        sleeps.go.put_nowait(None)
        await asyncio.wait_for(trimmer.run(), 5)
        return trimmer

    assert asyncio.run(main()).trims == 0
    assert sleeps.asked == [trim.INTERVAL_S]


@pytest.mark.parametrize("once", [False, True])
def test_a_live_runner_trims_as_a_task_of_its_group_and_a_once_run_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, once: bool) -> None:
    made: list[Trimmer] = []

    class Recorded(Trimmer):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            made.append(self)

    monkeypatch.setattr(supervisor, "Trimmer", Recorded)
    (tmp_path / "a.log").write_text("")
    config = {"watchers": [{"id": "a", "path": "a.log", "pattern": "ERROR"}]}

    async def main() -> None:
        async with Running(tmp_path, config, once=once) as r:
            if not once:
                named = [t for t in asyncio.all_tasks() if t.get_name() == "heap-trim"]
                assert len(named) == 1 and not named[0].done()
        if not once:  # cancelled and awaited by the supervisor's TaskGroup, with the rest
            assert named[0].cancelled()
        assert r.task is not None and r.task.done()

    asyncio.run(main())
    assert len(made) == (0 if once else 1)
    if not once:
        assert made[0].interval_s == trim.INTERVAL_S == 60.0


PROBE = """
import json, os, sys
from watchrun.runtime.trim import glibc_trim
trim = glibc_trim()
if trim is None:
    print("null"); sys.exit()
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
base = rss()
big = [bytearray(1024) for _ in range(60 * 1024)]  # 60 MiB of malloc'd 1 KiB buffers
keep = bytearray(1024)  # after them, in use: the heap's top cannot shrink past it
held = rss()
del big
freed = rss()
trim()
print(json.dumps([base, held, freed, rss()]))
"""


def test_a_real_trim_gives_back_the_freed_heap_below_a_chunk_in_use() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    sizes = json.loads(out)
    if sizes is None:
        pytest.skip("no glibc malloc_trim here (musl, macOS): the trimmer does nothing")
    base, held, freed, trimmed = (n / 2**20 for n in sizes)
    assert held - base >= 50, sizes  # the buffers were resident
    assert freed - base >= 40, sizes  # free() alone gave little back: the trim has work
    assert freed - trimmed >= 20, f"the trim gave back {freed - trimmed:.1f} MiB (~60)"
