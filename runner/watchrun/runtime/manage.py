"""`add`, `start` and `restart` on the control socket: every check before any side effect, then
the watcher starts as at start-up (the reply comes once its source holds its start position)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from watchrun.config.adding import check_added
from watchrun.config.model import Config, WatcherSpec
from watchrun.output.runlog import RunLog
from watchrun.output.sink import SinkWriteError
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.watchers import WatcherSet

__all__ = ["Managing", "Refused", "add", "start"]


class Managing(Protocol):
    """What these requests need of the supervisor."""

    config: Config
    log: RunLog
    set: WatcherSet
    board: StatusBoard
    once: bool
    changing: asyncio.Lock

    @property
    def state(self) -> object: ...


class Refused(Exception):
    """A request that was not carried out: its error `code`, message and details."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.extra = code, extra

    def reply(self) -> dict[str, Any]:
        return {"ok": False, "error": {"code": self.code, "message": str(self), **self.extra}}


async def add(sup: Managing, raw: Any) -> dict[str, Any]:
    """`{"cmd": "add", "watcher": {…}}`: check it as the config would, then start it."""
    async with sup.changing:
        _can_change(sup, "add watchers")
        spec, diagnostics = check_added(raw, sup.config)
        if spec is None:
            n = sum(d.severity == "error" for d in diagnostics)
            raise Refused("invalid", f"the watcher has {n} error{'' if n == 1 else 's'}; "
                          "nothing was started", diagnostics=[d.to_dict() for d in diagnostics])
        _unused(sup, spec.id)
        _room(sup)
        sup.set.runtime[spec.id] = spec
        try:
            reply = await _launch(sup, spec)
        except Refused:
            if spec.id not in sup.board.entries:  # never launched: nothing to keep
                del sup.set.runtime[spec.id]
            raise
        sup.log.info(f"added at runtime ({spec.kind} {spec.label})", spec.id,
                     event="watcher-added")
        warnings = [d.to_dict() for d in diagnostics]
        return {**reply, "warnings": warnings} if warnings else reply


async def start(sup: Managing, wid: str, *, restart: bool) -> dict[str, Any]:
    """`start`: a watcher that is not running (stopped, exited, fatal) starts again with the
    spec it had; `restart`: a running one is stopped first. A file watcher resumes from its
    checkpoint, so no line is read twice."""
    async with sup.changing:
        what = "restart watchers" if restart else "start watchers"
        _can_change(sup, what)
        spec = sup.set.spec_of(wid)
        if spec is None:
            known = sorted({*sup.set.running, *sup.set.runtime,
                            *(w.id for w in sup.config.watchers)})
            raise Refused("not_found", f"no watcher {wid!r} (known: "
                          f"{', '.join(known) or 'none'})", id=wid, known=known)
        rt = sup.set.running.get(wid)
        was_running = rt is not None and rt.task is not None and not rt.task.done()
        if was_running and not restart:  # as `systemctl start`: nothing to do is no error
            return {"ok": True, "watcher": _record(sup, wid), "started": False,
                    "wasRunning": True, "message": f"{wid} is running already (`watchrun "
                    f"restart {wid}` stops it and starts it again)"}
        if rt is not None:  # running, or ended by itself (exited, fatal): its sink is open
            await sup.set.stop(wid, reason="restart")
        else:
            _room(sup)
        reply = await _launch(sup, spec)
        sup.log.info("restarted" if was_running else "started again", wid,
                     event="watcher-started")
        message = f"restarted {wid}" if was_running else f"started {wid}"
        return {**reply, "started": True, "wasRunning": was_running, "message": message}


def _can_change(sup: Managing, what: str) -> None:
    state = str(sup.state)
    if sup.once:
        raise Refused("refused", f"a `run --once` runner cannot {what}: it runs what its "
                      "config names once")
    if state == "starting":
        raise Refused("busy", "the runner is starting; retry when it runs")
    if state != "running":
        raise Refused("refused", f"the runner is {state}")
    if not sup.config.limits.enabled:
        raise Refused("refused", "limits.enabled is false: this runner runs no watchers")


def _unused(sup: Managing, wid: str) -> None:
    """An id names a JSONL file and a checkpoint: it may not be one in use, even in case."""
    taken = {*sup.set.running, *sup.set.later, *sup.board.entries, *sup.set.runtime,
             *(w.id for w in sup.config.watchers)}
    for other in sorted(taken):
        if other.lower() == wid.lower():
            how = "" if other == wid else f" (as `{other}`: ids are file names, so they must " \
                "differ in more than case)"
            origin = sup.set.origin(other)
            raise Refused("exists", f"watcher id `{wid}` is in use by a {origin} watcher{how}; "
                          f"pick another id, or `watchrun restart {other}`", id=wid,
                          diagnostics=[{"path": "watchers[0].id", "severity": "error",
                                        "message": f"duplicate id `{wid}`"}])


def _room(sup: Managing) -> None:
    limit = sup.config.limits.max_watchers
    if sup.set.held >= limit:
        raise Refused("limit", f"{sup.set.held} watchers are running or held and "
                      f"limits.maxWatchers is {limit}; stop or clear one, or raise the limit "
                      "in the config (up to 500)", maxWatchers=limit)


async def _launch(sup: Managing, spec: WatcherSpec) -> dict[str, Any]:
    """Build (its sink opens), start, wait until its source holds its start position. A
    failure leaves nothing running (a source that failed is stopped: its `stop` record and
    `lastError` say why). Nothing awaits between the state check and the launch, so a shutdown
    either stops it or refuses it."""
    if str(sup.state) != "running":
        raise Refused("refused", f"the runner is {sup.state}")
    try:
        rt = sup.set.build(spec)
    except (OSError, SinkWriteError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise Refused("start_failed", f"{spec.id} could not be started: {why}",
                      id=spec.id) from exc
    sup.set.launch(rt)
    failed = await sup.set.ready([rt])
    if failed is not None:  # stopped, and listed with its last error
        await sup.set.stop(spec.id, reason="startup-failed")
        raise Refused("start_failed", f"{failed}; it is stopped (`watchrun start {spec.id}` "
                      f"tries again, `watchrun clear` forgets it)", id=spec.id)
    return {"ok": True, "watcher": _record(sup, spec.id), "message": f"started {spec.id}"}


def _record(sup: Managing, wid: str) -> dict[str, Any]:
    """The watcher as the live `list` shows it."""
    return sup.board.live_record(wid)
