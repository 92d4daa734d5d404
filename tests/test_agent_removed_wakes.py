"""A reload that removes an agent some watcher wakes: nothing that watcher matched for it goes
unheard. The matches the old watcher makes until it is restarted are recorded dropped
(agent-removed) in the agent's stream, and a watcher added at runtime that wakes it is stopped
with the reason in `status` (a real runner, real agent scripts, SIGHUP)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, cli, read_records, wait_for, write_config

STUBBORN = """\
#!/bin/sh
trap 'touch termed' TERM
echo '{"type":"system","subtype":"init","session_id":"s"}'
while :; do sleep 0.05; done
"""
QUICK = """\
#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s"}'
"""


def script(tmp_path: Path, text: str) -> None:
    (tmp_path / "ag.sh").write_text(text)
    (tmp_path / "ag.sh").chmod(0o755)


def agent_records(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "agents" / f"{name}.jsonl")


def start_a_turn(r: LiveRunner, log: Path, tmp_path: Path) -> None:
    """Once the runner runs, a match that wakes agent `s`; back when its turn has started."""
    r.wait_running()
    with log.open("a") as fh:
        fh.write("ERROR 1\n")
    wait_for(lambda: any(x["kind"] == "dispatch-start" for x in agent_records(tmp_path, "s")),
             "s's turn")


def final_deliveries(tmp_path: Path, name: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in agent_records(tmp_path, name):
        if r["kind"] == "delivery":
            out[r["deliveryId"]] = r
    return out


def test_matches_made_while_a_removed_agent_is_closed_are_recorded_dropped(
        tmp_path: Path) -> None:
    """The agent left the hub before its stubborn turn ended (stopTimeout), while the old
    watcher still matched for it: those matches were in no record, and the log called the
    agent, which was still in the running config, 'unknown'."""
    script(tmp_path, STUBBORN)
    log = tmp_path / "app.log"
    log.write_text("")
    watcher = {"id": "app", "path": "app.log", "pattern": "ERROR"}
    agent = {"name": "s", "provider": "claude", "command": ["./ag.sh", "{prompt}"]}
    config = write_config(tmp_path, {"limits": {"stopTimeout": "2s"},
                                     "watchers": [{**watcher, "wake": "s"}], "agents": [agent]})
    r = LiveRunner(config)
    try:
        start_a_turn(r, log, tmp_path)
        write_config(tmp_path, {"limits": {"stopTimeout": "2s"}, "watchers": [watcher]})
        r.send(signal.SIGHUP)
        wait_for((tmp_path / "termed").exists, "the turn told to stop")
        with log.open("a") as fh:  # its turn ignores SIGTERM: the old watcher still runs
            fh.write("".join(f"ERROR {i}\n" for i in range(2, 7)))
        wait_for(lambda: len(r.matches("app")) == 6, "the old watcher's matches")
        r.wait_log("reloaded")
    finally:
        assert r.stop() == 0
    finals = final_deliveries(tmp_path, "s")
    states = sorted((d["deliveryState"], d.get("reason"), d["count"]) for d in finals.values())
    assert states == [("delivered", None, 1), ("dropped", "agent-removed", 5)]
    assert agent_records(tmp_path, "s")[-1]["status"] == "disabled"
    shown = cli("agent", "transcript", "s", "--output-dir", ".watchrun", "--format", "text",
                cwd=tmp_path).stdout
    assert "  hint: a reload (SIGHUP, `systemctl reload`) removed the agent from the config" \
        in shown.splitlines(), shown
    assert "unknown agent" not in r.stderr()
    assert "1 waiting delivery(ies) of 5 match(es) or prompt(s) dropped: the agent was " \
        "removed from the config" in r.stderr()


def test_a_runtime_watcher_waking_a_removed_agent_is_stopped_and_status_says_why(
        tmp_path: Path) -> None:
    """It kept running and matching into nothing: one log line, no count, `problems: none`."""
    script(tmp_path, QUICK)
    added = tmp_path / "rt.log"
    added.write_text("")
    config = write_config(tmp_path, {"agents": [
        {"name": "a", "provider": "claude", "command": ["./ag.sh", "{prompt}"]}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        reply = r.control({"cmd": "add", "watcher": {
            "id": "rt", "path": str(added), "pattern": "ERROR", "wake": ["a"]}})
        assert reply["ok"], reply
        with added.open("a") as fh:
            fh.write("ERROR 1\n")
        wait_for(lambda: any(d["deliveryState"] == "delivered"
                             for d in final_deliveries(tmp_path, "a").values()), "a's turn")
        write_config(tmp_path, {"agents": []})
        r.send(signal.SIGHUP)
        r.wait_log("reloaded")
        status = cli("status", "-c", config, cwd=tmp_path)
        start = cli("start", "rt", "-c", config, cwd=tmp_path)
        with added.open("a") as fh:
            fh.write("ERROR 2\n")
        listed = r.control({"cmd": "list"})
    finally:
        assert r.stop() == 0
    assert "rt: reload: it wakes agent 'a', which the config no longer has: stopped" \
        in status.stdout, status.stdout
    assert "[rt] its agent removed; stopped" in r.stderr()
    assert start.returncode == 2, (start.stdout, start.stderr)
    assert "rt wakes agent 'a', which the config does not have" in start.stderr
    assert [w["status"] for w in listed["watchers"] if w["id"] == "rt"] == ["stopped"]
    assert [x["line"] for x in r.matches("rt")] == ["ERROR 1"]


def test_a_turn_a_reload_stopped_says_so_in_the_transcript(tmp_path: Path) -> None:
    """Its hint said `watchrun agent stop` or the runner shutting down: neither happened. And
    while the reload waited out the turn's stopTimeout (it ignores SIGTERM), holding the
    control requests behind it, the log said nothing."""
    script(tmp_path, STUBBORN)
    log = tmp_path / "app.log"
    log.write_text("")

    def config(v: str) -> Path:
        return write_config(tmp_path, {
            "limits": {"stopTimeout": "3s"},
            "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "s"}],
            "agents": [{"name": "s", "provider": "claude", "command": ["./ag.sh", "{prompt}"],
                        "env": {"V": v}}]})

    r = LiveRunner(config("1"))
    try:
        start_a_turn(r, log, tmp_path)
        config("2")
        r.send(signal.SIGHUP)
        r.wait_log("config changed: restarted")
    finally:
        assert r.stop() == 0
    log = r.stderr()
    slow = "[s] warning: its turn has not ended 1 s after it was told to stop; it is killed " \
        "once limits.stopTimeout (3 s) is up, and what waits for it (a reload, the control " \
        "requests behind it) waits until then"
    assert slow in log and log.index(slow) < log.index("config changed: restarted"), log
    shown = cli("agent", "transcript", "s", "--format", "text", cwd=tmp_path).stdout
    assert "  hint: a reload (SIGHUP, `systemctl reload`) changed the agent's config: the turn " \
        "was stopped and the agent restarted with it" in shown.splitlines(), shown
