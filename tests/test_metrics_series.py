"""`--metrics` against a live runner: which watchers have series and what their counters count,
as `watchrun list` and the log show them: restarts however the watcher started again, a
watcher a reload could not start, `gap` records of records given up on a full disk."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for, write_config
from test_metrics_live import Scrape, free_port

DEADLINE_S = 20.0
"""For each wait: generous for a loaded 2-core box; a passing run takes a fraction of it."""


def listed(r: LiveRunner, wid: str) -> dict[str, Any] | None:
    """The watcher's row in the live `list`, or None when it has none."""
    return next((w for w in r.control({"cmd": "list"})["watchers"] if w["id"] == wid), None)


def test_restarts_total_counts_what_list_counts(tmp_path: Path) -> None:
    """An explorer's F2: `watchrun_restarts_total` counted only the restart policy's restarts,
    while `list`'s restarts (and the docs, which say the two count the same) also counts
    `watchrun restart`, a `stop` then `start`, and a reload that changed the watcher: the same
    watcher read 3 in `list` and 0 on /metrics."""
    conf: dict[str, Any] = {"watchers": [
        {"id": "fl", "command": "echo up; exec sleep 600", "pattern": "up"}]}
    port = free_port()
    r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")

    def both() -> tuple[int, float]:
        row = listed(r, "fl")
        assert row is not None
        return row["restarts"], Scrape(port)("watchrun_restarts_total", watcher="fl")

    try:
        r.wait_running()
        assert both() == (0, 0)
        assert r.control({"cmd": "restart", "id": "fl"})["ok"]
        assert both() == (1, 1)
        assert r.control({"cmd": "stop", "id": "fl"})["ok"]
        assert r.control({"cmd": "start", "id": "fl"})["ok"]
        assert both() == (2, 2)
        conf["watchers"][0]["pattern"] = "up|down"  # changed: the reload starts it again
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:", timeout=DEADLINE_S)
        assert both() == (3, 3)
        starts = [x for x in r.records("fl") if x["kind"] == "start"]
        assert len(starts) == 4  # (what was counted: each a start of the watcher again)
        wait_for(lambda: len(r.matches("fl")) == 4, "each run's `up`", DEADLINE_S)
    finally:
        assert r.stop() == 0
