"""Control-socket requests (`add`, `start`, `restart`, `stop`, `clear`, `list`, `status`, `agent
send/stop`) applied to the live runner; the protocol is in docs/control.md."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from watchrun.config.model import Config
from watchrun.output.runlog import RunLog
from watchrun.runtime import manage
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.watchers import WatcherSet

if TYPE_CHECKING:
    from watchrun.agents.hub import AgentHub


class Runner(Protocol):
    """What the requests need of the supervisor (kept narrow so this module does not import it)."""

    config: Config
    log: RunLog
    set: WatcherSet
    board: StatusBoard
    hub: AgentHub | None
    lag: LoopLag
    once: bool
    changing: asyncio.Lock

    @property
    def watchers(self) -> dict[str, Any]: ...

    @property
    def problems(self) -> Iterable[str]: ...

    @property
    def state(self) -> object: ...

    async def stop_watcher(self, wid: str, reason: str) -> None: ...


async def dispatch(sup: Runner, req: dict[str, Any]) -> dict[str, Any]:
    """One request from `watchrun add/start/restart/stop/clear/list/agent …` on control.sock."""
    cmd = req.get("cmd")
    try:
        if cmd == "add":
            return await manage.add(sup, req.get("watcher"))
        if cmd in ("start", "restart"):
            return await manage.start(sup, str(req.get("id")), restart=cmd == "restart")
    except manage.Refused as exc:
        return exc.reply()
    if cmd == "list":
        return {"ok": True, "state": str(sup.state), "watchers": sup.board.live()}
    if cmd == "stop":
        wid = str(req.get("id"))
        if wid not in sup.watchers:
            return _fail("not_found", f"no running watcher {wid!r}")
        async with sup.changing:
            await sup.stop_watcher(wid, reason="requested")
        return {"ok": True, "message": f"stopped {wid}"}
    if cmd == "clear":
        async with sup.changing:
            if req.get("all"):
                for wid in list(sup.watchers):
                    await sup.stop_watcher(wid, reason="requested")
            cleared = sup.board.forget_stopped()
            for wid in [w for w in sup.set.runtime if w not in sup.watchers]:
                del sup.set.runtime[wid]  # a cleared runtime watcher is gone for good
        return {"ok": True, "cleared": cleared, "message": f"cleared {cleared} watchers"}
    if cmd in ("agent-send", "agent-stop"):
        if sup.hub is None:
            return _fail("not_found", "this runner has no agents")
        name = str(req.get("name"))
        if cmd == "agent-send":
            return sup.hub.send(name, str(req.get("text", "")))
        stopped = await sup.hub.stop_agent(name)
        return {"ok": stopped, "message": f"stopped the running turn of {name}"} if stopped \
            else _fail("not_found", f"{name} has no running turn")
    if cmd == "status":
        return {"ok": True, "state": str(sup.state), "watchers": sorted(sup.watchers),
                "loopLagMaxS": round(sup.lag.max_s, 3), "problems": list(sup.problems)}
    return _fail("bad_request", f"unknown command {cmd!r}")


def _fail(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}
