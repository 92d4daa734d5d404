"""`watchrun mcp`'s parts in-process, on real files, inotify and a real runner: the followers
behind resource subscriptions (every batch of new matches reaches every subscriber, a flood is
coalesced with sends at least MIN_GAP_S apart and the last batch never lost, a subscriber that
fails is dropped alone, no task outlives `close()`), and the session's runner stopped even when
the call that started it was cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from watchrun.mcp.resources import MIN_GAP_S, Followers, uri_of
from watchrun.output.runlog import RunLog

DEADLINE_S = 30.0


class Records:
    """A watcher's JSONL written as the runner writes it: one compact record per line, seq by
    seq."""

    def __init__(self, root: Path, wid: str) -> None:
        self.path = root / "watchers" / f"{wid}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.seq = 0

    def write(self, *kinds: str) -> None:
        with self.path.open("a") as f:
            for kind in kinds:
                self.seq += 1
                f.write(json.dumps({"schema": 1, "seq": self.seq, "kind": kind,
                                    "line": f"line {self.seq}"}, separators=(",", ":")) + "\n")


@contextlib.asynccontextmanager
async def running_followers(tmp_path: Path) -> AsyncIterator[Followers]:
    """Followers of tmp_path's JSONLs, running; closed and awaited after."""
    followers = Followers(tmp_path, 500, RunLog("text", quiet=True))
    runner = asyncio.ensure_future(followers.run())
    try:
        await until(lambda: followers._tg is not None, "the followers to run")
        yield followers
    finally:
        followers.close()
        await asyncio.wait_for(runner, DEADLINE_S)


async def until(cond: object, what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not cond():  # type: ignore[operator]
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_a_flood_is_coalesced_and_the_last_batch_is_sent(tmp_path: Path) -> None:
    records = Records(tmp_path, "w1")
    records.write("start")
    uri = uri_of("w1")
    sent: list[float] = []
    other: list[float] = []
    failing: list[str] = []

    async def send(u: str) -> None:
        assert u == uri
        sent.append(time.monotonic())

    async def send_other(u: str) -> None:
        other.append(time.monotonic())

    async def broken(u: str) -> None:
        failing.append(u)
        raise ConnectionError("the client went away")

    async def body() -> None:
        async with running_followers(tmp_path) as followers:
            await followers.subscribe(uri, "a", send)
            await followers.subscribe(uri, "b", send_other)
            await followers.subscribe(uri, "c", broken)

            def probed() -> bool:  # a match until one is reported: the follower is reading
                records.write("match")
                return bool(sent)
            await until(probed, "a first update")
            before = len(sent)
            records.write("stop")
            for _ in range(200):  # a flood: 200 writes of a match each
                records.write("match")
            final = time.monotonic()
            records.write("match")
            await until(lambda: sent[-1] > final, "an update after the last match")
            assert len(sent) - before < 50  # 201 matching writes, a few updates
            gaps = [b - a for a, b in itertools.pairwise(sent)]
            assert all(g >= MIN_GAP_S * 0.99 for g in gaps), gaps
            await until(lambda: len(other) == len(sent), "the other subscriber's updates")
            assert failing == [uri]  # dropped after its first failure; the others went on
            followers.unsubscribe(uri, "a")
            assert followers._tasks  # "b" still listens
            followers.unsubscribe(uri, "b")
            await until(lambda: not followers._tasks, "the follow task to end")
        assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    asyncio.run(body())



def test_a_match_recorded_as_soon_as_the_subscription_is_answered_is_told(
        tmp_path: Path) -> None:
    """The follower took its starting place in a thread after `subscribe` had returned (the
    client told it was subscribed): a match recorded in between was passed over, and its
    update never came (a 2026 client's `listen` timed out in a loaded suite)."""
    records = Records(tmp_path, "w1")
    records.write("start")
    uri, sent = uri_of("w1"), []

    async def send(u: str) -> None:
        sent.append(u)

    async def body() -> None:
        async with running_followers(tmp_path) as followers:
            await followers.subscribe(uri, "a", send)
            records.write("match")  # at once: nothing else has run on the loop
            await until(lambda: sent == [uri], "the update of that one match")

    asyncio.run(body())


def test_a_call_cancelled_while_the_sessions_runner_starts_still_stops_it(
        tmp_path: Path) -> None:
    """The client hangs up while the first `add` waits for the session's runner to start (the
    SDK cancels that call): the session's end still stops the runner, so nothing is left."""
    from watchrun.config.model import Config, Limits, OutputSpec
    from watchrun.mcp.runners import Runners

    config = Config(Limits(), OutputSpec(tmp_path / "out"))
    socket = tmp_path / "out" / "control.sock"

    async def session() -> None:
        async with asyncio.TaskGroup() as tg:
            runners = Runners(config, RunLog("text", quiet=True), tg, on_end=lambda: None)
            adding = tg.create_task(runners.for_add())
            end = time.monotonic() + DEADLINE_S
            while not socket.exists() and not adding.done():  # its first start-up step
                assert time.monotonic() < end, "the runner never began to start"
                await asyncio.sleep(0.001)
            adding.cancel()
            await asyncio.wait({adding})
            await runners.close()

    asyncio.run(asyncio.wait_for(session(), DEADLINE_S))
    assert not socket.exists()  # the runner ended and removed its socket
