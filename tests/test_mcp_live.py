"""`watchrun mcp -c CONFIG` beside a live `watchrun run` of the same config: the tool talks to
that runner over its control socket, what it adds is a runtime watcher of the runner (seen by
`watchrun list`), and the session's end stops what the session added, nothing else.

Most of the operator's `watchrun list`/`stop` run in this process (tests/inproc.py: the same
`main`, a process's CPU spared); one of each, `add`, `start` and `run` are processes of their own.
The sessions are served in this process too (mcpclient.mcp_inproc: the SDK's client over two
pipes; the server process's own behaviour is tests/test_mcp_cli.py's): their end stops what
they added whatever process they run in."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, write_config
from mcpclient import mcp_inproc, until


def listed(config: Path, *, process: bool = False) -> dict[str, dict[str, Any]]:
    """`watchrun list -c CONFIG --json`, by id (in this process, or a process of its own)."""
    args = ("list", "-c", str(config), "--json")
    p = cli(*args, timeout=60) if process else inproc(Path.cwd(), *args)
    assert p.returncode == 0, p.stderr
    return {w["id"]: w for w in json.loads(p.stdout)["watchers"]}


def test_the_tool_drives_the_live_runner_and_the_session_end_stops_its_watchers(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "command": "exec sleep 600", "pattern": "ERROR"}]})
    app = tmp_path / "app.log"
    app.write_text("")
    runner = LiveRunner(config)
    try:
        runner.wait_running()

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                added = await c.ok(action="add", path="app.log", pattern="ERROR")
                assert added["runner"] == "live" and added["watch"]["id"] == "w1"
                assert added["watch"]["origin"] == "runtime"
                row = listed(config)["w1"]
                assert (row["origin"], row["status"], row["live"]) == ("runtime", "running", True)
                watches = (await c.ok(action="list"))["watches"]
                assert [(w["id"], w["origin"]) for w in watches] == [
                    ("cfg", "config"), ("w1", "runtime")]
                with app.open("a") as f:
                    f.write("ERROR seen by the runner\n")

                async def matched() -> bool:
                    got = await c.ok(action="matches", id="w1")
                    return bool(got["matches"] == "ERROR seen by the runner")
                await until(matched, "the runner's match, read from the output dir")
                bad = await c.error(action="add", path="app.log", pattern="(")  # the runner's
                assert "- pattern: invalid regex \"(\": missing )" in bad  # check, same words
                taken = await c.error(action="add", id="cfg", path="app.log", pattern="x")
                assert "watcher id `cfg` is in use by a config watcher" in taken
                assert set(listed(config)) == {"cfg", "w1"}  # neither refusal added one
                await c.ok(action="add", path="app.log", pattern="WARN")
                await c.ok(action="stop", id="w2")
                cleared = await c.ok(action="clear", all=True)  # the session's, not the runner's
                assert cleared["cleared"] == 2
                assert [(w["id"], w["status"]) for w in cleared["watches"]] == [
                    ("cfg", "running")]
        anyio.run(body)
        async def ending() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                assert (await c.ok(action="add", path="app.log", pattern="ERROR",
                                   id="kept"))["runner"] == "live"
        anyio.run(ending)
        after = listed(config)
        assert after["kept"]["status"] == "stopped"  # the session's watcher ended with it
        assert after["cfg"]["status"] == "running"  # the runner's own went on
        stops = [r for r in runner.records("kept") if r["kind"] == "stop"]
        assert [r["reason"] for r in stops] == ["requested"]
    finally:
        assert runner.stop() == 0


def test_clear_forgets_the_sessions_watchers_not_the_operators(tmp_path: Path) -> None:
    """helper-92's F4: the tool's `clear` sent the runner a plain `clear`, which forgot every
    stopped watcher: a config watcher the operator stopped, and a runtime one the operator
    added (whose settings were then gone: `watchrun start` could not bring it back)."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "path": "app.log", "pattern": "ERROR"},
        {"id": "once", "command": "echo ERROR once", "pattern": "ERROR", "restart": "never"}]})
    (tmp_path / "app.log").write_text("")
    runner = LiveRunner(config)

    def wr(*args: str, process: bool = True) -> None:
        done = cli(*args, "-c", config, timeout=60, cwd=tmp_path) if process \
            else inproc(tmp_path, *args, "-c", str(config))
        assert done.returncode == 0, done.stderr
    try:
        runner.wait_running()
        wr("add", "op", "--path", "app.log", "--pattern", "WARN")
        wr("stop", "op")
        wr("stop", "cfg", process=False)

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                await c.ok(action="add", path="app.log", pattern="FATAL", id="mine")
                await c.ok(action="add", path="app.log", pattern="PANIC", id="mine2")
                await c.ok(action="stop", id="mine")
                assert (await c.ok(action="clear"))["cleared"] == 1
                assert (await c.ok(action="clear", all=True))["cleared"] == 1
        anyio.run(body)
        assert {w: row["status"] for w, row in listed(config).items()} == {
            "cfg": "stopped", "op": "stopped", "once": "exited"}
        wr("start", "op")  # the operator's runtime watcher kept its settings
        assert listed(config, process=True)["op"]["status"] == "running"
    finally:
        assert runner.stop() == 0


def test_list_without_a_runner_shows_the_snapshots_left(tmp_path: Path) -> None:
    """helper-92's F5: once the live runner was gone (SIGKILL), `list` said "no watchers (no
    runner)" while `status ID` of the session's watcher still showed it stopped, with its
    matches; an agent was told it had no watchers."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "path": "app.log", "pattern": "ERROR"}]})
    (tmp_path / "app.log").write_text("")
    runner = LiveRunner(config)
    try:
        runner.wait_running()

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                await c.ok(action="add", path="app.log", pattern="WARN", id="mine")
                wait_for(lambda: (runner.out / "state" / "mine.status.json").exists(),
                         "its status snapshot")
                runner.send(signal.SIGKILL)
                runner.proc.wait(60)
                got = await c.ok(action="list")
                assert got["runner"] == "none"
                assert [(w["id"], w["status"]) for w in got["watches"]] == [
                    ("cfg", "stopped"), ("mine", "stopped")]
        anyio.run(body)
    finally:
        runner.stop()


def test_list_without_a_runner_returns_500_watchers_and_counts_the_rest(tmp_path: Path) -> None:
    """With no runner, `list` reads the output dir's snapshots, which may be thousands: the
    result holds the first 500 (as many as a runner runs) and `omitted` counts the rest."""
    state = tmp_path / ".watchrun" / "state"
    state.mkdir(parents=True)
    for i in range(600):
        snap = {"schema": 1, "id": f"w{i:03d}", "kind": "file", "source": f"/l/{i}.log",
                "label": f"/l/{i}.log", "pattern": "x", "exclude": [], "status": "stopped",
                "runnerPid": 2**22 + 1, "linesRead": 0, "matchCount": 0}
        (state / f"w{i:03d}.status.json").write_text(json.dumps(snap))

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            got = await c.ok(action="list")
            assert (got["runner"], len(got["watches"]), got["omitted"]) == ("none", 500, 100)
            assert got["watches"][-1]["id"] == "w499"
    anyio.run(body)
