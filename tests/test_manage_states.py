"""docs/control.md: `add`, `start` and `restart` are refused by a runner that cannot change its
watchers now, before anything is checked or started: `busy` while it starts (retry), `refused`
while it reloads or stops, in a once run, or with `limits.enabled: false`; `stop` and `clear`
are still carried out while it stops (a real runner, last)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, wait_for, write_config

from watchrun.config.model import Config, Limits, OutputSpec
from watchrun.runtime.commands import dispatch
from watchrun.views.humanize import DISABLED


class Stub:
    """Only what the refusal reads of the supervisor: a request that went past it (to check
    the watcher, to look one up) fails on a missing attribute."""

    def __init__(self, state: str, once: bool = False, enabled: bool = True) -> None:
        self.state, self.once = state, once
        self.config = Config(Limits(enabled=enabled), OutputSpec(Path(".")))
        self.changing = asyncio.Lock()


WATCHER = {"id": "w", "command": "true", "pattern": "x"}


@pytest.mark.parametrize(("stub", "code", "said"), [
    (Stub("starting"), "busy", "the runner is starting; retry when it runs"),
    (Stub("reloading"), "refused", "the runner is reloading"),
    (Stub("stopping"), "refused", "the runner is stopping"),
    (Stub("running", once=True), "refused", "a `run --once` runner cannot"),
    (Stub("running", enabled=False), "refused", DISABLED),
])
@pytest.mark.parametrize("request_", [{"cmd": "add", "watcher": WATCHER},
                                      {"cmd": "start", "id": "w"},
                                      {"cmd": "restart", "id": "w"}])
def test_a_runner_that_cannot_change_refuses_first(stub: Stub, code: str, said: str,
                                                   request_: dict[str, Any]) -> None:
    reply = asyncio.run(dispatch(stub, request_))  # type: ignore[arg-type]
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    assert reply["error"]["message"].startswith(said), reply


def test_a_runner_that_is_stopping_refuses_add_and_start_and_still_clears(
        tmp_path: Path) -> None:
    """A real runner held in `stopping` by a command that ignores SIGTERM (its `stopTimeout`
    is a minute; a second SIGTERM ends it): `add` and `start` are refused `refused`, "the
    runner is stopping" (`watchrun add` exits 3 saying so) and nothing is added; `stop` of a
    watcher the stop ended is answered as for any stopped one, and `clear` forgets it."""
    (tmp_path / "app.log").touch()
    config = write_config(tmp_path, {"limits": {"stopTimeout": "1m"}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "stubborn", "command": "trap '' TERM; echo up; exec sleep 1000",
         "pattern": "up"}]})
    r = LiveRunner(config)
    c = ("-c", str(config))
    try:
        r.wait_running()
        wait_for(lambda: r.matches("stubborn"), "the command to run")
        r.send(signal.SIGTERM)
        r.wait_log("[app] stopped (shutdown)")  # the runner is stopping; `stubborn` holds it
        late = {"id": "late", "path": str(tmp_path / "app.log"), "pattern": "WARN"}
        for req in ({"cmd": "add", "watcher": late}, {"cmd": "start", "id": "app"}):
            reply = r.control(req)
            assert reply == {"ok": False, "error": {
                "code": "refused", "message": "the runner is stopping"}}, (req, reply)
        added = inproc(tmp_path, "add", "late", "--path", "app.log", "--pattern", "WARN", *c)
        assert (added.returncode, added.stdout, added.stderr) == (
            3, "", "watchrun: error: the runner is stopping\n"), added
        def settled() -> dict[str, Any] | None:  # (its `stop` record, logged, comes first)
            status: dict[str, Any] = r.control({"cmd": "status"})
            return status if status["stopping"] == ["stubborn"] else None
        status = wait_for(settled, "`app` ended, not stopping")
        assert (status["state"], status["watchers"]) == ("stopping", []), status
        assert not (r.out / "watchers" / "late.jsonl").exists()
        stopped = inproc(tmp_path, "stop", "app", *c)
        assert (stopped.returncode, stopped.stdout) == (
            0, "app is already stopped (it was not running)\n"), stopped
        assert (r.out / "state" / "app.status.json").exists()
        cleared = inproc(tmp_path, "clear", "--all", *c)
        assert (cleared.returncode, cleared.stdout) == (0, "cleared 1 watcher\n"), cleared
        assert [w["id"] for w in r.control({"cmd": "list"})["watchers"]] == ["stubborn"]
        assert not (r.out / "state" / "app.status.json").exists()
    finally:
        assert r.stop() == 0  # the second SIGTERM: kills what remains now
    assert "second signal: killing what remains now" in r.stderr()
    assert r.left == []
