"""Control-socket requests (`add`, `start`, `restart`, `stop`, `clear`, `list`, `status`, `agent
send/stop`) applied to the live runner; the protocol is in docs/control.md."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from watchrun.config.model import Config, WatcherSpec
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.runtime import identity, manage
from watchrun.runtime.census import doing, ended
from watchrun.runtime.client_gone import added_by
from watchrun.runtime.control import PEER_PID
from watchrun.runtime.forgetting import forget_files
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.leftovers import left_over
from watchrun.runtime.problems import Problems
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.tally import Tally
from watchrun.runtime.watchers import WatcherSet
from watchrun.views.humanize import named

if TYPE_CHECKING:
    from watchrun.actions.hub import ActionHub
    from watchrun.agents.hub import AgentHub


class Runner(Protocol):
    """What the requests need of the supervisor (kept narrow so this module does not import it)."""

    config: Config
    layout: OutputLayout
    log: RunLog
    set: WatcherSet
    board: StatusBoard
    hub: AgentHub | None
    actions: ActionHub | None
    tally: Tally
    lag: LoopLag
    once: bool
    changing: asyncio.Lock

    @property
    def watchers(self) -> dict[str, Any]: ...

    @property
    def problems(self) -> Problems: ...

    @property
    def state(self) -> object: ...

    async def stop_watcher(self, wid: str, reason: str) -> None: ...
    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...
    def problem(self, message: str, wid: str | None = None) -> None: ...
    def track_actions(self, spec: WatcherSpec) -> None: ...


FIELDS: dict[str, dict[str, tuple[type, bool]]] = {
    "add": {"watcher": (dict, True), "endWithClient": (bool, False)},
    "start": {"id": (str, True)},
    "restart": {"id": (str, True)},
    "stop": {"id": (str, True), "mine": (bool, False)},
    "clear": {"all": (bool, False), "ids": (list, False), "mine": (bool, False)},
    "agent-send": {"name": (str, True), "text": (str, True)},
    "agent-stop": {"name": (str, True)},
}
"""Each command's fields: (type, required); docs/control.md gives the same."""
UNSEEN = ("this client is in a pid namespace the runner cannot see (its pid is 0 here: the "
          "runner runs in a container, the client on the host or in another one)")
"""Why a client's process cannot be followed (`endWithClient`) nor told from another (`mine`)."""
_ALLOWED = {dict: "an object", str: "a string", bool: "true or false",
            list: "an array of watcher ids"}
_JSON_TYPE = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
              int: "a number", float: "a number", type(None): "null"}


