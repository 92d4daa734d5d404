"""Matches that join a waiting delivery after its `queued` record are counted in the agent's
stream within a second, so a runner that dies (SIGKILL) leaves every match accounted for: the
next runner records the delivery `dropped` (runner-restarted) with all of them."""

from __future__ import annotations

import functools
import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, read_records, wait_for, write_config


def deliveries(folder: Path) -> list[dict[str, Any]]:
    path = folder / ".watchrun" / "agents" / "ag.jsonl"
    return [r for r in read_records(path) if r["kind"] == "delivery"] if path.exists() else []


def matched(r: LiveRunner, n: int) -> bool:
    return len([x for x in r.records("app") if x["kind"] == "match"]) == n


def test_a_killed_runner_leaves_the_count_of_a_grown_delivery(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "ag"}],
        "agents": [{"name": "ag", "provider": "mock", "prompt": "{matches}"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR a1 [mock:hang]\n")  # the first turn takes it and hangs
        wait_for(lambda: any(d["deliveryState"] == "delivered" for d in deliveries(tmp_path)),
                 "the first turn")
        for i in (2, 3, 4, 5):  # one waiting delivery, grown after its `queued` record
            with log.open("a") as fh:
                fh.write(f"ERROR a{i}\n")
            wait_for(functools.partial(matched, r, i), f"match {i}")
        wait_for(lambda: [d["count"] for d in deliveries(tmp_path)
                          if d["deliveryState"] == "queued"][-1:] == [4],
                 "the waiting delivery recorded with its 4 matches (no more need come)")
        r.send(signal.SIGKILL)
        r.proc.wait(timeout=20)
    finally:
        r.close()
    again = LiveRunner(config)
    try:
        again.wait_running()
    finally:
        assert again.stop() == 0
    final = {d["deliveryId"]: d for d in deliveries(tmp_path)}
    dropped = [d for d in final.values() if d["deliveryState"] == "dropped"]
    assert [(d["count"], d["reason"]) for d in dropped] == [(4, "runner-restarted")]
    assert sum(d["count"] for d in final.values()) == 5  # every match, in one delivery or other
