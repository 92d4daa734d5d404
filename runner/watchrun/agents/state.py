"""One agent's state in the hub and its queue of waiting work: deliveries, sends, cron ticks."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

from watchrun.agents.prompt import Delivery, TurnWindow
from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder
from watchrun.agents.turn import PROMPT_BYTES, TurnRunner
from watchrun.clock import Clock
from watchrun.config.model import AgentSpec, Limits, WatcherSpec
from watchrun.match.sanitize import sanitize

__all__ = ["AgentState"]


@dataclass(eq=False)
class AgentState:
    """One agent of a live runner: its records, its waiting work, its running turn, totals."""

    spec: AgentSpec
    rec: Recorder
    tracker: UsageTracker
    window: TurnWindow
    pending: dict[str, Delivery] = field(default_factory=dict)
    sends: deque[Delivery] = field(default_factory=deque)
    schedule_due: int | None = None
    next_tick: float | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    working: bool = False
    turn: TurnRunner | None = None
    turn_end: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    turns: int = 0
    tokens: int = 0
    last_reply: str = ""

    @property
    def busy(self) -> bool:
        return self.working or bool(self.pending or self.sends) or self.schedule_due is not None

    # -- queueing ---------------------------------------------------------------------------
    def queue_matches(self, watcher: WatcherSpec, lines: list[str], limits: Limits) -> None:
        """Add a watcher's (sanitized) match lines to its waiting delivery, or queue a new one."""
        d = self.pending.get(watcher.id)
        if d is None:
            seq = self.rec.next_seq
            d = Delivery(f"d-{seq}", watcher.label, limits.max_matches, watcher.id, seq=seq)
            d.add(lines)
            self.pending[watcher.id] = d
            self.rec.emit("delivery", d.record("queued", limits.match_lines))
        else:
            d.add(lines)
        self.wake.set()

    def queue_send(self, text: str, match_lines: int) -> str:
        """Queue a manual prompt (trigger `send`); returns its delivery id."""
        seq = self.rec.next_seq
        d = Delivery(f"d-{seq}", "send", 1, source="send", seq=seq)
        d.add([sanitize(text, PROMPT_BYTES)[0]])
        self.sends.append(d)
        self.rec.emit("delivery", d.record("queued", match_lines))
        self.wake.set()
        return d.id

    def tick(self, clock: Clock) -> float | None:
        """Mark a due cron tick; seconds until the next one (None: no schedule)."""
        expr = self.spec.schedule
        if not expr:
            return None
        now = clock.now()
        if self.next_tick is None or now >= self.next_tick:
            if self.next_tick is not None and self.schedule_due is None:
                self.schedule_due = self.rec.next_seq
            from croniter import croniter  # type: ignore[import-untyped]  # with a schedule only

            base = datetime.fromtimestamp(now).astimezone()
            self.next_tick = float(croniter(expr, base).get_next(float))
        return max(0.0, self.next_tick - now)

    # -- taking and dropping ----------------------------------------------------------------
    def next_work(self) -> tuple[str, list[Delivery]] | None:
        """The oldest waiting work: all pending wake deliveries at once, a send, or a tick."""
        options: list[tuple[int, str]] = []
        if self.pending:
            options.append((min(d.seq for d in self.pending.values()), "wake"))
        if self.sends:
            options.append((self.sends[0].seq, "send"))
        if self.schedule_due is not None:
            options.append((self.schedule_due, "schedule"))
        if not options:
            return None
        trigger = min(options)[1]
        if trigger == "wake":
            batch = sorted(self.pending.values(), key=lambda d: d.seq)
            self.pending = {}
            return trigger, batch
        if trigger == "send":
            return trigger, [self.sends.popleft()]
        self.schedule_due = None
        return trigger, []

    def drop(self, batch: list[Delivery], reason: str, match_lines: int) -> None:
        """Record each delivery of `batch` as dropped for `reason`."""
        for d in batch:
            self.rec.emit("delivery", d.record("dropped", match_lines, reason=reason))

    def drop_all(self, reason: str, match_lines: int) -> None:
        """Drop everything that waits (recorded, oldest first) and forget a due tick."""
        self.drop(sorted([*self.pending.values(), *self.sends], key=lambda d: d.seq), reason,
                  match_lines)
        self.pending, self.sends, self.schedule_due = {}, deque(), None
