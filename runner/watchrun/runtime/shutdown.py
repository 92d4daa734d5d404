"""The runner's stop, once it is `stopping`: the once driver and the watchdog end, the actions
stop first, then every watcher and the agents together (the agents' files close last); a
second SIGTERM/SIGINT kills now (a SIGHUP meanwhile reloads nothing and kills nothing: it is
said and let be)."""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Any, Protocol

from watchrun.config.model import Config
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner
from watchrun.runtime.ending import finish
from watchrun.runtime.resuming import INTERRUPTED
from watchrun.runtime.sdnotify import SdNotify
from watchrun.runtime.signals import SignalInbox
from watchrun.runtime.watchers import WatcherSet

if TYPE_CHECKING:
    from watchrun.actions.hub import ActionHub
    from watchrun.agents.hub import AgentHub

__all__ = ["Stopping", "hup_while_stopping", "kill_after", "shutdown", "stop_reason"]


class Stopping(Protocol):
    """What the stop needs of the supervisor."""

    config: Config
    log: RunLog
    once: bool
    sd: SdNotify
    spawner: Spawner
    set: WatcherSet
    hub: AgentHub | None
    actions: ActionHub | None
    runtime_errors: list[str]
    stop_reason: str | None
    kill_timer: asyncio.TimerHandle | None
    driver: asyncio.Task[None] | None
    watchdog: asyncio.Task[None] | None
    hub_task: asyncio.Task[None] | None
    actions_task: asyncio.Task[None] | None


async def shutdown(sup: Stopping, inbox: SignalInbox, reason: str) -> None:
    """Stop every watcher (its `stop` record, its sink closed) and the agents: TERM, grace, KILL
    per group. A second SIGTERM/SIGINT kills now; a SIGHUP is no second signal."""
    sup.sd.stopping()
    sup.log.info(f"stopping ({reason})", event="stopping", reason=reason)
    for task in (sup.driver, sup.watchdog):
        if task is not None:
            await finish(task)
    stopping: asyncio.Future[Any] = asyncio.ensure_future(
        _stop_everything(sup, stop_reason(reason, sup.once)))
    second: asyncio.Future[Any] = asyncio.ensure_future(_second_stop(sup, inbox))
    if sup.kill_timer is not None and \
            sup.kill_timer.when() <= asyncio.get_running_loop().time():
        sup.spawner.kill_all()  # (its time is past, and said: what started since goes too)
    try:
        await asyncio.wait({stopping, second}, return_when=asyncio.FIRST_COMPLETED)
        if second.done():
            if sup.once and reason == "once":  # (its verdict is out after it: never a pass)
                sup.stop_reason = second.result()
            if not stopping.done():  # (the first may have been no signal: a once run's end)
                said = "second signal" if reason.startswith("SIG") else \
                    f"{second.result()} while stopping ({reason})"
                sup.log.warning(f"{said}: killing what remains now")
                sup.spawner.kill_all()
        await stopping
    finally:
        second.cancel()
        if sup.kill_timer is not None:
            sup.kill_timer.cancel()


def kill_after(sup: Stopping, delay: float, said: str | None) -> None:
    """Kill what remains `delay` s from now (0: at once), saying `said`, unless the stop has
    ended by then: the bound of a stop signal that came while a reload stopped watchers, which
    waited out their grace before the runner's stop gave the others theirs (twice stopTimeout),
    and a second one then, which was heard by no one."""
    if sup.kill_timer is not None:
        sup.kill_timer.cancel()
    sup.kill_timer = asyncio.get_running_loop().call_later(delay, _kill, sup, said)


def _kill(sup: Stopping, said: str | None) -> None:
    if said is not None:
        sup.log.warning(said, event="stop-timeout")
    sup.spawner.kill_all()


def stop_reason(reason: str, once: bool) -> str:
    """The watchers' `stop` reason when the runner stops for `reason`: `interrupted` for a once
    run a signal ended before it ended by itself, whose verdict judged only part of what it was
    to (the next once run counts its matches toward its gate, as a killed run's)."""
    if reason == "startup-failed":
        return reason
    return INTERRUPTED if once and reason != "once" else "shutdown"


async def _second_stop(sup: Stopping, inbox: SignalInbox) -> str:
    """Until a second SIGTERM or SIGINT: its name. A SIGHUP (logrotate's postrotate, `systemctl
    reload`) is no order to kill: it was taken for one, and every child lost its grace period."""
    while (sig := await inbox.next()) == signal.SIGHUP:
        hup_while_stopping(sup)
    return sig.name


def hup_while_stopping(sup: Stopping) -> None:
    sup.log.warning("SIGHUP while stopping: nothing is reloaded, and the stop goes on (a "
                    "second SIGTERM or SIGINT kills what remains)", event="reload-ignored")


async def _stop_hub(sup: Stopping, watchers: asyncio.Future[None]) -> None:
    assert sup.hub is not None
    try:
        await sup.hub.shutdown(watchers)
    finally:
        if sup.hub_task is not None:
            await finish(sup.hub_task)
        sup.runtime_errors += sup.hub.failures  # (records given up: a once run fails)


async def _stop_everything(sup: Stopping, reason: str) -> None:
    """Actions first (their cancelled firings are recorded while the watchers' files are
    open), then the watchers and agents together: the agents' files close after the watchers
    stopped, so that what those matched meanwhile is recorded (dropped)."""
    if sup.actions is not None:
        try:
            await sup.actions.shutdown()
        finally:
            if sup.actions_task is not None:
                await finish(sup.actions_task)
    watchers = asyncio.ensure_future(sup.set.stop_all(reason))
    jobs: list[Any] = [watchers]
    if sup.hub is not None:
        jobs.append(_stop_hub(sup, watchers))
    await asyncio.gather(*jobs)
