"""`add`, `start` and `restart` on the control socket: every check before any side effect, then
the watcher starts as at start-up (the reply comes once its source holds its start position).
One that cannot start (its JSONL, its source failing at once, a command that could not be
spawned) is answered `start_failed`; an `add` that failed keeps nothing of it (its JSONL says
what happened), a `start` leaves it listed, stopped, with the reason.
An added watcher's regexes are compiled first in a child process under a time budget
(`compile_probe`): one that RE2 takes too long to compile is refused before the runner, whose
event loop RE2's compile would hold, compiles it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, Protocol

from watchrun.config.adding import check_added
from watchrun.config.diagnostics import Diagnostic
from watchrun.config.model import Config, WatcherSpec
from watchrun.match.sanitize import edge_name
from watchrun.match.scanning import Store
from watchrun.offload import at_stop
from watchrun.output.sink import SinkWriteError
from watchrun.runtime import identity, leftovers
from watchrun.runtime.client_gone import own
from watchrun.runtime.compile_probe import Refusal, probe
from watchrun.runtime.forgetting import Forgetting, forget_refused
from watchrun.runtime.watchers import WatcherSet
from watchrun.runtime.wiring import precompile
from watchrun.views.humanize import DISABLED, not_reading

__all__ = ["MAX_EXCLUDE", "MAX_LABEL", "MAX_PATTERN", "Managing", "Refused", "add", "bounded",
           "probed", "start"]

MAX_PATTERN = 16 * 1024
"""Bytes (UTF-8) of an added watcher's `pattern`. Its check and its matcher's compile run in a
worker thread, in time that grows faster than the pattern: up to about 0.25 s for 16 KiB, and
seconds for 64 KiB; first in a child process, under `compile_probe`'s budgets."""
MAX_EXCLUDE = 16 * 1024
"""Bytes of an added watcher's `exclude` regexes, all of them together (compiled as well)."""
MAX_LABEL = 1024
"""Bytes of an added watcher's `label`: a display name (its status, `list`, agents' prompts)."""


class Managing(Forgetting, Protocol):
    """What these requests need of the supervisor."""

    set: WatcherSet
    once: bool
    changing: asyncio.Lock

    @property
    def state(self) -> object: ...

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...
    def problem(self, message: str, wid: str | None = None) -> None: ...
    def track_actions(self, spec: WatcherSpec) -> None: ...


