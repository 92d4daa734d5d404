"""Where the live screen's data comes from: control.sock when a runner is live, else the
output dir's status snapshots and JSONL (blocking reads: the screen calls these in a thread,
a stop or clear in a daemon one, `detached`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from watchrun.match.sanitize import edge_name
from watchrun.output.backward import last_records
from watchrun.output.outdir import layout_for
from watchrun.output.records import ID_PATTERN, iter_records, stream_ids
from watchrun.runtime.client import request, wait_s
from watchrun.tui.model import ENDED, Row, Snapshot, format_match
from watchrun.tui.tails import Matches, new_matches, transcript
from watchrun.tui.text import inert
from watchrun.views.agent_window import StatusTracker, delivery_state, settled
from watchrun.views.watchers import load_statuses, unreadable_note

if TYPE_CHECKING:
    from watchrun.config.model import Config

__all__ = ["POLL_TIMEOUT_S", "Control", "Feed", "detached"]

T = TypeVar("T")

Control = Callable[[Path, dict[str, Any], float], dict[str, Any]]
"""`runtime.client.request`: one request to the live runner (ConnectionError when none)."""
POLL_TIMEOUT_S = 2.0


class _AgentTally:
    """One agent's row, from its records read incrementally (oldest first)."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.seq = 0
        self.status = StatusTracker()
        self.turns = 0
        self.delivered = 0  # matched lines of finished deliveries (delivered or dropped)
        self.pending: dict[str, int] = {}  # queued deliveries: id -> count so far
        self.last_match: str | None = None
        self.last_reply = ""

    def feed(self, rec: dict[str, Any]) -> None:
        self.seq = rec["seq"]
        self.status.feed(rec)
        kind = rec.get("kind")
        if kind == "dispatch-start":
            self.turns += 1
            if isinstance(rec.get("provider"), str) and self.provider == "unknown":
                self.provider = rec["provider"]
        elif kind == "dispatch-finished" and isinstance(rec.get("reply"), str):
            self.last_reply = " ".join(rec["reply"].split()) or self.last_reply
        elif kind == "delivery" and isinstance(rec.get("watcher"), str):
            did, count = str(rec.get("deliveryId")), rec.get("count")
            count = count if isinstance(count, int) and count >= 0 else 0
            if delivery_state(rec) == "queued":
                self.pending[did] = count
            else:
                self.pending.pop(did, None)
                self.delivered += count
            self.last_match = rec.get("ts") if isinstance(rec.get("ts"), str) else None

    def row(self, name: str, path: Path) -> Row:
        status = settled(self.status.result()[0], path)
        reply = f" · {self.last_reply}" if self.last_reply else ""
        return Row("agent", name, status, None, self.delivered + sum(self.pending.values()),
                   self.last_match, f"{self.provider} · {self.turns} turn(s){reply}")


