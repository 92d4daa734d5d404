"""Control-socket requests (`stop`, `clear`, `agent send/stop`) applied to the live runner."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from watchrun.runtime.lag import LoopLag
from watchrun.runtime.status import StatusBoard

if TYPE_CHECKING:
    from watchrun.agents.hub import AgentHub


class Runner(Protocol):
    """What the requests need of the supervisor (kept narrow so this module does not import it)."""

    board: StatusBoard
    hub: AgentHub | None
    lag: LoopLag

    @property
    def watchers(self) -> dict[str, Any]: ...

    @property
    def problems(self) -> Iterable[str]: ...

    @property
    def state(self) -> object: ...

    async def stop_watcher(self, wid: str, reason: str) -> None: ...


async def dispatch(sup: Runner, req: dict[str, Any]) -> dict[str, Any]:
    """Requests from `watchrun stop/clear/agent send/agent stop` on control.sock."""
    cmd = req.get("cmd")
    if cmd == "stop":
        wid = str(req.get("id"))
        if wid not in sup.watchers:
            return _fail("not_found", f"no running watcher {wid!r}")
        await sup.stop_watcher(wid, reason="requested")
        return {"ok": True, "message": f"stopped {wid}"}
    if cmd == "clear":
        if req.get("all"):
            for wid in list(sup.watchers):
                await sup.stop_watcher(wid, reason="requested")
        cleared = sup.board.forget_stopped()
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
