"""What `matches` and `logs` read from the output dir, as the CLI does (blocking: the server runs
these in a worker thread). `matches` reads by cursor: the last N matches and the cursor of the
newest record, or the matches strictly after a cursor, oldest first, a page at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import Struct

from watchrun.match.sanitize import edge_text
from watchrun.output.records import cursor_expired, format_cursor, last_records
from watchrun.views import watchers as views
from watchrun.views.agent_window import ViewError, window

__all__ = ["Page", "ReadError", "read_logs", "read_matches"]


class ReadError(Exception):
    """A cursor that cannot be honoured (expired, or ahead of the stream); the message says
    what to do."""


class Page(Struct, frozen=True):
    lines: list[str]
    """Sanitized, one per item (a line never contains a newline: it is escaped)."""
    truncated: bool
    cursor: str | None = None


def read_matches(root: Path, wid: str, lines: int, since: int | None) -> Page:
    """Without `since`: the last `lines` matches, and the cursor of the newest record (read
    first, so a match recorded meanwhile comes with the next `since` call, not never). With
    `since`: the first `lines` matches after it and the cursor to read on from; `truncated`
    when more follow."""
    path = root / "watchers" / f"{wid}.jsonl"
    newest = last_records(path, 1)
    top = int(newest[0]["seq"]) if newest else 0
    if since is None:
        recs, truncated = _last_matches(path, lines, top)
        return Page([_line(r) for r in recs], truncated, format_cursor(wid, top))
    if since > top:
        raise ReadError(f"since: cursor {format_cursor(wid, since)} is ahead of {wid}'s "
                        f"newest record ({format_cursor(wid, top)}): its JSONL was removed "
                        "and began again; call matches without since to start over")
    expired = ReadError(f"cursor_expired: the records after {format_cursor(wid, since)} were "
                        "rotated away (output.keep); call matches without since to start over")
    if cursor_expired(path, since):
        raise expired
    found: list[dict[str, Any]] = []
    last, truncated = since, False
    try:  # (contiguous from `since`: a rotation since the check, or seqs missing, is said)
        for rec in window(path, wid, since, again="call matches without since to start over"):
            if rec.get("kind") == "match":
                if len(found) == lines:
                    truncated = True
                    break
                found.append(rec)
            last = int(rec["seq"])
    except ViewError as exc:
        raise ReadError(str(exc)) from None
    return Page([_line(r) for r in found], truncated, format_cursor(wid, last))


def _last_matches(path: Path, lines: int, top: int) -> tuple[list[dict[str, Any]], bool]:
    """The last `lines` matches up to seq `top` (records appended since are not counted),
    and whether older ones exist."""
    want = lines + 1
    while True:
        got = last_records(path, want, {"match"})
        keep = [r for r in got if r["seq"] <= top]
        if len(got) < want or len(keep) > lines:
            return keep[-lines:], len(keep) > lines
        want += len(got) - len(keep)


def read_logs(root: Path, wid: str, lines: int) -> Page:
    """The last `lines` raw lines of the watcher's tail snapshot (sanitized by the runner and
    again here: the file is only as trustworthy as whoever can write the output dir)."""
    found = views.logs(root, wid, lines + 1)
    return Page([edge_text(x) for x in found[-lines:]], len(found) > lines)


def _line(rec: dict[str, Any]) -> str:
    return edge_text(rec.get("line", ""))
