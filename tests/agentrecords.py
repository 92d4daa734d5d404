"""Test helper: write realistic `agents/<name>.jsonl` streams through the real JsonlSink.

Records follow the agent-records contract in the order the turn runner writes them:
delivery queued …; dispatch-start, prompt, status running, delivery delivered …, the real
provider adapter's observations of each stdout line (parsed as printed, then cleaned by the
recorder's own `clean_record`), stderr lines, status stopping + stopped when the runner stops
the turn, the adapter's end, dispatch-finished (the runner's own tally and outcome rules),
status idle. Claude stream-json lines are built by
the `claude_*` functions (shapes copied from real Claude Code output).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchrun.agents.clean import FIELD_BYTES, clean_record, unreserved
from watchrun.agents.providers import Observation, make_adapter
from watchrun.agents.tally import Tally, turn_error, turn_outcome
from watchrun.output.records import format_cursor, iter_records
from watchrun.output.sink import JsonlSink

T0 = datetime(2026, 5, 16, 12, 0, tzinfo=UTC).timestamp()
"""The first record's time: 2026-05-16T12:00:00.000Z; each record is 0.25 s later."""
SESSION = "9861b989-5c57-4065-9c6d-79f7a054aafc"


_NULLABLE = {"exitCode", "signal"}
"""Fields the runner writes as null rather than leave out (dispatch-finished requires them)."""


class StepClock:
    """Wall time that moves 0.25 s per record written."""

    def __init__(self) -> None:
        self.t = T0 - 0.25

    def monotonic(self) -> float:
        return self.t

    def now(self) -> float:
        self.t += 0.25
        return self.t


@dataclass
class Turn:
    """What a written turn is: its id and the cursors of its first and last records."""

    turn_id: str
    first: str
    last: str
    records: list[dict[str, Any]] = field(default_factory=list)


class AgentLog:
    """One agent's stream under `<root>/agents/`, written as the runner writes it."""

    def __init__(self, root: Path, name: str, provider: str = "claude", *,
                 max_bytes: int = 1 << 20, keep: int = 3) -> None:
        (root / "agents").mkdir(parents=True, exist_ok=True)
        self.name, self.provider = name, provider
        self.path = root / "agents" / f"{name}.jsonl"
        self.sink = JsonlSink(self.path, name, max_bytes=max_bytes, keep=keep, clock=StepClock())
        self.deliveries: dict[str, dict[str, Any]] = {}  # queued ones, also from before
        for rec in iter_records(self.path):
            if rec["kind"] == "delivery" and rec.get("deliveryState") == "queued":
                self.deliveries[rec["deliveryId"]] = {
                    k: rec[k] for k in ("deliveryId", "label", "count", "lines", "overflow",
                                        "watcher") if k in rec}
        self.written: list[dict[str, Any]] = []

    def close(self) -> None:
        self.sink.close()

    @property
    def cursor(self) -> str:
        return format_cursor(self.name, self.sink.next_seq - 1)

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Write one record, cleaned as the recorder cleans it; return it as a reader will
        see it."""
        fields = clean_record(kind, {k: v for k, v in fields.items()
                                     if v is not None or k in _NULLABLE}, FIELD_BYTES)
        seq = self.sink.write(kind, fields)
        rec = {"seq": seq, "cursor": format_cursor(self.name, seq), "kind": kind, **fields}
        self.written.append(rec)
        return rec

    def status(self, status: str, message: str | None = None) -> dict[str, Any]:
        return self.emit("status", status=status, source="runner", message=message)

    def queue(self, watcher: str, lines: list[str], *, label: str | None = None,
              overflow: int = 0) -> str:
        """A watcher's matches queued for the next turn; returns the delivery id."""
        did = f"d-{self.sink.next_seq}"
        info = {"deliveryId": did, "label": label or watcher, "count": len(lines) + overflow,
                "lines": lines, "overflow": overflow, "watcher": watcher}
        self.deliveries[did] = info
        self.emit("delivery", deliveryState="queued", **info)
        return did

    def turn(self, prompt: str, stdout: list[str], *, trigger: str = "manual",
             deliveries: tuple[str, ...] = (), stderr: tuple[str, ...] = (),
             stop: str | None = None, stop_by: str | None = None, exit_code: int | None = 0,
             signal: str | None = None, duration_ms: int = 4100, pty: bool = False,
             finish: bool = True) -> Turn:
        """One turn: `stdout` lines go through the provider's real adapter."""
        tid = f"turn-{self.sink.next_seq}"
        start = self.emit("dispatch-start", turnId=tid, trigger=trigger,
                          deliveries=list(deliveries), command=["claude", "-p", "{prompt}"],
                          pid=4242, pty=pty, provider=self.provider)
        turn = Turn(tid, start["cursor"], start["cursor"])
        self.emit("prompt", turnId=tid, text=prompt)
        self.emit("status", status="running", source="runner", turnId=tid)
        for did in deliveries:
            self.emit("delivery", deliveryState="delivered", turnId=tid, **self.deliveries[did])
        adapter = make_adapter(self.provider)
        tally = Tally()

        def observe(found: list[Observation]) -> None:
            for obs in found:
                rec = self.emit(obs.kind, **unreserved(obs.fields), turnId=tid)
                tally.note(obs.kind, {k: v for k, v in rec.items()
                                      if k not in ("seq", "cursor", "kind")})

        for line in stdout:
            observe(adapter.parse(line))
        for line in stderr:
            self.emit("stderr", turnId=tid, text=line, raw=line)
            observe(adapter.stderr(line))
        if stop is not None:
            self.emit("status", status="stopping", source="runner", turnId=tid)
            by = {} if stop_by is None else {"by": stop_by}
            self.emit("stopped", turnId=tid, reason=stop, message=f"stopped: {stop}", **by)
        observe(adapter.finish(exit_code))
        if finish:
            self._finish(tid, tally, stop, exit_code, signal, duration_ms)
        turn.records = [r for r in self.written if r.get("turnId") == tid]
        turn.last = self.cursor
        return turn

    def _finish(self, tid: str, tally: Tally, stop: str | None, exit_code: int | None,
                signal: str | None, duration_ms: int) -> None:
        """dispatch-finished as the turn runner writes it (its pure outcome functions)."""
        status, completed = turn_outcome(
            stop_reason=stop, completed_ok=tally.completed_ok, marker_seen=False,
            exit_code=exit_code, generic=self.provider == "generic")
        error = turn_error(status, stop, f"stopped: {stop}", tally, exit_code, signal)
        usage = tally.usage
        self.emit("dispatch-finished", turnId=tid, status=status, completed=completed,
                  usage=usage.fields(), tokens=usage.tokens, durationMs=duration_ms,
                  exitCode=exit_code, signal=signal, reply=tally.reply()[0], stopReason=stop,
                  error=error)
        self.status("idle")


