"""The supervisor loop: builds every watcher, routes signals, reloads, and stops cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from watchrun.agents.hub import AgentHub
from watchrun.clock import Clock
from watchrun.config.model import Config, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.output.sink import SinkWriteError
from watchrun.process.spawn import Spawner, reap_orphans
from watchrun.runtime.commands import dispatch
from watchrun.runtime.control import ControlServer
from watchrun.runtime.gate import Evidence
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.runtime.sdnotify import SdNotify
from watchrun.runtime.signals import SignalInbox
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.tally import Tally
from watchrun.runtime.wiring import Seams, WatcherRuntime, build_watcher, counters_of, evidence_of
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.command import CommandSource
from watchrun.sources.file import FileSource
from watchrun.sources.notify import Notifier


class RunnerState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RELOADING = "reloading"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Supervisor:
    """Runs every watcher (and hands matches to the agents) until told to stop."""

    def __init__(
        self,
        config: Config,
        layout: OutputLayout,
        log: RunLog,
        clock: Clock,
        spawner: Spawner,
        *,
        once: bool = False,
        echo: Callable[[bytes], None] | None = None,
        reload: Callable[[], Config | None] | None = None,
        force_poll: bool = False,
        metrics: tuple[str, int] | None = None,
    ) -> None:
        self.config = config
        self.layout = layout
        self.log = log
        self.clock = clock
        self.spawner = spawner
        self.once = once
        self.echo = echo
        self._reload = reload
        self.force_poll = force_poll
        self.metrics = metrics
        self.state = RunnerState.STARTING
        self.watchers: dict[str, WatcherRuntime] = {}
        self.store = CheckpointStore(layout.state)
        self.board = StatusBoard(layout.state, clock)
        self.sd = SdNotify()
        self.hub: AgentHub | None = None
        self.evidence: dict[str, Evidence] = {}
        self.runtime_errors: list[str] = []
        self._notifier: Notifier | None = None
        self.tally = Tally()  # metrics totals: survive reload, stop and clear
        log.add_tap(self.tally.observe)

    # -- building -------------------------------------------------------------------------
    def _start_watcher(self, spec: WatcherSpec) -> None:
        assert self._notifier is not None
        try:
            rt = build_watcher(
                spec,
                self.config,
                self.layout,
                self.log,
                Seams(self.clock, self.spawner, self.store, self._notifier),
                once=self.once,
                echo=self.echo,
                on_matches=self._matched,
                on_event=self._watcher_event,
            )
        except SinkWriteError as exc:  # e.g. a symlink in place of its JSONL: fail closed
            self._refuse(spec, f"not started: its JSONL file cannot be used: {exc}")
            return
        self.board.add(spec, rt.pipeline, rt.source, rt.engine)
        self.tally.attach(spec.id, rt.pipeline.counters)
        rt.task = asyncio.create_task(self._run_source(spec, rt.source, rt.pipeline), name=spec.id)
        self.watchers[spec.id] = rt

    def _refuse(self, spec: WatcherSpec, message: str) -> None:
        """A watcher that cannot run: said in the log, its status and its gate (exit 3)."""
        self.log.error(message, spec.id)
        self.runtime_errors.append(f"{spec.id}: {message}")
        path = str(spec.path) if spec.path is not None else None
        self.evidence[spec.id] = Evidence(0, path=path, error=message)
        self.board.refused(spec, message)

    async def _run_source(
        self, spec: WatcherSpec, source: FileSource | CommandSource, pipeline: WatcherPipeline
    ) -> None:
        try:
            await source.run(pipeline)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not take the other watchers down
            self.runtime_errors.append(f"{spec.id}: {exc!r}")
            self.log.error(f"watcher failed: {exc!r}", spec.id)
            with contextlib.suppress(Exception):
                await pipeline.event("error", code="internal", message=repr(exc))
        finally:
            self.board.touch(spec.id)

    async def stop_watcher(self, wid: str, reason: str) -> None:
        rt = self.watchers.pop(wid, None)
        if rt is None:
            return
        rt.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await rt.task
        with contextlib.suppress(Exception):
            await rt.pipeline.event("stop", reason=reason)
        rt.sink.close()
        self.board.stopped(wid)

    def _matched(self, spec: WatcherSpec, found: list[MatchInfo]) -> None:
        if spec.wake and self.hub is not None:
            self.hub.deliver(spec, found)

    def _watcher_event(self, spec: WatcherSpec, kind: str, fields: dict[str, Any]) -> None:
        self.board.touch(spec.id)

    # -- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        control = ControlServer(self.layout.control_socket, self._control)
        await control.start()  # refuses when another runner is live on this output dir
        metrics = None
        if self.metrics is not None:
            from watchrun.runtime.metrics import MetricsServer  # prometheus_client: only if asked

            metrics = MetricsServer(*self.metrics, self.metrics_snapshot)
            try:
                await metrics.start()
            except OSError:
                await control.close()  # undo what was started
                raise
        inbox = SignalInbox(loop)
        # SIGCHLD: orphans re-parented to us (we are a subreaper) are reaped by the loop.
        loop.add_signal_handler(signal.SIGCHLD, loop.call_soon, reap_orphans)
        self._notifier = Notifier(self.config.limits.poll_ms, force_poll=self.force_poll)
        if self.config.agents:
            self._start_hub()
        if self.config.limits.enabled:
            for spec in self.config.watchers:
                if not (self.once and spec.kind == "file"):  # once: files after commands
                    self._start_watcher(spec)
        for problem in self._notifier.problems:
            self.log.warning(problem)
        self.state = RunnerState.RUNNING  # STARTING -> RUNNING: every watcher is up
        # once: file watchers start after the commands, but they are part of this run
        n = len(self.watchers) + sum(self.once and s.kind == "file" and self.config.limits.enabled
                                     for s in self.config.watchers)
        a = len(self.config.agents)
        summary = f"{n} watcher{'' if n == 1 else 's'}, {a} agent{'' if a == 1 else 's'} running"
        self.log.info(f"{summary} (change notification: {self._notifier.mode})", event="ready",
                      watchers=n, agents=a,
                      notify=self._notifier.mode)
        self.sd.ready(summary)
        watchdog = asyncio.create_task(self._watchdog()) if self.sd.watchdog_s else None
        done = asyncio.create_task(self._all_done()) if self.once else None
        try:
            await self._serve(inbox, done)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            inbox.close()
            loop.remove_signal_handler(signal.SIGCHLD)
            await control.close()
            if metrics is not None:
                await metrics.close()
            self._notifier.close()
            self.board.close()
            self.sd.close()
            self.state = RunnerState.STOPPED  # STOPPING -> STOPPED: everything flushed

    async def _serve(self, inbox: SignalInbox, done: asyncio.Task[None] | None) -> None:
        while True:
            sig_wait = asyncio.ensure_future(inbox.next())
            waiters: set[asyncio.Future[Any]] = {sig_wait}
            if done is not None:
                waiters.add(done)
            finished, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            if sig_wait not in finished:  # once mode: everything ran
                sig_wait.cancel()
                await self.shutdown(inbox, reason="once")  # RUNNING -> STOPPING
                return
            sig = sig_wait.result()
            if sig == signal.SIGHUP:
                await self.reload()
                continue
            await self.shutdown(inbox, reason=sig.name)  # SIGTERM/SIGINT: RUNNING -> STOPPING
            return

    async def _all_done(self) -> None:
        """Once mode: every command runs to its exit, then every file is read to its end (so
        a log the build wrote is complete), then every woken agent turn finishes."""
        await asyncio.gather(*(rt.task for rt in self.watchers.values()), return_exceptions=True)
        if self.config.limits.enabled:
            for spec in self.config.watchers:
                if spec.kind == "file":
                    self._start_watcher(spec)
        await asyncio.gather(*(rt.task for rt in self.watchers.values()), return_exceptions=True)
        if self.hub is not None:
            await self.hub.idle()

    async def shutdown(self, inbox: SignalInbox, reason: str) -> None:
        """Stop intake, stop every process group (TERM, grace, KILL), flush and checkpoint.
        A second SIGTERM/SIGINT while this runs kills the remaining groups at once."""
        self.state = RunnerState.STOPPING
        self.sd.stopping()
        self.log.info(f"stopping ({reason})", event="stopping", reason=reason)
        for wid, rt in self.watchers.items():
            self.evidence[wid] = evidence_of(rt)
        jobs = [self.stop_watcher(wid, reason="shutdown") for wid in list(self.watchers)]
        if self.hub is not None:
            jobs.append(self._stop_hub())
        stopping: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*jobs))
        second: asyncio.Future[Any] = asyncio.ensure_future(inbox.next())
        await asyncio.wait({stopping, second}, return_when=asyncio.FIRST_COMPLETED)
        if not stopping.done():
            self.log.warning("second signal: killing what remains now")
            self.spawner.kill_all()
            await stopping
        second.cancel()

    def _start_hub(self) -> None:
        try:
            self.hub = AgentHub(
                self.config, self.layout, self.log.scoped("agent"), self.clock, self.spawner,
                once=self.once,
            )
        except SinkWriteError as exc:  # e.g. a symlink in place of an agent's JSONL
            message = f"agents not started: a JSONL file cannot be used: {exc}"
            self.log.error(message)
            self.runtime_errors.append(message)
            return
        self._hub_task = asyncio.create_task(self.hub.run(), name="agents")

    async def _stop_hub(self) -> None:
        assert self.hub is not None
        await self.hub.shutdown()
        self._hub_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._hub_task

    def metrics_snapshot(self) -> dict[str, Any]:
        agents = self.hub.snapshot() if self.hub is not None else []
        watchers = {wid: counters_of(rt) for wid, rt in self.watchers.items()}
        return {"up": self.state == RunnerState.RUNNING, "watchers": watchers, "agents": agents,
                "totals": self.tally.watchers(), "agentTotals": self.tally.agents()}

    async def _control(self, req: dict[str, Any]) -> dict[str, Any]:
        return await dispatch(self, req)

    async def reload(self) -> None:
        """SIGHUP: re-read the config; keep the running one when the new one is invalid."""
        if self._reload is None:
            return
        self.state = RunnerState.RELOADING  # RUNNING -> RELOADING
        self.sd.reloading()
        new = self._reload()
        if new is None:
            self.log.error("reload failed: the new config is invalid; keeping the running one",
                           event="reload-failed")
        else:
            await self._apply(new)
        self.state = RunnerState.RUNNING  # RELOADING -> RUNNING
        self.sd.ready(f"{len(self.watchers)} watchers running")

    async def _apply(self, new: Config) -> None:
        old = self.config
        if old.output.dir != new.output.dir:
            self.log.error(f"reload refused: output.dir cannot change while running "
                           f"({old.output.dir} → {new.output.dir}); restart the runner")
            return
        global_change = old.limits != new.limits or old.output != new.output
        self.config = new
        if self.hub is not None:
            await self.hub.reload(new)
        elif new.agents:
            self._start_hub()
        wanted = {w.id: w for w in new.watchers} if new.limits.enabled else {}
        for wid, rt in list(self.watchers.items()):
            if wid not in wanted or rt.spec != wanted[wid] or global_change:
                why = "removed" if wid not in wanted else "config changed"
                await self.stop_watcher(wid, reason="reload")
                self.log.info(f"{why}; stopped", wid)
        for wid, spec in wanted.items():
            if wid not in self.watchers:
                self._start_watcher(spec)
        self.log.info(f"reloaded: {len(self.watchers)} watchers running", event="reloaded",
                      watchers=len(self.watchers))

    async def _watchdog(self) -> None:
        """Pings systemd from the loop itself, so a stalled loop stops the pings."""
        assert self.sd.watchdog_s is not None
        while True:
            self.sd.watchdog()
            await asyncio.sleep(self.sd.watchdog_s / 2)


