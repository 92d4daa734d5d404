"""Once an agent has had its `maxTurns`, a busy watcher's matches are refused together: one
`dropped{max-turns}` delivery per watcher a second at most, and one log line a minute with the
count, not a refused turn (a log line and two records) per matched line (a real runner, a real
agent script)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, read_records, wait_for, write_config

AGENT = """\
#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s"}'
"""
LINES = 150


def finals(tmp_path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in read_records(tmp_path / ".watchrun" / "agents" / "a.jsonl"):
        if r["kind"] == "delivery":
            out[r["deliveryId"]] = r
    return out


def dropped(tmp_path: Path) -> list[dict[str, Any]]:
    return [d for d in finals(tmp_path).values() if d["deliveryState"] == "dropped"]


def test_refused_matches_are_coalesced_counted_and_said_once(tmp_path: Path) -> None:
    (tmp_path / "ag.sh").write_text(AGENT)
    (tmp_path / "ag.sh").chmod(0o755)
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "a"}],
        "agents": [{"name": "a", "provider": "claude", "command": ["./ag.sh", "{prompt}"],
                    "maxTurns": 1}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR first\n")
        wait_for(lambda: any(d["deliveryState"] == "delivered" for d in finals(tmp_path).values()),
                 "the one turn of the hour")
        for i in range(LINES):  # one line at a time: each could be a refused turn of its own
            with log.open("a") as fh:
                fh.write(f"ERROR {i}\n")
            wait_for(lambda i=i: len(r.matches("app")) == i + 2, f"match {i}")
        wait_for(lambda: sum(d["count"] for d in dropped(tmp_path)) == LINES,
                 "every later match recorded dropped")
    finally:
        assert r.stop() == 0
    assert {(d["reason"]) for d in dropped(tmp_path)} == {"max-turns"}
    assert len(dropped(tmp_path)) < LINES // 5, len(dropped(tmp_path))
    said = re.findall(r"turn refused: (.*)", r.stderr())
    assert len(said) == 1, said
    assert said[0].startswith("maxTurns reached (1 turns in the last hour; the next is allowed")
    first = dropped(tmp_path)[0]["count"]  # (matches that came while it was refused join it)
    assert f"; 1 delivery(ies) of {first} match(es) or prompt(s) dropped" in said[0]
