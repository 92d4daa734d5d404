"""Reading an agent's stream for its views: cursor checks, contiguous windows, status, errors.

Errors are `ViewError`s printed as `{"error": {"code", "message", ...}}`. Exit status by code:
2 for a request that cannot be served as written (invalid_cursor, not_supported, not_found,
invalid_argument); 1 when the data cannot answer it (cursor_expired and gap_detected: read
again without --since; watch_timeout: the condition did not happen in time); 3 otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from watchrun.agents.streamlock import lock_path
from watchrun.output import flocks
from watchrun.output.backward import last_records
from watchrun.output.records import format_cursor, iter_records, oldest_seq, parse_cursor

__all__ = [
    "EXIT_STATUS", "AgentInfo", "StatusTracker", "ViewError", "anchor_seq", "check_since",
    "delivery_state", "is_agent_status", "latest_seq", "read_status", "settled", "status_tracker",
    "window", "writer_gone",
]

EXIT_STATUS = {"invalid_cursor": 2, "not_supported": 2, "not_found": 2, "invalid_argument": 2,
               "cursor_expired": 1, "gap_detected": 1, "watch_timeout": 1}
"""Exit status per error code; any other code (an unreadable file) is 3, a runtime failure."""


class ViewError(Exception):
    """A view cannot be given as asked: printed as `{"error": {"code", "message", ...}}`."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.extra = code, message, extra

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS.get(self.code, 3)

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


class AgentInfo(Protocol):
    """What a view needs of an agent (an `AgentSpec` fits)."""

    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> str: ...


def delivery_state(rec: dict[str, Any]) -> str | None:
    """A `delivery` record's state: `deliveryState`, or `delivery_state` as earlier records
    name it (existing JSONL is read as it is, never rewritten)."""
    state = rec.get("deliveryState", rec.get("delivery_state"))
    return state if isinstance(state, str) else None


def is_agent_status(rec: dict[str, Any]) -> bool:
    """An agent-level `status` record: written by the runner (`source: "runner"`), or without
    `turnId`. Adapters' own `status` observations (rate-limit, compacting, ...) are turn events."""
    return (rec.get("kind") == "status" and isinstance(rec.get("status"), str)
            and (rec.get("source") == "runner" or "turnId" not in rec))