class Feed:
    """Reads what the screen shows and sends its requests (stop, clear) to the live runner."""

    def __init__(self, root: Path, agents: Mapping[str, str] | None = None,
                 control: Control = request, config: Config | None = None) -> None:
        self.root = root
        self.layout = layout_for(root)
        self.config_agents = dict(agents or {})
        """Agents named by the config: name -> provider (others are found as JSONL files)."""
        self.control = control
        self.config = config
        """The runner's config as `top` read it (None: `--output-dir` alone): how long a stop
        or clear waits for its answer (`wait_s`)."""
        self._agents: dict[str, _AgentTally] = {}

    # -- the rows ---------------------------------------------------------------------------
    def poll(self) -> Snapshot:
        errors: list[str] = []
        live, note, live_ids, stopping = self._ask_runner()
        rows = self._watcher_rows(live_ids, stopping)
        for name in self._agent_names():
            try:
                rows.append(self._agent_row(name))
            except (OSError, ValueError) as exc:
                errors.append(inert(f"agent {name}: {exc}"))
        return Snapshot(rows, live, note, errors)

    def _ask_runner(self) -> tuple[bool, str, set[str] | None, set[str]]:
        """(live, the header's note, the ids the live runner runs: None when unknown, the ids
        it is stopping)."""
        try:
            reply = self.control(self.layout.control_socket, {"cmd": "status"}, POLL_TIMEOUT_S)
        except (OSError, ValueError) as exc:  # ConnectionError, a timeout, a garbled reply
            return False, inert(f"read-only: {exc}"), None, set()
        if not reply.get("ok"):
            return True, inert(f"runner: {_error(reply)}"), None, set()
        ids, stopping = reply.get("watchers"), reply.get("stopping")
        live_ids = {str(i) for i in ids} if isinstance(ids, list) else None
        stopping = {str(i) for i in stopping} if isinstance(stopping, list) else set()
        note = inert(f"runner {reply.get('state', '?')}{_problems(reply)}")
        return True, note, live_ids, stopping

    def _watcher_rows(self, live_ids: set[str] | None, stopping: set[str]) -> list[Row]:
        rows, seen = [], set()
        for snap in load_statuses(self.root, unreadable=True):
            wid = str(snap.get("id", "?"))
            status = str(snap.get("status", "?"))
            if status == "unreadable":  # (as `watchrun list` shows it: nothing hidden)
                seen.add(wid)
                name = f"state/{wid}.status.json"
                rows.append(Row("?", wid, status, None, 0, None,
                                unreadable_note(self.root / name, name)))
                continue
            if live_ids is not None and not snap.get("live"):
                continue  # an earlier runner's: not the live one's, nor in `watchrun list`
            seen.add(wid)
            if wid in stopping:
                status = "stopping"  # (no longer among `watchers`: its process still runs)
            elif live_ids is not None and wid not in live_ids and status not in ENDED:
                status = "stopped"  # a snapshot the live runner no longer runs
            source = snap.get("source")
            source = " ".join(map(str, source)) if isinstance(source, list) else str(source)
            detail = edge_name(snap.get("label") or source)  # (defaults to the source; a tab
            # in a file name shown as `\t`, not as the space `inert` makes of it)
            kind = snap.get("kind") if snap.get("kind") in ("file", "command") else "?"  # (never
            # `agent`, whatever a snapshot says: a watcher's row is not an agent's, nor keyed so)
            rows.append(Row(str(kind), wid, status, _int(snap.get("linesRead")),
                            _int(snap.get("matchCount")) or 0, snap.get("lastMatchAt"), detail,
                            f"{snap.get('runnerPid')}@{snap.get('startedAt')}"))
        rows += [Row("?", wid, "starting", 0, 0, None, "(no status snapshot yet)")
                 for wid in sorted((live_ids or set()) - seen)]
        return rows

    def _agent_names(self) -> list[str]:
        found = {n for n in stream_ids(self.root / "agents") if re.fullmatch(ID_PATTERN, n)}
        return sorted(found | set(self.config_agents))

    def _agent_row(self, name: str) -> Row:
        path = self.layout.jsonl("agent", name)
        tally = self._agents.get(name)
        newest = last_records(path, 1)
        if tally is None or (newest and newest[0]["seq"] < tally.seq):  # new, or started over
            tally = self._agents[name] = _AgentTally(self.config_agents.get(name, "unknown"))
        for rec in iter_records(path, since_seq=tally.seq or None):
            tally.feed(rec)
        return tally.row(name, path)

    # -- the panes --------------------------------------------------------------------------
    def matches(self, wid: str, last: dict[str, Any] | None, limit: int) -> Matches:
        """The last `limit` match records of a watcher, or (with `last`, the newest one shown)
        those after it: `tails.new_matches`, bounded; with the lines the pane shows."""
        got = new_matches(self.layout.jsonl("watcher", wid), last, limit)
        got.lines = [format_match(rec) for rec in got.records]  # (sanitizing 4 MB takes a while)
        return got

    def transcript(self, name: str, shown: int | None) -> tuple[int, str] | None:
        """(the stream's latest seq, the agent's newest turns as text: `agent transcript`), or
        None when its latest seq is still `shown` (nothing read but the last record)."""
        path = self.layout.jsonl("agent", name)
        newest = last_records(path, 1)
        if shown is not None and (newest[0]["seq"] if newest else 0) == shown:
            return None
        tally = self._agents.get(name)
        provider = tally.provider if tally else self.config_agents.get(name, "unknown")
        return transcript(path, name, provider, tally.turns if tally else 0)

    # -- requests ---------------------------------------------------------------------------
    def stop(self, wid: str) -> tuple[bool, str]:
        return self._send({"cmd": "stop", "id": wid})

    def clear(self) -> tuple[bool, str]:
        return self._send({"cmd": "clear", "all": False})

    def _send(self, payload: dict[str, Any]) -> tuple[bool, str]:
        try:
            reply = self.control(self.layout.control_socket, payload,
                                 wait_s(payload["cmd"], self.config))
        except (OSError, ValueError) as exc:
            return False, inert(f"{exc}; is `watchrun run` running with this output dir?")
        if reply.get("ok"):
            return True, inert(reply.get("message", "ok"))
        return False, inert(_error(reply))


def _error(reply: dict[str, Any]) -> str:
    err = reply.get("error")
    return str(err.get("message", "failed")) if isinstance(err, dict) else "failed"


def _problems(reply: dict[str, Any]) -> str:
    """The runner's problems for the header: how many, and the newest (`status` lists them)."""
    listed = reply.get("problems")
    listed = [str(p) for p in listed] if isinstance(listed, list) else []
    count = len(listed) + (_int(reply.get("problemsDropped")) or 0)
    if not count:
        return ""
    newest = f", the newest: {listed[-1]}" if listed else " (no longer listed: see the log)"
    return f" · {count} problem{'' if count == 1 else 's'}{newest}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def detached(call: Callable[[], T]) -> T:
    """`call()` in a daemon thread: a request that waits out its `wait_s` for a runner that
    stopped answering must not hold up quitting (`asyncio.to_thread`'s pool is joined at the
    end)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def run() -> None:
        try:
            result = call()
        except BaseException as err:  # (handed to the awaiting task)
            outcome = functools.partial(done.set_exception, err)
        else:
            outcome = functools.partial(done.set_result, result)
        with contextlib.suppress(RuntimeError):  # the screen has ended: nobody awaits it
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="watchrun-top-request", daemon=True).start()
    return await done
