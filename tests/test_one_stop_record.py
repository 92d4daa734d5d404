"""A watcher's stream has one `stop` record per start: a command watcher that gave up at its
start limit wrote its own `stop{start-limit}`, and neither the shutdown nor a `watchrun start`
of it writes a second one (records.md: `stop` is "the watcher stopped")."""

from __future__ import annotations

import itertools
import signal
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config


def _limited(tmp_path: Path) -> LiveRunner:
    config = write_config(tmp_path, {"watchers": [{
        "id": "c", "command": "echo hi; exit 1", "pattern": "hi", "restart": "always",
        "restartDelay": 0}]})  # fmt: skip
    runner = LiveRunner(config)
    wait_for(lambda: any(r.get("reason") == "start-limit" for r in runner.records("c")),
             "the start limit")
    return runner


def _lifecycle(records: list[dict[str, Any]]) -> list[str]:
    return [f"{r['kind']}:{r.get('reason', '')}" for r in records
            if r["kind"] in ("start", "stop")]


def test_the_shutdown_writes_no_second_stop_after_the_start_limit(tmp_path: Path) -> None:
    runner = _limited(tmp_path)
    assert runner.stop(signal.SIGTERM) == 0
    assert _lifecycle(runner.records("c")) == ["start:"] * 5 + ["stop:start-limit"]
    assert "[c] stopped (shutdown)" not in runner.stderr()


def test_starting_it_again_writes_no_stop_between(tmp_path: Path) -> None:
    runner = _limited(tmp_path)
    try:
        reply = runner.control({"cmd": "start", "id": "c"})
        assert reply["ok"] and reply["started"], reply
        wait_for(lambda: len(_lifecycle(runner.records("c"))) >= 7, "the new start")
        assert _lifecycle(runner.records("c"))[5:7] == ["stop:start-limit", "start:"]
    finally:
        runner.stop()
    # and the new start ends in a stop of its own: the one at the start limit, or the shutdown's
    lifecycle = _lifecycle(runner.records("c"))
    assert lifecycle[-1] in ("stop:start-limit", "stop:shutdown"), lifecycle
    assert all(not (a.startswith("stop") and b.startswith("stop"))
               for a, b in itertools.pairwise(lifecycle)), lifecycle


@pytest.mark.parametrize("cmd", ["start", "restart"])
def test_a_manual_start_begins_a_new_count_of_starts(tmp_path: Path, cmd: str) -> None:
    """docs/config.md (`restart`): `watchrun start` (or `restart`) after the start limit is a
    person's choice, and begins a new count: five more starts, then the limit again (explorer
    cmd item 2 asked which it was)."""
    runner = _limited(tmp_path)
    try:
        reply = runner.control({"cmd": cmd, "id": "c"})
        assert reply["ok"] and reply["started"], reply
        wait_for(lambda: _lifecycle(runner.records("c")).count("stop:start-limit") == 2,
                 "the start limit again")
        assert _lifecycle(runner.records("c")) == (["start:"] * 5 + ["stop:start-limit"]) * 2
    finally:
        runner.stop()