class Refused(Exception):
    """A request that was not carried out: its error `code`, message and details."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.extra = code, extra

    def reply(self) -> dict[str, Any]:
        return {"ok": False, "error": {"code": self.code, "message": str(self), **self.extra}}


async def add(sup: Managing, raw: Any, owner: int | None = None) -> dict[str, Any]:
    """`{"cmd": "add", "watcher": {…}}`: its regexes compiled in a child under a budget
    (`probed`), then checked as the config would (in a worker thread: a large regex takes a
    while, and `status` and `list` do not wait), then started. `owner`: the pid of a process
    whose end stops it (`endWithClient`)."""
    bounded(raw)
    async with sup.changing:
        _can_change(sup, "add watchers")
        await probed(raw)
        spec, diagnostics = await asyncio.to_thread(_checked, raw, sup.config,
                                                    sup.set.databases, threading.get_ident())
        if spec is None:
            n = sum(d.severity == "error" for d in diagnostics)
            raise Refused("invalid", f"the watcher has {n} error{'' if n == 1 else 's'}; "
                          "nothing was started", diagnostics=[d.to_dict() for d in diagnostics])
        _unused(sup, spec)
        _room(sup)
        sup.set.runtime[spec.id] = spec
        sup.track_actions(spec)
        try:
            reply = await _launch(sup, spec, added=True)
        except Refused:  # as one refused before: not running, not listed, its id free
            del sup.set.runtime[spec.id]
            sup.board.forget(spec.id)  # (launched, then stopped: its entry and snapshot)
            await forget_refused(sup, spec.id)
            raise
        sup.log.info(f"added at runtime ({spec.kind} {edge_name(spec.label)})", spec.id,
                     event="watcher-added")
        if owner is not None:
            own(sup, owner, spec)
        resumed, said = leftovers.resumed(spec.id, sup.set.running.get(spec.id))
        reply = {**reply, **resumed, "message": _added(spec.id, reply["watcher"]) + said}
        warnings = [d.to_dict() for d in diagnostics]
        return {**reply, "warnings": warnings} if warnings else reply


def _added(wid: str, record: dict[str, Any]) -> str:
    """What an `add` that started its watcher says: `started ID`, unless its file is not
    there yet (`waiting`) or cannot be read (`error`): it is kept, and tries again."""
    note = not_reading(record.get("kind"), record.get("status"), str(record.get("source")),
                       record.get("lastError"), f"`watchrun stop {wid}`")
    return f"added {wid}: {note}" if note is not None else f"started {wid}"


async def start(sup: Managing, wid: str, *, restart: bool) -> dict[str, Any]:
    """`start`: a watcher that is not running (stopped, exited, fatal) starts again with the
    spec it had; `restart`: a running one is stopped first. A file watcher resumes from its
    checkpoint, so no line is read twice."""
    async with sup.changing:
        what = "restart watchers" if restart else "start watchers"
        _can_change(sup, what)
        spec = sup.set.spec_of(wid)
        if spec is None:  # (an earlier runner's: its snapshot says what it was)
            known = sorted({*sup.set.running, *sup.set.runtime,
                            *(w.id for w in sup.config.watchers)})
            raise Refused("not_found", f"no watcher {wid!r} (known: {', '.join(known) or 'none'})"
                          f"{await leftovers.why_not_held(sup, wid)}", id=wid, known=known,
                          runner=identity.fields(sup))
        if gone := sup.config.missing_agents(spec):  # (a reload removed it: it stopped then)
            raise Refused("invalid", f"{wid} wakes agent {gone[0]!r}, which the config does not "
                          f"have: its matches would wake no one (`watchrun clear {wid}` forgets "
                          "it; add it again without that agent)", id=wid, agent=gone[0])
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
        await asyncio.to_thread(precompile, [spec], sup.set.databases, threading.get_ident())
        reply = await _launch(sup, spec, added=False)
        sup.log.info("restarted" if was_running else "started again", wid,
                     event="watcher-started")
        message = f"restarted {wid}" if was_running else f"started {wid}"
        return {**reply, "started": True, "wasRunning": was_running, "message": message}


async def probed(raw: Any) -> None:
    """Refuse (`bad_request`, naming the field, the CPU seconds and the budget) an added
    watcher whose regexes did not compile within `compile_probe`'s budgets in a child process,
    before anything in this process compiles them. The loop awaits the child meanwhile.
    `start`/`restart` need none: they compile a spec that passed `add` (or the config's)."""
    try:
        await probe(raw)
    except Refusal as exc:
        raise Refused(exc.code, str(exc), **exc.extra) from None


def _checked(raw: Any, config: Config, databases: Store | None, loop_thread: int
             ) -> tuple[WatcherSpec | None, list[Diagnostic]]:
    """`check_added`, then (for a valid watcher) its matchers compiled for the loop
    (`wiring.precompile`)."""
    spec, diagnostics = check_added(raw, config)
    if spec is not None:
        precompile([spec], databases, loop_thread)
    return spec, diagnostics


def bounded(raw: Any) -> None:
    """Refuse (`bad_request`) an added watcher whose `pattern`, `exclude` or `label` is larger
    than its bound, before anything reads it; other types are left to the config's checks."""
    if not isinstance(raw, dict):
        return
    sizes: list[tuple[str, int, int]] = []
    if isinstance(raw.get("pattern"), str):
        sizes.append(("pattern", _size(raw["pattern"]), MAX_PATTERN))
    if isinstance(raw.get("label"), str):
        sizes.append(("label", _size(raw["label"]), MAX_LABEL))
    excludes = raw.get("exclude")
    if isinstance(excludes, list):
        each = [(f"exclude[{i}]", _size(x)) for i, x in enumerate(excludes) if isinstance(x, str)]
        sizes += [(key, n, MAX_EXCLUDE) for key, n in each]
        sizes.append(("exclude", sum(n for _, n in each), MAX_EXCLUDE))
    for key, size, limit in sizes:
        if size > limit:
            whole = " in all" if key == "exclude" else ""
            raise Refused("bad_request", f"`{key}` is {size} bytes{whole}, over the {limit}-byte "
                          f"({limit // 1024} KiB) limit of a watcher added at runtime",
                          field=key, size=size, limit=limit)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


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
        raise Refused("refused", DISABLED)


def _taken(sup: Managing, wid: str) -> str | None:
    """The id in use (running, held, stopped but kept, configured) that is `wid` ignoring case:
    ids are file names (its JSONL, its checkpoint)."""
    taken = {*sup.set.running, *sup.set.later, *sup.board.entries, *sup.set.runtime,
             *(w.id for w in sup.config.watchers)}
    return next((other for other in sorted(taken) if other.lower() == wid.lower()), None)


def _unused(sup: Managing, spec: WatcherSpec) -> None:
    """An added watcher's id may not be one in use, even in case, nor a config watcher's
    `previousId`; nor may its `previousId` be an id in use, as in a config: the checkpoint it
    would adopt is the one that watcher reads on with."""
    wid, prev = spec.id, spec.previous_id
    if prev is not None and (other := _taken(sup, prev)) is not None:
        message = (f"{prev!r} is the id of a {sup.set.origin(other)} watcher (`{other}`), "
                   "whose checkpoint it reads on with; previousId names the id this watcher "
                   "had before it was renamed (a checkpoint no watcher uses)")
        raise Refused("invalid", "the watcher has 1 error; nothing was started", id=wid,
                      diagnostics=[{"path": "watchers[0].previousId", "severity": "error",
                                    "message": message}])
    renamed = next((w for w in sup.config.watchers
                    if w.previous_id is not None and w.previous_id.lower() == wid.lower()), None)
    if renamed is not None:  # (a reload would hand its checkpoint to the renamed watcher)
        raise Refused("exists", f"watcher id `{wid}` is the previousId of the config's watcher "
                      f"{renamed.id} (its old name, whose checkpoint it takes); pick another id",
                      id=wid, diagnostics=[{"path": "watchers[0].id", "severity": "error",
                                            "message": f"`{wid}` is a config watcher's "
                                            "previousId"}])
    if (other := _taken(sup, wid)) is not None:
        how = "" if other == wid else f" (as `{other}`: ids are file names, so they must " \
            "differ in more than case)"
        raise Refused("exists", f"watcher id `{wid}` is in use by a {sup.set.origin(other)} "
                      f"watcher{how}; pick another id, or `watchrun restart {other}`", id=wid,
                      diagnostics=[{"path": "watchers[0].id", "severity": "error",
                                    "message": f"duplicate id `{wid}`"}])


def _room(sup: Managing) -> None:
    limit = sup.config.limits.max_watchers
    if sup.set.held >= limit:
        raise Refused("limit", f"{sup.set.held} watchers are running or held and "
                      f"limits.maxWatchers is {limit}; stop or clear one, or raise the limit "
                      "in the config (up to 500)", maxWatchers=limit)


async def _launch(sup: Managing, spec: WatcherSpec, *, added: bool) -> dict[str, Any]:
    """Build (its sink opens, in a worker thread), start, wait until its source holds its start
    position. A failure leaves nothing running: a source that failed, or a command whose first
    start failed (ENOENT, EACCES, a missing `cwd`, whatever its restart policy), is stopped (its
    `error` and `stop{reason: startup-failed}` records say why) and refused `start_failed`;
    `added`: the caller forgets it. Nothing awaits between the last state check and the
    launch, so a shutdown either stops it or refuses it."""
    if str(sup.state) != "running":
        raise Refused("refused", f"the runner is {sup.state}")
    try:
        rt = await sup.set.build_off_loop(spec)
    except (OSError, SinkWriteError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise Refused("start_failed", f"{spec.id} could not be started: {why}",
                      id=spec.id) from exc
    if str(sup.state) != "running":  # it stopped while the sink opened
        with contextlib.suppress(Exception):  # (a close that fails or hangs: the refusal
            await at_stop(rt.sink.close)  # stands, and the run's end names a hung one)
        raise Refused("refused", f"the runner is {sup.state}")
    sup.set.launch(rt)
    await sup.set.ready([rt])
    failed: str | None = rt.failure if rt.failure is not None else \
        getattr(rt.source, "start_error", None)  # (a command's)
    if failed is not None:
        await sup.set.stop(spec.id, reason="startup-failed")
        then = "nothing was added (its JSONL records the attempt)" if added else \
            f"it is stopped (`watchrun start {spec.id}` tries again, `watchrun clear` forgets it)"
        raise Refused("start_failed", f"{spec.id} could not be started: {failed}; {then}",
                      id=spec.id)
    return {"ok": True, "watcher": _record(sup, spec.id), "message": f"started {spec.id}"}


def _record(sup: Managing, wid: str) -> dict[str, Any]:
    """The watcher as the live `list` shows it."""
    return sup.board.live_record(wid)
