"""`agent watch`: the readable view of one agent's JSONL records (seed 000), from a cursor on.

Decisions (see also docs/decisions.md):

- `agent.uuid` is the agent's name: it is the stream id, the prefix of every cursor.
- `agent.status` is the `status` of the last agent-level status record (`source: "runner"`
  or no `turnId`; adapters' own `status` observations are turn events). A stream without any
  is derived: `running` while the newest dispatch record is a `dispatch-start`, else `idle`.
- Include set: the default is status,transcript,output,delivery. `--include LIST` *replaces*
  it (as seed 000's `--include raw_output` response has no transcript); `--raw` adds
  raw_output. `agent`, `cursor`, `events`, `output` and `delivery` are always present, so
  `status`, `output` and `delivery` are accepted but change nothing; `transcript`,
  `raw_output` and `events` are opt-in.
- `events`: the records strictly after `--since` (or after the `--until` anchor), or every
  retained record with `--include events`; otherwise `[]`. Unless raw_output is included,
  their `raw` field is dropped and a `raw` record's `value` is shown sanitized (raw terminal
  text is never the default surface).
- `output` (always present) is the sanitized terminal fallback: `output`, `stderr` and `raw`
  (unparseable protocol line, sanitized) records one line each, a generic agent's stdout
  lines (`text` with `source: "stdout"`) as they come, and the `reply` of each finished turn
  that printed no such lines (a generic turn's reply is those lines). `raw_output` is the
  same stream as printed: a record's `raw` field (or a `raw` record's `value`), else its text.
- `transcript.messages`: `prompt` records (role user, source `prompt`) and root assistant
  `text` records (role assistant, source = the record's `source`, else `text`); consecutive
  text records of one turn, one `messageId` and one source are one message, and a root tool
  call, tool result or denial ends a message; streamed `text-delta`s become a message (source
  `text-delta`) only when no complete `text` follows them. Tool calls are not messages (they
  are in `agent transcript`). `latest_text` is the answer of the newest turn that has one —
  the same answer rule (agents/answer.py) as the turn's reply, so it always equals the
  transcript's `answer` and the reply `agent run` printed.
- Every part's `cursor` is the view's `cursor`: the last record read (the `--since` cursor
  when nothing is newer, `<name>:0000000000000000` for an empty stream).
- `--tail BYTES` keeps the last BYTES of UTF-8 of output, raw_output and the transcript's
  messages (older messages dropped whole, the oldest kept one cut at a character boundary);
  `latest_text` is cut the same way on its own; `omitted_bytes` counts what was cut.
- `delivery.delivery`: one entry per `deliveryId` seen in the window, with its latest state.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from watchrun.agents.clean import clean_text
from watchrun.output.records import format_cursor
from watchrun.views.agent_text import Messages, Output, TailText
from watchrun.views.agent_window import (
    AgentInfo,
    ViewError,
    anchor_seq,
    check_since,
    delivery_state,
    read_status,
    window,
)

__all__ = ["DEFAULT_INCLUDE", "INCLUDES", "build_watch", "parse_include"]

INCLUDES = ("status", "transcript", "output", "delivery", "raw_output", "events")
DEFAULT_INCLUDE = frozenset({"status", "transcript", "output", "delivery"})


def parse_include(values: Iterable[str], raw: bool = False) -> frozenset[str]:
    """`--include a,b --include c` (replacing the default set) plus `--raw`."""
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    bad = [n for n in names if n not in INCLUDES]
    if bad:
        raise ViewError("not_supported", f"unknown --include value {', '.join(map(repr, bad))}: "
                        f"choose from {', '.join(INCLUDES)}")
    chosen = set(names) if names else set(DEFAULT_INCLUDE)
    if raw:
        chosen.add("raw_output")
    return frozenset(chosen)


def _event(rec: dict[str, Any], keep_raw: bool) -> dict[str, Any]:
    """A record as an `events` entry: as printed only when raw_output was asked for."""
    if keep_raw:
        return rec
    shown = {k: v for k, v in rec.items() if k != "raw"}
    for key in ("value", "preview"):
        if rec.get("kind") == "raw" and isinstance(rec.get(key), str):
            shown[key] = clean_text(rec[key], None)[0]
    return shown


def _delivery(entries: dict[str, dict[str, Any]], rec: dict[str, Any]) -> None:
    did = str(rec.get("deliveryId") or rec["cursor"])
    entry = entries.setdefault(did, {"id": did})
    state = delivery_state(rec)
    if state is not None:
        entry["state"] = state
    for src, dst in (("watcher", "watcher"), ("label", "label"),
                     ("count", "count"), ("overflow", "overflow"), ("lines", "lines"),
                     ("source", "source"), ("turnId", "turn_id"),
                     ("reason", "reason")):
        if src in rec:
            entry[dst] = rec[src]
    entry["cursor"], entry["updated_at"] = rec.get("cursor"), rec.get("ts")


def _part(cursor: str, text: TailText) -> dict[str, Any]:
    body, truncated, omitted = text.result()
    return {"cursor": cursor, "text": body, "truncated": truncated, "omitted_bytes": omitted}


def build_watch(
    records_path: Path, agent: AgentInfo, *, include: Iterable[str] = DEFAULT_INCLUDE,
    since: str | None = None, tail: int | None = None, anchor: str | None = None,
) -> dict[str, Any]:
    """The seed-000 view of `agent` from `records_path`. `since`: only what is strictly after
    it; `anchor` (an `--until` start): `events` are the records after it, the rest is whole."""
    include, name = frozenset(include), agent.name
    if tail is not None and tail < 0:
        raise ViewError("invalid_argument", f"--tail {tail}: must be 0 or more bytes")
    since_seq = None if since is None else check_since(records_path, name, since)
    status, status_at = read_status(records_path)
    events_after = since_seq if since_seq is not None else (
        anchor_seq(anchor) if anchor else (0 if "events" in include else None))
    keep_raw = "raw_output" in include
    out, raw = TailText(tail), TailText(tail) if keep_raw else None
    output = Output(out, raw)
    msgs = Messages(agent.provider, tail) if "transcript" in include else None
    deliveries: dict[str, dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    last = since_seq or 0
    until = anchor is not None and since_seq is None  # what follows the anchor: contiguous too
    again = "they were written faster than output.keep holds them; raise it" if until else \
        "read again without --since"
    for rec in window(records_path, name, since_seq, after=events_after if until else None,
                      again=again):
        last = rec["seq"]
        output.feed(rec)
        if msgs is not None:
            msgs.feed(rec)
        if rec.get("kind") == "delivery":
            _delivery(deliveries, rec)
        if events_after is not None and last > events_after:
            events.append(_event(rec, keep_raw))
    cursor = format_cursor(name, last)
    view: dict[str, Any] = {
        "schema": 1,
        "agent": {"uuid": name, "name": name, "provider": agent.provider, "status": status,
                  "last_status_at": status_at},
        "cursor": cursor, "events": events, "output": _part(cursor, out),
    }
    if msgs is not None:
        messages = msgs.result()
        latest = TailText(tail)
        latest.add(msgs.latest)
        view["transcript"] = {"cursor": cursor, "messages": messages,
                              "latest_text": latest.result()[0], "truncated": msgs.omitted > 0,
                              "omitted_bytes": msgs.omitted}
    if raw is not None:
        view["raw_output"] = _part(cursor, raw)
    view["delivery"] = {"delivery": list(deliveries.values())}
    return view
