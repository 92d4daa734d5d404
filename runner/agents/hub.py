"""The agents of a live runner: queues deliveries, runs turns one at a time per agent."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from croniter import croniter  # type: ignore[import-untyped]

from watchrun.agents.prompt import Delivery, TurnWindow, render_prompt, render_turn_prompt
from watchrun.agents.turn import PROMPT_BYTES, Recorder, TurnRunner
from watchrun.agents.usage import UsageTracker
from watchrun.clock import Clock
from watchrun.config.model import AgentSpec, Config, WatcherSpec
from watchrun.logs import RunLog
from watchrun.outdir import OutputLayout
from watchrun.pipeline import MatchInfo
from watchrun.procs import Spawner
from watchrun.records import iter_records
from watchrun.sanitize import sanitize
from watchrun.sink import JsonlSink

__all__ = ["MAX_SENDS", "AgentHub", "read_history"]

MAX_SENDS = 100
"""Manual prompts (`agent send`) waiting per agent; more are refused to the sender."""
REPLY_CHARS = 500
"""`lastReply` in `snapshot()` is clipped to this many characters."""


@dataclass(eq=False)
class _Agent:
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


def read_history(rec: Recorder, tracker: UsageTracker, clock: Clock) -> tuple[int, int, str]:
    """Teach `tracker` the usage baselines of an agent's history (so resumed sessions are not
    counted twice); close a turn a crashed runner left open; (turns, tokens, last reply)."""
    turns = tokens = 0
    reply = ""
    open_turn: dict[str, Any] | None = None
    for r in iter_records(rec.sink.path):
        kind = r.get("kind")
        if kind == "usage":
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
        started = datetime.fromisoformat(str(open_turn["ts"]).replace("Z", "+00:00"))
        rec.emit("dispatch-finished", {
            "turnId": open_turn.get("turnId"), "status": "cancelled", "completed": False,
            "usage": {"input": 0, "cached": 0, "output": 0, "complete": False}, "tokens": 0,
            "durationMs": max(0, round((clock.now() - started.timestamp()) * 1000)),
            "exitCode": None, "signal": None, "reply": "",
            "error": {"code": "runner-restarted",
                      "message": "the runner stopped before this turn ended"}})
    return turns, tokens, reply


class AgentHub:
    """Every agent of the config; the supervisor calls `deliver` with each watcher's matches."""

    def __init__(self, config: Config, layout: OutputLayout, log: RunLog, clock: Clock,
                 spawner: Spawner, *, once: bool = False) -> None:
        self.config, self.layout, self.log = config, layout, log
        self.clock, self.spawner, self.once = clock, spawner, once
        self._agents: dict[str, _Agent] = {}
        self._changed = asyncio.Event()
        self._unknown: set[tuple[str, str]] = set()
        self._running = False
        self._closed = False
        for spec in config.agents:
            self._agents[spec.name] = self._open(spec)

    # -- building ---------------------------------------------------------------------------
    def _open(self, spec: AgentSpec) -> _Agent:
        out = self.config.output
        sink = JsonlSink(self.layout.jsonl("agent", spec.name), spec.name,
                         max_bytes=out.max_bytes, keep=out.keep, clock=self.clock)
        a = _Agent(spec, Recorder(sink, self.log, spec.name), UsageTracker(),
                   TurnWindow(spec.max_turns))
        a.turns, a.tokens, a.last_reply = read_history(a.rec, a.tracker, self.clock)
        a.rec.emit("status", {"status": "idle", "source": "runner"})
        return a

    # -- input ------------------------------------------------------------------------------
    def deliver(self, watcher: WatcherSpec, matches: list[MatchInfo]) -> None:
        """Queue `matches` for every agent the watcher wakes; never blocks."""
        if not matches or self._closed:
            return
        limits = self.config.limits
        lines = [sanitize(m.line, limits.max_line_bytes)[0] for m in matches]
        for name in watcher.wake:
            a = self._agents.get(name)
            if a is None:
                if (watcher.id, name) not in self._unknown:
                    self._unknown.add((watcher.id, name))
                    self.log.warning(f"wake names unknown agent {name!r}: its matches are "
                                     "not delivered", watcher.id)
                continue
            d = a.pending.get(watcher.id)
            if d is None:
                seq = a.rec.next_seq
                d = Delivery(f"d-{seq}", watcher.label, limits.max_matches, watcher.id, seq=seq)
                d.add(lines)
                a.pending[watcher.id] = d
                a.rec.emit("delivery", d.record("queued", limits.match_lines))
            else:
                d.add(lines)
            a.wake.set()

    def send(self, name: str, text: str) -> dict[str, Any]:
        """Queue a manual prompt (trigger `send`) for agent `name`."""
        a = self._agents.get(name)
        if a is None or self._closed:
            known = ", ".join(sorted(self._agents)) or "(none)"
            return {"ok": False, "error": {"code": "unknown_agent",
                                           "message": f"no agent named {name!r}; known: {known}"}}
        if len(a.sends) >= MAX_SENDS:
            return {"ok": False, "error": {"code": "queue_full", "message": f"{name} already "
                                           f"has {MAX_SENDS} prompts waiting"}}
        seq = a.rec.next_seq
        d = Delivery(f"d-{seq}", "send", 1, source="send", seq=seq)
        d.add([sanitize(text, PROMPT_BYTES)[0]])
        a.sends.append(d)
        a.rec.emit("delivery", d.record("queued", self.config.limits.match_lines))
        a.wake.set()
        return {"ok": True, "queued": True, "deliveryId": d.id}

    async def stop_agent(self, name: str) -> bool:
        """Abort the running turn of `name` and wait for it to end; False when none runs."""
        a = self._agents.get(name)
        if a is None or a.turn is None:
            return False
        ended = a.turn_end
        a.turn.abort("stopped by request (`watchrun agent stop`)")
        await ended.wait()
        return True

    # -- running ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Run every agent's loop until cancelled (then running turns are aborted)."""
        self._running = True
        for a in self._agents.values():
            self._start(a)
        try:
            await asyncio.Event().wait()
        finally:
            self._running = False
            await self._cancel([a for a in self._agents.values()])

    def _start(self, a: _Agent) -> None:
        if self._running and not self._closed and (a.task is None or a.task.done()):
            a.task = asyncio.create_task(self._loop(a), name=f"agent:{a.spec.name}")

    async def _cancel(self, agents: list[_Agent]) -> None:
        tasks = [a.task for a in agents if a.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self, a: _Agent) -> None:
        while True:
            a.wake.clear()
            delay = self._tick(a)
            work = self._next(a)
            if work is None:
                self._changed.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(a.wake.wait(), delay)
                continue
            a.working = True
            try:
                await self._turn(a, *work)
            except Exception as exc:  # a bug in one turn must not stop the agent
                self.log.error(f"turn failed: {exc!r}", a.spec.name)
                a.rec.emit("error", {"code": "internal", "message": repr(exc)})
            finally:
                a.working = False
                self._changed.set()

    def _tick(self, a: _Agent) -> float | None:
        """Mark a due cron tick; seconds until the next one (None: no schedule)."""
        expr = a.spec.schedule
        if self.once or not expr:
            return None
        now = self.clock.now()
        if a.next_tick is None or now >= a.next_tick:
            if a.next_tick is not None and a.schedule_due is None:
                a.schedule_due = a.rec.next_seq
            base = datetime.fromtimestamp(now).astimezone()
            a.next_tick = float(croniter(expr, base).get_next(float))
        return max(0.0, a.next_tick - now)

    def _next(self, a: _Agent) -> tuple[str, list[Delivery]] | None:
        """The oldest waiting work: all pending wake deliveries at once, a send, or a tick."""
        options: list[tuple[int, str]] = []
        if a.pending:
            options.append((min(d.seq for d in a.pending.values()), "wake"))
        if a.sends:
            options.append((a.sends[0].seq, "send"))
        if a.schedule_due is not None:
            options.append((a.schedule_due, "schedule"))
        if not options:
            return None
        trigger = min(options)[1]
        if trigger == "wake":
            batch = sorted(a.pending.values(), key=lambda d: d.seq)
            a.pending = {}
            return trigger, batch
        if trigger == "send":
            return trigger, [a.sends.popleft()]
        a.schedule_due = None
        return trigger, []

    async def _turn(self, a: _Agent, trigger: str, batch: list[Delivery]) -> None:
        spec, limits, name = a.spec, self.config.limits, a.spec.name
        if not a.window.allow(self.clock.monotonic()):
            wait = a.window.retry_in(self.clock.monotonic())
            why = (f"maxTurns reached ({spec.max_turns} turns in the last hour; the next is "
                   f"allowed in {wait:.0f} s)")
            self._drop(a, batch, "max-turns")
            if not batch:
                a.rec.emit("dropped", {"count": 1, "reason": "max-turns",
                                       "message": f"{trigger} turn refused: {why}"})
            self.log.warning(f"{trigger} turn refused: {why}; {len(batch)} delivery(ies) "
                             "dropped", name)
            return
        if trigger == "send":
            prompt = batch[0].lines[0]
        elif trigger == "wake":
            prompt = render_turn_prompt(spec.prompt, batch, limits.match_lines)
        else:
            prompt = render_prompt(spec.prompt, {"matches": "", "watcher": "",
                                                 "label": "schedule", "count": "0"})
        runner = TurnRunner(spec, limits, a.rec, self.spawner, self.clock, a.tracker)
        a.turn, a.turn_end = runner, asyncio.Event()

        def started(turn_id: str) -> None:
            a.turns += 1
            for d in batch:
                a.rec.emit("delivery", d.record("delivered", limits.match_lines, turnId=turn_id))
            self.log.info(f"{turn_id} started ({trigger}, pid {runner.pid})", name)

        try:
            result = await runner.run(prompt, trigger=trigger, deliveries=[d.id for d in batch],
                                      on_start=started)
        except asyncio.CancelledError:
            if not runner.turn_id:  # stopped before its process started: say so
                self._drop(a, batch, "aborted")
            raise
        finally:
            a.turn = None
            a.turn_end.set()
        a.tokens += result.usage.tokens
        a.last_reply = result.reply
        how = f"{result.status} in {result.duration_ms} ms, {result.usage.tokens} tokens"
        if result.status == "done":
            self.log.info(f"{result.turn_id} {how}", name)
        else:
            error = (result.error or {}).get("message", "")
            self.log.warning(f"{result.turn_id} {how}: {error}", name)

    async def idle(self) -> None:
        """Return once no turn runs and nothing waits for any agent, every record written
        (once mode). `run()` must be running, or queued work never drains."""
        while True:
            self._changed.clear()
            if not any(a.busy or a.turn is not None for a in self._agents.values()):
                for a in list(self._agents.values()):
                    await a.rec.flush()
                if not any(a.busy for a in self._agents.values()):
                    return
                continue
            await self._changed.wait()

    # -- stopping and reloading ---------------------------------------------------------------
    async def shutdown(self) -> None:
        """Abort running turns (`aborted`), drop what still waits (recorded), close the files."""
        if self._closed:
            return
        self._closed = True
        agents = list(self._agents.values())
        self._agents.clear()
        await self._close(agents, "the runner is stopping", "runner-stopped")

    async def _close(self, agents: list[_Agent], why: str, reason: str,
                     status: str | None = None) -> None:
        for a in agents:
            if a.turn is not None:
                a.turn.abort(why)
        await self._cancel(agents)
        for a in agents:
            a.task = None
            self._drop(a, sorted([*a.pending.values(), *a.sends], key=lambda d: d.seq), reason)
            a.pending, a.sends, a.schedule_due = {}, deque(), None
            if status is not None:
                a.rec.emit("status", {"status": status, "source": "runner", "message": why})
            await a.rec.close()

    def _drop(self, a: _Agent, batch: list[Delivery], reason: str) -> None:
        for d in batch:
            a.rec.emit("delivery", d.record("dropped", self.config.limits.match_lines,
                                            reason=reason))

    async def reload(self, config: Config) -> None:
        """Apply a new config: removed agents are closed, changed ones restarted (their running
        turn aborted, their queue kept), new ones started."""
        self.config = config
        specs = {s.name: s for s in config.agents}
        for name, a in list(self._agents.items()):
            spec = specs.get(name)
            if spec is None:
                del self._agents[name]
                await self._close([a], "the agent was removed from the config",
                                  "agent-removed", "disabled")
                self.log.info("removed", name)
            elif spec != a.spec:
                if a.turn is not None:
                    a.turn.abort("the agent's config changed")
                await self._cancel([a])
                a.spec, a.next_tick, a.task = spec, None, None
                a.window.max_turns = spec.max_turns
                self._start(a)
                self.log.info("config changed: restarted", name)
        for name, spec in specs.items():
            if name not in self._agents:
                self._agents[name] = self._open(spec)
                self._start(self._agents[name])
                self.log.info("added", name)

    def snapshot(self) -> list[dict[str, Any]]:
        """Per agent: name, provider, status, turns, tokens, lastReply (clipped), pending."""
        out = []
        for a in self._agents.values():
            turn = a.turn
            status = "idle" if turn is None else "stopping" if turn.stop_reason else "running"
            reply = a.last_reply[:REPLY_CHARS] + ("…" if len(a.last_reply) > REPLY_CHARS else "")
            out.append({
                "name": a.spec.name, "provider": a.spec.provider, "status": status,
                "turns": a.turns, "tokens": a.tokens, "lastReply": reply,
                "pending": len(a.pending) + len(a.sends) + (a.schedule_due is not None),
                "pendingMatches": sum(d.count for d in a.pending.values()),
                "turnId": turn.turn_id if turn is not None and turn.turn_id else None,
                "pid": turn.pid if turn is not None else None,
            })
        return out

