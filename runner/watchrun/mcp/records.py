"""The seed's `WatchRecord` made from what watchrun knows of a watcher (the live runner's `list`
record or a status snapshot; pure). Snapshots are read from disk, so every value is checked:
what has the wrong type is left out or given its default, never passed on as is."""

from __future__ import annotations

from typing import Any

from watchrun.match.sanitize import edge_text

__all__ = ["SEED_STATUS", "watch_record"]

SEED_STATUS = {
    "running": "running", "starting": "running", "backoff": "running", "waiting": "running",
    "stopping": "running", "exited": "exited", "stopped": "stopped", "fatal": "error",
    "refused": "error", "error": "error", "paused": "error",
}
"""watchrun's statuses → the seed's four: a watcher at work (also while it waits for a missing
file, a restart delay or its schedule, or for its command to end after a stop) is running; one
that failed, or whose records cannot be written (`paused`), is error."""


def watch_record(snap: dict[str, Any]) -> dict[str, Any]:
    """`WatchRecord` {id, label, source, pattern, exclude, caseSensitive, wake, wakeAgents,
    fromStart, status, state, origin, startedAt, updatedAt, lastMatchAt, linesRead, matchCount,
    restarts, lastError, pid, exitCode, signal, live}; text sanitized for the edge."""
    state = _text(snap.get("status")) or "stopped"
    wake = [_clean(x) for x in _list(snap.get("wake"))]
    record: dict[str, Any] = {
        "id": _text(snap.get("id")) or "?",
        "label": _text(snap.get("label")) or _text(snap.get("source")) or "",
        "source": _source(snap),
        "pattern": _text(snap.get("pattern")) or "",
        "exclude": [_clean(x) for x in _list(snap.get("exclude"))],
        "caseSensitive": snap.get("caseSensitive") is True,
        "wake": bool(wake),
        "wakeAgents": wake,
        "fromStart": snap.get("fromStart") is True,
        "status": SEED_STATUS.get(state, "running"),
        "state": state,
        "origin": _text(snap.get("origin")) or "config",
        "startedAt": _text(snap.get("startedAt")),
        "updatedAt": _text(snap.get("updatedAt")),
        "lastMatchAt": _text(snap.get("lastMatchAt")),
        "linesRead": _count(snap.get("linesRead")),
        "matchCount": _count(snap.get("matchCount")),
        "restarts": _count(snap.get("restarts")),
        "lastError": _text(snap.get("lastError")),
        "pid": _int(snap.get("pid")),
        "exitCode": _int(snap.get("exitCode")),
        "signal": _text(snap.get("signal")),
        "live": snap.get("live") is True,
    }
    return record


def _source(snap: dict[str, Any]) -> dict[str, Any]:
    value = snap.get("source")
    if snap.get("kind") == "command":
        command: str | list[str] = [_clean(x) for x in value] if isinstance(value, list) \
            else _clean(value if value is not None else "")
        return {"kind": "command", "command": command, "cwd": _text(snap.get("cwd"))}
    return {"kind": "file", "path": _clean(value if value is not None else "")}


def _clean(value: Any) -> str:
    return edge_text(value)


def _text(value: Any) -> str | None:
    """A string (sanitized), or None for anything else."""
    return edge_text(value) if isinstance(value, str) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value: Any) -> int:
    found = _int(value)
    return found if found is not None and found >= 0 else 0
