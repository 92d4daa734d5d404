"""The `watch` tool's `stop` on a live runner stops only a watcher its session added, as its
`clear` and its end do (`mine`, docs/control.md): it stopped any watcher of the runner by id, a
service's config watcher and one an operator added included (the config's then stayed stopped
through reloads until a person started it). Another's is now not stopped, and the call is a
tool error that says why and names `watchrun stop ID`. On the session's own runner nothing
changed.

The sessions are served in this process (mcpclient.mcp_inproc: the SDK's client over two
pipes); the runner and the operator's `add` are processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from inproc import inproc
from liverunner import LiveRunner, cli, write_config
from mcpclient import mcp_inproc


def listed(config: Path) -> dict[str, str]:
    p = inproc(config.parent, "list", "-c", str(config), "--json")
    assert p.returncode == 0, p.stderr
    return {w["id"]: w["status"] for w in json.loads(p.stdout)["watchers"]}


def operator_adds(config: Path, wid: str) -> None:
    """`watchrun add WID -c CONFIG` (a process of its own), which must succeed."""
    done = cli("add", wid, "--path", "app.log", "--pattern", "WARN", "-c", config, timeout=60,
               cwd=config.parent)
    assert done.returncode == 0, done.stderr


def not_mine(wid: str) -> str:
    return (f"watch stop: {wid} is not a watcher this session added, so it was not stopped: on "
            "a live runner the tool stops only its session's own watchers, never the runner's "
            "(its config's, or one a person or another session added); a person stops it with "
            f"`watchrun stop {wid}`")


def stops(runner: LiveRunner, wid: str) -> list[Any]:
    return [r["reason"] for r in runner.records(wid) if r["kind"] == "stop"]


def test_a_stop_on_a_live_runner_leaves_the_runners_own_watchers_running(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "path": "app.log", "pattern": "ERROR"}]})
    (tmp_path / "app.log").write_text("")
    runner = LiveRunner(config)
    try:
        runner.wait_running()
        operator_adds(config, "op")

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                await c.ok(action="add", path="app.log", pattern="FATAL", id="mine")
                assert await c.error(action="stop", id="cfg") == not_mine("cfg")
                assert await c.error(action="stop", id="op") == not_mine("op")
                assert listed(config) == {"cfg": "running", "op": "running", "mine": "running"}
                stopped = await c.ok(action="stop", id="mine")  # its own, as before
                assert (stopped["stopped"], stopped["watch"]["status"]) == (True, "stopped")
                again = await c.ok(action="stop", id="mine")  # not running: no error
                assert again["stopped"] is False
                unknown = await c.error(action="stop", id="nosuch")
                assert unknown.startswith("watch stop: no watcher 'nosuch' (known: "), unknown
        anyio.run(body)
        assert listed(config) == {"cfg": "running", "op": "running", "mine": "stopped"}
        assert (stops(runner, "cfg"), stops(runner, "op"), stops(runner, "mine")) == (
            [], [], ["requested"])
    finally:
        assert runner.stop() == 0


def test_on_the_sessions_own_runner_a_stop_stops_any_of_its_watchers(tmp_path: Path) -> None:
    """No runner live: the session runs its own, and a watcher an operator adds to it (through
    its control socket) is stopped by the tool as before."""
    config = write_config(tmp_path, {"watchers": []})
    (tmp_path / "app.log").write_text("")

    async def body() -> None:
        async with mcp_inproc(tmp_path, "-c", str(config)) as c:
            added = await c.ok(action="add", path="app.log", pattern="FATAL")
            assert added["runner"] == "session"
            await anyio.to_thread.run_sync(operator_adds, config, "op")
            stopped = await c.ok(action="stop", id="op")
            assert (stopped["runner"], stopped["stopped"]) == ("session", True)
            assert {w["id"]: w["status"] for w in (await c.ok(action="list"))["watches"]} == {
                "w1": "running", "op": "stopped"}
    anyio.run(body)
