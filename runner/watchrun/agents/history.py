"""What an agent's stream tells of its past, read back at a start a slice at a time, and the
records that settle what a stopped runner left open (a turn, queued deliveries)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from watchrun.agents.providers.usage import Usage, UsageTracker
from watchrun.agents.tally import Tally
from watchrun.clock import Clock, parse_ts
from watchrun.output.records import iter_records

__all__ = ["HISTORY_SLICE", "History", "read_history", "settle_history"]

MAX_TURNS = 10_000
"""The most `maxTurns` can be (its clamp): the turn starts a history keeps."""
HISTORY_SLICE = 1024
"""Records of an agent's history read between two turns of the loop (~3 ms here)."""


class History(Struct):
    """What an agent's stream tells of its past (`read_history`)."""

    tracker: UsageTracker = field(default_factory=UsageTracker)
    """Taught the usage baselines of the history, so resumed sessions are not counted twice."""
    turns: int = 0
    tokens: int = 0
    reply: str = ""
    open_turn: dict[str, Any] | None = None
    """A `dispatch-start` with no `dispatch-finished`: the runner stopped during that turn."""
    open_tally: Tally | None = None
    """What the open turn's records add up to (its usage and answer so far)."""
    queued: list[dict[str, Any]] = field(default_factory=list)
    """Deliveries (plan steps among them) still `queued` when the runner stopped."""
    starts: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_TURNS))
    """When its last turns' processes started (Unix time): `maxTurns` counts them after a
    restart."""


async def read_history(path: Path) -> History:
    """Read an agent's stream through, a slice of records at a time: it can be tens of MiB,
    and the loop runs between slices (in a worker thread the parse would fight the loop for
    the GIL at each of its system calls: ~0.1-0.2 s stalls at a start, against ~5 ms here)."""
    h = History()
    queued: dict[Any, dict[str, Any]] = {}
    with contextlib.closing(iter_records(path)) as records:
        for i, r in enumerate(records, 1):
            if not i % HISTORY_SLICE:
                await asyncio.sleep(0)
            kind = r.get("kind")
            if kind == "delivery":
                if r.get("deliveryState", r.get("delivery_state")) == "queued":
                    queued[r.get("deliveryId")] = r
                else:
                    queued.pop(r.get("deliveryId"), None)
            elif kind == "usage":
                with contextlib.suppress(ValueError):
                    h.tracker.learn(r)
            elif kind == "dispatch-start":
                h.turns, h.open_turn, h.open_tally = h.turns + 1, r, Tally()
                started = parse_ts(r.get("ts"))
                if started is not None and r.get("pid") is not None:  # (one that could not
                    h.starts.append(started)  # start used nothing: maxTurns does not count it)
            elif kind == "dispatch-finished":
                h.tokens += r["tokens"] if isinstance(r.get("tokens"), int) else 0
                h.reply = str(r.get("reply") or "")
                if h.open_turn is not None and h.open_turn.get("turnId") == r.get("turnId"):
                    h.open_turn = h.open_tally = None
            if h.open_tally is not None and h.open_turn is not None and \
                    r.get("turnId") == h.open_turn.get("turnId") and isinstance(kind, str):
                h.open_tally.note(kind, r)
    h.queued = list(queued.values())
    return h


def settle_history(emit: Callable[[str, Mapping[str, Any]], object], h: History,
                   clock: Clock) -> None:
    """Close the turn a stopped runner left open, and drop the deliveries it left queued."""
    if h.open_turn is not None:
        started = parse_ts(h.open_turn.get("ts"))
        tally = h.open_tally or Tally()
        counted = tally.usage  # (what its records said: never its final totals, so inexact)
        usage = Usage(counted.input, counted.cached, counted.output, complete=False)
        reply, cut = tally.reply()
        fields: dict[str, Any] = {
            "turnId": h.open_turn.get("turnId"), "status": "cancelled", "completed": False,
            "usage": usage.fields(), "tokens": usage.tokens,
            "durationMs": 0 if started is None else max(0, round((clock.now() - started) * 1000)),
            "exitCode": None, "signal": None, "reply": reply,
            "error": {"code": "runner-restarted",
                      "message": "the runner stopped before this turn ended"}}
        if cut:
            fields["replyTruncated"] = True
        emit("dispatch-finished", fields)
        h.tokens += usage.tokens
        h.reply = reply
        h.open_turn = h.open_tally = None
    keep = ("deliveryId", "watcher", "source", "label", "count", "lines", "overflow", "planId")
    for d in h.queued:
        emit("delivery", {**{k: d[k] for k in keep if k in d}, "deliveryState": "dropped",
                              "reason": "runner-restarted"})
