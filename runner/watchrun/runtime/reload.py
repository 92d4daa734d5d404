"""A SIGHUP's reload, a stop signal heard meanwhile, and applying the re-read config to the live
runner: unchanged watchers keep running, changed and removed ones stop, new and changed ones
start, but a watcher stopped by request (`watchrun stop`), changed or not, stays stopped (as
supervisord's `update` leaves a program a user stopped) until `watchrun start` starts it with
the config's spec. A change of the settings all watchers share is set in place, but for a limit
a watcher reads only at its start, which restarts those that read it (runtime/retune.py).
Watchers added at runtime are in no file: they keep running, unless the config now names their
id, which then is the config's, or names it in other case or as a watcher's `previousId` (that
watcher takes its place: it is stopped and forgotten), or `limits.maxWatchers` has no room left
for them after the config's (those stopped by request take none; the oldest kept first), or
they wake an agent the config no longer has (stopped: their matches would wake no one; what
they matched before, with the agent's queue, is recorded dropped), or `limits.enabled` is now
false (each stopped with that said in `status`). A removed file watcher whose file is gone is
forgotten (runtime/forgetting.py). No step's failure ends the runner: each is reported (log,
`status`, an `error` record where the watcher has a sink) and the rest goes on; the parts of
the new config that could not apply (the agents, the actions, a watcher that could not start:
listed `stopped`, with why) make the reload `partial`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Protocol

from watchrun.config.model import Config, WatcherSpec
from watchrun.config.shared import restart_reason, shared_changes
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.process.tree import limit_hint
from watchrun.runtime.census import counted, disabled
from watchrun.runtime.ending import STOP_RECORD_S
from watchrun.runtime.forgetting import forget_files, forget_gone
from watchrun.runtime.retune import emptied, retune
from watchrun.runtime.shutdown import Stopping, hup_while_stopping, kill_after
from watchrun.runtime.signals import SignalInbox
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.tally import Tally
from watchrun.runtime.watchers import WatcherSet
from watchrun.runtime.wiring import precompile

if TYPE_CHECKING:
    from watchrun.actions.hub import ActionHub
    from watchrun.agents.hub import AgentHub

__all__ = ["apply", "reload_or_stop"]

PRECOMPILE_BATCH = 64
"""Watchers compiled off the loop at a time before they start: well under the 256 compiled
matchers `matcher.compile_for` keeps, so none is evicted before its start takes it."""


class Reloader(Stopping, Protocol):
    reading_config: bool
    stop_heard: str | None

    async def reload(self) -> None: ...


async def reload_or_stop(sup: Reloader, inbox: SignalInbox) -> str | None:
    """A reload, hearing the signals meanwhile; the stop signal's name, if one came. A stop
    before the config is read (the reload waiting for a change under way, or reading a file on
    a mount that stopped answering, which never ends) gives the reload up; one while it is
    applied waits for it, with the stop's bound begun (`kill_after`: what remains is killed
    stopTimeout after the signal; a second stop signal kills it now). A SIGHUP meanwhile is one
    more reload after it."""
    reloading = asyncio.ensure_future(sup.reload())
    stop: str | None = None
    again = False
    while not reloading.done():
        sig = await inbox.next_before(reloading)
        if sig is None:
            continue
        if sig == signal.SIGHUP:
            if stop is None:
                again = True
            else:  # (the runner stops next)
                hup_while_stopping(sup)
            continue
        if stop is not None:  # a second one: as during the runner's stop
            sup.log.warning("second signal: killing what remains now")
            kill_after(sup, 0, None)
            continue
        stop = sup.stop_heard = sig.name  # (an apply under way starts nothing more)
        if sup.reading_config:
            reloading.cancel()
            await asyncio.wait({reloading})
            sup.log.warning(f"reload given up: {stop} came before the new config was read",
                            event="reload-given-up")
        else:  # what the apply stops, and then the rest, within stopTimeout of the signal
            grace = sup.config.limits.stop_timeout_ms / 1000
            sup.log.info(f"{stop} during a reload: stopping once what it stops has ended "
                         f"(killed {grace:g} s from now; a second {stop} kills it now)",
                         event="stop-in-reload", signal=stop)
            kill_after(sup, grace, f"stopTimeout ({grace:g} s) has passed since {stop}, which "
                       "came during a reload: killing what remains")
    if again and stop is None:
        inbox.push(signal.SIGHUP)
    return stop


class Reloading(Protocol):
    config: Config
    layout: OutputLayout
    log: RunLog
    board: StatusBoard
    stop_heard: str | None
    set: WatcherSet
    hub: AgentHub | None
    actions: ActionHub | None
    tally: Tally

    async def start_hub(self) -> None: ...
    def start_actions(self) -> None: ...
    def problem(self, message: str, wid: str | None = None) -> None: ...


async def apply(sup: Reloading, new: Config) -> tuple[str | None, list[str]]:
    """Apply `new`: nothing, and why, when it cannot apply while running; else None and the
    parts of it that could not apply (each reported as it failed)."""
    old = sup.config
    if old.output.dir != new.output.dir:
        return (f"output.dir cannot change while running ({old.output.dir} → "
                f"{new.output.dir}): restart the runner"), []
    if (why := emptied(old, new)) is not None:
        return why, []
    unapplied: list[str] = []
    if shared := shared_changes(old, new):  # (before a stop: its last records redacted so too)
        sup.log.info(retune(sup.set, sup.board, old, new, shared), event="reload-settings",
                     settings=shared)
    sup.config = new
    try:
        if sup.hub is not None:
            await sup.hub.reload(new)
        elif new.agents:
            await sup.start_hub()
    except Exception as exc:
        unapplied.append("the agents")
        sup.problem(f"reload: the agents could not be updated: {exc}")
    try:  # before changed watchers stop: their actions' last records go in their streams
        if sup.actions is not None:
            await sup.actions.reload(new)
        sup.start_actions()
    except Exception as exc:
        unapplied.append("the actions")
        sup.problem(f"reload: the actions could not be updated: {exc}")
    wanted = {w.id: w for w in new.watchers} if new.limits.enabled else {}
    no_room: set[str] = set()
    orphans: set[str] = set()
    renamed = {w.previous_id.lower(): w.id for w in wanted.values() if w.previous_id}
    in_case = {wid.lower(): wid for wid in wanted}
    taken_over: set[str] = set()
    cased: set[str] = set()  # (of those, the ones whose checkpoint no watcher adopts)
    # the config's watchers stopped by request stay stopped (_kept_stopped): as for `add`,
    # they take no room under maxWatchers
    before = {w.id for w in old.watchers}
    resting = {wid for wid in sup.set.stopped_by_request
               if wid in wanted and wid in before and wid not in sup.set.running}
    for wid, spec in list(sup.set.runtime.items()):
        if wid in wanted:
            del sup.set.runtime[wid]
            entry = sup.set.sup.board.entries.get(wid)
            if entry is not None:
                entry.origin = "config"
            sup.problem("reload: the config now names this id, so the config's watcher "
                        "replaces the one added at runtime", wid)
        elif wid.lower() in renamed:  # (its checkpoint is adopted: it may not read on too)
            del sup.set.runtime[wid]
            taken_over.add(wid)
            sup.problem(f"reload: the config's watcher {renamed[wid.lower()]} has this id as "
                        "its previousId, so it replaces the one added at runtime and reads on "
                        "from its checkpoint: stopped and forgotten", wid)
        elif wid.lower() in in_case:  # (ids are file names: as `add` refuses it)
            del sup.set.runtime[wid]
            taken_over.add(wid)
            cased.add(wid)
            sup.problem(f"reload: the config's watcher {in_case[wid.lower()]} differs from this "
                        "id only in case, and ids are file names, so it replaces the one added "
                        "at runtime: stopped and forgotten", wid)
        elif wid in sup.set.running and new.limits.enabled:
            if gone := new.missing_agents(spec):  # (as a config watcher's is checked: one
                # would make the config invalid)
                orphans.add(wid)
                sup.problem(f"reload: it wakes agent {gone[0]!r}, which the config no longer "
                            "has: stopped, so no match of it goes unheard (`watchrun clear "
                            f"{wid}` forgets it; or put the agent back and `watchrun start "
                            f"{wid}`)", wid)
                continue
            if len(wanted) - len(resting) >= new.limits.max_watchers:  # (oldest first)
                no_room.add(wid)
                sup.problem(f"reload: limits.maxWatchers is {new.limits.max_watchers}, filled "
                            "by the config's watchers and those added before it: stopped "
                            f"(`watchrun start {wid}` once there is room, `watchrun clear` "
                            "forgets it)", wid)
                continue
            wanted[wid] = spec  # kept: in no file, it lives until stopped or the runner exits
        elif wid in sup.set.running:  # (no watcher runs: as `add` and `start` are refused)
            sup.problem("reload: limits.enabled is false: stopped (`watchrun start "
                        f"{wid}` once it is true again, `watchrun clear` forgets it)", wid)
    held = _kept_stopped(sup, old, wanted, bool(shared))
    restarts = {wid: why for wid, rt in sup.set.running.items()
                if (why := restart_reason(rt.spec.kind, old, new)) is not None}
    trouble: dict[str, str] = {}

    async def stop(wid: str) -> None:
        why = "no room" if wid in no_room else "its agent removed" if wid in orphans else \
            "limits.enabled is false" if not new.limits.enabled else \
            "removed" if wid not in wanted else "config changed" \
            if sup.set.running[wid].spec != wanted[wid] else None
        problems = await sup.set.stop(wid, reason="reload")
        sup.log.info(f"{why}; stopped" if why else f"restarting: {restarts[wid]}", wid)
        if problems:
            trouble[wid] = "; ".join(problems)

    # together, as the runner's stop does: one by one, commands that wait out stopTimeout
    # held the reload (and every signal behind it) for the sum of theirs
    await asyncio.gather(*(stop(wid) for wid, rt in list(sup.set.running.items())
                           if wid not in wanted or rt.spec != wanted[wid] or wid in restarts))
    try:  # what the stopped watchers matched for removed agents: recorded dropped
        if sup.hub is not None:
            await sup.hub.settle()
    except Exception as exc:
        sup.problem(f"reload: the removed agents could not be closed: {exc}")
    for wid in taken_over:  # (stopped above, its checkpoint saved: now the config's to adopt)
        sup.board.forget(wid)
    await forget_files(sup, sup.set, sorted(cased))  # (forgotten for good, as `clear` does:
    # added again, it is a new watcher, not one that reads on from its old checkpoint)
    todo = [spec for wid, spec in wanted.items()
            if wid not in sup.set.running and wid not in held]
    if sup.stop_heard is not None and todo:  # the runner stops next: nothing starts now
        sup.log.warning(f"reload cut short: {sup.stop_heard} came while it was applied; "
                        f"{len(todo)} new or changed watchers not started", event="reload-cut")
        todo = []
    for at in range(0, len(todo), PRECOMPILE_BATCH):
        batch = todo[at:at + PRECOMPILE_BATCH]  # compiled off the loop, then started
        await asyncio.to_thread(precompile, batch, sup.set.databases, threading.get_ident())
        for spec in batch:  # (`stop_heard`: one may come during a start)
            if sup.stop_heard is None and not await _start(sup, spec, trouble.get(spec.id)):
                unapplied.append(f"watcher {spec.id}")
    await forget_gone(sup, sup.set, old)
    counts = sup.set.census()
    watchers, each = counted(counts)
    said = f"reloaded: {watchers}{each or ' running'}"
    if (why := disabled(sup.config)) is not None:
        said += f": {why}"
    fields = {"watchers": sum(counts.values()), "running": counts.get("running", 0),
              "states": counts}
    if unapplied:  # (each said above, and in `status`)
        sup.log.warning(f"{said}; not applied: {', '.join(unapplied)}", event="reloaded",
                        **fields, unapplied=unapplied)
    else:
        sup.log.info(said, event="reloaded", **fields)
    return None, unapplied


def _kept_stopped(sup: Reloading, old: Config, wanted: dict[str, WatcherSpec],
                  shared: bool) -> set[str]:
    """The config's watchers stopped by request that the new config names too: they stay
    stopped (said in the log; `list` shows the spec `watchrun start` will start). Those it no
    longer names are gone, as any removed watcher: named again, they are new, and start."""
    before = {w.id: w for w in old.watchers}
    held = {wid for wid in sup.set.stopped_by_request
            if wid in wanted and wid in before and wid not in sup.set.running}
    sup.set.stopped_by_request &= held | sup.set.runtime.keys()
    board = sup.set.sup.board
    for wid in sorted(held):
        spec = wanted[wid]
        changed = shared or before[wid] != spec
        then = "its new settings apply when" if changed else "it runs again once"
        sup.log.info(f"stopped by request: kept stopped by the reload ({then} `watchrun start "
                     f"{wid}` starts it)", wid, event="kept-stopped", changed=changed)
        entry = board.entries.get(wid)
        if entry is not None and entry.spec != spec:  # (listed with what starts next)
            entry.spec, entry.said = spec, None
            board.touch(wid)
    return held


async def _start(sup: Reloading, spec: WatcherSpec, trouble: str | None) -> bool:
    """Start a new or changed watcher; `trouble`: what went wrong while it was stopped. One
    that cannot start (its JSONL cannot be opened) is listed stopped, with why: False."""
    try:
        rt = await sup.set.build_off_loop(spec)
    except Exception as exc:
        sup.board.not_started(spec, sup.set.origin(spec.id), sup.config.records_redactor())
        sup.problem(f"reload: could not be started: {exc}{limit_hint(exc)}", spec.id)
        return False
    sup.set.launch(rt)
    if trouble:  # told in its own stream too, now that it has a sink again
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rt.pipeline.event("error", code="reload-problem", message=(
                f"while it was stopped for the reload: {trouble}")), STOP_RECORD_S)
    return True
