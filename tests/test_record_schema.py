"""The record schema: every kind of SPEC §4, strict watcher records, open agent records,
and the `validate_records` helper other tests rely on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from recordcheck import record_errors, record_validator, validate_records

from watchrun.output.sink import JsonlSink

T0 = datetime(2026, 5, 16, 12, 0, tzinfo=UTC).timestamp()

WATCHER_KINDS = ["start", "match", "rotate", "gap", "exit", "restart", "error", "stop"]
AGENT_KINDS = [
    "dispatch-start", "prompt", "delivery", "text", "text-delta", "reasoning", "tool",
    "tool-result", "tool-denied", "file-change", "usage", "stderr", "output", "raw", "failure",
    "quota", "warning", "model-retry", "model-error", "compaction", "stopped", "status",
    "dispatch-finished", "session", "completed",
]
USAGE = {"input": 10, "cached": 4, "output": 3}

# one valid example of every kind, minimal where it can be
VALID: dict[str, dict[str, Any]] = {
    "start": {"path": "/var/log/app.log", "inode": 12, "offset": 0},
    "match": {"line": "ERROR x", "lineNo": 3, "offset": 40, "path": "/var/log/a.log", "inode": 9},
    "rotate": {"reason": "truncate", "path": "/var/log/a.log", "inode": 10, "oldInode": 10,
               "oldSize": 900, "unreadBytes": 40},
    "gap": {"reason": "unwritten", "fromSeq": 5, "toSeq": 9, "records": 5, "kinds": {"match": 5},
            "message": "5 records could not be written"},
    "exit": {"exitCode": None, "signal": "SIGKILL", "status": "killed", "run": 2,
             "signals": ["SIGTERM", "SIGKILL"], "stragglers": 1},
    "restart": {"attempt": 1, "delayMs": 1000},
    "error": {"code": "EACCES", "message": "permission denied", "path": "/var/log/a.log.1"},
    "stop": {"reason": "shutdown"},
    "dropped": {"count": 3, "reason": "queue-full"},
    "dispatch-start": {"turnId": "turn-3", "trigger": "wake", "deliveries": ["d-2"],
                       "command": ["claude", "-p", "{prompt}"], "pid": 4242, "pty": False,
                       "provider": "claude"},
    "prompt": {"text": "Find the cause."},
    "delivery": {"deliveryState": "queued", "watcher": "server", "count": 2},
    "text": {"text": "Final answer"},
    "text-delta": {"text": "Fin"},
    "reasoning": {"text": "thinking"},
    "tool": {"name": "Bash", "callId": "t1", "input": {"command": "ls"}},
    "tool-result": {"callId": "t1", "isError": False, "preview": "a\nb", "characters": 3},
    "file-change": {"path": "src/a.py", "op": "update"},
    "usage": {**USAGE, "complete": True},
    "stderr": {"text": "warning: x"},
    "output": {"text": "not json"},
    "raw": {"value": "{\"type\":", "bytes": 9_000_000, "truncated": True,
            "reason": "oversized-event"},
    "tool-denied": {"callId": "toolu_1", "name": "Write", "reason": "permission",
                    "input": {"file_path": "/root/x"}},
    "warning": {"message": "Loop detected, stopping execution"},
    "model-retry": {"attempt": 1, "maxAttempts": 10, "delayMs": 600, "status": 529,
                    "error": "overloaded", "message": "overloaded (HTTP 529)"},
    "model-error": {"message": "500 canned provider failure", "status": 500, "error": "server"},
    "compaction": {"trigger": "auto", "tokensBefore": 155025},
    "failure": {"message": "exit 1"},
    "quota": {"message": "rate limited", "resetAt": "2026-05-16T13:00:00.000Z"},
    "stopped": {"reason": "idle-timeout"},
    "status": {"status": "idle"},
    "dispatch-finished": {"turnId": "turn-3", "status": "done", "completed": True, "usage": USAGE,
                          "tokens": 13, "durationMs": 1200, "exitCode": 0, "signal": None,
                          "reply": "Final answer"},
    "session": {"sessionId": "0199-abc"},
    "completed": {"ok": True, "result": "Final answer"},
    "action-fired": {"action": "page", "type": "webhook", "firing": 1, "reason": "match",
                     "count": 2, "shown": 2, "suppressed": 0, "suppressedMatches": 0,
                     "dropped": 0, "firstCursor": "server:0000000000000001",
                     "lastCursor": "server:0000000000000002", "target": "https://hooks.x"},
    "action-result": {"action": "page", "type": "webhook", "firing": 1, "status": "ok",
                      "durationMs": 40, "attempts": 2, "httpStatus": 200},
    "action-suppressed": {"action": "page", "type": "exec", "count": 1, "suppressed": 1,
                          "windowEndsInMs": 1000},
    "action-dropped": {"action": "page", "type": "exec", "count": 3, "matches": 4,
                       "reason": "queue-full"},
    "plan": {"planId": "server:0000000000000001", "decision": "agents",
             "reason": "watcher server matched 1 line", "watcher": "server",
             "steps": [{"id": "review", "role": "agent", "intent": None, "depends_on": []}],
             "step": "review"},
}


def rec(kind: str, seq: int = 1, **fields: Any) -> dict[str, Any]:
    return {"schema": 1, "seq": seq, "cursor": f"server:{seq:016x}",
            "ts": "2026-05-16T12:00:00.000Z", "kind": kind, **fields}


def all_subschemas(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        found.append(node)
        for v in node.values():
            found.extend(all_subschemas(v))
    elif isinstance(node, list):
        for v in node:
            found.extend(all_subschemas(v))
    return found


def test_schema_is_draft_2020_12_and_every_property_is_described() -> None:
    schema = record_validator().schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    undescribed = [
        name
        for node in all_subschemas(schema)
        for name, prop in node.get("properties", {}).items()
        if isinstance(prop, dict) and not prop.get("description")
    ]
    assert undescribed == []


def test_every_kind_of_the_spec_has_a_definition() -> None:
    schema = record_validator().schema
    kinds = schema["$defs"]["envelope"]["properties"]["kind"]["enum"]
    assert set(WATCHER_KINDS + AGENT_KINDS) <= set(kinds)
    assert set(kinds) == set(VALID)
    assert all(k in schema["$defs"] for k in kinds)


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_example_of_each_kind(kind: str) -> None:
    assert record_errors(rec(kind, **VALID[kind])) == []


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("error", {"code": "ENOENT", "message": "spawn failed: no such file"}),
        ("error", {"code": "sink-repaired", "message": "cut 10 bytes", "bytes": 10}),
        ("start", {"run": 1, "pid": 42, "command": ["make", "test"]}),
        ("match", {"line": "x", "lineNo": 1, "offset": 0, "run": 1, "truncated": True,
                   "omittedBytes": 0}),
        ("exit", {"exitCode": 2, "signal": None, "status": "exited", "run": 1}),
        ("rotate", {"reason": "truncate", "path": "/a", "inode": 1, "oldInode": 1, "oldSize": 0}),
        ("error", {"code": "ENOENT", "message": "cannot start 'x…'", "turnId": "turn-4",
                   "truncated": True, "omittedBytes": 300}),
        ("dispatch-start", {"turnId": "turn-4", "trigger": "manual", "deliveries": [],
                            "command": ["x"], "pid": None, "pty": False, "provider": "generic"}),
    ],
)
def test_more_valid_records(kind: str, fields: dict[str, Any]) -> None:
    assert record_errors(rec(kind, **fields)) == []


@pytest.mark.parametrize("kind", [*WATCHER_KINDS, "dropped"])
def test_watcher_kinds_allow_no_other_fields(kind: str) -> None:
    errors = record_errors(rec(kind, **VALID[kind], lineNumber=3))
    assert any("lineNumber" in e for e in errors), errors


@pytest.mark.parametrize("kind", AGENT_KINDS)
def test_agent_kinds_allow_adapter_fields(kind: str) -> None:
    assert record_errors(rec(kind, **VALID[kind], adapterNote="x", provider_extra={"a": 1})) == []


INVALID = [
    ("seq 0", rec("stop", seq=0, reason="x") | {"cursor": "server:0000000000000000"}),
    ("schema 2", rec("stop", reason="x") | {"schema": 2}),
    ("uppercase cursor", rec("stop", reason="x") | {"cursor": "server:000000000000000A"}),
    ("ts without ms", rec("stop", reason="x") | {"ts": "2026-05-16T12:00:00Z"}),
    ("ts not UTC", rec("stop", reason="x") | {"ts": "2026-05-16T12:00:00.000+02:00"}),
    ("unknown kind", rec("matched", line="x")),
    ("no envelope", {"kind": "stop", "reason": "x"}),
    ("match with neither file nor run", rec("match", line="x", lineNo=1, offset=0)),
    ("match with path but no inode", rec("match", line="x", lineNo=1, offset=0, path="/a")),
    ("match with both", rec("match", line="x", lineNo=1, offset=0, path="/a", inode=1, run=1)),
    ("match lineNo 0", rec("match", line="x", lineNo=0, offset=0, run=1)),
    ("match inode null", rec("match", line="x", lineNo=1, offset=0, path="/a", inode=None)),
    ("rotate reason", rec("rotate", reason="moved", path="/a", inode=1)),
    ("rotate size (never written)", rec("rotate", reason="truncate", path="/a", inode=1,
                                        size=0)),
    ("error errno (never written)", rec("error", code="EACCES", message="x", errno="EACCES")),
    ("turnId not turn-<seq>", rec("text", text="x", turnId="t1")),
    ("dispatch-start pid 0", rec("dispatch-start", **VALID["dispatch-start"] | {"pid": 0})),
    ("exit without signal", rec("exit", exitCode=0, status="exited", run=1)),
    ("exit status", rec("exit", exitCode=0, signal=None, status="success", run=1)),
    ("exit signals", rec("exit", exitCode=None, signal="SIGKILL", status="killed", run=1,
                         signals="SIGKILL")),
    ("error code with spaces", rec("error", code="File Unreadable", message="x")),
    ("error code snake_case", rec("error", code="file_unreadable", message="x")),
    ("error code lowercase errno", rec("error", code="enoent", message="x") | {"x": 1}),
    ("usage without complete", rec("usage", **USAGE)),
    ("usage negative", rec("usage", input=-1, cached=0, output=0, complete=True)),
    ("stopped reason", rec("stopped", reason="timeout")),
    ("delivery state", rec("delivery", deliveryState="sent")),
    ("finished without usage", rec("dispatch-finished", status="done", completed=True,
                                   durationMs=1, exitCode=0)),
    ("finished status", rec("dispatch-finished", **VALID["dispatch-finished"] | {"status": "ok"})),
    ("tool-result without isError", rec("tool-result", callId="t1")),
    ("raw without value", rec("raw", reason="unparseable")),
    ("tool-denied without reason", rec("tool-denied", callId="t1")),
    ("model-retry without error class", rec("model-retry", attempt=1)),
    ("model-retry negative delay", rec("model-retry", error="network", delayMs=-1)),
    ("warning without message", rec("warning", code="x")),
    ("model-error without message", rec("model-error", status=500)),
    ("compaction tokens as text", rec("compaction", tokensBefore="many")),
]


@pytest.mark.parametrize(("what", "record"), INVALID, ids=[w for w, _ in INVALID])
def test_invalid_records_are_rejected(what: str, record: dict[str, Any]) -> None:
    assert record_errors(record) != []


def test_the_per_kind_check_finds_what_the_whole_schema_finds() -> None:
    """`record_errors` checks a record against its kind's part of the schema only (faster):
    on every valid and invalid example here it flags the same paths as the whole schema."""
    whole = record_validator()
    examples = [rec(k, **VALID[k]) for k in VALID] + [r for _, r in INVALID]
    examples += [rec(k, **VALID[k], lineNumber=3) for k in VALID]
    for record in examples:
        want = sorted({e.json_path for e in whole.iter_errors(record)})
        assert sorted({e.split(":")[0] for e in record_errors(record)}) == want, record


class FixedClock:
    def monotonic(self) -> float:
        return T0

    def now(self) -> float:
        return T0


def test_records_written_by_the_sink_validate(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    with JsonlSink(path, "server", max_bytes=1 << 20, keep=2, clock=FixedClock()) as sink:
        for kind in [*WATCHER_KINDS, "dropped", *AGENT_KINDS]:
            sink.write(kind, VALID[kind])
        sink.write("match", {"line": "\x1b]0;x\x07 é", "lineNo": 2, "offset": 9, "run": 3,
                             "truncated": True, "omittedBytes": 100, "raw": "\x1b]0;x\x07"})
    recs = validate_records(path)
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    assert recs[0]["ts"] == "2026-05-16T12:00:00.000Z"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (json.dumps(rec("stop", reason="x")).encode(), "torn"),
        (b"{oops\n", "not UTF-8 JSON"),
        (b"\xff\n", "not UTF-8 JSON"),
        ((json.dumps(rec("stop", 1, reason="x")) + "\n" + json.dumps(rec("stop", 3, reason="x"))
          + "\n").encode(), "seq 3 after 1"),
        ((json.dumps(rec("stop", reason="x") | {"cursor": "other:0000000000000001"}) + "\n")
         .encode(), "is not server:<seq>"),
        ((json.dumps(rec("stop")) + "\n").encode(), "'reason' is a required property"),
    ],
)
def test_validate_records_reports_each_problem(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "server.jsonl"
    path.write_bytes(content)
    with pytest.raises(AssertionError, match=problem):
        validate_records(path)


def test_validate_records_needs_the_file(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="no such JSONL file"):
        validate_records(tmp_path / "server.jsonl")


def test_docs_records_md_lists_every_kind_of_the_schema() -> None:
    """docs/records.md has one table row per record kind, and no kind the schema lacks."""
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "records.md").read_text()
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", doc, flags=re.M))
    schema = json.loads((Path(__file__).resolve().parents[1] / "runner" / "watchrun" /
                         "schemas" / "record.schema.json").read_text())
    kinds = set(schema["$defs"]["envelope"]["properties"]["kind"]["enum"])
    assert listed == kinds
