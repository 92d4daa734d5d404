"""A watcher started while the runner runs (`add`, a reload) opens its sink in a worker thread:
an output file system that hangs (a dead NFS mount) holds up that watcher, not the loop —
`status` is answered and the other watchers record their matches meanwhile, and a SIGTERM
stops the runner. The hang is the sink factory's seam blocking on an event (a dead mount cannot
be made on demand); a fallback timer frees it, so code that opened on the loop fails the test
instead of hanging it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from filehelpers import open_fds_to
from insupervisor import Running, Sinks, load, until

import watchrun.runtime.control as control
from watchrun.config.model import Config
from watchrun.output.sink import JsonlSink

FALLBACK_S = 8.0
"""When the fallback frees a hung open: the loop was frozen if the test got that far."""


class HungSinks(Sinks):
    """Opening the sink of `hung` waits until `release` is set (or the fallback timer)."""

    def __init__(self, hung: str) -> None:
        super().__init__()
        self.hung = hung
        self.entered = threading.Event()
        self.release = threading.Event()
        self.by_timer = False
        self.on_loop = False
        self.opened_late = threading.Event()

    def __call__(self, path: Path, stream_id: str, **kw: Any) -> JsonlSink:
        if stream_id == self.hung:
            self.entered.set()
            self.on_loop = threading.current_thread() is threading.main_thread()
            if not self.release.wait(FALLBACK_S):
                self.by_timer = True
            self.release.set()
            sink = super().__call__(path, stream_id, **kw)
            self.opened_late.set()
            return sink
        return super().__call__(path, stream_id, **kw)


async def _still_served(r: Running, log: Path, sinks: HungSinks) -> None:
    """While the open hangs: `status` answered at once, the other watcher's match recorded."""
    await until(sinks.entered.is_set, "the new watcher's sink to be opening")
    started = time.monotonic()
    status = await asyncio.wait_for(r.sup.control({"cmd": "status"}), FALLBACK_S * 2)
    assert status["state"] in ("running", "reloading")
    with log.open("a") as fh:
        fh.write("ERROR while a sink hangs\n")
    await until(lambda: [x for x in r.records("app") if x["kind"] == "match"],
                "the running watcher's match", timeout=FALLBACK_S * 2)
    assert not sinks.by_timer and not sinks.on_loop, (
        "the sink was opened on the loop: nothing ran until the fallback freed it after "
        f"{FALLBACK_S:.0f}s ({time.monotonic() - started:.1f}s since)")


def _app(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "app.log").write_text("")
    (tmp_path / "new.log").write_text("")
    return {"id": "app", "path": "app.log", "pattern": "ERROR"}


def test_an_add_whose_sink_hangs_holds_up_only_itself(tmp_path: Path) -> None:
    sinks = HungSinks("new")

    async def main() -> None:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}, sinks=sinks) as r:
            adding = asyncio.ensure_future(r.sup.control({"cmd": "add", "watcher": {
                "id": "new", "path": str(tmp_path / "new.log"), "pattern": "WARN"}}))
            await _still_served(r, tmp_path / "app.log", sinks)
            assert not adding.done()
            sinks.release.set()
            reply = await asyncio.wait_for(adding, FALLBACK_S)
            assert reply["ok"], reply
            with (tmp_path / "new.log").open("a") as fh:
                fh.write("WARN once its sink opened\n")
            await until(lambda: [x for x in r.records("new") if x["kind"] == "match"],
                        "the added watcher's match")

    asyncio.run(main())


def test_a_reload_whose_new_sink_hangs_holds_up_only_that_watcher(tmp_path: Path) -> None:
    sinks = HungSinks("new")
    app = _app(tmp_path)
    nxt: list[Config] = []

    async def main() -> None:
        async with Running(tmp_path, {"watchers": [app]}, sinks=sinks,
                           reload=lambda: nxt[0]) as r:
            nxt.append(load(tmp_path, {"watchers": [
                app, {"id": "new", "path": "new.log", "pattern": "WARN"}]}))
            os.kill(os.getpid(), signal.SIGHUP)
            await _still_served(r, tmp_path / "app.log", sinks)
            assert "new" not in r.sup.watchers
            sinks.release.set()
            await until(lambda: "new" in r.sup.watchers, "the reload to start the new watcher")

    asyncio.run(main())


def test_a_sigterm_while_a_sink_hangs_stops_the_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The add came over the socket; the stop waits DRAIN_S for it, then cancels it: the
    runner stops, and the sink the hung call opens at last is closed."""
    monkeypatch.setattr(control, "DRAIN_S", 0.5)
    sinks = HungSinks("new")

    async def main() -> None:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}, sinks=sinks) as r:
            _, writer = await asyncio.open_unix_connection(str(r.layout.control_socket))
            writer.write(json.dumps({"cmd": "add", "watcher": {
                "id": "new", "path": str(tmp_path / "new.log"), "pattern": "WARN"}}).encode()
                + b"\n")
            await writer.drain()
            await until(sinks.entered.is_set, "the new watcher's sink to be opening")
            started = time.monotonic()
            await r.stop()
            assert time.monotonic() - started < FALLBACK_S / 2 and not sinks.by_timer
            assert r.sup.state.value == "stopped"
            assert [x["kind"] for x in r.records("app")][-1] == "stop"
            sinks.release.set()  # the hung call ends: its sink is closed, nothing runs
            await until(sinks.opened_late.is_set, "the hung open to end")
            await until(lambda: not open_fds_to(r.layout.jsonl("watcher", "new")),
                        "the late sink to be closed")
            assert "new" not in r.sup.watchers
            writer.close()

    asyncio.run(main())

