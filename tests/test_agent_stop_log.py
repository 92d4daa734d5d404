"""The runner's log pairs every `turn-start` with a `turn-end` also when a SIGTERM, a reload or a
restart after a SIGKILL ends the turn, and counts the wake deliveries dropped then
(`deliveries-dropped`), as their records say: a real runner, a real agent script that hangs."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config

HANGS = """\
#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s1"}'
exec sleep 1000
"""


def log_events(r: LiveRunner) -> list[dict[str, Any]]:
    return [json.loads(line) for line in r.stderr().splitlines() if line.startswith("{")]


def agent_records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "agents" / "slow.jsonl")


def config(tmp_path: Path, *agents: str) -> Path:
    return write_config(tmp_path, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                      **({"wake": "slow"} if agents else {})}],
        "agents": [{"name": a, "provider": "claude", "command": ["./hangs.sh", "{prompt}"]}
                   for a in agents]})


def busy_with_one_waiting(tmp_path: Path, r: LiveRunner) -> None:
    """A turn runs (ERROR one) and a delivery (ERROR two, three) waits behind it."""
    log = tmp_path / "app.log"
    with log.open("a") as fh:
        fh.write("ERROR one\n")
    wait_for(lambda: [x for x in agent_records(tmp_path) if x["kind"] == "dispatch-start"],
             "the turn")
    with log.open("a") as fh:
        fh.write("ERROR two\nERROR three\n")
    wait_for(lambda: [x for x in agent_records(tmp_path) if x["kind"] == "delivery"
                      and x["deliveryState"] == "queued" and x["count"] == 2], "the delivery")


@pytest.mark.parametrize(("how", "reason"), [("sigterm", "runner-stopped"),
                                             ("reload", "agent-removed"),
                                             ("sigkill", "runner-restarted")])
def test_an_aborted_turn_has_its_turn_end_and_the_dropped_matches_are_counted(
        tmp_path: Path, how: str, reason: str) -> None:
    (tmp_path / "hangs.sh").write_text(HANGS)
    (tmp_path / "hangs.sh").chmod(0o755)
    (tmp_path / "app.log").write_text("")
    r = LiveRunner(config(tmp_path, "slow"), "--log-format", "json")
    try:
        r.wait_running()
        busy_with_one_waiting(tmp_path, r)
        if how == "reload":
            config(tmp_path)  # the agent removed
            r.send(signal.SIGHUP)
            wait_for(lambda: any(x.get("status") == "disabled" for x in agent_records(tmp_path)),
                     "the agent closed")
        elif how == "sigkill":
            r.send(signal.SIGKILL)
            r.proc.wait(timeout=30)
    finally:
        r.stop()
    (start,) = [e for e in log_events(r) if e["event"] == "turn-start"]
    events = log_events(r)
    if how == "sigkill":  # the next runner closes the turn and drops the delivery
        again = LiveRunner(config(tmp_path, "slow"), "--log-format", "json")
        try:
            again.wait_running()
        finally:
            assert again.stop() == 0
        events = log_events(again)
    ends = [e for e in events if e["event"] == "turn-end"]
    assert [(e["turnId"], e["status"]) for e in ends] == [(start["turnId"], "cancelled")]
    (dropped,) = [e for e in events if e["event"] == "deliveries-dropped"]
    assert (dropped["reason"], dropped["deliveries"], dropped["count"]) == (reason, 1, 2)
    assert dropped["msg"].startswith("1 waiting delivery(ies) of 2 match(es) or prompt(s) "
                                     "dropped: ")
    records = [x for x in agent_records(tmp_path) if x["kind"] == "delivery"
               and x["deliveryState"] == "dropped"]
    assert [(x["reason"], x["count"]) for x in records] == [(reason, 2)]
