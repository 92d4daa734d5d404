"""Values for people (pure): relative times, lists and flags without reprs, status colours, what
an added watcher's first look found."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from watchrun.clock import parse_ts

__all__ = ["DISABLED", "DISABLED_ONCE", "NAMED", "Paint", "ago", "as_datetime", "named",
           "no_paint", "not_reading", "paint", "value", "when"]

NAMED = 20
"""Ids a message names at most (`known: …`): an output dir may have thousands."""
DISABLED = ("the runner's watchers are disabled by `limits.enabled: false` in its config: it runs "
            "none, and `start` and `add` are refused (set it to true, then reload: SIGHUP)")
"""What the runner's log, `status`, `list` and a refused `start` or `add` say of a runner whose
config has `limits.enabled: false`."""
DISABLED_ONCE = "its watchers are disabled by `limits.enabled: false` in its config: it runs none"
"""What a once run's start line and verdicts say of it (nothing to start, add or reload)."""

Paint = Callable[[str, str], str]
"""(text, status) -> the text as printed: coloured for a terminal, or as it is."""

_SGR = {"green": "32", "yellow": "33", "red": "31", "dim": "2"}
STATUS_COLOUR = {
    "running": "green", "waiting": "yellow", "starting": "yellow", "backoff": "yellow",
    "stopping": "yellow",
    "error": "red", "paused": "red", "fatal": "red", "refused": "red", "failed": "red",
    "interrupted": "red",
    "stopped": "dim", "exited": "dim", "idle": "dim", "done": "green",
}


def as_datetime(text: object) -> datetime | None:
    """A record's `ts` as an aware datetime (UTC), else None."""
    seconds = parse_ts(text)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def ago(then: datetime, now: datetime) -> str:
    """`just now`, `42s ago`, `3m ago`, `2h 5m ago`, `3d ago` (`in 5s` when ahead: a skewed
    clock)."""
    seconds = int((now - then).total_seconds())
    if abs(seconds) < 1:
        return "just now"
    span = _span(abs(seconds))
    return f"{span} ago" if seconds > 0 else f"in {span}"


def _span(s: int) -> str:
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h {m}m" if m else f"{h}h"
    return f"{s // 86400}d"


def when(text: object, now: datetime, *, short: bool = False) -> str:
    """A timestamp for people: `3m ago` (short) or `2026-05-16T12:00:00.000Z (3m ago)`; `-`
    when there is none; an unparseable one as it is."""
    ts = as_datetime(text)
    if ts is None:
        return "-" if text in (None, "") else value(text)
    rel = ago(ts, now)
    return rel if short else f"{text} ({rel})"


def value(v: Any) -> str:
    """A status value for people: `-` for nothing, yes/no, lists joined with `, `, mappings as
    `key=value`; never a Python repr."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list | tuple):
        return ", ".join(value(x) for x in v) or "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}={value(x)}" for k, x in v.items()) or "-"
    return str(v)


def paint(text: str, status: str) -> str:
    """`text` in the colour of `status` (SGR codes; for a terminal only)."""
    colour = STATUS_COLOUR.get(status.strip())
    return f"\x1b[{_SGR[colour]}m{text}\x1b[0m" if colour else text


def no_paint(text: str, status: str) -> str:
    return text


def named(ids: list[str], limit: int = NAMED) -> str:
    """`a, b, c`, or the first `limit` and `… and 2980 more`; `none` for no ids."""
    if len(ids) <= limit:
        return ", ".join(ids) or "none"
    return f"{', '.join(ids[:limit])}, … and {len(ids) - limit} more"


def not_reading(kind: object, status: object, source: str, last_error: object,
                stop: str) -> str | None:
    """What an `add` says of a watcher that started but does not read its source yet (as
    `watchrun add` and the MCP tool's `add` say it): `waiting for PATH (…)`, a file not there
    yet; `cannot read PATH yet: REASON (…)`, one it cannot read (`status` error). None: it
    reads. `stop` names how the caller's user ends it."""
    if status == "waiting" and kind == "file":
        return f"waiting for {source} (not there yet; followed once it appears)"
    if status == "error":
        why = str(last_error or "unknown error").removeprefix(f"cannot read {source}: ")
        return (f"cannot read {source} yet: {why} (it is kept, and tries again whenever the "
                f"path changes: a regular file there is followed; {stop} ends it)")
    return None
