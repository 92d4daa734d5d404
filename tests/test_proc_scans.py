"""Children stopped together share their /proc scans (`process/scans.fresh_table`).

Found by hand: a SIGTERM to a runner of 500 command watchers (each a plain `sleep`) took 25 s
at `stopTimeout: 1s`, 200 took 6 s: every child being stopped read the whole process table
(and the environ of every process it had not seen) itself, every 50 ms, in the default thread
pool; N stops made N scans a tick of N processes each. Now one scan a tick serves them all,
and each picks its tree out of the scan's indexes. Pure (a fake scan: who shares which
scan) and real (thirty children stopped at once, the scans counted)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from watchrun.process import scans
from watchrun.process.spawn import Spawner, become_subreaper
from watchrun.process.tree import Table


class FakeScans:
    """`scan` as a test drives it: each call is numbered and waits until released."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def __call__(self) -> Table:
        self.calls += 1
        n = self.calls
        assert self.release.wait(10)
        table = Table({})
        table.owners["n"] = [n]  # (which scan this is)
        return table


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeScans:
    f = FakeScans()
    monkeypatch.setattr(scans, "scan", f)
    return f


def number(table: Table) -> int:
    return table.owners["n"][0]


def test_callers_waiting_together_share_one_scan(fake: FakeScans) -> None:
    """Forty stops a tick: the first starts a scan, the other 39 share the next one."""
    async def go() -> list[int]:
        callers = [asyncio.ensure_future(scans.fresh_table()) for _ in range(40)]
        await asyncio.sleep(0)
        fake.release.set()
        return [number(t) for t in await asyncio.gather(*callers)]

    assert asyncio.run(go()) == [1] + [2] * 39
    assert fake.calls == 2


def test_a_caller_during_a_scan_gets_the_next_one(fake: FakeScans) -> None:
    """A scan that started before the call may have missed what the caller just did (a kill):
    the caller waits it out and shares the next, with everyone else who came meanwhile."""
    async def go() -> tuple[int, list[int]]:
        first = asyncio.ensure_future(scans.fresh_table())
        while fake.calls == 0:
            await asyncio.sleep(0.001)
        later = [asyncio.ensure_future(scans.fresh_table()) for _ in range(5)]
        await asyncio.sleep(0)
        fake.release.set()
        return number(await first), [number(t) for t in await asyncio.gather(*later)]

    assert asyncio.run(go()) == (1, [2] * 5)
    assert fake.calls == 2


def test_a_scan_done_before_its_callback_ran_is_not_waited_for_again() -> None:
    """A scan whose thread has finished is done a loop iteration before its callback forgets
    it: a caller in between starts the next one (it span, holding the loop, before)."""
    script = textwrap.dedent("""
        import asyncio
        from watchrun.process import scans
        from watchrun.process.tree import Table

        async def main():
            loop = asyncio.get_running_loop()
            old = loop.create_future()
            old.set_result(Table({}))
            state = scans._SCANS.setdefault(loop, scans._Scans())
            state.started, state.running = 1, (1, old)
            table = await asyncio.wait_for(scans.fresh_table(), 10)
            print(table is not old.result(), state.started)

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=30)
    assert (done.stdout.strip(), done.stderr) == ("True 2", "")


@pytest.fixture
def subreaper() -> Iterator[None]:
    assert become_subreaper(True)
    yield
    become_subreaper(False)


def test_thirty_children_stopped_together_share_their_scans(
        subreaper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = 0
    listdir = os.listdir

    def counting(path: str = ".") -> list[str]:
        nonlocal listed
        listed += path == "/proc"
        return listdir(path)

    async def go() -> list[str | None]:
        spawner = Spawner()
        procs = [await spawner.spawn(["sleep", "600"], cwd=None, env={}) for _ in range(30)]
        monkeypatch.setattr(os, "listdir", counting)
        infos = await asyncio.gather(*(p.terminate(30) for p in procs))
        monkeypatch.setattr(os, "listdir", listdir)
        for p in procs:
            p.close()
        return [i.signal for i in infos]

    assert asyncio.run(go()) == ["SIGTERM"] * 30
    assert 0 < listed < 30  # each stop scanned for itself at least twice before: 60 or more
