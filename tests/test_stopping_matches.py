"""What a command prints while its watcher is being stopped is matched, and recorded where it
was to go: its actions record it `action-dropped` (they fire nothing once it stops), the
agents it wakes get it (`watchrun stop`) or record it `dropped` (the runner stopping)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liverunner import LiveRunner, deliveries, wait_for, write_config
from recordcheck import validate_records

# Prints one ERROR line, then two more once it gets SIGTERM (as a test runner's summary).
DYING_WORDS = ("trap 'echo ERROR dying on SIGTERM; echo ERROR last words; exit 1' TERM; "
               "echo ERROR start; while :; do sleep 0.1; done")


def config(folder: Path) -> Path:
    return write_config(folder, {"limits": {"stopTimeout": "5s"}, "watchers": [
        {"id": "app", "command": DYING_WORDS, "pattern": "ERROR", "wake": "ag",
         "actions": [{"type": "exec", "name": "note", "command": ["cat"]}]}],
        "agents": [{"name": "ag", "provider": "mock", "prompt": "{matches}"}]})


def first_match_handled(r: LiveRunner, folder: Path) -> None:
    """The first match fired the action (its result recorded) and woke the agent."""
    wait_for(lambda: any(x["kind"] == "action-result" for x in r.records("app")),
             "the action's result for the first match")
    wait_for(lambda: any(d["deliveryState"] == "delivered" for d in deliveries(folder)),
             "the first match delivered to the agent")


def ends(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The watcher's records (schema-checked), and its one `action-dropped` record."""
    recs = validate_records(folder / ".watchrun" / "watchers" / "app.jsonl")
    assert [x["line"] for x in recs if x["kind"] == "match"] == [
        "ERROR start", "ERROR dying on SIGTERM", "ERROR last words"]
    (late,) = [x for x in recs if x["kind"] == "action-dropped"]
    assert recs[-1]["kind"] == "stop" and recs.index(late) < len(recs) - 1
    return recs, late


def test_matches_printed_while_the_runner_stops_are_recorded_dropped(tmp_path: Path) -> None:
    """SIGTERM: the two lines the command printed as it was stopped were `match` records, but
    the action recorded nothing (the supervisor no longer found the watcher, already taken
    from the running ones), and the agent's stream nothing either (its hub was closed): they
    reached nobody and nothing said so."""
    r = LiveRunner(config(tmp_path))
    try:
        first_match_handled(r, tmp_path)
    finally:
        assert r.stop() == 0
    _, late = ends(tmp_path)
    assert (late["action"], late["reason"], late["matches"]) == ("note", "runner-stopped", 2)
    assert "action note: 2 matches came after the actions stopped (the runner was stopping)" \
        in r.stderr()
    validate_records(tmp_path / ".watchrun" / "agents" / "ag.jsonl")
    dropped = [d for d in deliveries(tmp_path) if d["deliveryState"] == "dropped"]
    assert [(d["reason"], d["count"], d["lines"]) for d in dropped] == [
        ("runner-stopped", 2, ["ERROR dying on SIGTERM", "ERROR last words"])]


def test_matches_printed_while_a_watcher_is_stopped_by_request_are_recorded(
        tmp_path: Path) -> None:
    """`watchrun stop app`: the agent got the two lines printed as the command was stopped,
    but its action neither fired for them nor recorded anything."""
    r = LiveRunner(config(tmp_path))
    try:
        first_match_handled(r, tmp_path)
        assert r.control({"cmd": "stop", "id": "app"})["ok"]
        wait_for(lambda: len([d for d in deliveries(tmp_path)
                              if d["deliveryState"] == "delivered"]) == 2,
                 "the late matches delivered to the agent")
    finally:
        assert r.stop() == 0
    _, late = ends(tmp_path)
    assert (late["action"], late["reason"], late["matches"]) == ("note", "watcher-stopped", 2)
    assert "action note: 2 matches came after the actions stopped (the watcher was being " \
        "stopped)" in r.stderr()
