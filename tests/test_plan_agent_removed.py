"""A reload that removes a plan's dependent agent while the plan runs: its step, still waiting for
its dependency, is recorded `dropped{agent-removed}` in its stream before the stream is closed,
so the transcript shows the plan ended (a real runner, real agent scripts, SIGHUP)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, cli, read_records, wait_for, write_config

AGENT = """\
#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s"}'
while [ ! -e go ]; do sleep 0.02; done
echo '{"type":"result","subtype":"success","is_error":false,"result":"reviewed","session_id":"s"}'
"""


def records(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "agents" / f"{name}.jsonl")


def shape(rec: dict[str, Any]) -> tuple[str, ...]:
    return (rec["kind"], rec.get("deliveryState") or rec.get("status") or "",
            rec.get("reason") or "" if rec["kind"] == "delivery" else "")


def config(tmp_path: Path, *agents: str) -> Path:
    every = {"review": {"name": "review", "provider": "claude", "command": ["./ag.sh", "{prompt}"]},
             "fix": {"name": "fix", "provider": "claude", "command": ["./ag.sh", "{prompt}"],
                     "dependsOn": ["review"], "prompt": "fix: {deps.review.answer}"}}
    return write_config(tmp_path, {
        "watchers": [{"id": "pay", "path": "app.log", "pattern": "ERROR", "wake": [agents[-1]]}],
        "agents": [every[a] for a in agents]})


def test_a_removed_dependent_s_waiting_step_is_recorded_dropped(tmp_path: Path) -> None:
    (tmp_path / "ag.sh").write_text(AGENT)
    (tmp_path / "ag.sh").chmod(0o755)
    log = tmp_path / "app.log"
    log.write_text("")
    r = LiveRunner(config(tmp_path, "review", "fix"))
    try:
        r.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR one\n")
        wait_for(lambda: any(x["kind"] == "dispatch-start" for x in records(tmp_path, "review")),
                 "review's turn")
        config(tmp_path, "review")  # fix removed while its step waits for review's answer
        r.send(signal.SIGHUP)
        wait_for(lambda: ("status", "disabled", "") in map(shape, records(tmp_path, "fix")),
                 "fix closed")
        (tmp_path / "go").touch()
        r.wait_log("fix dropped")
    finally:
        assert r.stop() == 0
    assert [shape(x) for x in records(tmp_path, "fix")][-4:] == [
        ("plan", "", ""), ("delivery", "queued", ""), ("delivery", "dropped", "agent-removed"),
        ("status", "disabled", "")]
    for where in (("transcript", "-c", "watch.yaml"), ("transcript", "--output-dir", ".watchrun"),
                  ("agent", "transcript", "review", "-c", "watch.yaml")):
        p = cli(*where, cwd=tmp_path)
        (plan,) = [t for t in json.loads(p.stdout)["turns"] if t.get("skipped") is not None]
        assert (plan["outcome"], [s["reason"] for s in plan["skipped"]]) == (
            "agent-removed", ["agent-removed"]), where
