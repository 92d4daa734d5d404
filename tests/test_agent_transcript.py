"""`agent transcript` (seed 004, mode agent) and `agent list` rows from real agent JSONL:
steps with ok null -> true/false, files with ops, tokens, wall time, answer, reply, outcome,
killed and partial turns; validated against the published schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from agentrecords import (
    FINDINGS,
    AgentLog,
    claude_init,
    claude_text,
    claude_tool,
    claude_tool_result,
    standard_history,
)
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from watchrun.cli.agent_views import list_row
from watchrun.output.records import iter_records
from watchrun.views.render import render_list
from watchrun.views.transcript import build_transcript, summarize


def transcript(path: Path, name: str = "triage", provider: str = "claude",
               recs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    text = resources.files("watchrun.schemas").joinpath("transcript.schema.json").read_text()
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    doc = build_transcript(recs if recs is not None else iter_records(path), name, provider,
                           workspace="/srv/app")
    errors = [f"{e.json_path}: {e.message}" for e in Draft202012Validator(schema)
              .iter_errors(doc)]
    assert errors == []
    return doc


def test_turns_of_the_standard_history(tmp_path: Path) -> None:
    h = standard_history(tmp_path)
    doc = transcript(h.path)
    assert {k: doc[k] for k in ("session_id", "mode", "bundle", "user_id", "title",
                                "workspace", "provider")} == {
        "session_id": "triage", "mode": "agent", "bundle": "triage", "user_id": None,
        "title": "These lines appeared in API server:", "workspace": "/srv/app",
        "provider": "claude"}
    done, failed, pty = doc["turns"]
    start = next(r for r in iter_records(h.path) if r["kind"] == "dispatch-start")
    assert start["ts"] == "2026-05-16T12:00:00.500Z"
    assert done["run_id"] == h.done.turn_id and done["ts"] == 1778932800.5
    assert done["user"] == {"text": "These lines appeared in API server:\nERROR db down\n"
                                    "Find the cause."}
    assert (done["parent"], done["trigger"], done["deliveries"]) == (None, "wake", [h.d1])
    agent = done["agents"][0]
    assert agent == {
        "id": "triage", "role": "agent", "bundle": "triage", "version": None, "intent": None,
        "depends_on": [], "tools": ["Read"],
        "model": {"provider": "claude", "model": "claude-x", "source": "session"},
        "status": "done",
        "steps": [{"kind": "tool_call", "step": 1, "tool": "Read",
                   "args": {"file_path": "app/store.py"}, "summary": "app/store.py",
                   "call_id": "c1", "ok": True}],
        "files": [{"path": "app/store.py", "op": "read"}],
        "tokens": 2076, "wall_seconds": 4.1, "answer": FINDINGS, "error": None}
    assert done["reply"] == {"text": FINDINGS, "source": "agent"}
    assert (done["outcome"], done["tokens"], done["wall_seconds"]) == ("ok", 2076, 4.1)
    assert "error" not in done and "partial" not in done

    fa = failed["agents"][0]
    assert fa["status"] == "failed" and fa["error"] == "pytest failed"
    assert [(s["tool"], s["summary"], s["ok"]) for s in fa["steps"]] == [
        ("Bash", "pytest -q", False)]
    assert fa["files"] == [{"path": "pytest -q", "op": "run"}]  # it failed, but it ran
    assert (fa["tokens"], fa["wall_seconds"], fa["answer"]) == (15, 2.5, "")
    assert (failed["reply"], failed["outcome"]) == (None, "failed")
    assert failed["error"] == {"error": "pytest failed", "hint": None, "stopped": None}

    assert pty["agents"][0]["status"] == "done" and pty["reply"]["text"] == "Final answer"
    assert (pty["tokens"], pty["wall_seconds"]) == (34, 0.9)


def test_a_running_turn_has_ok_null_until_the_result_arrives(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    log.turn("fix it", [claude_init(), claude_text("m1", "Looking."),
                        claude_tool("m2", "c1", "Edit", {"file_path": "a.py", "old_string": "x",
                                                         "new_string": "y"})], finish=False)
    doc = transcript(log.path)
    turn = doc["turns"][0]
    agent = turn["agents"][0]
    assert agent["status"] == "running" and agent["steps"][0]["ok"] is None
    assert agent["files"] == []  # an edit counts once it succeeded
    assert (agent["answer"], agent["wall_seconds"], agent["error"]) == ("Looking.", None, None)
    assert (turn["reply"], turn["outcome"]) == (None, None) and "error" not in turn
    tid = turn["run_id"]
    log.emit("usage", input=100, cached=0, output=20, complete=True, turnId=tid)
    assert transcript(log.path)["turns"][0]["tokens"] == 120  # usage so far while running
    # the result arrives, then the file change the adapter derives from a successful edit
    log.emit("tool-result", callId="c1", isError=False, output="ok", name="Edit", turnId=tid)
    log.emit("file-change", path="a.py", op="edit", callId="c1", tool="Edit", turnId=tid)
    log.close()
    agent = transcript(log.path)["turns"][0]["agents"][0]
    assert agent["steps"][0]["ok"] is True
    assert agent["files"] == [{"path": "a.py", "op": "write"}]  # edit -> write


@pytest.mark.parametrize(("tool", "args", "files"), [
    ("Edit", {"file_path": "src/a.py"}, [{"path": "src/a.py", "op": "write"}]),
    ("Write", {"file_path": "new.txt", "content": "x"}, [{"path": "new.txt", "op": "write"}]),
    ("Grep", {"pattern": "TODO", "path": "src"},
     [{"path": "src", "op": "search", "detail": "TODO"}]),
    ("Bash", {"command": "make test"}, [{"path": "make test", "op": "run"}]),
    ("LS", {"path": "docs"}, [{"path": "docs", "op": "list"}]),
    ("WebFetch", {"url": "https://example.com"}, []),
])
def test_files_touched_and_their_ops(tmp_path: Path, tool: str, args: dict[str, Any],
                                     files: list[dict[str, str]]) -> None:
    log = AgentLog(tmp_path, "triage")
    log.turn("go", [claude_init(), claude_tool("m1", "c1", tool, args),
                    claude_tool_result("c1", "ok"), claude_tool("m2", "c2", tool, args),
                    claude_tool_result("c2", "ok")], finish=False)
    log.close()
    agent = transcript(log.path)["turns"][0]["agents"][0]
    assert agent["files"] == files  # the same path and op twice is listed once
    assert [s["ok"] for s in agent["steps"]] == [True, True]


@pytest.mark.parametrize(("stop", "outcome", "hint"), [
    ("deadline", "deadline", "the turn ran past the agent's `deadline`; raise it or ask for less"),
    ("idle-timeout", "idle-timeout",
     "the agent printed nothing for `idleTimeout`; raise it if it works silently"),
    ("aborted", "aborted", "stopped by `watchrun agent stop` or by the runner shutting down"),
])
def test_a_turn_stopped_by_the_runner_is_killed(tmp_path: Path, stop: str, outcome: str,
                                                hint: str) -> None:
    log = AgentLog(tmp_path, "triage")
    log.turn("long job", [claude_init()], stop=stop, exit_code=None, signal="SIGTERM")
    log.close()
    turn = transcript(log.path)["turns"][0]
    agent = turn["agents"][0]
    assert agent["status"] == "killed" and turn["outcome"] == outcome
    assert agent["steps"] == [{"kind": "guardrail", "step": 1, "rule": stop,
                               "message": f"stopped: {stop}"}]
    assert turn["error"] == {"error": f"stopped: {stop}", "hint": hint, "stopped": stop}


BY = json.loads((Path(__file__).parents[1] / "runner" / "watchrun" / "schemas" /
                   "record.schema.json").read_text())[
    "$defs"]["stopped"]["properties"]["by"]["enum"]


def test_an_aborted_turns_hint_says_who_stopped_it(tmp_path: Path) -> None:
    """The hint was picked by how the record's message began, texts written again in the
    views; now by the record's `by`: each of the schema's values has a hint of its own."""
    hints = {}
    for by in BY:
        log = AgentLog(tmp_path / by, "triage")
        log.turn("long job", [claude_init()], stop="aborted", stop_by=by, exit_code=None,
                 signal="SIGTERM")
        log.close()
        hints[by] = transcript(log.path)["turns"][0]["error"]["hint"]
    assert len(set(hints.values())) == len(BY), hints
    assert "stopped by `watchrun agent stop` or by the runner shutting down" not in hints.values()
    assert hints["request"] == "stopped by `watchrun agent stop`"


def test_a_turn_that_could_not_start(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    tid = log.turn("hi", [], finish=False).turn_id
    log.emit("error", code="ENOENT", message="cannot start 'claude': not found", turnId=tid)
    log.emit("dispatch-finished", turnId=tid, status="failed", completed=False,
             usage={"input": 0, "cached": 0, "output": 0, "complete": False}, tokens=0,
             durationMs=3, exitCode=None, signal=None, reply="",
             error={"code": "ENOENT", "message": "cannot start 'claude': not found"})
    log.close()
    turn = transcript(log.path)["turns"][0]
    assert turn["agents"][0]["status"] == "failed"
    assert turn["error"] == {"error": "cannot start 'claude': not found", "stopped": None,
                             "hint": "the agent's command was not found: install it or fix "
                                     "`command`"}


def test_a_turn_whose_start_was_rotated_away_is_partial(tmp_path: Path) -> None:
    h = standard_history(tmp_path)
    recs = [r for r in iter_records(h.path) if r["seq"] > int(h.done.first[-16:], 16) + 1]
    doc = transcript(h.path, recs=recs)
    first = doc["turns"][0]
    assert first["partial"] is True and first["user"] == {"text": ""}
    assert first["trigger"] is None and first["deliveries"] == [h.d1]  # from its delivery
    assert first["agents"][0]["status"] == "done" and first["reply"]["text"] == FINDINGS
    assert doc["title"] == ""
    assert "partial" not in doc["turns"][1]


def test_no_turns(tmp_path: Path) -> None:
    doc = transcript(tmp_path / "agents" / "triage.jsonl")
    assert doc["turns"] == [] and doc["title"] is None


def test_summarize_for_agent_list(tmp_path: Path) -> None:
    h = standard_history(tmp_path)
    row = summarize(iter_records(h.path), "triage", "claude")
    last = list(iter_records(h.path))[-1]
    idle = [r for r in iter_records(h.path) if r["kind"] == "status"][-1]
    assert row == {"name": "triage", "provider": "claude", "status": "idle",
                   "last_status_at": idle["ts"], "turns": 3, "tokens": 2076 + 15 + 34,
                   "last_reply": "Final answer", "last_turn": "done", "last_error": None,
                   "cursor": last["cursor"], "last_activity": last["ts"]}
    log = AgentLog(tmp_path, "long")
    log.turn("p", [claude_text("m", "word " * 40)], finish=True, duration_ms=1)
    log.close()
    row = summarize(iter_records(log.path), "long", "claude")
    finished = [r for r in iter_records(log.path) if r["kind"] == "dispatch-finished"]
    assert row["last_reply"] == finished[-1]["reply"] == "word " * 40  # whole
    table = render_list([list_row(row)], datetime.now(UTC))  # (the table: one line, clipped)
    assert table.splitlines()[1].endswith(" " + ("word " * 12)[:59] + "…"), table
    empty = summarize(iter_records(tmp_path / "agents" / "none.jsonl"), "none", "codex")
    assert (empty["status"], empty["turns"], empty["tokens"], empty["last_reply"],
            empty["cursor"]) == ("idle", 0, 0, None, None)


@pytest.mark.parametrize("deliveries", [7, True, {"d-1": 1}, [1, {"x": 2}, "d-3"]])
def test_a_record_with_deliveries_of_the_wrong_type_is_read_not_fatal(
        tmp_path: Path, deliveries: object) -> None:
    """`deliveries: 7` in a `dispatch-start` (a damaged or hand-edited stream) was iterated:
    `agent transcript`, `transcript` and `top`'s agent pane died with a TypeError."""
    recs = [{"schema": 1, "seq": 1, "cursor": "triage:0000000000000001",
             "ts": "2026-12-02T14:00:00.000Z", "kind": "dispatch-start", "turnId": "turn-1",
             "trigger": "wake", "deliveries": deliveries, "provider": "claude"}]
    (turn,) = transcript(tmp_path, recs=recs)["turns"]
    assert turn["deliveries"] == (["d-3"] if isinstance(deliveries, list) else [])
