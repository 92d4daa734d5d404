"""The supervisor's hubs: starting the agent hub, and the action hub with each watcher's actions;
a watcher's matches handed to both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from watchrun.clock import Clock
from watchrun.config.model import Config, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner
from watchrun.runtime.problems import Problems

if TYPE_CHECKING:
    from watchrun.actions.hub import ActionHub
    from watchrun.agents.hub import AgentHub
    from watchrun.runtime.pipeline import WatcherPipeline
    from watchrun.runtime.watchers import WatcherSet


class SupervisorHubs:
    """The part of `Supervisor` that builds the hubs (each imported only when the config has
    agents, or actions), hands them a watcher's matches, and passes a watcher's start and stop
    on to its actions."""

    config: Config
    layout: OutputLayout
    log: RunLog
    clock: Clock
    spawner: Spawner
    once: bool
    problems: Problems
    hub: AgentHub | None
    hub_task: asyncio.Task[None] | None
    actions: ActionHub | None
    actions_task: asyncio.Task[None] | None
    spawn: Callable[[Any, str], asyncio.Task[Any]]
    set: WatcherSet

    async def start_hub(self) -> None:
        hub = await asyncio.to_thread(_agent_hub)  # (~20 ms of imports: off the loop)
        self.hub = await hub.open(self.config, self.layout, self.log.scoped("agent"),
                                  self.clock, self.spawner, once=self.once,
                                  problem=self.problems.keep)
        self.hub_task = self.spawn(self.hub.run(), "agents")

    def matched(self, spec: WatcherSpec, found: Sequence[MatchInfo],
                stream: WatcherPipeline) -> None:
        """New matches of a watcher, also of one being stopped (it reads until it ends): to
        the agents it wakes, and to its actions, which fire for a running watcher only."""
        if spec.wake and self.hub is not None:
            self.hub.deliver(spec, found)
        if spec.actions and self.actions is not None:
            rt = self.set.running.get(spec.id)
            stopping = rt is None or rt.pipeline is not stream
            self.actions.deliver(spec, found, stream, stopping=stopping)

    # -- actions --------------------------------------------------------------------------
    async def record_unfired(self, wid: str, pipeline: WatcherPipeline) -> None:
        """Before a watcher's `stop`: what its matches did not fire after its actions stopped."""
        if self.actions is not None:
            await self.actions.record_unfired(wid, pipeline)

    async def stop_actions(self, wid: str) -> None:
        """A watcher is being stopped: its running firings are cancelled and recorded."""
        if self.actions is not None:
            await self.actions.stop_watcher(wid)

    def attach_actions(self, spec: WatcherSpec, pipeline: WatcherPipeline) -> None:
        """A watcher (re)started: its actions take up what a reload carried over for them."""
        if spec.actions and self.actions is not None:
            self.actions.attach(spec, pipeline)

    def start_actions(self) -> None:
        """The owner of every action's tasks, when a watcher has actions (imported only then)."""
        if any(w.actions for w in self.config.watchers):
            self._action_hub()

    def track_actions(self, spec: WatcherSpec) -> None:
        """A watcher added at runtime: its actions are the hub's too (started for them)."""
        if spec.actions:
            self._action_hub().track(spec)

    def _action_hub(self) -> ActionHub:
        if self.actions is None:
            from watchrun.actions.hub import ActionHub

            self.actions = ActionHub(self.config, self.log, self.clock, self.spawner,
                                     once=self.once)
            self.actions_task = self.spawn(self.actions.run(), "actions")
        return self.actions


def _agent_hub() -> type[AgentHub]:
    """The agent hub, imported only when agents are configured."""
    from watchrun.agents.hub import AgentHub

    return AgentHub