class StatusTracker:
    """The agent's status from its records, fed oldest first.

    The `status` of the last agent-level status record (`is_agent_status`). A stream without
    any is derived: `running` while the newest dispatch record is a `dispatch-start`, else
    `idle` (also for an empty stream).
    """

    def __init__(self) -> None:
        self.record: dict[str, Any] | None = None
        self.dispatch: dict[str, Any] | None = None

    def feed(self, rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        if is_agent_status(rec):
            self.record = rec
        elif kind in ("dispatch-start", "dispatch-finished"):
            self.dispatch = rec

    def result(self) -> tuple[str, str | None]:
        """(status, last_status_at): the ts of the record the status comes from."""
        if self.record is not None:
            return str(self.record["status"]), self.record.get("ts")
        if self.dispatch is not None:
            running = self.dispatch.get("kind") == "dispatch-start"
            return ("running" if running else "idle"), self.dispatch.get("ts")
        return "idle", None


def status_tracker(path: Path) -> StatusTracker:
    """A tracker fed with the end of the stream: enough to hold its last agent-level status."""
    kinds = {"status", "dispatch-start", "dispatch-finished"}
    tracker = StatusTracker()
    for n in (64, 4096, 2**62):
        tracker = StatusTracker()
        recs = last_records(path, n, kinds)
        for rec in recs:
            tracker.feed(rec)
        if tracker.record is not None or len(recs) < n:
            break
    return tracker


def writer_gone(path: Path) -> bool:
    """Whether nobody holds the agent's lock (`state/agents-<name>.lock`), as the kernel says
    (`flocks.held`: a writer in another pid namespace holds it too): the process that wrote
    its stream (`agent run`, a runner) is gone. False when that cannot be told (no lock file,
    or it cannot be opened)."""
    lock = lock_path(path)
    try:
        return lock.exists() and not flocks.held(lock)
    except OSError:
        return False


def settled(status: str, path: Path) -> str:
    """`status` as it stands: `interrupted` for a turn left open (`running`, `stopping`) by a
    writer that is gone (an `agent run` SIGKILLed: its guardian ended the agent, nothing closed
    the turn; the next run records it `cancelled`)."""
    return "interrupted" if status in ("running", "stopping") and writer_gone(path) else status


def read_status(path: Path) -> tuple[str, str | None]:
    """The agent's (status, last_status_at), read backwards from the end of its stream."""
    status, at = status_tracker(path).result()
    return settled(status, path), at


def latest_seq(path: Path) -> int:
    """The seq of the stream's last record (0 for an empty or missing stream)."""
    tail = last_records(path, 1)
    return int(tail[0]["seq"]) if tail else 0


def check_since(path: Path, name: str, since: str) -> int:
    """The seq of a `--since` cursor of agent `name`; else `invalid_cursor` (malformed, of
    another agent, or ahead of the stream)."""
    try:
        sid, seq = parse_cursor(since)
    except ValueError as exc:
        raise ViewError("invalid_cursor", str(exc).removeprefix("invalid_cursor: "),
                        cursor=since) from None
    if sid != name:
        raise ViewError("invalid_cursor", f"cursor {since!r} belongs to {sid!r}, not to agent "
                        f"{name!r}", cursor=since)
    latest = latest_seq(path)
    if seq > latest:
        raise ViewError("invalid_cursor", f"cursor {since!r} is ahead of the latest record "
                        f"{format_cursor(name, latest)}: was the output dir cleared or replaced?",
                        cursor=since)
    return seq


def window(path: Path, name: str, since_seq: int | None, *, after: int | None = None,
           again: str = "read again without --since") -> Iterator[dict[str, Any]]:
    """Retained records, oldest first; with `since_seq`, strictly after it. From `after` on
    (`since_seq` when not given; an `--until` anchor, whose view holds the records before it
    too) they are contiguous — `cursor_expired` when rotation deleted the next ones (`again`:
    what to do), `gap_detected` when a seq is missing in the middle. Never a silent gap."""
    after = since_seq if after is None else after
    expected = None if after is None else after + 1
    for rec in iter_records(path, since_seq=since_seq):
        seq = int(rec["seq"])
        if expected is not None and seq >= expected:  # (before it: an anchor's view only)
            if seq != expected and not explains(rec, expected):
                raise _discontinuity(path, name, expected, seq, again)
            expected = seq + 1
        yield rec


def _discontinuity(path: Path, name: str, expected: int, seq: int, again: str) -> ViewError:
    """Why seq `seq` came where `expected` was due: `cursor_expired` when rotation deleted
    the records between (`again`: what to do), else `gap_detected`."""
    at = format_cursor(name, expected - 1)
    oldest = oldest_seq(path)
    if oldest is not None and oldest > expected:
        return ViewError(
            "cursor_expired", f"records after {at} were rotated away; the oldest retained is "
            f"{format_cursor(name, oldest)}: {again}",
            cursor=at, oldest_cursor=format_cursor(name, oldest))
    return ViewError("gap_detected", f"after {at} the next record is seq {seq}, not "
                     f"{expected}: records are missing from the stream", cursor=at,
                     found_cursor=format_cursor(name, max(seq, 0)))


def explains(rec: dict[str, Any], expected: int) -> bool:
    """`rec` is the `gap` record of seqs given up unwritten (a full disk: at a stop, or in a
    once run) from `expected` on: it takes the last seq of that range, so the seqs before it
    are accounted for, not missing."""
    lo = rec.get("fromSeq")
    return (rec.get("kind") == "gap" and rec.get("reason") == "unwritten"
            and isinstance(lo, int) and lo <= expected and rec.get("toSeq") == rec["seq"])


def anchor_seq(cursor: str) -> int:
    """The seq of a cursor already checked (an `--until` anchor)."""
    return parse_cursor(cursor)[1]
