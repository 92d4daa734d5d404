"""One agent's work: its loop takes the next batch (matches, sends, its schedule, a plan step)
and runs it as a turn when the agent's limits allow; each turn's deliveries, start and end are
recorded and logged, and its plan step told how it ended."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from watchrun.agents.prompt import Delivery
from watchrun.agents.state import REFUSED_S, AgentState, PlanStep, StepOutcome
from watchrun.agents.turn import TurnResult, TurnRunner
from watchrun.clock import Clock
from watchrun.config.model import Config
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner

__all__ = ["Host", "agent_loop"]


class Host(Protocol):
    """What an agent's loop needs of the hub that runs it."""

    config: Config
    log: RunLog
    clock: Clock
    spawner: Spawner
    once: bool
    changed: asyncio.Event
    """Set whenever every agent may have become idle: `AgentHub.idle` looks again."""


async def agent_loop(hub: Host, a: AgentState) -> None:
    """Take the agent's next work and run it as a turn, one at a time, until cancelled; when
    there is none, wait for some (or for the agent's next schedule tick)."""
    while True:
        a.wake.clear()
        delay = None if hub.once else a.tick(hub.clock)
        work = a.next_work()
        if work is None:
            hub.changed.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(a.wake.wait(), delay)
            continue
        a.working = True
        refused = False
        try:
            refused = not await _turn(hub, a, *work)
        except Exception as exc:  # a bug in one turn must not stop the agent
            hub.log.error(f"turn failed: {exc!r}", a.spec.name, event="turn-error")
            a.rec.emit("error", {"code": "internal", "message": repr(exc)})
        finally:
            a.working = False
            hub.changed.set()
        if refused:  # what comes meanwhile is coalesced, then refused at once
            await asyncio.sleep(REFUSED_S)


async def _turn(hub: Host, a: AgentState, trigger: str, batch: list[Delivery]) -> bool:
    """Run the work as a turn; False when maxTurns refused it."""
    step, a.taken = (a.taken if trigger == "plan" else None), None
    try:
        if a.allow_turn(hub.clock, trigger, batch, hub.config.limits, hub.log):
            await _run_turn(hub, a, trigger, batch, step)
            return True
        if step is not None:
            step.resolve(StepOutcome("dropped", why="max-turns"))
        return False
    finally:
        if step is not None:  # whatever happened, its plan learns it (no-op when told)
            step.resolve(StepOutcome("dropped", why="aborted"))


async def _run_turn(hub: Host, a: AgentState, trigger: str, batch: list[Delivery],
                    step: PlanStep | None) -> None:
    spec, limits, name = a.spec, hub.config.limits, a.spec.name
    prompt = a.prompt_for(trigger, batch, step, limits.match_lines)
    runner = TurnRunner(spec, limits, a.rec, hub.spawner, hub.clock, a.tracker)
    a.turn, a.turn_end = runner, asyncio.Event()

    def started(turn_id: str) -> None:
        a.turns += 1
        if runner.pid is not None:
            a.started(hub.clock)
        for d in batch:
            a.rec.emit("delivery", d.record("delivered", limits.match_lines, turnId=turn_id))
        how = "its process did not start" if runner.pid is None else f"pid {runner.pid}"
        hub.log.info(f"{turn_id} started ({trigger}, {how})", name,
                     event="turn-start", turnId=turn_id, trigger=trigger, pid=runner.pid)
        if runner.cut:
            how = ("under `pty` it can only be an argument" if spec.pty else
                   "give the prompt on stdin: leave {prompt} out of the command")
            hub.log.warning(f"{turn_id}: {runner.cut} bytes cut from the middle of its prompt: "
                            f"one command-line argument holds at most 128 KiB ({how})", name,
                            event="prompt-cut", turnId=turn_id, cutBytes=runner.cut)

    try:
        result = await runner.run(prompt, trigger=trigger, deliveries=[d.id for d in batch],
                                  on_start=started, plan=step.plan if step else None)
    except asyncio.CancelledError:
        if not runner.turn_id:  # stopped before its process started: say so
            a.drop(batch, "aborted", hub.config.limits.match_lines)
            a.rec.say_dropped([d.count for d in batch], "the turn was stopped before its "
                              "process started", "aborted")
        elif runner.result is not None:  # its turn-start has its turn-end
            _ended(hub, a, runner.result)
        if step is not None:
            step.resolve(StepOutcome("cancelled" if runner.turn_id else "dropped",
                                     why="the turn was stopped"))
        raise
    finally:
        a.turn = None
        a.turn_end.set()
    error = _ended(hub, a, result)
    if not result.started:
        a.not_started(error or "its process did not start")
    if step is not None:
        step.resolve(StepOutcome(result.status, result.reply, error,
                                 answer_cut=result.reply_truncated))


def _ended(hub: Host, a: AgentState, result: TurnResult) -> str:
    """A turn ended (also one the runner stopped): its totals, its `turn-end` log line; its
    error message ("" when none)."""
    a.tokens += result.usage.tokens
    a.last_reply = result.reply
    error = (result.error or {}).get("message", "")
    how = f"{result.status} in {result.duration_ms} ms, {result.usage.tokens} tokens"
    hub.log.log("info" if result.status == "done" else "warning", "turn-end",
                f"{result.turn_id} {how}" + (f": {error}" if error else ""), a.spec.name,
                turnId=result.turn_id, status=result.status, durationMs=result.duration_ms,
                **result.usage.counts())
    return error
