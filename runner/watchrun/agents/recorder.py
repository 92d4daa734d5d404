"""An agent's record stream: the one place its text is cleaned, ordered retrying writes, and
reading back its history."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import Mapping
from typing import Any

from watchrun.agents.providers.usage import UsageTracker
from watchrun.clock import Clock, parse_ts
from watchrun.match.sanitize import clip, sanitize
from watchrun.output.records import iter_records
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter

__all__ = [
    "FIELD_BYTES", "Recorder", "clean_record", "clean_text", "read_history", "unreserved",
]

FIELD_BYTES = 64 * 1024
"""Default clip of one string field (the runner passes limits.maxLineBytes)."""
_C1 = dict.fromkeys(range(0x80, 0xA0))
_HAS_C1 = re.compile("[\x80-\x9f]")
_RESERVED = frozenset({"schema", "seq", "cursor", "ts", "kind", "turnId"})


def unreserved(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Adapter fields with the names the record envelope (and `turnId`) owns renamed
    `provider_<name>`, so a provider field can never forge them."""
    return {(f"provider_{k}" if k in _RESERVED else k): v for k, v in fields.items()}


def clean_text(text: str, max_bytes: int | None) -> tuple[str, bool]:
    """Text parsed out of a protocol line (or read from a pipe) made safe (SPEC §6).

    C1 controls are removed one by one *before* the escape rules run: a decoded U+009D is common
    mojibake (`â€\u009d` is a mis-decoded right quote) and must not start an OSC string that
    eats the rest of the text. Every other rule is `sanitize`'s: 7-bit ESC sequences, C0
    controls, DEL, `\r` rewrites, clipping on a UTF-8 boundary.
    """
    if _HAS_C1.search(text) is not None:
        text = text.translate(_C1)
    return sanitize(text, max_bytes)


def _clean(value: Any, max_bytes: int | None) -> tuple[Any, bool]:
    if isinstance(value, str):
        return clean_text(value, max_bytes)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        cut = False
        for key, item in value.items():
            name = clean_text(str(key), max_bytes)[0]
            out[name], one = _clean(item, max_bytes)
            cut = cut or one
        return out, cut
    if isinstance(value, list | tuple):
        items = [_clean(item, max_bytes) for item in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, float) and not math.isfinite(value):  # json.loads accepts NaN
        return str(value), False
    return value, False


def clean_record(kind: str, fields: Mapping[str, Any], max_bytes: int | None
                 ) -> dict[str, Any]:
    """A record's fields as they may be written: every string (keys too, at any depth) cleaned
    by `clean_text` and clipped to `max_bytes` (then `truncated: true`). Two fields keep what
    the agent printed, JSON-escaped on disk and shown only on request: a terminal line's `raw`
    (dropped when cleaning changed nothing but a line-ending `\r`) and a `raw` record's
    `value` (a protocol line that could not be parsed)."""
    out: dict[str, Any] = {}
    cut = False
    for key, value in fields.items():
        if isinstance(value, str) and (key == "raw" or (kind == "raw" and key == "value")):
            out[key] = value if max_bytes is None else clip(value, max_bytes)[0]
            continue
        out[clean_text(str(key), None)[0]], one = _clean(value, max_bytes)
        cut = cut or one
    if isinstance(out.get("raw"), str) and out["raw"].removesuffix("\r") == out.get("text"):
        del out["raw"]
    if cut:
        out.setdefault("truncated", True)
    return out


class Recorder:
    """An agent's JSONL stream: every record's text is cleaned here (`clean_record`), so no
    adapter or caller can forget; a record is built at once (its seq is known) and written in
    order by a background flush that retries on disk errors (nothing is dropped)."""

    def __init__(self, sink: JsonlSink, log: RunLog, name: str, *,
                 max_bytes: int = FIELD_BYTES) -> None:
        self.sink = sink
        self.max_bytes = max_bytes
        self.writer = AsyncWriter(
            sink, on_error=lambda msg: log.error(f"cannot write records: {msg}", name),
            on_recovered=lambda: log.info("writing records again", name))
        self._out: list[bytes] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def next_seq(self) -> int:
        return self.sink.next_seq

    @property
    def pending(self) -> int:
        """Records built but not written yet."""
        return len(self._out)

    def emit(self, kind: str, fields: Mapping[str, Any], *, limit: int | None = None
             ) -> dict[str, Any]:
        """Clean one record (strings clipped to `limit`, default `max_bytes`), build it and
        queue it for writing; returns the fields as written."""
        clean = clean_record(kind, fields, limit or self.max_bytes)
        self._out.append(self.sink.record(kind, clean))
        with contextlib.suppress(RuntimeError):  # no running loop: the next flush writes it
            self._kick()
        return clean

    def _kick(self) -> None:
        if self._out and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """The only writer: callers are never able to cancel a batch half-way."""
        while self._out:
            batch, self._out = self._out, []
            await self.writer.write_lines(batch)

    async def flush(self) -> None:
        """Wait until every queued record is written (while the disk fails: back-pressure)."""
        while self._out or (self._task is not None and not self._task.done()):
            self._kick()
            assert self._task is not None
            await asyncio.shield(self._task)

    async def close(self) -> None:
        await self.flush()
        self.sink.close()


def read_history(rec: Recorder, tracker: UsageTracker, clock: Clock) -> tuple[int, int, str]:
    """Teach `tracker` the usage baselines of an agent's history (so resumed sessions are not
    counted twice); close a turn a crashed runner left open, and drop the deliveries it left
    queued (plan steps among them); (turns, tokens, last reply)."""
    turns = tokens = 0
    reply = ""
    open_turn: dict[str, Any] | None = None
    queued: dict[Any, dict[str, Any]] = {}
    for r in iter_records(rec.sink.path):
        kind = r.get("kind")
        if kind == "delivery":
            if r.get("deliveryState", r.get("delivery_state")) == "queued":
                queued[r.get("deliveryId")] = r
            else:
                queued.pop(r.get("deliveryId"), None)
        elif kind == "usage":
            with contextlib.suppress(ValueError):
                tracker.learn(r)
        elif kind == "dispatch-start":
            turns, open_turn = turns + 1, r
        elif kind == "dispatch-finished":
            tokens += r["tokens"] if isinstance(r.get("tokens"), int) else 0
            reply = str(r.get("reply") or "")
            if open_turn is not None and open_turn.get("turnId") == r.get("turnId"):
                open_turn = None
    if open_turn is not None:
        started = parse_ts(open_turn.get("ts"))
        rec.emit("dispatch-finished", {
            "turnId": open_turn.get("turnId"), "status": "cancelled", "completed": False,
            "usage": {"input": 0, "cached": 0, "output": 0, "complete": False}, "tokens": 0,
            "durationMs": 0 if started is None else max(0, round((clock.now() - started) * 1000)),
            "exitCode": None, "signal": None, "reply": "",
            "error": {"code": "runner-restarted",
                      "message": "the runner stopped before this turn ended"}})
    for d in queued.values():
        keep = ("deliveryId", "watcher", "source", "label", "count", "lines", "overflow",
                "planId")
        rec.emit("delivery", {**{k: d[k] for k in keep if k in d}, "deliveryState": "dropped",
                              "reason": "runner-restarted"})
    return turns, tokens, reply
