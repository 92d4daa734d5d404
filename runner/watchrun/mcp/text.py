"""The text a `watch` result shows beside its structured content, as the seed's transcript does
(pure): `add`/`stop` one outcome line, `list` the rows (at most eight), `matches`/`logs` the
lines with what is hidden noted above them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from watchrun.match.sanitize import edge_name, edge_text
from watchrun.views.humanize import not_reading, when
from watchrun.views.watchers import table

__all__ = ["LIST_ROWS", "render"]

LIST_ROWS = 8
"""`list` shows this many rows in text (the structured content has every watcher)."""


def render(details: dict[str, Any], now: datetime) -> str:
    action = str(details.get("action"))
    if "error" in details:
        return f"watch {action}: {details['error']}"
    watch = details.get("watch")
    if action == "add" and isinstance(watch, dict):
        lines = [f"{watch['id']} added: {_added(watch)}"]
        lines += [f"warning: {w}" for w in details.get("warnings", [])]
        return "\n".join(lines)
    if action == "stop":
        wid = watch["id"] if isinstance(watch, dict) else "?"
        return f"stopped {wid}" if details.get("stopped") else f"{wid} was not running"
    if action in ("list", "clear"):
        return _list(details, now)
    if action == "status" and isinstance(watch, dict):
        return "\n".join([_rows([watch], now), _describe(watch)] + (
            [f"last error: {watch['lastError']}"] if watch.get("lastError") else []))
    if action in ("matches", "logs"):
        return _lines(details, action)
    return f"watch {action}: done"


def _added(w: dict[str, Any]) -> str:
    """What it does, or, when its first look found nothing to read, that (as the runner's
    `message` and `watchrun add` say it) and what it will look for."""
    src = w["source"]
    name = src["path"] if src["kind"] == "file" else _command(src)
    note = not_reading(src["kind"], w.get("state"), name, w.get("lastError"),
                       "the `stop` action")
    return f"{note}; it looks {_how(w)}" if note is not None else _describe(w)


def _describe(w: dict[str, Any]) -> str:
    return f"{_what(w)} {_how(w)}"


def _what(w: dict[str, Any]) -> str:
    src = w["source"]
    if src["kind"] == "file":
        return f"tailing {src['path']}"
    return f"running `{_command(src)}`" + (f" in {src['cwd']}" if src.get("cwd") else "")


def _command(src: dict[str, Any]) -> str:
    return src["command"] if isinstance(src["command"], str) else " ".join(src["command"])


def _how(w: dict[str, Any]) -> str:
    how = f"for /{w['pattern']}/"
    if w["exclude"]:
        how += f" except /{'/, /'.join(w['exclude'])}/"
    if w["caseSensitive"]:
        how += " (case-sensitive)"
    if w["fromStart"]:
        how += " from its start"
    if w["wakeAgents"]:
        how += f"; a match wakes {', '.join(w['wakeAgents'])}"
    return how


def _list(details: dict[str, Any], now: datetime) -> str:
    watches = [w for w in details.get("watches", []) if isinstance(w, dict)]
    head = []
    if details.get("action") == "clear":
        n = details.get("cleared", 0)
        head.append(f"cleared {n} watcher{'' if n == 1 else 's'}")
    where = {"live": "the live runner", "session": "this session",
             "none": "no runner"}.get(str(details.get("runner")), "?")
    if not watches:
        return "\n".join([*head, f"no watchers ({where})"])
    omitted = int(details.get("omitted", 0))
    total = len(watches) + omitted
    head.append(f"{total} watcher{'' if total == 1 else 's'} ({where})")
    body = _rows(watches[:LIST_ROWS], now)
    more = total - LIST_ROWS
    where_else = f" ({omitted} of them past the structured result's {len(watches)}: `watchrun " \
        "list` shows them)" if omitted else " in the structured result"
    tail = [f"… {more} more{where_else}"] if more > 0 else []
    return "\n".join([*head, body, *tail])


def _rows(watches: list[dict[str, Any]], now: datetime) -> str:
    rows = [[w["id"], w["status"], w["source"]["kind"], str(w["matchCount"]),
             str(w["linesRead"]), when(w.get("lastMatchAt"), now, short=True),
             edge_name(w["label"])]
            for w in watches]
    return table(rows, ["ID", "STATUS", "KIND", "MATCHES", "LINES", "LAST MATCH", "LABEL"])


def _lines(details: dict[str, Any], action: str) -> str:
    watch, cursor = details.get("watch"), str(details.get("cursor") or "")
    wid = watch["id"] if isinstance(watch, dict) else cursor.partition(":")[0] or "the watcher"
    text = str(details.get(action, ""))
    n = int(details.get("count", 0))
    noun = "match" if action == "matches" else "line"
    head = f"{wid}: {n} {noun}{'' if n == 1 else ('es' if noun == 'match' else 's')}"
    if details.get("cursor"):
        head += f" (cursor {edge_text(details['cursor'])})"
    notes = []
    omitted = int(details.get("omitted", 0))
    if omitted:
        plural = "es" if noun == "match" else "s"
        notes.append(f"{omitted} more {noun}{'' if omitted == 1 else plural} left out: a result "
                     "holds at most 1 MiB of lines; " + (
                         "call again with since=cursor for them" if "since" in details else
                         "those are the older ones: ask for fewer lines"))
    elif details.get("truncated"):
        notes.append("more were recorded after these: call again with since=cursor"
                     if "since" in details else "older ones not shown (raise lines)")
    return "\n".join([head, *(f"({x})" for x in notes), *([text] if text else [])])
