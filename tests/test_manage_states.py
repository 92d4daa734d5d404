"""docs/control.md: `add`, `start` and `restart` are refused by a runner that cannot change its
watchers now, before anything is checked or started: `busy` while it starts (retry), `refused`
while it reloads or stops, in a once run, or with `limits.enabled: false`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from watchrun.config.model import Config, Limits, OutputSpec
from watchrun.runtime.commands import dispatch


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
    (Stub("running", enabled=False), "refused", "limits.enabled is false"),
])
@pytest.mark.parametrize("request_", [{"cmd": "add", "watcher": WATCHER},
                                      {"cmd": "start", "id": "w"},
                                      {"cmd": "restart", "id": "w"}])
def test_a_runner_that_cannot_change_refuses_first(stub: Stub, code: str, said: str,
                                                   request_: dict[str, Any]) -> None:
    reply = asyncio.run(dispatch(stub, request_))  # type: ignore[arg-type]
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    assert reply["error"]["message"].startswith(said), reply
