"""Stopping and reloading the agent hub: halting turns, closing agents, applying a new config."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple

from msgspec.structs import replace

from watchrun.agents.plan import Plans
from watchrun.agents.state import AgentState
from watchrun.config.model import AgentSpec, Config
from watchrun.output.runlog import RunLog


class Ending(NamedTuple):
    """Why the hub stops an agent: the message said in its stream, and who (a `stopped`
    record's `by`)."""

    message: str
    by: str


STOPPING = Ending("the runner is stopping", "runner-stopping")
REMOVED = Ending("the agent was removed from the config", "reload-removed")
SLOW_STOP_S = 1.0
"""A turn told to stop that is still running after this long is said in the log."""


class StoppingHub:
    """The part of `AgentHub` that stops agents: at shutdown, and when a reload removes or
    changes them."""

    config: Config
    log: RunLog
    plans: Plans
    failures: list[str]
    _agents: dict[str, AgentState]
    _removing: dict[str, AgentState]
    _closed: bool
    _ended: bool
    _start: Callable[[AgentState], None]
    _open: Callable[[AgentSpec], Coroutine[Any, Any, AgentState]]

    async def _cancel(self, agents: list[AgentState]) -> None:
        """End their loops (a running turn stopped: SIGTERM, SIGKILL after stopTimeout); one
        whose turn outlasts SLOW_STOP_S is said in the log, since a reload, and the control
        requests behind it, wait for it."""
        tasks = {a.task: a for a in agents if a.task is not None}
        for task in tasks:
            task.cancel()
        _, slow = await asyncio.wait(tasks, timeout=SLOW_STOP_S) if tasks else (set(), set())
        for task in slow:
            self.log.warning(f"its turn has not ended {SLOW_STOP_S:g} s after it was told to "
                             "stop; it is killed once limits.stopTimeout "
                             f"({self.config.limits.stop_timeout_ms / 1000:g} s) is up, and "
                             "what waits for it (a reload, the control requests behind it) "
                             "waits until then", tasks[task].spec.name, event="turn-slow-stop")
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- stopping and reloading ---------------------------------------------------------------
    async def shutdown(self, watchers: asyncio.Future[Any] | None = None) -> None:
        """Abort running turns (`aborted`); once `watchers` (the watchers' stop) is done, drop
        what waits (recorded `dropped`, also what the watchers matched while they were being
        stopped) and close the files."""
        if self._closed:
            return
        self._closed = True
        await self.plans.cancel()  # steps not handed to an agent yet: recorded dropped
        await self.settle()
        agents = list(self._agents.values())
        await self._halt(agents, STOPPING)
        if watchers is not None:
            await asyncio.wait({watchers})
        await self.plans.cancel()  # (what came for a plan meanwhile: said in the log)
        self._agents.clear()
        self._ended = True
        await self._close(agents, STOPPING, "runner-stopped")

    async def _halt(self, agents: list[AgentState], why: Ending) -> None:
        """Abort their running turns and end their loops: no turn runs after this."""
        for a in agents:
            a.rec.stopping()
            if a.turn is not None:
                a.turn.abort(*why)
        await self._cancel(agents)

    async def _close(self, agents: list[AgentState], why: Ending, reason: str,
                     status: str | None = None) -> None:
        await self._halt(agents, why)
        for a in agents:
            a.task = None
            a.drop_all(reason, self.config.limits.match_lines, why.message)
            if status is not None:
                a.rec.emit("status", {"status": status, "source": "runner",
                                      "message": why.message})
            await a.rec.close()
            if a.rec.failed is not None:
                self.failures.append(f"agent {a.spec.name}: {a.rec.failed}")

    async def reload(self, config: Config) -> None:
        """Apply a new config: removed agents are halted (their running turn aborted) and
        closed by `settle`, which the reload calls once the watchers that woke them stopped;
        changed ones restarted (their running turn aborted, their queue kept), new ones
        started. A change of the `redact` rules alone restarts no agent: its next turn's prompt
        is redacted with them (docs/config.md "Reload")."""
        self.config = config
        specs = {s.name: s for s in config.agents}
        for name, a in list(self._agents.items()):
            spec = specs.get(name)
            if spec is None:
                del self._agents[name]
                self._removing[name] = a
                await self._halt([a], REMOVED)
            elif replace(spec, redact=a.spec.redact) == a.spec:  # (the same, or only the
                # rules: a turn takes them as it starts, the running one's prompt has left)
                a.spec = spec
            else:
                if a.turn is not None:
                    a.turn.abort("the agent's config changed", "reload-changed")
                await self._cancel([a])
                a.spec, a.ticks, a.task = spec, None, None
                a.unstartable, a.unstarted = None, 0  # (its old command's problem)
                a.window.max_turns = spec.max_turns
                self._start(a)
                self.log.info("config changed: restarted", name)
        for name, spec in specs.items():
            if name not in self._agents:
                a = await self._open(spec)
                if self._closed:  # shut down while its history was read
                    await self._close([a], STOPPING, "runner-stopped")
                    return
                self._agents[name] = a
                self._start(a)
                self.log.info("added", name)

    async def settle(self) -> None:
        """Close the agents a reload removed: what waits for them, and what the old watchers
        matched for them until they stopped, is recorded dropped (agent-removed)."""
        while self._removing:
            name, a = self._removing.popitem()
            await self._close([a], REMOVED, "agent-removed", "disabled")
            self.log.info("removed", name)
