"""`watchrun mcp` beside a live runner stops and clears only the watchers the session added, as
it added them: not an operator's watcher added again under an id the session's watcher had
(docs/control.md: "a new watcher"), nor a config watcher that took such an id over in a
reload. Its end used to stop, and its `clear all` to stop and forget, whatever watcher held
an id the session had once added (explore-runtime F3); a config watcher stopped so stayed
stopped through every later reload, as if a user had stopped it.

The sessions are served in this process (mcpclient.mcp_inproc); the operator's `add`s are
processes of their own."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, write_config
from mcpclient import mcp_inproc


def listed(config: Path) -> dict[str, dict[str, Any]]:
    p = inproc(config.parent, "list", "-c", str(config), "--json")
    assert p.returncode == 0, p.stderr
    return {w["id"]: w for w in json.loads(p.stdout)["watchers"]}


def operator(config: Path, *args: str) -> None:
    """`watchrun ARGS -c CONFIG` (a process of its own), which must succeed."""
    done = cli(*args, "-c", config, timeout=60, cwd=config.parent)
    assert done.returncode == 0, done.stderr


def stops(runner: LiveRunner, wid: str) -> list[str]:
    return [r["reason"] for r in runner.records(wid) if r["kind"] == "stop"]


def test_the_operators_watcher_added_again_under_the_sessions_id_outlives_the_session(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "path": "app.log", "pattern": "ERROR"}]})
    (tmp_path / "app.log").write_text("")
    runner = LiveRunner(config)
    try:
        runner.wait_running()

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                await c.ok(action="add", path="app.log", pattern="ERROR", id="api")
                await c.ok(action="add", path="app.log", pattern="ERROR", id="db")
                await c.ok(action="stop", id="api")  # the session stops and clears its api,
                assert (await c.ok(action="clear"))["cleared"] == 1
                operator(config, "stop", "db")  # the operator its db
                operator(config, "clear")
                for wid in ("api", "db"):  # then adds both again, its own now
                    operator(config, "add", wid, "--path", "app.log", "--pattern", "FATAL")
                cleared = await c.ok(action="clear", all=True)
                assert cleared["cleared"] == 0
                assert {w["id"]: w["status"] for w in cleared["watches"]} == {
                    "cfg": "running", "api": "running", "db": "running"}
        anyio.run(body)
        after = listed(config)
        assert {w: (row["status"], row["pattern"]) for w, row in after.items()} == {
            "cfg": ("running", "ERROR"), "api": ("running", "FATAL"),
            "db": ("running", "FATAL")}
        assert stops(runner, "api") == ["requested"]  # the session's own api's only
        assert stops(runner, "db") == ["requested"]  # the operator's stop of the session's db
        with (tmp_path / "app.log").open("a") as f:
            f.write("FATAL still watched\n")
        wait_for(lambda: runner.matches("api") and runner.matches("db"),
                 "the operator's api and db to match")
    finally:
        assert runner.stop() == 0


def test_a_config_watcher_that_took_the_sessions_id_over_is_left_alone(tmp_path: Path) -> None:
    """README "Live reload": a reload whose config names an id added at runtime replaces that
    watcher with the config's. The session's end stopped the config's (`stop{requested}`), and
    every later SIGHUP kept it stopped ("kept stopped by the reload")."""
    (tmp_path / "app.log").write_text("")
    (tmp_path / "z.log").write_text("")
    cfg = {"id": "cfg", "path": "app.log", "pattern": "ERROR"}
    config = write_config(tmp_path, {"watchers": [cfg]})
    runner = LiveRunner(config)

    def reloads() -> int:
        return runner.stderr().count("reloaded:")
    try:
        runner.wait_running()

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                assert (await c.ok(action="add", path="z.log", pattern="ERROR",
                                   id="zz"))["runner"] == "live"
                write_config(tmp_path, {"watchers": [
                    cfg, {"id": "zz", "path": "z.log", "pattern": "ERROR"}]})
                runner.send(signal.SIGHUP)
                await anyio.to_thread.run_sync(
                    lambda: wait_for(lambda: reloads() == 1, "the reload"))
                row = listed(config)["zz"]
                assert (row["origin"], row["status"]) == ("config", "running")
        anyio.run(body)
        assert listed(config)["zz"]["status"] == "running"
        runner.send(signal.SIGHUP)
        wait_for(lambda: reloads() == 2, "the second reload")
        assert listed(config)["zz"]["status"] == "running"
        assert "kept stopped by the reload" not in runner.stderr(), runner.stderr()
        assert "requested" not in stops(runner, "zz")
        with (tmp_path / "z.log").open("a") as f:
            f.write("ERROR the config's zz reads on\n")
        wait_for(lambda: runner.matches("zz"), "the config's zz to match")
    finally:
        assert runner.stop() == 0
