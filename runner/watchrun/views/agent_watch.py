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
  retained record with `--include events`; otherwise `[]`. Their `raw` field is dropped unless
  raw_output is included (raw terminal text is never the default surface).
- `output` (always present) is the sanitized terminal fallback: `output`, `stderr` and `raw`
  (unparseable protocol line, sanitized) records one line each, and each finished turn's
  `reply`. `raw_output` is the same stream unsanitized: a record's `raw` field, else its text.
- `transcript.messages`: `prompt` records (role user, source `prompt`) and root assistant
  `text` records (role assistant, source = the record's `source`, else `text`); consecutive
  text records of one turn and one `messageId` are one message; streamed `text-delta`s
  become a message (source `text-delta`) only when no complete `text` follows them. Tool
  calls are not messages (they are in `agent transcript`). `latest_text` is the newest
  assistant text.
- Every part's `cursor` is the view's `cursor`: the last record read (the `--since` cursor
  when nothing is newer, `<name>:0000000000000000` for an empty stream).
- `--tail BYTES` keeps the last BYTES of UTF-8 of output, raw_output and the transcript's
  messages (older messages dropped whole, the oldest kept one cut at a character boundary);
  `latest_text` is cut the same way on its own; `omitted_bytes` counts what was cut.
- `delivery.delivery`: one entry per `deliveryId` seen in the window, with its latest state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from watchrun.match.sanitize import sanitize
from watchrun.output.records import format_cursor
from watchrun.views.agent_window import (
    AgentInfo,
    ViewError,
    anchor_seq,
    check_since,
    read_status,
    window,
)

__all__ = ["DEFAULT_INCLUDE", "INCLUDES", "TailText", "build_watch", "parse_include"]

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


def _keep_end(data: bytes, limit: int) -> int:
    """Index where the last `limit` bytes of `data` start, moved forward to a char boundary."""
    cut = max(0, len(data) - max(0, limit))
    while cut < len(data) and (data[cut] & 0xC0) == 0x80:
        cut += 1
    return cut


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class TailText:
    """Text whose last `limit` UTF-8 bytes are kept (None: all of it); counts what is cut."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.omitted, self._size = limit, 0, 0
        self._parts: deque[bytes] = deque()

    def add(self, text: str) -> None:
        data = _utf8(text)
        self._parts.append(data)
        self._size += len(data)
        if self.limit is not None and self._size > 2 * self.limit + 65536:
            self._compact()

    def _compact(self) -> None:
        data = b"".join(self._parts)
        cut = _keep_end(data, self.limit if self.limit is not None else len(data))
        self.omitted += cut
        self._parts = deque([data[cut:]])
        self._size = len(data) - cut

    def result(self) -> tuple[str, bool, int]:
        """(text, truncated, omitted_bytes)."""
        self._compact()
        return b"".join(self._parts).decode("utf-8", "replace"), self.omitted > 0, self.omitted


class _Messages:
    """Transcript messages from records (see the module docstring), kept within `tail`."""

    def __init__(self, provider: str, tail: int | None) -> None:
        self.provider, self.tail = provider, tail
        self.items: deque[tuple[dict[str, Any], int]] = deque()
        self.size = self.omitted = 0
        self.latest = ""
        self._open: dict[str, Any] | None = None
        self._open_mid: object = None
        self._deltas: dict[Any, list[str]] = {}
        self._last: dict[Any, str] = {}

    def feed(self, rec: dict[str, Any]) -> None:
        kind, turn, text = rec.get("kind"), rec.get("turnId"), rec.get("text")
        if kind == "prompt" and isinstance(text, str):
            self._flush()
            self._push({"role": "user", "text": text, "provider": self.provider,
                        "turn_id": turn, "source": "prompt"})
        elif kind == "text" and isinstance(text, str) and "parentCallId" not in rec:
            self._deltas.pop(turn, None)
            final, mid = rec.get("final") is True, rec.get("messageId")
            if final and text.strip() == self._last.get(turn, "").strip():
                return
            o = self._open
            if (o is not None and not final and o["turn_id"] == turn and o["source"] == "text"
                    and self._open_mid == mid):
                o["text"] += "\n" + text
            else:
                self._flush()
                o = self._open = {"role": "assistant", "text": text, "provider": self.provider,
                                  "turn_id": turn, "source": str(rec.get("source") or "text")}
                self._open_mid = mid
            self._last[turn] = self.latest = o["text"]
        elif kind == "text-delta" and isinstance(text, str) and "parentCallId" not in rec:
            self._deltas.setdefault(turn, []).append(text)
        elif kind == "dispatch-finished":
            self._flush()
            self._flush_deltas(turn)

    def _flush_deltas(self, turn: Any) -> None:
        parts = self._deltas.pop(turn, None)
        if parts and "".join(parts).strip():
            self.latest = "".join(parts)
            self._push({"role": "assistant", "text": self.latest, "provider": self.provider,
                        "turn_id": turn, "source": "text-delta"})

    def _flush(self) -> None:
        if self._open is not None:
            self._push(self._open)
            self._open = None

    def _push(self, msg: dict[str, Any]) -> None:
        n = len(_utf8(msg["text"]))
        self.items.append((msg, n))
        self.size += n
        while self.tail is not None and self.items and self.size - self.items[0][1] >= self.tail:
            self.size -= self.items[0][1]
            self.omitted += self.items.popleft()[1]

    def result(self) -> list[dict[str, Any]]:
        self._flush()
        for turn in list(self._deltas):
            self._flush_deltas(turn)
        msgs = [m for m, _ in self.items]
        if self.tail is not None and self.size > self.tail:
            first, n = self.items[0]
            data = _utf8(first["text"])
            cut = _keep_end(data, self.tail - (self.size - n))
            self.omitted += cut
            first["text"] = data[cut:].decode("utf-8", "replace")
            if not first["text"]:
                msgs.pop(0)
        return msgs


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _feed_output(rec: dict[str, Any], out: TailText, raw: TailText | None) -> None:
    kind = rec.get("kind")
    if kind in ("output", "stderr") and isinstance(rec.get("text"), str):
        out.add(_line(rec["text"]))
        if raw is not None:
            raw.add(_line(rec["raw"] if isinstance(rec.get("raw"), str) else rec["text"]))
    elif kind == "raw":
        value = rec.get("preview", rec.get("value"))
        if isinstance(value, str):
            out.add(_line(sanitize(value)[0]))
            if raw is not None:
                raw.add(_line(value))
    elif kind == "dispatch-finished" and isinstance(rec.get("reply"), str) and rec["reply"]:
        out.add(_line(rec["reply"]))


def _delivery(entries: dict[str, dict[str, Any]], rec: dict[str, Any]) -> None:
    did = str(rec.get("deliveryId") or rec["cursor"])
    entry = entries.setdefault(did, {"id": did})
    for src, dst in (("delivery_state", "state"), ("watcher", "watcher"), ("label", "label"),
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
    msgs = _Messages(agent.provider, tail) if "transcript" in include else None
    deliveries: dict[str, dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    last = since_seq or 0
    for rec in window(records_path, name, since_seq):
        last = rec["seq"]
        _feed_output(rec, out, raw)
        if msgs is not None:
            msgs.feed(rec)
        if rec.get("kind") == "delivery":
            _delivery(deliveries, rec)
        if events_after is not None and last > events_after:
            events.append(rec if keep_raw else {k: v for k, v in rec.items() if k != "raw"})
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
