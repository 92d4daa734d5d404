"""The supervisor: starts everything or nothing, serves signals and requests, stops cleanly
(`startup.py` and `shutdown.py` take the supervisor through the start and the stop).

Every task belongs to the supervisor's TaskGroup (watchers, the agent hub, the action hub, the
once-mode driver, the watchdog, the loop-lag monitor, the orphan reaper, the heap trimmer) and
is cancelled and awaited by it. Everything start-up acquires is pushed on an exit stack, so a
failed step undoes the steps before it, in reverse, exactly as a normal stop does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from watchrun.clock import Clock
from watchrun.config.model import Config
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.process.spawn import Spawner
from watchrun.runtime import client_gone, startup
from watchrun.runtime import reload as reloading
from watchrun.runtime import shutdown as stopping
from watchrun.runtime.census import counted, disabled, held_up
from watchrun.runtime.gate import Evidence
from watchrun.runtime.hubs import SupervisorHubs
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.problems import Problems
from watchrun.runtime.sdnotify import SdNotify
from watchrun.runtime.signals import SignalInbox, handle_signals, reap_orphans_when
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.tally import Tally
from watchrun.runtime.trim import Trimmer
from watchrun.runtime.watchers import WatcherSet, counters_of
from watchrun.runtime.wiring import open_sink
from watchrun.sources.checkpoints import CheckpointStore

if TYPE_CHECKING:
    from pathlib import Path

    from watchrun.actions.hub import ActionHub
    from watchrun.agents.hub import AgentHub
    from watchrun.sources.command import Echo

__all__ = ["RunnerState", "StartupError", "Supervisor"]

StartupError = startup.StartupError


class RunnerState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RELOADING = "reloading"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Supervisor(SupervisorHubs):
    """Runs every watcher (and hands matches to the agents) until told to stop."""

    def __init__(self, config: Config, layout: OutputLayout, log: RunLog, clock: Clock,
                 spawner: Spawner, *, once: bool = False,
                 echo: Echo | None = None,
                 reload: Callable[[], Config | None] | None = None, force_poll: bool = False,
                 metrics: tuple[str, int] | None = None, guardian: bool = False,
                 sinks: Callable[..., JsonlSink] = open_sink,
                 checkpoints: Callable[[Path], CheckpointStore] = CheckpointStore) -> None:
        self.config, self.layout, self.log, self.clock = config, layout, log, clock
        self.spawner, self.once, self._reload = spawner, once, reload
        self.force_poll, self.metrics, self.guardian = force_poll, metrics, guardian
        self.state = RunnerState.STARTING
        self.problems = Problems(log)
        self.problems.standing.append(lambda: disabled(self.config))  # (as the config is now)
        self.lag = LoopLag(stalled=self.problems.stalled, resumed=self.problems.resumed,
                           suspended=self.problems.suspended)
        self.board = StatusBoard(layout.state, clock, self.lag)
        self.sd = SdNotify()
        self.hub: AgentHub | None = None
        self.actions: ActionHub | None = None
        """Reactions to matches (webhook, exec); built only when a watcher has actions."""
        self.actions_task: asyncio.Task[None] | None = None
        self.runtime_errors: list[str] = []
        self.stop_reason: str | None = None
        """Why it stopped: `once` (a once run's end), a signal's name, `startup-failed`."""
        self.tally = Tally()  # metrics totals: survive reload and stop, not a forget for good
        log.add_tap(self.tally.observe)
        self.set = WatcherSet(self, checkpoints(layout.state), sinks, echo)
        self._tg: asyncio.TaskGroup | None = None
        self.hub_task: asyncio.Task[None] | None = None
        self.driver: asyncio.Task[None] | None = None
        self.watchdog: asyncio.Task[None] | None = None
        self._orphans = asyncio.Event()
        self.reload_pending = False
        """A SIGHUP came while starting: reload once started."""
        self.reading_config = False
        """A reload is reading the config (a stop signal then gives it up)."""
        self.stop_heard: str | None = None
        """A stop signal that came while a reload was applied: it starts nothing more."""
        self.kill_timer: asyncio.TimerHandle | None = None
        """Kills what remains, once stopTimeout has passed since that signal (`kill_after`)."""
        self.reloads = {"ok": 0, "partial": 0, "failed": 0, "last": 1}  # (last: applied whole)
        self._inbox: SignalInbox | None = None
        self._stop_asked: signal.Signals | None = None  # (before `run()`: see request_*)
        self._reload_asked = False
        self.changing = asyncio.Lock()
        """Held while the set of watchers changes (a reload; `add`, `start`, `restart`, `stop`,
        `clear`), so one change sees the result of the one before."""

    @property
    def watchers(self) -> dict[str, Any]:
        return self.set.running

    @property
    def evidence(self) -> dict[str, Evidence]:
        return self.set.evidence

    # -- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        """Start everything or nothing, serve until told to stop, stop everything. A failed
        start raises StartupError (one line naming the cause) after undoing what it did."""
        loop = asyncio.get_running_loop()
        handler = loop.get_exception_handler()
        loop.set_exception_handler(self.problems.loop_error)
        inbox = SignalInbox(loop)  # first: a signal during start-up is recorded, not fatal
        self._inbox = inbox
        if self._stop_asked is not None:
            inbox.push(self._stop_asked)
        if self._reload_asked:  # (a SIGHUP before the inbox: one reload once started)
            inbox.push(signal.SIGHUP)
        sigchld = handle_signals(loop, {signal.SIGCHLD: self._orphans.set})
        failure: StartupError | None = None
        try:
            async with contextlib.AsyncExitStack() as undo, asyncio.TaskGroup() as tg:
                self._tg = tg
                helpers = [tg.create_task(self.lag.run(), name="loop-lag"),
                           tg.create_task(reap_orphans_when(self._orphans), name="orphans")]
                if not self.once:  # (a once run's heap ends with it)
                    helpers.append(tg.create_task(Trimmer().run(), name="heap-trim"))
                reason = "startup-failed"
                try:
                    reason = await startup.start_or_stop(self, undo, inbox) or \
                        await self._serve(inbox)
                except StartupError as exc:
                    failure = exc
                finally:  # from here on, nothing starts
                    self.state, self.stop_reason = RunnerState.STOPPING, reason
                    await stopping.shutdown(self, inbox, reason)
                    client_gone.release(self)  # (a client may outlive the runner)
                    for task in helpers:
                        task.cancel()
        finally:
            # STOPPING -> STOPPED: everything flushed (before the signals are given back: a
            # stop from now on is no runner's to act on, `request_stop`)
            self.state = RunnerState.STOPPED
            self._inbox = None
            unread = [sig for sig in inbox.close() if sig != signal.SIGHUP]
            if unread and self.once and self.stop_reason == "once":  # (as a second stop)
                self.stop_reason = unread[0].name
            sigchld()
            loop.set_exception_handler(handler)
        if failure is not None:
            raise failure

    def request_stop(self, sig: signal.Signals = signal.SIGTERM) -> bool:
        """Stop as on `sig` (`watchrun mcp` at its end; a stop signal before the loop holds
        the signals); before `run()`: as soon as it runs. Whether it will: not once stopped."""
        if self.state is RunnerState.STOPPED:
            return False
        self._stop_asked = self._stop_asked or sig
        if self._inbox is not None:
            self._inbox.push(sig)
        return True

    def request_reload(self) -> None:
        """A SIGHUP that came before `run()` took the signals over: a reload once started."""
        self._reload_asked = True

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        """A task owned by the supervisor's TaskGroup."""
        assert self._tg is not None
        return self._tg.create_task(coro, name=name)

    def started(self) -> None:
        """Every source holds its start position, but those held by their file system (said,
        and named here): STARTING -> RUNNING, READY=1."""
        self.state = RunnerState.RUNNING
        # once: file watchers start after the commands, but they are part of this run
        counts = self.set.census()  # (a command that could not start is no running one)
        watchers, each = counted(counts)
        a = len(self.config.agents)
        summary = f"{watchers}{each}, {a} agent{'' if a == 1 else 's'} running"
        why = disabled(self.config, self.once)
        held = self.set.held_up()
        off = f": {why}" if why is not None else held_up(held)
        mode, polling = self.set.notify_mode
        said = f"{mode}, {polling} polling" if polling else mode
        self.log.info(f"{summary} (change notification: {said}){off}", event="ready",
                      watchers=sum(counts.values()), running=counts.get("running", 0),
                      states=counts, agents=a, notify=mode, polling=polling, notReady=held)
        self.sd.ready(summary + off)
        if self.sd.watchdog_s:
            self.watchdog = self.spawn(self.sd.keep_pinging(self.sd.watchdog_s / 2), "watchdog")
        if self.once:
            self.driver = self.spawn(self._once(), "once")

    async def _serve(self, inbox: SignalInbox) -> str:
        if self.reload_pending:  # (a SIGHUP during the start: its reload hears stops too)
            inbox.push(signal.SIGHUP)
        while True:
            sig = await inbox.next_before(self.driver)
            if sig is None:
                return "once"  # once mode: everything ran
            if sig != signal.SIGHUP:
                return sig.name  # SIGTERM/SIGINT: RUNNING -> STOPPING
            stop = await reloading.reload_or_stop(self, inbox)
            if stop is not None:
                return stop

    async def _once(self) -> None:
        """Once mode: every command runs to its exit, then (unless a stop began) every file is
        read to its end, so a log the build wrote is complete; then woken turns finish."""
        await self.set.wait_running()
        if self.state is not RunnerState.RUNNING:
            return
        self.set.start_later()
        await self.set.wait_running()
        if self.hub is not None:
            await self.hub.idle()
        if self.actions is not None:
            await self.actions.idle()

    # -- requests, reload, problems -------------------------------------------------------
    def problem(self, message: str, wid: str | None = None, event: str = "message") -> None:
        """Report a problem the runner survives: the log, `status`, the watcher's snapshot."""
        self.problems.report(message, wid, event)
        if wid is not None:
            self.board.note(wid, message)

    async def stop_watcher(self, wid: str, reason: str) -> None:
        await self.set.stop(wid, reason)

    def metrics_snapshot(self) -> dict[str, Any]:
        agents = self.hub.snapshot() if self.hub is not None else []
        watchers = {wid: counters_of(rt) for wid, rt in self.watchers.items()}
        self.tally.know(self.set.named())  # (one a reload could not start: its series, down)
        return {"up": self.state == RunnerState.RUNNING, "watchers": watchers, "agents": agents,
                "loop_lag_max_s": self.lag.max_s, "totals": self.tally.watchers(),
                "agentTotals": self.tally.agents(),
                "actions": self.actions.counts() if self.actions is not None else {},
                "reloads": dict(self.reloads)}

    async def control(self, req: dict[str, Any]) -> dict[str, Any]:
        from watchrun.runtime.commands import dispatch  # (a live runner's start loaded it;
        # a once run's first request does: `run --once` starts without it)

        return await dispatch(self, req)

    async def reload(self) -> None:
        """SIGHUP: re-read the config; keep the running one when the new one is invalid. No
        error while applying it ends the runner: each is reported and the rest goes on."""
        if self._reload is None:
            return
        if self.once:  # a restart would drop what a command's run saw: its gate would pass
            return self.log.warning("SIGHUP ignored: a `run --once` runner judges the config it "
                                    "started with, each command run once", event="reload-ignored")
        self.reading_config = True  # (waiting for a change under way, then reading: until
        try:  # the new config is read, a stop gives the reload up)
            async with self.changing:
                self.state = RunnerState.RELOADING  # RUNNING -> RELOADING
                self.sd.reloading()
                try:
                    new = await asyncio.to_thread(self._reload)
                    self.reading_config = False
                    refused = "the new config is invalid or could not be read (the log's " \
                        "`reload:` lines, or `watchrun validate`, say why)" if new is None else None
                    unapplied: list[str] = []
                    if new is not None:  # (what failed reloads said is no longer so)
                        self.problems.forget("reload failed")
                        refused, unapplied = await reloading.apply(self, new)
                    if refused is not None:  # nothing of the new config applied
                        self.reloads |= {"failed": self.reloads["failed"] + 1, "last": 0}
                        self.problem(f"reload failed: {refused}; keeping the running one",
                                     event="reload-failed")
                    else:  # (`partial`: applied but for these parts, each a problem)
                        done = "partial" if unapplied else "ok"
                        self.reloads |= {done: self.reloads[done] + 1, "last": int(not unapplied)}
                except Exception as exc:
                    self.reloads |= {"failed": self.reloads["failed"] + 1, "last": 0}
                    self.problem(f"reload failed: {exc!r}; going on with what is running")
                finally:
                    self.state = RunnerState.RUNNING  # RELOADING -> RUNNING
                    watchers, each = counted(self.set.census())
                    self.sd.ready(f"{watchers}{each or ' running'}")
        finally:
            self.reading_config = False