async def dispatch(sup: Runner, req: dict[str, Any]) -> dict[str, Any]:
    """One request from `watchrun add/start/restart/stop/clear/list/agent …` on control.sock."""
    cmd = req.get("cmd")
    try:
        _check_fields(cmd, req)
        if cmd == "add":
            owner = PEER_PID.get() if req.get("endWithClient", False) else None
            if owner == 0:  # (SO_PEERCRED's pid of a peer outside the runner's pid namespace)
                raise manage.Refused("cannot_follow_client", f"{UNSEEN}, so the runner could not "
                                     "stop the watcher when this client ends (`endWithClient`); "
                                     "nothing was added: send the `add` from the runner's pid "
                                     "namespace, or without `endWithClient` and stop the "
                                     "watcher yourself")
            reply = await manage.add(sup, req["watcher"], owner)
            if identity.SESSION.get():  # (whoever added it: said, as `status` says it)
                reply |= {"endsWithSession": True,
                          "message": reply["message"] + identity.session_note(
                              reply["watcher"]["id"])}
            return reply
        if cmd in ("start", "restart"):
            return await manage.start(sup, req["id"], restart=cmd == "restart")
    except manage.Refused as exc:
        return exc.reply()
    if cmd == "list":
        return {"ok": True, "state": str(sup.state), "enabled": sup.config.limits.enabled,
                "watchers": sup.board.live()}
    if cmd == "stop":
        wid = req["id"]
        async with sup.changing:  # looked for in turn: a restart or reload may be starting it
            if req.get("mine", False) and wid not in added_by(sup, PEER_PID.get()):
                why = f"{UNSEEN}: it can have added none" if PEER_PID.get() == 0 else \
                    "the one under that id now, if any, is not it"
                return manage.Refused(  # (`mine: false`: not the client's, whatever it is)
                    "not_found", f"no watcher {wid!r} that this client added with "
                    f"`endWithClient` ({why})", mine=False).reply()
            if wid in sup.set.stopping:  # (the runner's stop, under way: it ends with it)
                await asyncio.shield(sup.set.stopping[wid])
                return {"ok": True, "wasRunning": True,
                        "message": f"stopped {wid} (the runner was stopping it)"}
            if wid not in sup.watchers:
                return _fail("not_found", f"no running watcher {wid!r}",
                             runner=identity.fields(sup))
            how = ended(sup.watchers[wid])  # (its task ended: stopped now, but it did not run)
            await sup.stop_watcher(wid, reason="requested")
        if how is not None:
            had = "exited" if how == "exited" else "failed"
            return {"ok": True, "wasRunning": False,
                    "message": f"{wid} is already stopped (it had {had})"}
        return {"ok": True, "wasRunning": True, "message": f"stopped {wid}"}
    if cmd == "clear":
        async with sup.changing:
            only = set(req["ids"]) if "ids" in req else None
            if req.get("mine", False):  # (`watchrun mcp`: its session's own)
                mine = added_by(sup, PEER_PID.get())
                only = mine if only is None else only & mine
            every = req.get("all", False)
            # (one that exited or failed has ended already: `clear` forgets it as a stopped
            # one, as `top`'s `d` says; stopped together, as a reload stops them: one by one,
            # commands that wait out stopTimeout held the answer for the sum of theirs)
            await asyncio.gather(*(sup.stop_watcher(w, reason="requested")
                                   for w, rt in list(sup.watchers.items())
                                   if (only is None or w in only) and (every or ended(rt))))
            earlier = [] if only is not None else await left_over(sup)  # (listed before the
            forgot = sup.board.forget_stopped(only)  # board removes their snapshots)
            gone = [w for w in sup.set.runtime if w not in sup.watchers
                    and (only is None or w in only)]
            for wid in gone:
                del sup.set.runtime[wid]  # a cleared runtime watcher is gone for good: its
            await forget_files(sup, sup.set, sorted({*forgot, *gone, *earlier}))  # id added
        cleared = len(forgot)  # again is new, and so is one only an earlier runner ran
        said = f"cleared {cleared} watcher{'' if cleared == 1 else 's'}"
        if earlier:
            said += f"; also forgot what an earlier runner left of {named(earlier)}"
        return {"ok": True, "cleared": cleared, "leftovers": earlier, "message": said}
    if cmd in ("agent-send", "agent-stop"):
        if sup.hub is None:
            return _fail("unknown_agent" if cmd == "agent-send" else "not_found",
                         "this runner has no agents")
        name = req["name"]
        if cmd == "agent-send":
            return sup.hub.send(name, req["text"])
        stopped = await sup.hub.stop_agent(name)
        return {"ok": stopped, "message": f"stopped the running turn of {name}"} if stopped \
            else _fail("not_found", f"{name} has no running turn")
    if cmd == "status":
        return {"ok": True, "state": str(sup.state), **identity.fields(sup),
                "enabled": sup.config.limits.enabled, "watchers": sorted(sup.watchers),
                "stopping": sup.board.being_stopped(),
                "notReading": [{"id": wid, "status": doing(rt)}  # (as `list` counts them)
                               for wid, rt in sorted(sup.watchers.items())
                               if doing(rt) in ("error", "fatal")],
                "loopLagMaxS": round(sup.lag.max_s, 3),
                "problems": [*(sup.hub.problems() if sup.hub is not None else []),
                             *sup.problems],
                "problemsDropped": sup.problems.dropped}
    known = ", ".join(sorted([*FIELDS, "list", "status"]))
    if cmd is None:
        return _fail("bad_request", f"the request has no `cmd`: one of {known}")
    return _fail("bad_request", f"unknown command {cmd!r}; known: {known}")


def _check_fields(cmd: Any, req: dict[str, Any]) -> None:
    """Refuse (`bad_request`) a field of the wrong JSON type, or a required one missing: never
    taken for true, nor turned into a string; and a field the command does not have (a typo,
    `"id"` for `clear`'s `"ids"`, made the clear one of every watcher)."""
    if cmd is not None and not isinstance(cmd, str):
        got = _JSON_TYPE.get(type(cmd), "not JSON")
        raise manage.Refused("bad_request", f"`cmd` must be a string, not {got}", field="cmd",
                             expected="a string", got=got)
    fields = FIELDS.get(cmd, {}) if isinstance(cmd, str) else {}
    if cmd in FIELDS or cmd in ("list", "status"):
        extra = sorted(k for k in req if k != "cmd" and k not in fields)
        if extra:
            has = ", ".join(f"`{k}`" for k in fields) or "none but `cmd`"
            raise manage.Refused("bad_request", f"`{cmd}` has no field `{extra[0]}` (its "
                                 f"fields: {has})", field=extra[0], expected=has,
                                 got="an unknown field")
    for key, (kind, required) in fields.items():
        if key not in req and not required:
            continue
        value, allowed = req.get(key), _ALLOWED[kind]
        if key not in req:
            raise manage.Refused("bad_request", f"`{cmd}` needs `{key}`: {allowed}", field=key,
                                 expected=allowed)
        strings = not isinstance(value, list) or all(isinstance(v, str) for v in value)
        if not isinstance(value, kind) or not strings:
            got = _JSON_TYPE.get(type(value), "not JSON") if strings else \
                "an array with a non-string"
            raise manage.Refused("bad_request", f"`{cmd}`: `{key}` must be {allowed}, not "
                                 f"{got}", field=key, expected=allowed, got=got)


def _fail(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message, **details}}