# -- Claude Code stream-json lines --------------------------------------------------------------

def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


def claude_init() -> str:
    return _line({"type": "system", "subtype": "init", "cwd": "/srv/app", "model": "claude-x",
                  "tools": ["Read", "Bash"], "session_id": SESSION, "uuid": "u-0"})


def claude_tool(mid: str, call_id: str, name: str, args: dict[str, Any]) -> str:
    return _line({"type": "assistant", "parent_tool_use_id": None, "session_id": SESSION,
                  "message": {"id": mid, "type": "message", "role": "assistant",
                              "model": "claude-x", "content": [
                                  {"type": "tool_use", "id": call_id, "name": name,
                                   "input": args}]}})


def claude_tool_result(call_id: str, content: str, is_error: bool = False) -> str:
    return _line({"type": "user", "parent_tool_use_id": None, "session_id": SESSION,
                  "message": {"role": "user", "content": [
                      {"tool_use_id": call_id, "type": "tool_result", "content": content,
                       "is_error": is_error}]}})


def claude_text(mid: str, text: str) -> str:
    return _line({"type": "assistant", "parent_tool_use_id": None, "session_id": SESSION,
                  "message": {"id": mid, "type": "message", "role": "assistant",
                              "model": "claude-x",
                              "content": [{"type": "text", "text": text}]}})


def claude_result(text: str | None, *, input_tokens: int, output_tokens: int,
                  error: str | None = None) -> str:
    obj: dict[str, Any] = {
        "type": "result", "subtype": "error_during_execution" if error else "success",
        "is_error": error is not None, "duration_ms": 4100, "num_turns": 2,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": output_tokens},
        "session_id": SESSION}
    if error:
        obj["errors"] = [error]
    else:
        obj["result"] = text
    return _line(obj)


# -- a standard history --------------------------------------------------------------------------

FINDINGS = "## Findings\n1. `get()` ignores the TTL"
PTY_STDOUT = [
    "\x1b[1;32m●\x1b[0m starting é",  # a coloured banner: not the protocol -> output (+ raw)
    claude_init(),
    claude_text("m4", "Final answer"),
    "\x1b[33mdone\x1b[0m\r",
    claude_result("Final answer", input_tokens=30, output_tokens=4),
]


@dataclass
class History:
    """`standard_history`'s stream and what is in it."""

    log: AgentLog
    d1: str
    d2: str
    done: Turn
    failed: Turn
    pty: Turn

    @property
    def path(self) -> Path:
        return self.log.path


def standard_history(root: Path, name: str = "triage", **sink: Any) -> History:
    """idle; a queued delivery; a completed turn woken by it (Read tool call + result, text,
    usage); a failed turn (Bash error, stderr line, exit 1); a PTY turn with ANSI output; a
    second delivery still queued."""
    log = AgentLog(root, name, **sink)
    log.status("idle")
    d1 = log.queue("server", ["ERROR db down", "ERROR café ☕"], label="API server")
    done = log.turn("These lines appeared in API server:\nERROR db down\nFind the cause.", [
        claude_init(),
        claude_tool("m1", "c1", "Read", {"file_path": "app/store.py"}),
        claude_tool_result("c1", "class Store: ..."),
        claude_text("m2", FINDINGS),
        claude_result(FINDINGS, input_tokens=2000, output_tokens=76),
    ], trigger="wake", deliveries=(d1,))
    failed = log.turn("run the tests", [
        claude_init(),
        claude_tool("m3", "c2", "Bash", {"command": "pytest -q"}),
        claude_tool_result("c2", "1 failed", is_error=True),
        claude_result(None, input_tokens=10, output_tokens=5, error="pytest failed"),
    ], stderr=("Error: 1 test failed",), exit_code=1, duration_ms=2500)
    pty = log.turn("show me", PTY_STDOUT, pty=True, duration_ms=900)
    d2 = log.queue("worker", ["FATAL oom"])
    log.close()
    return History(log, d1, d2, done, failed, pty)
