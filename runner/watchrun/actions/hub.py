"""Every action of a live runner: one TaskGroup owns every firing's task and the throttle timer;
the supervisor hands it each watcher's matches (`deliver`, never blocking) and stops it first at
shutdown, so cancelled firings are recorded before the watchers' files close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from watchrun.actions.payload import Outgoing
from watchrun.actions.program import run_program
from watchrun.actions.results import Result
from watchrun.actions.watcher_actions import Stream, WatcherActions
from watchrun.actions.webhook import BACKOFF_S, send
from watchrun.actions.windows import Carried
from watchrun.clock import RECHECK_S, Clock
from watchrun.config.model import ActionSpec, Config, WatcherSpec
from watchrun.config.shared import restart_reason
from watchrun.events import MatchInfo
from watchrun.match.redact import redactor
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner

__all__ = ["ActionHub", "Stream"]


class _Unfired:
    """Matches of one action that came after it stopped."""

    def __init__(self, type_: str, reason: str) -> None:
        self.type, self.reason = type_, reason
        self.batches = self.matches = 0


class ActionHub:
    """Owns every action's work; see the module doc. `run()` must be running for firings to
    go out; `shutdown()` ends it."""

    def __init__(self, config: Config, log: RunLog, clock: Clock, spawner: Spawner, *,
                 once: bool = False, backoff_s: float = BACKOFF_S) -> None:
        self.log, self.clock, self.spawner = log, clock, spawner
        self.once, self.backoff_s = once, backoff_s
        self.changed = asyncio.Event()
        """Set when a firing or a record batch finished (`idle` waits on it)."""
        self._watchers: dict[str, WatcherActions] = {}
        self._counts: dict[str, dict[str, dict[str, int]]] = {}
        self._unfired: dict[str, dict[str, _Unfired]] = {}
        """watcher → action → matches that came after its actions stopped (`record_unfired`)."""
        self._carried: dict[str, dict[str, tuple[ActionSpec, Carried]]] = {}
        """watcher → action → its gate's windows when a reload closed it, for the same action
        after the reload: at most one firing per throttle window, and a threshold's count,
        reload or not."""
        self._runtime: dict[str, WatcherSpec] = {}
        """Watchers added at runtime (`track`): their actions fire as a config watcher's."""
        self._tg: asyncio.TaskGroup | None = None
        self._poke = asyncio.Event()
        self._stop = asyncio.Event()
        self._closed = False
        self._configure(config)

    def _configure(self, config: Config) -> None:
        self.config = config
        self._specs = {w.id: w for w in config.watchers}
        for wid in self._specs:  # (the config's watcher of an id replaces an added one)
            self._runtime.pop(wid, None)
        self.redactor = redactor(config.redact)
        self.keep = config.limits.match_lines
        self.grace_s = config.limits.stop_timeout_ms / 1000

    @property
    def running(self) -> bool:
        return self._tg is not None and not self._stop.is_set()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A task owned by the hub's TaskGroup (only while `running`); `coro` is closed when a
        cancel comes before it ran (no "never awaited" warning)."""
        assert self._tg is not None

        async def owned() -> None:
            try:
                await coro
            except Exception as exc:  # a bug in one firing must not end the runner's TaskGroup
                self.log.error(f"{name} failed: {exc!r}", event="action-error")
            finally:
                self.changed.set()

        task = self._tg.create_task(owned(), name=name)
        task.add_done_callback(lambda _: coro.close())
        return task

    def counter(self, wid: str, action: str) -> dict[str, int]:
        """The counts of one action; they outlive reloads (metrics never go back)."""
        return self._counts.setdefault(wid, {}).setdefault(action, {})

    def forget(self, wid: str) -> None:
        """A watcher forgotten for good: its counts go (its series with them)."""
        self._counts.pop(wid, None)

    def counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """watcher → action → {fired, suppressed, dropped, ok, failed, timeout, cancelled}."""
        return {w: {a: dict(c) for a, c in actions.items()} for w, actions in self._counts.items()}

    # -- running -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Own every firing until `shutdown()` (which cancels and records what still runs)."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            timer = tg.create_task(self._timer(), name="action-timer")
            for w in self._watchers.values():
                w.kick()
            await self._stop.wait()
            timer.cancel()
        self._tg = None

    async def _timer(self) -> None:
        """Sends what a throttle window held when the window ends, looking RECHECK_S apart at
        most: the windows are on `Clock.elapsed`, which runs on while the machine sleeps, and
        asyncio's timers do not."""
        while True:
            self._poke.clear()
            due = [a.tick() for w in self._watchers.values() for a in w.actions]
            soonest = min((d for d in due if d is not None), default=None)
            delay = None if soonest is None else \
                min(max(0.0, soonest - self.clock.elapsed()), RECHECK_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)

    def poke(self) -> None:
        """Look at the throttle windows again (after the clock moved: tests with a fake one)."""
        self._poke.set()

    def deliver(self, spec: WatcherSpec, found: Sequence[MatchInfo], stream: Stream, *,
                stopping: bool = False) -> None:
        """Offer a watcher's new matches to each of its actions; never blocks. `stopping`:
        the watcher is being stopped (it reads until it ends): they fire nothing."""
        if not spec.actions or not found:
            return
        if self._closed or stopping or self._wanted(spec.id) != spec:
            self._late(spec, found)  # (the runner stops, or a reload changed the watcher,
            return  # or it is stopped: it reads until it ends)
        w = self._attached(spec, stream)
        w.stream = stream
        for action in w.actions:
            action.offer(found)
        self._poke.set()

    def track(self, spec: WatcherSpec) -> None:
        """A watcher added at runtime (`watchrun add`): its actions fire from now on, and a
        reload keeps them as it keeps the watcher."""
        self._runtime[spec.id] = spec

    def _wanted(self, wid: str) -> WatcherSpec | None:
        return self._specs.get(wid) or self._runtime.get(wid)

    def attach(self, spec: WatcherSpec, stream: Stream) -> None:
        """A watcher (re)started: when a reload carried a throttle window's held firing of its
        actions over, they take it up now, so it goes out when the window ends."""
        if spec.id in self._carried and self._wanted(spec.id) == spec and not self._closed:
            self._attached(spec, stream).kick()
            self._poke.set()

    def _attached(self, spec: WatcherSpec, stream: Stream) -> WatcherActions:
        w = self._watchers.get(spec.id)
        if w is None or w.spec != spec:
            w = self._watchers[spec.id] = WatcherActions(spec, stream, self,
                                                   self._carried.pop(spec.id, {}))
        return w

    def _late(self, spec: WatcherSpec, found: Sequence[MatchInfo]) -> None:
        """Matches that came after the watcher's actions stopped: nothing fires for them; they
        are counted as dropped, and `record_unfired` writes them before the watcher's `stop`."""
        wanted = self._wanted(spec.id)
        kept = wanted.actions if wanted is not None else ()
        held = self._unfired.setdefault(spec.id, {})
        for action in spec.actions:
            reason = "runner-stopped" if self._closed else "watcher-stopped" \
                if wanted == spec else "watcher-restarted" if action in kept else "action-removed"
            late = held.setdefault(action.name, _Unfired(action.type, reason))
            late.batches += 1
            late.matches += len(found)
            counts = self.counter(spec.id, action.name)
            counts["dropped"] = counts.get("dropped", 0) + 1

    async def record_unfired(self, wid: str, stream: Stream) -> None:
        """Before a watcher's `stop` record: one `action-dropped` record per action for the
        matches that came after its actions stopped, and a log line."""
        for name, late in self._unfired.pop(wid, {}).items():
            why = {"runner-stopped": "the runner was stopping",
                   "watcher-stopped": "the watcher was being stopped",
                   "watcher-restarted": "a reload had restarted the watcher"}.get(
                       late.reason, "a reload had removed or changed the action")
            message = (f"{late.matches} match{'es' if late.matches != 1 else ''} came after the "
                       f"actions stopped ({why}): nothing fired for them")
            fields = {"action": name, "type": late.type, "count": late.batches,
                      "matches": late.matches, "reason": late.reason, "message": message}
            self.log.warning(f"action {name}: {message}", wid, event="action-dropped")
            await stream.writer.write_lines([stream.sink.record("action-dropped", fields)])

    async def execute(self, spec: ActionSpec, outgoing: Outgoing,
                      on_retry: Callable[[int, float, str], None]) -> Result:
        if spec.type == "webhook":
            body = outgoing.slack_body() if spec.format == "slack" else outgoing.json_body()
            return await send(spec, body, self.redactor, backoff_s=self.backoff_s,
                              on_retry=on_retry)
        return await run_program(spec, outgoing, self.spawner, self.grace_s, self.redactor)

    async def idle(self) -> None:
        """Once mode: send what throttles hold now (the run is over), then return when every
        firing has ended and every record is written."""
        for w in self._watchers.values():
            for action in w.actions:
                held = action.gate.due(float("inf"))
                if held is not None:
                    action.take([held])
            w.kick()
        self._poke.set()  # (a drop just now is recorded when its second is up)
        while any(w.busy for w in self._watchers.values()):
            self.changed.clear()
            if any(w.busy for w in self._watchers.values()):
                await self.changed.wait()

    # -- reload and stop -------------------------------------------------------------------------
    async def reload(self, config: Config) -> None:
        """Before the supervisor restarts changed watchers (and those a limit read at a start
        restarts: `restart_reason`): their actions are closed (running firings cancelled and
        recorded in the old stream); an unchanged action of theirs keeps its windows
        (`Gate.carry`). Unchanged watchers keep theirs; the redaction and stopTimeout are read
        as a firing starts, but a changed matchLines (each action's `keep`) makes them anew,
        windows kept."""
        old = self.config
        lines = old.limits.match_lines != config.limits.match_lines
        self._configure(config)
        wanted = {**self._runtime, **self._specs}
        for wid, w in list(self._watchers.items()):
            spec = wanted.get(wid)
            goes_on = spec is not None and spec == w.spec and \
                restart_reason(spec.kind, old, config) is None
            if lines or not goes_on:
                del self._watchers[wid]
                kept = spec.actions if spec is not None else ()
                carried = {a.spec.name: (a.spec, a.gate.carry()) for a in w.actions
                           if a.spec in kept}
                await w.close("action-removed", kept)
                if carried:
                    self._carried[wid] = carried
                if goes_on:  # (it reads on: its actions take their windows up at once)
                    self._attached(w.spec, w.stream).kick()

    async def stop_watcher(self, wid: str) -> None:
        """A watcher is being stopped (`watchrun stop`, `restart`, `clear`, …): its running
        firings are cancelled (recorded `cancelled`, an exec program's tree stopped) and what
        waits or a throttle holds is dropped (`watcher-stopped`), all written before its `stop`.
        After a reload or at shutdown they are closed already: nothing to do."""
        w = self._watchers.pop(wid, None)
        if w is not None:
            await w.close("watcher-stopped")

    async def shutdown(self) -> None:
        """Cancel what runs (recorded `cancelled`), record what waits as dropped, write every
        record, and end `run()`."""
        self._closed = True
        watchers = list(self._watchers.values())
        self._watchers.clear()
        await asyncio.gather(*(w.close("runner-stopped") for w in watchers))
        for wid, carried in self._carried.items():  # (its watcher did not start again)
            for name, (_, windows) in carried.items():
                if windows.held is not None:
                    counts = self.counter(wid, name)
                    counts["dropped"] = counts.get("dropped", 0) + 1
                    self.log.warning(f"action {name}: 1 firing ({windows.held.count} matches) "
                                     "held by its throttle dropped: its watcher did not start "
                                     "again after the reload", wid, event="action-dropped")
        self._carried.clear()
        self._stop.set()
