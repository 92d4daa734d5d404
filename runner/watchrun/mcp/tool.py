"""The `watch` tool's actions: each call is checked before anything happens, then carried out by
the runner that holds the watchers (`runners.py`); `matches` and `logs` read the output dir as
the CLI does. The result is the seed's `WatchDetails`; a failure is `{action, error}`."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from watchrun.config.adding import check_added
from watchrun.config.model import Config
from watchrun.match.redact import redact_tree, redactor
from watchrun.mcp.calls import Call, CallError, Failed, diagnostic, normalize, refuse_invalid
from watchrun.mcp.reads import ReadError, read_logs, read_matches
from watchrun.mcp.records import watch_record
from watchrun.mcp.runners import NoAnswer, NoRunner, Runner, Runners, StartFailed
from watchrun.mcp.schema import MAX_RESULT_BYTES, MAX_WATCHES
from watchrun.runtime.manage import Refused, bounded, probed
from watchrun.views import watchers as views
from watchrun.views.humanize import named

__all__ = ["Failed", "Tool"]

ADD_TRIES = 10
"""An id chosen for `add` that someone else took meanwhile is replaced this often."""


class Tool:
    """Runs `watch` calls against the runners of one output dir."""

    def __init__(self, config: Config, runners: Runners, cwd: str,
                 broken: str | None = None) -> None:
        self.config, self.runners, self.cwd = config, runners, cwd
        self.broken = broken
        """Why no call can be carried out (an invalid config), or None."""
        self.root = Path(config.output.dir)
        self._reserved: set[str] = set()
        """Ids chosen for the adds under way (`_free_id`)."""

    async def call(self, arguments: Any) -> tuple[dict[str, Any], bool]:
        """(WatchDetails, whether the set of watchers changed: the resource list), its text
        redacted as an agent's prompt is, always: the client is an agent, whose model most
        likely runs off this machine."""
        details, changed = await self._call(arguments)
        return redact_tree(details, redactor(self.config.redact)), changed

    async def _call(self, arguments: Any) -> tuple[dict[str, Any], bool]:
        found = arguments.get("action") if isinstance(arguments, dict) else None
        action = found if isinstance(found, str) else ""
        if self.broken is not None:
            return {"action": action, "error": self.broken}, False
        try:
            call = normalize(arguments, self.cwd)
            return await self._run(call)
        except (CallError, Failed, NoAnswer, ReadError, StartFailed) as exc:
            return {"action": action, "error": str(exc)}, False
        except NoRunner as exc:  # the live runner went away during the call
            return {"action": action, "error": f"{exc}; try again"}, False

    async def _run(self, call: Call) -> tuple[dict[str, Any], bool]:
        if call.action == "add":
            return await self._add(call.watcher), True
        runner = await self.runners.current()
        base: dict[str, Any] = {"action": call.action, "outputDir": str(self.root),
                                "runner": runner.kind if runner else "none"}
        if call.action in ("list", "clear"):
            cleared = None
            if call.action == "clear" and runner is not None:
                cleared = await self._clear(runner, call.all)
            if call.action == "clear":
                base["cleared"] = cleared or 0
            listed = await self._listed(runner)
            if len(listed) > MAX_WATCHES:  # (an output dir's snapshots may be thousands)
                base["omitted"] = len(listed) - MAX_WATCHES
            watches = [watch_record(w) for w in listed[:MAX_WATCHES]]
            return {**base, "watches": watches}, bool(cleared)
        assert call.id is not None
        wid = call.id
        if call.action == "stop":
            return {**base, **await self._stop(runner, wid)}, False
        record = await self._record(runner, wid)
        if call.action == "status":
            if record is None:
                raise Failed(await self.unknown(wid))
            return {**base, "watch": record}, False
        if record is None and not await asyncio.to_thread(self._recorded, wid):
            raise Failed(await self.unknown(wid))
        details = await self._lines(call, wid)
        return {**base, **({"watch": record} if record else {}), **details}, False

    async def _lines(self, call: Call, wid: str) -> dict[str, Any]:
        """`matches` (by cursor) or `logs` of `wid`, read off the loop."""
        n = call.lines or self.config.limits.match_lines
        hide = redactor(self.config.redact)  # (a line's cut: the answer's redaction sees none)
        if call.action == "matches":
            page = await asyncio.to_thread(read_matches, self.root, wid, n, call.since,
                                           MAX_RESULT_BYTES, hide)
        else:
            page = await asyncio.to_thread(read_logs, self.root, wid, n, MAX_RESULT_BYTES, hide,
                                           self.config.limits.max_line_bytes)
        out: dict[str, Any] = {call.action: "\n".join(page.lines), "count": len(page.lines),
                               "truncated": page.truncated}
        if page.omitted:
            out["omitted"] = page.omitted
        if page.cursor is not None:
            out["cursor"] = page.cursor
        if call.since is not None:
            out["since"] = f"{wid}:{call.since:016x}"
        return out

    # -- add ------------------------------------------------------------------------------
    async def _add(self, watcher: dict[str, Any]) -> dict[str, Any]:
        try:
            bounded(watcher)  # as the runner would: before a huge regex is read
        except Refused as exc:
            raise Failed(str(exc)) from None
        runner = await self.runners.current()
        if runner is None or runner.kind == "session":
            # Checked here before anything starts (not even this session's runner), and for the
            # one thing the session's runner cannot see: the config's watcher ids, whose JSONL
            # and checkpoint belong to `watchrun run`. In a worker thread: a large regex takes
            # a while, and the session's runner goes on meanwhile. First its regexes compiled
            # in a child under the runner's budget: RE2's compile would hold this process's
            # interpreter lock (the session's runner, every call) from the thread as well.
            try:
                await probed(watcher)
            except Refused as exc:
                raise Failed(str(exc)) from None
            _, diagnostics = await asyncio.to_thread(check_added, {"id": "new", **watcher},
                                                     self.config)
            refuse_invalid([d.to_dict() for d in diagnostics])
            wid = str(watcher.get("id", "")).lower()
            owner = next((w.id for w in self.config.watchers if w.id.lower() == wid), None)
            if owner is not None:
                raise Failed(f"watcher id `{watcher['id']}` is the config's watcher `{owner}` "
                             "(its JSONL and checkpoint are `watchrun run`'s): pick another id")
        runner = runner or await self.runners.for_add()
        chosen = "id" not in watcher
        wid = str(watcher.get("id") or await self._free_id(runner))
        clashed: set[str] = set()  # (ids chosen that another client's add took meanwhile)
        try:
            for _ in range(ADD_TRIES):
                # endWithClient: a live runner stops it when this process ends, even killed
                reply = await runner.request({"cmd": "add", "watcher": {**watcher, "id": wid},
                                              "endWithClient": True})
                found = reply.get("error")
                err: dict[str, Any] = found if isinstance(found, dict) else {}
                if reply.get("ok") or not chosen or err.get("code") != "exists":
                    break
                self._reserved.discard(wid)  # (taken by another client of the runner, whose
                clashed.add(wid.lower())  # adds under way do not show in `list` yet)
                wid = await self._free_id(runner, clashed)
        finally:
            if chosen:  # added (the runner lists it now) or refused: free either way
                self._reserved.discard(wid)
        if not reply.get("ok"):
            if err.get("code") == "invalid":
                refuse_invalid(err.get("diagnostics") or [])
            if err.get("code") == "cannot_follow_client":  # (the runner's advice is a client's)
                raise Failed(f"the runner live on {self.root} cannot see this MCP server's "
                             "process (it runs in another pid namespace: a container), so a "
                             "watcher added there would not end with this session, and one "
                             "a killed server left would run on: nothing was added. Run `watchrun"
                             " mcp` in the runner's container, or put the watcher in its config")
            if chosen and err.get("code") == "exists":  # (its advice names another's watcher)
                raise Failed(f"no free watcher id in {ADD_TRIES} tries: other clients of the "
                             "runner are adding watchers too; give this one an `id`")
            raise Failed(str(err.get("message") or "the runner refused the watcher"))
        self.runners.added[wid] = runner
        warnings = [diagnostic(d) for d in reply.get("warnings") or [] if isinstance(d, dict)]
        details: dict[str, Any] = {"action": "add", "runner": runner.kind,
                                   "outputDir": str(self.root),
                                   "watch": watch_record(reply.get("watcher") or {})}
        if warnings:
            details["warnings"] = warnings
        return details

    async def _free_id(self, runner: Runner, clashed: AbstractSet[str] = frozenset()) -> str:
        """The first of w1, w2, … that no watcher of the runner, the config or the output dir
        uses (ignoring case: ids are file names), nor an `add` of this session under way:
        reserved until that add is answered (concurrent adds took the same one, and all but
        one were refused "in use", even where the refusal was `limits.maxWatchers`)."""
        taken = {str(w.get("id")).lower() for w in await self._listed(runner)} | clashed
        taken |= {w.id.lower() for w in self.config.watchers}
        taken |= {x.lower() for x in await asyncio.to_thread(self._on_disk)}
        n = 1
        while f"w{n}" in taken or f"w{n}" in self._reserved:
            n += 1
        self._reserved.add(f"w{n}")
        return f"w{n}"

    async def _clear(self, runner: Runner, every: bool) -> int:
        """Forget stopped watchers; `every`: stop running ones first. On a live runner only
        those this session added, as it added them (`mine`: the runner checks): the runner's
        own (its config's, the operator's, one added again under an id the session cleared)
        are not the session's, stopped or not."""
        request: dict[str, Any] = {"cmd": "clear", "all": every}
        if runner.kind == "live":
            request["mine"] = True
        reply = await self._ask(runner, request)
        return int(reply.get("cleared") or 0)

    # -- stop -----------------------------------------------------------------------------
    async def _stop(self, runner: Runner | None, wid: str) -> dict[str, Any]:
        """As `watchrun stop`: a watcher that is not running is no error (`stopped: false`);
        only one nobody knows is. On a live runner only one this session added, as it added
        it (`mine`, as `clear` and the session's end): the runner's own (its config's, one a
        person added) is refused, and nothing is stopped."""
        stopped = others = False
        if runner is not None:
            request: dict[str, Any] = {"cmd": "stop", "id": wid}
            if runner.kind == "live":
                request["mine"] = True
            reply = await self._ask(runner, request, missing_ok=True)
            stopped = bool(reply.get("ok"))
            err = reply.get("error")
            others = isinstance(err, dict) and err.get("mine") is False
        record = await self._record(runner, wid)
        if record is None and not stopped:
            raise Failed(await self.unknown(wid))
        if others:
            raise Failed(f"{wid} is not a watcher this session added, so it was not stopped: "
                         "on a live runner the tool stops only its session's own watchers, "
                         "never the runner's (its config's, or one a person or another "
                         f"session added); a person stops it with `watchrun stop {wid}`")
        return {"stopped": stopped, **({"watch": record} if record else {})}

    # -- reading --------------------------------------------------------------------------
    async def _listed(self, runner: Runner | None) -> list[dict[str, Any]]:
        """The runner's live list; without a runner, the output dir's status snapshots (as
        `watchrun list`: each `stopped`, as its runner's end left it)."""
        if runner is None:
            return await asyncio.to_thread(views.load_statuses, self.root)
        reply = await self._ask(runner, {"cmd": "list"})
        found = reply.get("watchers")
        return [w for w in found if isinstance(w, dict)] if isinstance(found, list) else []

    async def _record(self, runner: Runner | None, wid: str) -> dict[str, Any] | None:
        """`wid` as the runner lists it, else its last snapshot in the output dir."""
        for w in await self._listed(runner) if runner is not None else ():  # (without one,
            if w.get("id") == wid:  # the list is the snapshots, read below)
                return watch_record(w)
        snap = await asyncio.to_thread(views.load_status, self.root, wid)
        return watch_record(snap) if snap is not None else None

    async def _ask(self, runner: Runner, payload: dict[str, Any], *,
                   missing_ok: bool = False) -> dict[str, Any]:
        try:
            reply = await runner.request(payload)
        except NoRunner as exc:
            raise Failed(f"{exc}; try again (a new runner is used, or this session's)") \
                from exc
        err = reply.get("error")
        if not reply.get("ok") and not (missing_ok and isinstance(err, dict) and
                                        err.get("code") == "not_found"):
            message = err.get("message") if isinstance(err, dict) else None
            raise Failed(str(message or "the runner refused the request"))
        return reply

    def _recorded(self, wid: str) -> bool:
        return os.path.lexists(self.root / "watchers" / f"{wid}.jsonl")

    def _on_disk(self) -> set[str]:
        return self._snapshots() | self._jsonls()

    def _snapshots(self) -> set[str]:
        return {str(s["id"]) for s in views.load_statuses(self.root)}

    def _jsonls(self) -> set[str]:
        with contextlib.suppress(OSError):
            return {p.name.removesuffix(".jsonl") for p in (self.root / "watchers").glob(
                "*.jsonl")}
        return set()

    async def known(self) -> set[str]:
        """The ids `status` knows: the runner's list and the output dir's status snapshots (a
        resource to subscribe to). Raises Failed or NoAnswer when the runner did not answer."""
        runner = await self.runners.current()
        known = await asyncio.to_thread(self._snapshots)
        if runner is not None:  # (without one, its list is those snapshots)
            known |= {str(w.get("id")) for w in await self._listed(runner)}
        return known

    async def unknown(self, wid: str) -> str:
        """No watcher `wid`: the ids known (listed, or with a status snapshot), and apart those
        cleared whose records are kept (`matches` and `logs` read them; `status` has none)."""
        known = await self.known()
        kept = await asyncio.to_thread(self._jsonls) - known
        text = f"no watcher {wid!r} (known: {named(sorted(known))}"
        if wid in kept:
            return f"{text}): {wid} was cleared; its records are kept, and `matches` and " \
                "`logs` still read them"
        if kept:
            text += f"; cleared, their records kept for `matches` and `logs`: " \
                f"{named(sorted(kept))}"
        return f"{text})"
