"""`agent watch --until`: waits for a new matching record, woken by inotify (or polling) on
records another thread appends; conditions, prompt echoes, split tokens, timeouts."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from agentrecords import AgentLog, History, standard_history

from watchrun.output.records import iter_records
from watchrun.views.agent_wait import EVENT_KINDS, parse_until, wait_until
from watchrun.views.agent_window import ViewError

DEADLINE_S = 20.0


@pytest.fixture
def hist(tmp_path: Path) -> History:
    return standard_history(tmp_path)


def records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path))


@pytest.mark.parametrize("condition", ["status", "status:", "foo:bar", "delivery:lost", "",
                                       "event:nosuchkind", "event:Text", "status:interrupted"])
def test_unsupported_until(condition: str) -> None:
    with pytest.raises(ViewError) as err:
        parse_until(condition)
    assert err.value.code == "not_supported" and err.value.exit_status == 2


def test_every_kind_a_turn_writes_can_be_waited_for() -> None:
    """`event:KIND` names a kind the agent's stream can hold (a typo waited out the whole
    `--timeout` for a record that never comes); every kind the runner or an adapter writes is
    one (the record schema's agent kinds)."""
    from watchrun.config.schema import schema_text

    defs = json.loads(schema_text("record"))["$defs"]
    watcher_only = {"start", "match", "rotate", "gap", "exit", "restart", "stop", "action-fired",
                    "action-result", "action-suppressed", "action-dropped"}
    kinds = {k for k, v in defs.items() if "kind" in v.get("properties", {})} - {"envelope"}
    agent_kinds = kinds - watcher_only
    assert agent_kinds == set(EVENT_KINDS)
    for kind in sorted(EVENT_KINDS):
        assert parse_until(f"event:{kind}") == ("event", kind)


def append_when_ready(path: Path, write: Any) -> tuple[Any, threading.Thread, list[str]]:
    """An on_ready callback that starts a thread appending to the stream (through a new sink,
    as another process would) once the waiter has fixed its anchor."""
    ready = threading.Event()
    modes: list[str] = []

    def writer() -> None:
        assert ready.wait(DEADLINE_S)
        log = AgentLog(path.parent.parent, path.name.removesuffix(".jsonl"))
        write(log)
        log.close()

    def on_ready(anchor: str, mode: str) -> None:
        modes.append(mode)
        ready.set()

    thread = threading.Thread(target=writer)
    thread.start()
    return on_ready, thread, modes


@pytest.mark.parametrize("force_poll", [False, True])
def test_until_status_waits_for_a_new_record(hist: History, force_poll: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    if force_poll:
        monkeypatch.setenv("WATCHRUN_FORCE_POLL", "1")
    assert records(hist.path)[-2]["status"] == "idle"  # already idle: that must not count
    written: list[dict[str, Any]] = []
    on_ready, thread, modes = append_when_ready(hist.path, lambda log: written.extend(
        [log.status("running"), log.queue("x", ["y"]), log.status("idle")]))
    result = wait_until(hist.path, "status:idle", timeout_s=DEADLINE_S, on_ready=on_ready)
    thread.join(DEADLINE_S)
    assert modes == ["poll" if force_poll else "inotify"]
    assert result["anchor"] == hist.log.cursor
    assert result["cursor"] == written[2]["cursor"] and result["match"]["status"] == "idle"


def test_until_with_since_counts_records_already_after_it(hist: History) -> None:
    result = wait_until(hist.path, "status:running", since_cursor=hist.failed.last,
                        timeout_s=DEADLINE_S)
    assert result["match"]["turnId"] == hist.pty.turn_id
    assert result["anchor"] == hist.failed.last


@pytest.mark.parametrize(("condition", "kind", "field", "value"), [
    ("event:tool-result", "tool-result", "callId", "c2"),
    ("event:stderr", "stderr", "text", "Error: 1 test failed"),
    ("delivery:queued", "delivery", "deliveryId", "d-40"),  # after the failed run's file-change
    ("output:starting", "output", "text", "● starting é"),
    ("output:[33mdone", "output", "text", "done"),  # only in the raw form
    ("status:idle", "status", "status", "idle"),
])
def test_until_conditions(hist: History, condition: str, kind: str, field: str,
                          value: str) -> None:
    r = wait_until(hist.path, condition, since_cursor=hist.done.last, timeout_s=DEADLINE_S)
    assert (r["match"]["kind"], r["match"][field]) == (kind, value)


def test_until_output_ignores_the_prompt_and_its_echo(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "gen", provider="generic")
    before = log.cursor
    log.turn("When finished say PINEAPPLE\nthanks", ["When finished say PINEAPPLE",
                                                     "working…", "PINEAPPLE"], duration_ms=1)
    log.close()
    r = wait_until(log.path, "output:PINEAPPLE", since_cursor=before, timeout_s=DEADLINE_S)
    assert (r["match"]["kind"], r["match"]["text"]) == ("text", "PINEAPPLE")


def test_until_output_times_out_when_only_the_prompt_has_the_token(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "gen", provider="generic")
    before = log.cursor
    log.turn("reply with PINEAPPLE", ["reply with PINEAPPLE", "ok"], duration_ms=1)
    log.close()
    with pytest.raises(ViewError) as err:
        wait_until(log.path, "output:PINEAPPLE", since_cursor=before, timeout_s=0.3)
    e = err.value.to_dict()["error"]
    assert (e["code"], e["anchor"], e["cursor"], e["until"]) == (
        "watch_timeout", before, log.cursor, "output:PINEAPPLE")
    assert err.value.exit_status == 1


def test_until_output_finds_a_token_split_across_deltas(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    tid = log.turn("go", [], finish=False).turn_id
    since = log.cursor
    for part in ("all DO", "NE now"):
        log.emit("text-delta", text=part, turnId=tid)
    log.close()
    r = wait_until(log.path, "output:DONE", since_cursor=since, timeout_s=DEADLINE_S)
    assert r["match"]["text"] == "NE now"


def test_until_times_out_without_a_new_record(hist: History) -> None:
    with pytest.raises(ViewError) as err:
        wait_until(hist.path, "status:idle", timeout_s=0.2)
    assert err.value.code == "watch_timeout"
    assert err.value.to_dict()["error"]["cursor"] == hist.log.cursor


def test_until_waits_for_the_agents_directory_to_appear(tmp_path: Path) -> None:
    """inotify on the nearest existing ancestor notices agents/ appearing (no polling)."""
    path = tmp_path / "agents" / "triage.jsonl"
    on_ready, thread, modes = append_when_ready(path, lambda log: log.status("idle"))
    r = wait_until(path, "status:idle", timeout_s=DEADLINE_S, on_ready=on_ready)
    thread.join(DEADLINE_S)
    assert modes == ["inotify"] and r["anchor"] == "triage:0000000000000000"
    assert r["cursor"] == "triage:0000000000000001"
