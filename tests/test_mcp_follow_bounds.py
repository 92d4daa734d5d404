"""What a `watchrun mcp` session's subscriptions cost is bounded: a subscription to a watcher the
session then clears ended with it (it kept a follower and the JSONL's descriptor for the whole
session, and after about a descriptor limit's worth of add, subscribe and clear every `add` failed
EMFILE); one to a watcher that is not there is refused `-32002` (it cost a follower for
nothing); and at most MAX_FOLLOWED URIs are followed at once, more refused with an error that
says how to go on. A real `watchrun mcp` process, driven by the SDK's own client, its
descriptors counted in /proc."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcpclient import Client, mcp_session, until

from watchrun.mcp.resources import MAX_FOLLOWED, uri_of

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
CYCLES = 15


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def holding(pid: int, name: str) -> int:
    """The descriptors of `pid` open on a file called `name` (a watcher's JSONL)."""
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # (closed meanwhile)
            held += os.readlink(f"/proc/{pid}/fd/{fd}").endswith(f"/{name}")
    return held


async def fds_at_most(c: Client, limit: int, what: str) -> None:
    """Until the server holds at most `limit` descriptors (one a call opened for a moment, a
    child's pipe, is closed by then)."""
    pid = c.pid
    assert pid is not None

    async def few() -> bool:
        return fds(pid) <= limit
    try:
        await until(few, what, timeout=10)
    except AssertionError:
        raise AssertionError(f"{what}: the server holds {fds(pid)} descriptors, "
                             f"{limit} before") from None


async def cycle(c: Client, log: Path, wid: str) -> None:
    """What the tool's description asks of a model: add, read what it told of, stop, clear
    (never unsubscribing, as clients do not)."""
    await c.ok(action="add", path=str(log), pattern="ERROR", id=wid)
    uri = uri_of(wid)
    await c.session.subscribe_resource(uri)
    told_before = c.updated(uri)
    with log.open("a") as f:
        f.write(f"ERROR in {wid}\n")

    async def told() -> bool:
        return c.updated(uri) > told_before
    await until(told, f"resources/updated for {uri}")
    assert (await c.ok(action="matches", id=wid, lines=1))["matches"] == f"ERROR in {wid}"
    await c.ok(action="stop", id=wid)
    assert (await c.ok(action="clear"))["cleared"] == 1


def test_a_cleared_watchers_subscription_ends_with_it(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            assert c.pid is not None
            for i in range(3):  # (the session's runner, its pools and caches, started)
                await cycle(c, log, f"warm{i}")
            before = fds(c.pid)
            for i in range(CYCLES):
                await cycle(c, log, f"x{i}")
            await fds_at_most(c, before, f"{CYCLES} watchers added, subscribed and cleared")
            # the cleared one's resource is gone from the list, and its records still read
            assert (await c.session.list_resources()).resources == []
            kept = (await c.session.read_resource(uri_of("x0"))).contents[0]
            assert isinstance(kept, types.TextResourceContents)
            assert json.loads(kept.text)["matches"] == "ERROR in x0"
            # a new watcher under a cleared id is a new watcher: subscribed anew, it is told
            await cycle(c, log, "x0")
    anyio.run(body)


def test_a_subscription_to_a_watcher_that_is_not_there_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            assert c.pid is not None
            await c.ok(action="add", path=str(log), pattern="ERROR", id="gone")
            await c.ok(action="clear", all=True)
            await c.ok(action="add", path=str(log), pattern="ERROR", id="here")
            before = fds(c.pid)
            for i in range(30):
                with pytest.raises(MCPError) as nosuch:
                    await c.session.subscribe_resource(uri_of(f"nosuch{i}"))
                assert nosuch.value.code == -32002
                assert nosuch.value.data == {"uri": uri_of(f"nosuch{i}")}
            assert nosuch.value.message == (
                f"cannot subscribe to {uri_of('nosuch29')}: no watcher 'nosuch29' (known: "
                "here; cleared, their records kept for `matches` and `logs`: gone)")
            with pytest.raises(MCPError) as cleared:
                await c.session.subscribe_resource(uri_of("gone"))
            assert cleared.value.message.endswith(
                "gone was cleared; its records are kept, and `matches` and `logs` still read "
                "them"), cleared.value.message
            await fds_at_most(c, before, "31 subscriptions refused")
            await c.session.subscribe_resource(uri_of("here"))  # one that is there: followed
            with log.open("a") as f:
                f.write("ERROR here\n")
            await until(lambda: _now(c.updated(uri_of("here")) > 0), "an update of `here`")
    anyio.run(body)


def test_at_most_max_followed_uris_are_followed_at_once(tmp_path: Path) -> None:
    """Each `?since=` cursor of one watcher is a URI of its own, followed by a follower of its
    own (a descriptor each): they are what the cap counts."""
    log = tmp_path / "app.log"
    log.write_text("")

    def uri(i: int) -> str:
        return f"{uri_of('w1')}?since=w1:{i:016x}"

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            assert c.pid is not None
            await c.ok(action="add", path=str(log), pattern="ERROR")
            before = fds(c.pid)
            for i in range(MAX_FOLLOWED):
                await c.session.subscribe_resource(uri(i))
            await c.session.subscribe_resource(uri(0))  # (followed already: no new one)
            with pytest.raises(MCPError) as full:
                await c.session.subscribe_resource(uri(MAX_FOLLOWED))
            assert full.value.message == (
                f"this session follows {MAX_FOLLOWED} resources, and follows at most "
                f"{MAX_FOLLOWED} at once (each holds a watcher's JSONL open): unsubscribe from "
                "one first (`resources/unsubscribe`)")
            # (What the cap counts: followers, each holding w1.jsonl open, beside the runner's
            # writer. All descriptors against a count taken after the `add` were one too many
            # in loaded runs, for good: the watcher opened one of its own after the count.)
            assert holding(c.pid, "w1.jsonl") <= MAX_FOLLOWED + 1
            await c.session.unsubscribe_resource(uri(0))
            await c.session.subscribe_resource(uri(MAX_FOLLOWED))
            await c.ok(action="stop", id="w1")
            await c.ok(action="clear")  # all of w1's end with it
            await fds_at_most(c, before, "w1 cleared: every follower of its URIs ended")
    anyio.run(body)


async def _now(value: object) -> object:
    return value
