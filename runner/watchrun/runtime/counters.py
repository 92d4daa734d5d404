"""A watcher's counters (the tail of its lines is `recent_lines.py`'s): what status snapshots,
metrics and `watchrun logs` read, kept at O(1) cost per chunk; what a gap or error says went
unread."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from watchrun.events import MatchInfo
from watchrun.runtime.matches import RecentMatches, Rows
from watchrun.runtime.recent_lines import RecentLines


class Counters(Struct):
    tail: RecentLines
    """Lines read and the last `maxLogLines` of them (for `watchrun logs`)."""
    bytes_read: int = 0
    matches: int = 0
    skipped_duplicates: int = 0
    """Lines not read again after a crash: they were recorded before it."""
    skipped_nul: int = 0
    """NUL bytes of a file passed over before a line (a hole: `sources/zeros.py`)."""
    truncated: int = 0
    """Match records of lines cut at `maxLineBytes` (`linesCut` matched); not one whose text
    alone was clipped there (`omittedBytes: 0`): nothing of that line was left out."""
    cut_lines: int = 0
    """Lines longer than `maxLineBytes`, matched or not: only their first `maxLineBytes` were
    kept, so only that part was matched."""
    cut_bytes: int = 0
    """What those lines lost."""
    errors: int = 0
    last_match_at: float | None = None
    first: list[MatchInfo] = field(default_factory=list)
    """The first few matches (for gate verdicts)."""
    require_seen: bool = False
    recent: RecentMatches = field(default_factory=lambda: RecentMatches(0))
    """The last `maxMatches` matches."""
    redacted: dict[str, int] = field(default_factory=dict)
    """Secrets redacted from this watcher's records, by kind (`output.redact`)."""
    unjudged: list[tuple[str, str]] = field(default_factory=list)
    """(where, line) of the matches a run that never ended recorded: no verdict saw them."""
    unread: str | None = None
    """Why lines went unread or unmatched (the first `gap`, truncation or regex timeout)."""
    unread_maybe: bool = False
    """`unread` says only that lines may have gone unread (how much is not known): a later
    record that says which gives way to it (a generation gone that was compressed)."""

    @property
    def lines(self) -> int:
        """Lines read so far (counted when asked, not per chunk)."""
        return self.tail.lines

    def note(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Keep why a record says lines went unread (`unread`): the first reason, unless it
        only said they may have and this one says more."""
        if self.unread is None or self.unread_maybe:
            why = unread(kind, fields)
            if why is not None:
                self.unread, self.unread_maybe = why, _unknown_loss(kind, fields)


class Landed:
    """A batch's `on_written` (`AsyncWriter.write_lines`): its match records are counted as
    they land, with those truncated and the secrets redacted in them, so a batch a full disk
    writes in parts (or gives the rest of up) counts the records written, no more."""

    __slots__ = ("_c", "_rows", "done")

    def __init__(self, counters: Counters, rows: Rows) -> None:
        self._c, self._rows = counters, rows
        self.done = 0
        """The rows whose records are written (the first `done`)."""

    def __call__(self, n: int) -> None:
        c, rows, lo = self._c, self._rows, self.done
        self.done = hi = lo + n
        c.matches += n
        c.last_match_at = time.time()
        if rows.cuts:
            c.truncated += sum(1 for k, omitted in rows.cuts.items() if omitted and lo <= k < hi)
        for k, found in (rows.redacted or {}).items():
            if lo <= k < hi:
                for kind, m in found.items():
                    c.redacted[kind] = c.redacted.get(kind, 0) + m


_UNKNOWN_LOSS = ("compressed", "missing", "unseen")
"""`gap` reasons that say lines went unread whatever their `unreadBytes` (0: not known)."""


_GONE_HINT = (" (a log deleted on purpose between two runs, as `make clean` does, is judged "
              "whole with a fresh --output-dir per build)")
_COPIED_HINT = (" (the log was copied and truncated more often between two looks, as between two "
                "runs, than its copies are kept: keep more copies, logrotate's `rotate N`, or "
                "run the gate on the finished log before it is rotated)")
"""A `gap{missing}` with a `laterCopy`: copytruncate's copy of what followed the read is gone,
not the log (`sources/announced.py`'s `copy_gone`)."""


def _lost(fields: Mapping[str, Any]) -> int:
    lost = fields.get("unreadBytes")
    return lost if isinstance(lost, int) and lost > 0 else 0


def _unknown_loss(kind: str, fields: Mapping[str, Any]) -> bool:
    """A `gap` that says lines may have gone unread, not which (a generation gone, files
    unseen)."""
    return kind == "gap" and not _lost(fields) and fields.get("reason") in ("missing", "unseen")


def unread(kind: str, fields: Mapping[str, Any]) -> str | None:
    """Why this record says lines went unread or unmatched (a once verdict's ERROR), or None."""
    lost = _lost(fields)
    reason = fields.get("reason")
    if kind == "gap" and (lost or reason in _UNKNOWN_LOSS):
        # (`missing`: `unreadBytes` is a lower bound, what the generation got after the last
        # look is not known; `unseen`: what those files held is not known)
        if lost:
            what = f"{lost} bytes were never read"
        elif reason == "compressed":
            what = "lines were never read"
        else:
            of = f" of {fields['path']}" if isinstance(fields.get("path"), str) else ""
            what = f"lines{of} may never have been read"
        hint = ""
        if reason == "missing" and not lost:
            hint = _COPIED_HINT if fields.get("laterCopy") else _GONE_HINT
        return f"{what}: {fields.get('message', reason)}{hint}"
    if kind == "error" and fields.get("code") == "output-held-open":
        if fields.get("unread"):
            return f"the command's output was not read to its end: {fields.get('message')}"
        return ("the command's output was cut short (what the processes it left running would "
                f"still have written was never read): {fields.get('message')}")
    if kind == "error" and fields.get("code") in ("not-utf8", "compressed"):
        return f"lines were never read: {fields.get('message')}"
    if kind == "gap" and reason == "lost":  # (a killed once run's matches among them)
        return f"records of an earlier run are lost, uncounted: {fields.get('message')}"
    if kind == "error" and fields.get("code") == "uncounted-matches":
        return f"matches were never counted: {fields.get('message')}"
    if kind == "error" and fields.get("code") == "regex-timeout":
        return f"a line was never matched: {fields.get('message')}"
    if kind == "error" and fields.get("code") == "cut-short":
        return f"{lost} bytes were never read: {fields.get('message')}"
    if kind == "error" and fields.get("unread") and (
            fields.get("code") == "checkpoint-corrupt"  # (or it could not be read at all)
            or str(fields.get("message", "")).startswith("cannot read checkpoint ")):
        return f"where the last run ended is lost (what was rotated away since is not read): " \
               f"{fields.get('message')}"
    if kind == "error" and fields.get("unread") is True:  # a read that failed
        return f"lines were never read: {fields.get('message')}"
    if kind == "rotate" and lost:
        return f"{lost} bytes were never read: {fields.get('path')} was truncated before them"
    return None
