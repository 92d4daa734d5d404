"""Plans of agents (SPEC §3.3): a watcher's matches answered by several agents with the runner
as the parent — independent agents in parallel, each dependent after what it depends on with
their answers in its prompt (`{deps.NAME.answer}`), a dependent of a step that did not finish
with an answer skipped. Every agent of the plan gets a `plan` record (the parent's decision) and
a delivery under the same `planId`; its turn carries it too, so the transcript is rebuilt from
the agents' JSONL alone."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any, Protocol

from msgspec import Struct, field

from watchrun.agents.clean import clean_text
from watchrun.agents.prompt import (
    Delivery,
    answer_cut_mark,
    format_matches,
    render_prompt,
    render_turn_prompt,
)
from watchrun.agents.state import AgentState, PlanStep, StepOutcome
from watchrun.agents.tally import REPLY_BYTES
from watchrun.agents.turn import PROMPT_BYTES
from watchrun.clock import Clock
from watchrun.config.model import Config, WatcherSpec
from watchrun.config.plans import plan_order
from watchrun.match.redact import redactor
from watchrun.output.runlog import RunLog

__all__ = ["INTENT_CHARS", "PlanHost", "PlanQueue", "Plans", "intent", "run_plan"]

INTENT_CHARS = 100
"""A step's `intent` (the first line of the agent's prompt template) is clipped to this."""
_PLACEHOLDERS = re.compile(r"\{(?:matches|watcher|label|count|deps\.[^{}]*\.answer)\}")
_DEP = re.compile(r"\{deps\.([^{}]*)\.answer\}")


class PlanHost(Protocol):
    """What a plan needs from the hub that runs it."""

    config: Config
    log: RunLog
    clock: Clock

    def agent(self, name: str) -> AgentState | None: ...

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
        """A task owned by the hub (None when the hub is not running)."""
        ...


class PlanQueue(Struct, eq=False):
    """A watcher's plan: its agents in order, and the matches waiting for its next run
    (coalesced while a run goes on; at most `keep` lines, the rest counted)."""

    watcher: WatcherSpec
    order: tuple[str, ...]
    lines: list[str] = field(default_factory=list)
    count: int = 0
    first_cursor: str = ""
    task: asyncio.Task[None] | None = None

    def add(self, lines: list[str], cursor: str, keep: int) -> None:
        self.lines.extend(lines[: max(0, keep - len(self.lines))])
        self.count += len(lines)
        self.first_cursor = self.first_cursor or cursor

    def take(self) -> tuple[list[str], int, str] | None:
        if not self.count:
            return None
        taken = (self.lines, self.count, self.first_cursor)
        self.lines, self.count, self.first_cursor = [], 0, ""
        return taken


def intent(template: str, watcher: WatcherSpec) -> str | None:
    """What the agent is asked to do: the first line of its prompt template that says more
    than its placeholders, with `{label}` and `{watcher}` filled in and the others left out;
    None when no line does."""
    for line in template.splitlines():
        if not _PLACEHOLDERS.sub("", line).strip(" \t:-"):
            continue
        values = {"label": watcher.label, "watcher": watcher.id, "count": "", "matches": ""}
        text = " ".join(render_prompt(line, values, dict.fromkeys(_DEP.findall(line), ""))
                        .split())
        return text if len(text) <= INTENT_CHARS else text[: INTENT_CHARS - 1] + "…"
    return None


async def run_plan(host: PlanHost, queue: PlanQueue, lines: list[str], count: int,
                   plan_id: str) -> dict[str, StepOutcome]:
    """One run of a plan: record it, run its steps (each in its agent's queue), and return how
    each step ended. Cancelled, steps not handed to their agent yet are recorded dropped."""
    config, watcher = host.config, queue.watcher
    limits = config.limits
    text, redacted = redactor(config.redact).redact(clean_text(
        format_matches(lines, count, limits.match_lines), None)[0])
    agents = {n: a for n in queue.order if (a := host.agent(n)) is not None}
    deps = {n: [d for d in agents[n].spec.depends_on if d in agents] for n in agents}
    steps = [{"id": n, "role": "agent", "intent": intent(agents[n].spec.prompt, watcher),
              "depends_on": deps[n]} for n in agents]
    reason = f"watcher {watcher.id} matched {count} line{'s' if count != 1 else ''}"
    deliveries: dict[str, Delivery] = {}
    for name, a in agents.items():
        a.rec.emit("plan", {"planId": plan_id, "decision": "agents", "reason": reason,
                            "watcher": watcher.id, "label": watcher.label, "count": count,
                            "text": text, "steps": steps, "step": name,
                            **({"redacted": redacted} if redacted else {})}, limit=PROMPT_BYTES)
        seq = a.rec.next_seq
        d = deliveries[name] = Delivery(f"d-{seq}", watcher.label, limits.max_matches,
                                        watcher.id, seq=seq, plan=plan_id)
        d.add(lines)
        d.count, d.overflow = count, count - len(d.lines)  # the queue kept the first lines
        a.rec.emit("delivery", d.record("queued", limits.match_lines))
    loop = asyncio.get_running_loop()
    done: dict[str, asyncio.Future[StepOutcome]] = {n: loop.create_future() for n in agents}
    host.log.info(f"plan {plan_id}: {reason}; agents {', '.join(agents)}", watcher.id,
                  event="plan-start", planId=plan_id)

    async def step(name: str) -> None:
        a, handed = agents[name], False
        waiting = PlanStep(plan_id, deliveries[name], "", done[name])
        a.waiting.append(waiting)  # until queued: dropped with the agent (`drop_all`)
        try:
            try:
                got = [(d, await asyncio.shield(done[d])) for d in deps[name]]
            finally:  # (cancelled too) from here on this code records how the step ends
                a.waiting = [w for w in a.waiting if w is not waiting]
            if done[name].done():  # its agent was closed meanwhile: recorded dropped then
                return
            failed = [(d, o) for d, o in got if o.status != "done"]
            if failed:
                d, o = failed[0]
                why = f"{d} did not finish with an answer ({o.status}" + (
                    f": {o.why})" if o.why else ")")
                a.drop([deliveries[name]], "dependency-failed", limits.match_lines,
                       message=f"skipped: {why}")
                done[name].set_result(StepOutcome("skipped", why=why))
                return
            live = host.agent(name)
            if live is not a:
                a.drop([deliveries[name]], "agent-removed", limits.match_lines)
                done[name].set_result(StepOutcome("dropped", why="agent-removed"))
                return
            prompt = render_turn_prompt(a.spec.prompt, [deliveries[name]], limits.match_lines,
                                        {d: answer_cut_mark(d, o.answer, REPLY_BYTES)
                                         if o.answer_cut else o.answer for d, o in got})
            a.queue_step(PlanStep(plan_id, deliveries[name], prompt, done[name]))
            handed = True
            await asyncio.shield(done[name])
        except asyncio.CancelledError:
            if not handed and not done[name].done():
                a.drop([deliveries[name]], "runner-stopped", limits.match_lines)
                a.rec.say_dropped([deliveries[name].count], "the runner is stopping",
                                  "runner-stopped")
            if not done[name].done():
                done[name].set_result(StepOutcome("dropped", why="runner-stopped"))
            raise

    async with asyncio.TaskGroup() as tg:
        for name in agents:
            tg.create_task(step(name), name=f"plan:{plan_id}:{name}")
    outcomes = {n: f.result() for n, f in done.items()}
    bad = {n: o for n, o in outcomes.items() if o.status != "done"}
    summary = "ok" if not bad else "; ".join(f"{n} {o.status}" for n, o in bad.items())
    host.log.log("info" if not bad else "warning", "plan-end", f"plan {plan_id}: {summary}",
                 watcher.id, planId=plan_id, outcome="ok" if not bad else "failed")
    return outcomes


class Plans:
    """The plans of a hub, one queue per watcher whose `wake` makes a plan: one run at a time
    per watcher; matches that arrive meanwhile wait for the next run."""

    def __init__(self, host: PlanHost) -> None:
        self.host = host
        self.queues: dict[str, PlanQueue] = {}

    def order(self, watcher: WatcherSpec) -> tuple[str, ...] | None:
        """The plan `watcher` wakes (config/plans.py), or None when it wakes agents alone."""
        graph = {a.name: a.depends_on for a in self.host.config.agents}
        return plan_order(watcher.wake, graph) if watcher.wake else None

    def deliver(self, watcher: WatcherSpec, order: tuple[str, ...], lines: list[str],
                cursor: str) -> None:
        q = self.queues.get(watcher.id)
        if q is None:
            q = self.queues[watcher.id] = PlanQueue(watcher, order)
        q.watcher, q.order = watcher, order  # a reload may have changed them: the next run
        q.add(lines, cursor, self.host.config.limits.max_matches)
        self.start(q)

    def start(self, q: PlanQueue) -> None:
        if q.count and (q.task is None or q.task.done()):
            q.task = self.host.spawn(self._loop(q), f"plan:{q.watcher.id}")

    def start_all(self) -> None:
        for q in self.queues.values():
            self.start(q)

    async def _loop(self, q: PlanQueue) -> None:
        while (taken := q.take()) is not None:
            lines, count, cursor = taken
            plan_id = cursor or f"{q.watcher.id}:{int(self.host.clock.now() * 1e6):016x}"
            try:
                await run_plan(self.host, q, lines, count, plan_id)
            except Exception as exc:  # a bug in one plan must not stop the others
                self.host.log.error(f"plan {plan_id} failed: {exc!r}", q.watcher.id,
                                    event="plan-error")

    @property
    def busy(self) -> bool:
        return any(q.count or (q.task is not None and not q.task.done())
                   for q in self.queues.values())

    async def cancel(self) -> None:
        """Stop every plan: steps not handed to an agent yet are recorded dropped."""
        tasks = [q.task for q in self.queues.values() if q.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for q in self.queues.values():
            if q.count:  # no plan record was written for them: the log says so
                self.host.log.warning(f"{q.count} match(es) waiting for the next run of its "
                                      "plan were not delivered: the runner is stopping",
                                      q.watcher.id, event="plan-dropped", count=q.count)
                q.take()
