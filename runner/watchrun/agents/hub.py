"""The agents of a live runner: queues deliveries, runs each agent's loop (turns one at a time:
agents/worker.py) and the plans watchers' wakes make (agents/plan.py); one TaskGroup owns every
agent loop and plan."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import msgspec

from watchrun.agents.hub_stop import StoppingHub
from watchrun.agents.plan import Plans
from watchrun.agents.prompt import TurnWindow, cut_mark
from watchrun.agents.recorder import open_recorder
from watchrun.agents.state import AgentState
from watchrun.agents.worker import agent_loop
from watchrun.clock import Clock
from watchrun.config.model import AgentSpec, Config, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.match.redact import clean_text, redactor
from watchrun.match.sanitize import sanitize
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner

__all__ = ["MAX_SENDS", "AgentHub"]

MAX_SENDS = 100
"""Manual prompts (`agent send`) waiting per agent; more are refused to the sender."""
REPLY_CHARS = 500
"""`lastReply` in `snapshot()` is clipped to this many characters."""


class AgentHub(StoppingHub):
    """Every agent of the config; the supervisor calls `deliver` with each watcher's matches."""

    def __init__(self, config: Config, layout: OutputLayout, log: RunLog, clock: Clock,
                 spawner: Spawner, *, once: bool = False,
                 problem: Callable[[str], None] | None = None) -> None:
        self.config, self.layout, self.log = config, layout, log
        self.clock, self.spawner, self.once = clock, spawner, once
        self.problem = problem
        """Keeps a problem for the runner's `status` (logged here already)."""
        self._agents: dict[str, AgentState] = {}
        self.changed = asyncio.Event()
        self._removing: dict[str, AgentState] = {}
        """Agents a reload removes, halted: what the old watchers still match for them until
        they are stopped is queued, then recorded dropped (agent-removed) by `settle`."""
        self._unheard: Counter[tuple[str, str]] = Counter()
        """Matches per (watcher, agent) that woke no one: the agent is not in the config."""
        self._running = False
        self._closed = False
        """Stopping: no turn starts; what is delivered now is recorded `dropped` at the end."""
        self._ended = False
        """Its files are closed: a delivery now can only be counted in the log."""
        self._tg: asyncio.TaskGroup | None = None
        self.plans = Plans(self)
        self.failures: list[str] = []
        """Agents whose records were given up (a failing disk), as the runner's errors."""

    @classmethod
    async def open(cls, config: Config, layout: OutputLayout, log: RunLog, clock: Clock,
                   spawner: Spawner, *, once: bool = False,
                   problem: Callable[[str], None] | None = None) -> AgentHub:
        """A hub with every agent of `config` open; when one cannot be opened, those opened
        before it are closed again and the error is raised."""
        hub = cls(config, layout, log, clock, spawner, once=once, problem=problem)
        try:
            for spec in config.agents:
                hub._agents[spec.name] = await hub._open(spec)
        except BaseException:
            await hub.shutdown()
            raise
        return hub

    # -- building ---------------------------------------------------------------------------
    async def _open(self, spec: AgentSpec) -> AgentState:
        """Its stream opened (in a thread) and its history read (`open_recorder`)."""
        rec, h = await open_recorder(self.layout.jsonl("agent", spec.name), spec.name,
                                     self.config.output, self.config.limits.max_line_bytes,
                                     self.log, self.clock,
                                     give_up_after=self.config.limits.once_write_ms / 1000
                                     if self.once else None)
        if self.problem is not None:  # (a full disk: `status` says so while the log did)
            logged, keep = rec.writer.on_error, self.problem

            def failing(msg: str) -> None:
                if logged is not None:
                    logged(msg)
                keep(f"agent {spec.name}: cannot write records: {msg}")
            rec.writer.on_error = failing
        window = TurnWindow(spec.max_turns)
        now = self.clock.now()
        window.seed((now - t for t in h.starts), self.clock.elapsed())
        a = AgentState(spec, rec, h.tracker, window, turns=h.turns, tokens=h.tokens,
                       last_reply=h.reply)
        a.rec.emit("status", {"status": "idle", "source": "runner"})
        return a

    def agent(self, name: str) -> AgentState | None:
        return None if self._closed else self._agents.get(name)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
        """A task owned by the hub's TaskGroup; None (the coroutine closed) when not running."""
        if self._tg is None or not self._running or self._closed:
            coro.close()
            return None

        async def owned() -> None:
            try:
                await coro
            finally:
                self.changed.set()  # `idle` looks again

        return self._tg.create_task(owned(), name=name)

    # -- input ------------------------------------------------------------------------------
    def deliver(self, watcher: WatcherSpec, matches: Sequence[MatchInfo]) -> None:
        """Queue `matches` for every agent the watcher wakes — or for its plan, when they
        depend on one another; never blocks."""
        if not matches:
            return
        if self._ended:  # (the watchers' stop is awaited first: only a bug comes here)
            self.log.warning(f"{len(matches)} match(es) came after the agents were closed: not "
                             "delivered", watcher.id, event="delivery-dropped")
            return
        limits = self.config.limits
        ends = redactor(self.config.redact)
        lines = [cut_mark(sanitize(m.line, limits.max_line_bytes)[0], m.cut,
                          limits.max_line_bytes, ends) for m in matches]
        hide = self.config.records_redactor()
        label = clean_text(watcher.label, hide)  # (a `${VAR}` in it): delivery and plan records
        if label != watcher.label:
            watcher = msgspec.structs.replace(watcher, label=label)
        order = self.plans.order(watcher)
        if order is not None:
            self.plans.deliver(watcher, order, lines, matches[0].cursor)
            return
        for name in watcher.wake:
            a = self._agents.get(name) or self._removing.get(name)
            if a is None:
                if not self._unheard[watcher.id, name]:
                    self.log.warning(f"wakes agent {name!r}, which is not in the config: its "
                                     "matches are not delivered (counted in `status`)",
                                     watcher.id, event="delivery-dropped")
                self._unheard[watcher.id, name] += len(matches)
                continue
            a.queue_matches(watcher, lines, limits)

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
        wait = a.window.retry_in(self.clock.elapsed())
        if wait and a.turn is None:  # its turn would start now, and be refused (max-turns)
            n = a.spec.max_turns
            return {"ok": False, "error": {"code": "limit", "message": (
                f"{name} has had its {n} turn{'' if n == 1 else 's'} of the last hour "
                f"(maxTurns): the next may start in {wait:.0f} s; nothing was queued")}}
        redacted: dict[str, int] = {}
        if self.config.output.redact:  # its delivery records hold the text, as match records do
            text, redacted = redactor(a.spec.redact).redact(text)
        delivery_id = a.queue_send(text, self.config.limits.match_lines, redacted)
        return {"ok": True, "queued": True, "deliveryId": delivery_id}

    async def stop_agent(self, name: str) -> bool:
        """Abort the running turn of `name` and wait for it to end; False when none runs."""
        a = self._agents.get(name)
        if a is None or a.turn is None:
            return False
        ended = a.turn_end
        a.turn.abort("stopped by request (`watchrun agent stop`)", "request")
        await ended.wait()
        return True

    # -- running ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Run every agent's loop and every plan until cancelled (then running turns are
        aborted): all of them are tasks of one TaskGroup, cancelled and awaited with it."""
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg, self._running = tg, True
                for a in self._agents.values():
                    self._start(a)
                self.plans.start_all()
                await asyncio.Event().wait()
        finally:
            self._running, self._tg = False, None

    def _start(self, a: AgentState) -> None:
        if a.task is None or a.task.done():
            a.task = self.spawn(agent_loop(self, a), f"agent:{a.spec.name}")

    async def idle(self) -> None:
        """Return once no turn runs and nothing waits for any agent, every record written
        (once mode). `run()` must be running, or queued work never drains."""
        while True:
            self.changed.clear()
            if not self.plans.busy and not any(a.busy or a.turn is not None
                                               for a in self._agents.values()):
                for a in list(self._agents.values()):
                    await a.rec.flush()
                if not any(a.busy for a in self._agents.values()):
                    return
                continue
            await self.changed.wait()

    def problems(self) -> list[str]:
        """For `status`: the agents whose last turns could not start their process."""
        return [f"agent {a.spec.name}: {a.unstarted} turn(s) in a row could not start its "
                f"command: {a.unstartable}" for a in self._agents.values()
                if a.unstartable is not None] + [
            f"watcher {wid}: {n} match(es) not delivered: it wakes agent {name!r}, which is "
            "not in the config" for (wid, name), n in self._unheard.items()]

    def snapshot(self) -> list[dict[str, Any]]:
        """Per agent: name, provider, status, turns, tokens (with what a running turn has
        reported so far), lastReply (clipped), pending."""
        out = []
        for a in self._agents.values():
            turn = a.turn
            status = "idle" if turn is None else "stopping" if turn.stop_reason else "running"
            reply = a.last_reply[:REPLY_CHARS] + ("…" if len(a.last_reply) > REPLY_CHARS else "")
            out.append({
                "name": a.spec.name, "provider": a.spec.provider, "status": status,
                "turns": a.turns, "lastReply": reply,
                "tokens": a.tokens + (turn.output.tally.usage.tokens if turn is not None else 0),
                "pending": len(a.pending) + len(a.sends) + (a.schedule_due is not None),
                "pendingMatches": sum(d.count for d in a.pending.values()),
                "turnId": turn.turn_id if turn is not None and turn.turn_id else None,
                "pid": turn.pid if turn is not None else None,
            })
        return out

