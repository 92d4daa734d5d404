"""`agent transcript` and `agent list`: an agent's turns grouped by delivered prompt (seed 004).

Seed 004's keys in mode "agent" (one agent per turn: the agent itself). Where it is silent:

- Top level: `session_id` and `bundle` are the agent name, `user_id` is null (prompts come
  from watchers, schedules and `send`), `title` is the first prompt's first line (80 chars),
  `workspace` the agent's cwd when known; `provider` is added.
- A turn is keyed by `turnId`: `run_id` is it, `ts` the dispatch-start time in epoch seconds.
  Added keys: `trigger` (wake | schedule | manual | send) and `deliveries` (ids). A turn whose
  dispatch-start was rotated away is still shown, with `partial: true`.
- `agents[0]`: `id`/`bundle` the agent name, `role` "agent", `version`/`intent` null,
  `depends_on` [], `tools` the tool names used, `model` {provider, model, source} (model from
  the provider's session record, source "session", else null).
  `status`: running until dispatch-finished, or `interrupted` when nobody holds the agent's
  lock (the runner or `agent run` that ran it is gone: nothing runs it; the next run closes it
  `cancelled`), as `agent list` says; killed when a `stopped` record says deadline,
  idle-timeout, aborted, oversized-event or reader-failed (or status cancelled); done; else
  failed.
  `steps`: `tool_call` entries {kind, step, tool, args, summary, call_id, ok} with `ok` null
  until the tool-result arrives, then true/false; and `guardrail` entries {kind, step, rule,
  message} for each `stopped` record (rule = its reason) and each `tool-denied` record (rule
  `tool-denied`, with `tool` and `call_id`). `files`: {path, op[, detail]} from file-change
  records, deduplicated, op read | write | search | list | run (edit, delete, add, update,
  rename -> write; unknown ops are skipped; a command that failed still ran, so it is `run`).
  `tokens`: dispatch-finished `tokens`, or the sum of usage increments (input + output) while
  running. `wall_seconds`: durationMs / 1000, null while running. `answer`: the reply, or
  while running the answer rule (agents/answer.py) over the turn's records so far (`so_far`:
  the last thing it said when a tool call just began). `error`: a message string when the
  turn failed or was killed, else null.
- `reply`: {text, source "agent"} when the turn ended with a non-empty reply, else null.
  `outcome`: null while running ("interrupted" for an interrupted turn), then "ok", the stop
  reason (deadline, idle-timeout, aborted, oversized-event, reader-failed), "cancelled" or
  "failed". `error` {error, hint, stopped} is
  present when the turn failed or was killed (also when it said something first: `reply` is
  then what it said) or ended without a reply; its `hint` is the failure record's own advice
  when it has one, else one chosen by the stop reason or error code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from watchrun.agents.answer import AnswerTracker, is_root
from watchrun.clock import parse_ts
from watchrun.views.agent_window import StatusTracker
from watchrun.views.turn_error import INTERRUPTED, INTERRUPTED_HINT, turn_error

__all__ = ["INTERRUPTED", "INTERRUPTED_HINT", "KILL_REASONS", "OPS", "Turn", "build_transcript",
           "epoch", "summarize", "title", "turns_of"]

KILL_REASONS = frozenset({"deadline", "idle-timeout", "aborted", "oversized-event",
                          "reader-failed"})
OPS = {"read": "read", "write": "write", "edit": "write", "delete": "write", "add": "write",
       "update": "write", "rename": "write", "search": "search", "list": "list", "run": "run"}
"""file-change `op` -> the transcript's op (seed 004: list, read, search, write, run)."""
def epoch(ts: Any) -> float | None:
    """A record's `ts` in epoch seconds (milliseconds kept), or None."""
    seconds = parse_ts(ts)
    return None if seconds is None else round(seconds, 3)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Turn:
    """What one turn's records say, accumulated in order."""

    def __init__(self, run_id: str, rec: dict[str, Any]) -> None:
        self.run_id, self.ts = run_id, epoch(rec.get("ts"))
        self.partial = rec.get("kind") != "dispatch-start"
        self.trigger: str | None = None
        self.plan: str | None = None
        """The plan the turn is a step of (its dispatch-start's `planId`)."""
        self.deliveries: list[str] = []
        self.woken: dict[str, int] = {}  # watcher -> matches delivered into the turn
        self.prompt = ""
        self.steps: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.files: dict[tuple[str, str], dict[str, Any]] = {}
        self.usage_tokens = 0
        self.answer = AnswerTracker()
        self.model: str | None = None
        self.stopped: str | None = None
        self.stopped_by: str | None = None
        self.problems: list[tuple[str, str | None, str | None]] = []  # (message, code, hint)
        self.finished: dict[str, Any] | None = None
        self.interrupted = False
        """Open, with nobody holding the agent's lock (`turns_of(gone=True)`)."""

    def feed(self, rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        self.answer.feed(str(kind), rec)
        if kind == "dispatch-start":
            self.partial, self.ts = False, epoch(rec.get("ts"))
            self.trigger = rec.get("trigger")
            self.plan = rec["planId"] if isinstance(rec.get("planId"), str) else None
            ids = rec.get("deliveries")  # (a JSONL is only as trustworthy as its writers)
            self.deliveries += [d for d in ids if isinstance(d, str) and d not in
                                self.deliveries] if isinstance(ids, list) else []
        elif kind == "delivery":
            if rec.get("deliveryId") not in self.deliveries:
                self.deliveries.append(str(rec.get("deliveryId")))
            if isinstance(rec.get("watcher"), str):
                self.woken[rec["watcher"]] = _int(rec.get("count")) or 0
        elif kind == "prompt":
            self.prompt = str(rec.get("text") or "")
        elif kind == "tool":
            self._step({"kind": "tool_call", "tool": str(rec.get("name") or "?"),
                        "args": rec.get("input"), "summary": rec.get("summary") or rec.get("name"),
                        "call_id": rec.get("callId"), "ok": None})
        elif kind == "tool-result":
            step = self.calls.get(str(rec.get("callId")))
            if step is None:
                step = self._step({"kind": "tool_call", "tool": str(rec.get("name") or "?"),
                                   "args": None, "summary": rec.get("name"),
                                   "call_id": rec.get("callId"), "ok": None})
            step["ok"] = rec.get("isError") is not True
        elif kind == "file-change" and isinstance(rec.get("path"), str):
            op = OPS.get(str(rec.get("op")))
            if op is not None and (rec["path"], op) not in self.files:
                entry = {"path": rec["path"], "op": op}
                if isinstance(rec.get("detail"), str):
                    entry["detail"] = rec["detail"]
                self.files[(rec["path"], op)] = entry
        elif kind == "usage":
            self.usage_tokens += (_int(rec.get("input")) or 0) + (_int(rec.get("output")) or 0)
        elif kind in ("session", "status") and isinstance(rec.get("model"), str):
            self.model = rec["model"]
        elif kind == "stopped":
            self.stopped = str(rec.get("reason") or "aborted")
            by = rec.get("by")
            self.stopped_by = by if isinstance(by, str) else None
            self._step({"kind": "guardrail", "rule": self.stopped, "message": rec.get("message")})
        elif kind == "tool-denied" and is_root(rec):
            self._step({"kind": "guardrail", "rule": "tool-denied", "tool": rec.get("name"),
                        "call_id": rec.get("callId"), "message": rec.get("message")
                        or f"{rec.get('name') or 'a tool'} was denied ({rec.get('reason')})"})
        elif kind in ("failure", "quota", "error"):
            code = "quota" if kind == "quota" else rec.get("code")
            hint = rec.get("hint") if isinstance(rec.get("hint"), str) else None
            self.problems.append((str(rec.get("message") or kind), code, hint))
        elif kind == "dispatch-finished":
            self.finished = rec
            if self.stopped is None and isinstance(rec.get("stopReason"), str):
                self.stopped = rec["stopReason"]

    def _step(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"kind": step.pop("kind"), "step": len(self.steps) + 1, **step}
        self.steps.append(step)
        if step["kind"] == "tool_call" and isinstance(step.get("call_id"), str):
            self.calls[step["call_id"]] = step
        return step

    def status(self) -> str:
        fin = self.finished
        if fin is None:
            return "interrupted" if self.interrupted else "running"
        if self.stopped in KILL_REASONS or fin.get("status") == "cancelled":
            return "killed"
        return "done" if fin.get("status") == "done" else "failed"

    def error(self, status: str) -> tuple[str | None, str | None]:
        """(message, hint) of a failed, killed or interrupted turn."""
        return turn_error(status, self.finished, self.problems, self.stopped, self.stopped_by)

    def to_dict(self, name: str, provider: str, *, intent: str | None = None,
                depends_on: list[str] | None = None) -> dict[str, Any]:
        fin, status = self.finished, self.status()
        tokens = _int((fin or {}).get("tokens"))
        if tokens is None and fin is not None and isinstance(fin.get("usage"), dict):
            tokens = (_int(fin["usage"].get("input")) or 0) + (_int(fin["usage"].get("output"))
                                                                 or 0)
        tokens = self.usage_tokens if tokens is None else tokens
        duration = _int((fin or {}).get("durationMs"))
        wall = None if duration is None else round(duration / 1000, 3)
        reply = (fin or {}).get("reply")
        reply = reply if isinstance(reply, str) else ""
        message, hint = self.error(status)
        tools = sorted({s["tool"] for s in self.steps if s["kind"] == "tool_call"})
        agent = {
            "id": name, "role": "agent", "bundle": name, "version": None, "intent": intent,
            "depends_on": depends_on or [], "tools": tools,
            "model": {"provider": provider, "model": self.model,
                      "source": "session" if self.model else None},
            "status": status, "steps": self.steps, "files": list(self.files.values()),
            "tokens": tokens, "wall_seconds": wall,
            "answer": reply if fin is not None else self.answer.so_far(), "error": message,
        }
        outcome = {"done": "ok", "killed": self.stopped or "cancelled", "running": None,
                   "interrupted": "interrupted"}.get(status, "failed")
        turn: dict[str, Any] = {
            "run_id": self.run_id, "ts": self.ts, "user": {"text": self.prompt}, "parent": None,
            "agents": [agent], "reply": {"text": reply, "source": "agent"} if reply else None,
            "outcome": outcome, "tokens": tokens, "wall_seconds": wall,
        }
        if self.interrupted or (fin is not None and (message is not None or not reply)):
            turn["error"] = {"error": message or "the turn ended without a reply", "hint": hint,
                             "stopped": self.stopped}
        turn["trigger"], turn["deliveries"] = self.trigger, self.deliveries
        if self.partial:
            turn["partial"] = True
        return turn


def turns_of(records: Iterable[dict[str, Any]], *, gone: bool = False) -> dict[str, Turn]:
    """An agent's turns by turnId, from its records in order; `gone`: nobody holds the agent's
    lock (`agent_window.writer_gone`), so its open turns are interrupted."""
    turns: dict[str, Turn] = {}
    for rec in records:
        run_id = rec.get("turnId")
        if isinstance(run_id, str):
            turn = turns.get(run_id)
            if turn is None:
                turn = turns[run_id] = Turn(run_id, rec)
            turn.feed(rec)
    for turn in turns.values():
        turn.interrupted = gone and turn.finished is None
    return turns


def title(prompt: str) -> str:
    """A transcript's title: the first line of its first prompt, shortened."""
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    return line if len(line) <= 80 else line[:79] + "…"


def build_transcript(records: Iterable[dict[str, Any]], name: str, provider: str, *,
                     workspace: str | None = None, gone: bool = False) -> dict[str, Any]:
    """The seed-004 structure (mode "agent") of an agent's records, oldest first (`gone`: as
    `turns_of`'s)."""
    turns = [t.to_dict(name, provider) for t in turns_of(records, gone=gone).values()]
    return {
        "session_id": name, "mode": "agent", "bundle": name, "user_id": None,
        "title": title(turns[0]["user"]["text"]) if turns else None, "workspace": workspace,
        "provider": provider, "turns": turns,
    }


def summarize(records: Iterable[dict[str, Any]], name: str, provider: str) -> dict[str, Any]:
    """One `agent list` row: status, turns, tokens, last reply (the last finished turn's answer,
    whole, as every surface has it: the table clips it), and how the last turn ended:
    `last_turn` its status, `last_error` its error (code and message) when it was not done."""
    tracker, turns, tokens, last_reply, last = StatusTracker(), 0, 0, None, None
    last_turn: str | None = None
    last_error: dict[str, Any] | None = None
    for rec in records:
        tracker.feed(rec)
        last = rec
        if rec.get("kind") == "dispatch-start":
            turns += 1
        elif rec.get("kind") == "dispatch-finished":
            tokens += _int(rec.get("tokens")) or 0
            last_turn = str(rec.get("status") or "failed")
            err: dict[str, Any] = rec["error"] if isinstance(rec.get("error"), dict) else {}
            last_error = None if last_turn == "done" else {
                "code": str(err.get("code") or last_turn),
                "message": str(err.get("message") or f"the turn {last_turn}")}
            if isinstance(rec.get("reply"), str) and rec["reply"].strip():
                last_reply = rec["reply"]
    status, status_at = tracker.result()
    return {"name": name, "provider": provider, "status": status, "last_status_at": status_at,
            "turns": turns, "tokens": tokens, "last_reply": last_reply,
            "last_turn": last_turn, "last_error": last_error,
            "cursor": last["cursor"] if last else None,
            "last_activity": last["ts"] if last else None}
