"""`watchrun top` and `watchrun mcp` wait for a change's answer as the CLI does
(`runtime.client.wait_s`: twice the config's `limits.stopTimeout` plus a margin), not a flat
75 s: with stopTimeout 60 s a stop behind another was reported failed while the runner was still
carrying it out, and with a short one a runner that stopped answering held the screen's stop and
the agent's call 75 s.

The waits are lowered here (ANSWER_S and CHANGE_MARGIN_S) against a stopTimeout of 0.5 s and a
runner stopped by SIGSTOP, so a change gives up after 1.5 s: `top` (its command, in this
process, on Textual's headless pilot) and the MCP session (in this process, the SDK's client)
give up then, by the config they read. Without a config, as for the longest stopTimeout."""

from __future__ import annotations

import argparse
import asyncio
import io
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from liverunner import LiveRunner, write_config
from mcpclient import mcp_inproc
from test_top import ids, notice, question, status, until
from textual.pilot import Pilot

from watchrun.cli.top import cmd_top
from watchrun.mcp import runners
from watchrun.runtime import client
from watchrun.tui.app import TopApp

STOP_S = 0.5
WAIT_S = 2 * STOP_S + 0.5
"""A change's wait with the lowered margin (0.5 s) and ANSWER_S (0.5 s)."""


@pytest.fixture
def lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "ANSWER_S", 0.5)
    monkeypatch.setattr(client, "CHANGE_MARGIN_S", 0.5)


def runner_of(folder: Path) -> LiveRunner:
    (folder / "app.log").write_text("")
    r = LiveRunner(write_config(folder, {"limits": {"stopTimeout": f"{STOP_S:g}s"}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]}))
    r.wait_running()
    return r


class Terminal(io.StringIO):
    """What `top` checks stdin and stdout for; the screen itself is Textual's headless one."""

    def isatty(self) -> bool:
        return True


def run_top(monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace,
            body: Callable[[TopApp, Pilot[None]], Awaitable[None]]) -> int:
    """`cmd_top(args)` with its screen driven by `body` (Textual's pilot) instead of a user."""
    def run(app: TopApp) -> None:
        async def main() -> None:
            async with app.run_test(size=(300, 30)) as pilot:  # (the notice on one line)
                await body(app, pilot)
        asyncio.run(main())

    monkeypatch.setattr(TopApp, "run", run)
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setenv("TERM", "xterm-256color")
    return cmd_top(args)


@pytest.mark.usefixtures("lowered")
def test_tops_stop_waits_as_long_as_the_configs_stop_timeout_asks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = runner_of(tmp_path)
    took: list[float] = []

    async def body(app: TopApp, pilot: Pilot[None]) -> None:
        await until(pilot, lambda: ids(app) == ["app"] and status(app, "app") == "running"
                    and app.live, "the row of app")
        await pilot.press("x")
        await until(pilot, lambda: question(app) == "Stop watcher app? [y/N]", "the confirm")
        r.send(signal.SIGSTOP)
        began = time.monotonic()
        await pilot.press("y")
        await until(pilot, lambda: "timed out" in notice(app), "the stop to give up")
        took.append(time.monotonic() - began)
        assert notice(app) == (f"timed out (on {r.out}/control.sock); is `watchrun run` "
                               "running with this output dir?")
        r.send(signal.SIGCONT)  # (the screen's poll under way answered: it ends at once)
        await pilot.press("q")

    try:
        assert run_top(monkeypatch, argparse.Namespace(config=[r.config], output_dir=None),
                       body) == 0
    finally:
        r.send(signal.SIGCONT)
        assert r.stop() == 0
    assert WAIT_S <= took[0] < WAIT_S + 10  # (not the flat 75 s)


@pytest.mark.usefixtures("lowered")
def test_an_mcp_stop_waits_as_long_as_the_configs_stop_timeout_asks(tmp_path: Path) -> None:
    r = runner_of(tmp_path)

    async def body() -> None:
        async with mcp_inproc(tmp_path, "-c", str(r.config)) as c:
            assert (await c.ok(action="add", id="mine", path="app.log",
                               pattern="WARN"))["runner"] == "live"
            r.send(signal.SIGSTOP)
            try:
                began = time.monotonic()
                with anyio.fail_after(WAIT_S + 10):  # (not the flat 75 s)
                    err = await c.error(action="stop", id="mine")
                assert time.monotonic() - began >= WAIT_S
            finally:
                r.send(signal.SIGCONT)
            sock = r.out / "control.sock"
            assert err == (f"watch stop: the runner on {sock} did not answer: timed out (on "
                           f"{sock}); it may still be carried out (`list` shows it once the "
                           "runner answers)")
    try:
        anyio.run(body)
    finally:
        assert r.stop() == 0


def test_without_a_config_mcp_waits_as_for_the_longest_stop_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`watchrun mcp --output-dir DIR` knows no stopTimeout (its defaults are not the live
    runner's): a change waits as `watchrun stop --output-dir DIR` does, 135 s."""
    r = runner_of(tmp_path)
    waits: list[tuple[str, float]] = []

    def spy(path: Path, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        waits.append((payload["cmd"], timeout))
        return client.request(path, payload, timeout)

    monkeypatch.setattr(runners, "request", spy)

    async def body() -> None:
        async with mcp_inproc(tmp_path, "--output-dir", str(r.out)) as c:
            await c.ok(action="add", id="mine", path=str(tmp_path / "app.log"), pattern="WARN")
            assert (await c.ok(action="stop", id="mine"))["stopped"] is True
    try:
        anyio.run(body)
    finally:
        assert r.stop() == 0
    assert {w for w in waits if w[0] != "list"} == {("add", 135.0), ("stop", 135.0)}
