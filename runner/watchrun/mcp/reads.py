"""What `matches` and `logs` read from the output dir, as the CLI does (blocking: the server runs
these in a worker thread). `matches` reads by cursor: the last N matches and the cursor of the
newest record, or the matches strictly after a cursor, oldest first, a page at a time. A page
holds at most MAX_RESULT_BYTES of lines; those left out are counted (`omitted`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from msgspec import Struct

from watchrun.match.redact import Redactor
from watchrun.match.sanitize import edge_text
from watchrun.mcp.schema import MAX_RESULT_BYTES
from watchrun.output.backward import last_records
from watchrun.output.records import cursor_expired, format_cursor
from watchrun.runtime.snapshot_text import CUT_MARK
from watchrun.views import watchers as views
from watchrun.views.agent_window import ViewError, window

__all__ = ["Page", "ReadError", "read_logs", "read_matches"]


class ReadError(Exception):
    """A cursor that cannot be honoured (expired, or ahead of the stream), or a file that
    cannot be read; the message says what to do or why."""


class Page(Struct, frozen=True):
    lines: list[str]
    """Sanitized, one per item (a line never contains a newline: it is escaped)."""
    truncated: bool
    cursor: str | None = None
    omitted: int = 0
    """Lines the call asked for that were left out to keep the page under its size cap: the
    oldest ones, or with `since` the newest (the cursor is then the last one returned)."""


@contextlib.contextmanager
def _reading(what: str, wid: str) -> Iterator[None]:
    """A file that cannot be read (a symlink, never followed; a FIFO; a directory) is the
    call's error, said as `watchrun matches/logs` say it, not an internal error."""
    try:
        yield
    except OSError as exc:
        raise ReadError(f"cannot read the {what} of {wid}: {exc}") from None


def read_matches(root: Path, wid: str, lines: int, since: int | None,
                 budget: int = MAX_RESULT_BYTES, hide: Redactor | None = None) -> Page:
    """Without `since`: the last `lines` matches, and the cursor of the newest record (read
    first, so a match recorded meanwhile comes with the next `since` call, not never). With
    `since`: the first `lines` matches after it and the cursor to read on from; `truncated`
    when more follow. `hide`: what the answer is redacted with, which hides here the head of a
    secret that a line's cut at maxLineBytes split (the answer's redaction sees no cut)."""
    with _reading("matches", wid):
        return _read_matches(root, wid, lines, since, budget, hide)


def _read_matches(root: Path, wid: str, lines: int, since: int | None, budget: int,
                  hide: Redactor | None) -> Page:
    path = root / "watchers" / f"{wid}.jsonl"
    newest = last_records(path, 1)
    top = int(newest[0]["seq"]) if newest else 0
    if since is None:
        recs, truncated = _last_matches(path, lines, top)
        kept = _newest_within([_line(r, hide) for r in recs], budget, hide)
        omitted = len(recs) - len(kept)
        return Page(kept, truncated or omitted > 0, format_cursor(wid, top), omitted)
    if since > top:
        raise ReadError(f"since: cursor {format_cursor(wid, since)} is ahead of {wid}'s "
                        f"newest record ({format_cursor(wid, top)}): its JSONL was removed "
                        "and began again; call matches without since to start over")
    expired = ReadError(f"cursor_expired: the records after {format_cursor(wid, since)} were "
                        "rotated away (output.keep); call matches without since to start over")
    if cursor_expired(path, since):
        raise expired
    found: list[str] = []
    last, truncated, size, omitted = since, False, 0, 0
    try:  # (contiguous from `since`: a rotation since the check, or seqs missing, is said)
        for rec in window(path, wid, since, again="call matches without since to start over"):
            if rec.get("kind") == "match":
                if len(found) + omitted == lines:
                    truncated = True
                    break
                line = _line(rec, hide) if found else _cut(_line(rec, hide), budget, hide)
                size += _size(line)
                if omitted or size > budget:  # over the cap: counted, the cursor stays
                    omitted += 1
                    continue
                found.append(line)
            if not omitted:
                last = int(rec["seq"])
    except ViewError as exc:
        raise ReadError(str(exc)) from None
    return Page(found, truncated or omitted > 0, format_cursor(wid, last), omitted)


def _last_matches(path: Path, lines: int, top: int) -> tuple[list[dict[str, Any]], bool]:
    """The last `lines` matches up to seq `top`, and whether older ones exist, in one pass
    from the end: the records appended since `top` are passed over, not counted (counting them
    and reading again chased a flood, which appends faster than records are parsed)."""
    got = last_records(path, lines + 1, {"match"}, upto=top)
    return got[-lines:], len(got) > lines


def read_logs(root: Path, wid: str, lines: int, budget: int = MAX_RESULT_BYTES,
              hide: Redactor | None = None, max_line_bytes: int = 0) -> Page:
    """The last `lines` raw lines of the watcher's tail snapshot (sanitized by the runner and
    again here: the file is only as trustworthy as whoever can write the output dir). `hide`:
    as for `read_matches`; a line is taken as cut when it ends in the tail's CUT_MARK or is
    about `max_line_bytes` long (the tail does not mark a line cut when it was read)."""
    with _reading("logs", wid):  # (never "no lines")
        found = views.logs(root, wid, lines + 1)
    asked = [edge_text(x) for x in found[-lines:]]
    if hide is not None:
        asked = [_cut_log(x, hide, max_line_bytes) for x in asked]
    kept = _newest_within(asked, budget, hide)
    omitted = len(asked) - len(kept)
    return Page(kept, len(found) > lines or omitted > 0, omitted=omitted)


def _newest_within(lines: list[str], budget: int, hide: Redactor | None) -> list[str]:
    """The newest of `lines` (oldest first) whose sizes add up to at most `budget`; at least
    the newest one (`_cut` to the budget)."""
    if not lines:
        return []
    size, n = _size(lines[-1]), 1
    for line in reversed(lines[:-1]):
        size += _size(line)
        if size > budget:
            break
        n += 1
    return [*lines[len(lines) - n:-1], _cut(lines[-1], budget, hide)]


def _cut(line: str, budget: int, hide: Redactor | None) -> str:
    """`line`, or (longer than `budget`: a line of up to limits.maxLineBytes, 16 MiB) its
    start, marked: one line alone never takes a page over its cap. `hide`: the head of a
    secret that this cut splits is hidden (`read_matches`)."""
    if _size(line) <= budget:
        return line
    head = _head(line, budget - 64)
    if hide is not None:
        head = _head(hide.cut_end(head)[0], budget - 64)
    return f"{head}…[cut: the line is over the result's {budget >> 10} KiB]"


def _head(line: str, size: int) -> str:
    return line.encode("utf-8", "surrogatepass")[:size].decode("utf-8", "ignore")


def _size(line: str) -> int:
    """Its UTF-8 bytes and its newline."""
    return len(line.encode("utf-8", "surrogatepass")) + 1


def _cut_log(line: str, hide: Redactor, max_line_bytes: int) -> str:
    """A tail line with the head of a secret at its cut edge hidden, when it was cut."""
    if line.endswith(CUT_MARK):
        return hide.cut_end(line[: -len(CUT_MARK)])[0] + CUT_MARK
    if max_line_bytes and len(line.encode("utf-8", "surrogatepass")) >= max_line_bytes - 3:
        return hide.cut_end(line)[0]
    return line


def _line(rec: dict[str, Any], hide: Redactor | None) -> str:
    line = rec.get("line", "")
    if hide is not None and rec.get("truncated") is True and isinstance(line, str):
        line = hide.cut_end(line)[0]  # (cut at maxLineBytes: the record says so)
    return edge_text(line)
