"""A watcher's counters and the tail of its lines: what status snapshots, metrics and
`watchrun logs` read, kept at O(1) cost per chunk."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field, structs

from watchrun.events import Chunk, Cut, MatchInfo
from watchrun.match.keyblocks import Region, inside
from watchrun.match.simd import count_newlines
from watchrun.runtime.matches import RecentMatches, Rows


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
            c.truncated += sum(1 for k in rows.cuts if lo <= k < hi)
        for k, found in (rows.redacted or {}).items():
            if lo <= k < hi:
                for kind, m in found.items():
                    c.redacted[kind] = c.redacted.get(kind, 0) + m


class RecentLines:
    """How many lines a stream of chunks held, and its last `keep` lines, at O(1) cost per
    chunk: it keeps references to the newest chunks' bytes and counts and splits them only when
    asked (a status snapshot, at most once a second), never on the hot path.

    A chunk's line count is the next chunk's `line_no` minus its own when the next one follows
    it in the same stream (same inode or run, next byte offset); otherwise it is counted. A
    chunk longer than `LONG_CHUNK` is counted as it comes and only its last `keep` lines are
    kept (a copy): a file's read is up to 1 MiB, and 200 watchers each keeping two whole reads
    held 400 MB for tails of 500 lines.
    Memory: the bytes of the last `keep` lines, plus fewer than `keep` lines before them (held
    chunks' lines not needed yet) and up to `LONG_CHUNK` bytes of chunks not cut.
    """

    __slots__ = ("_done", "_held", "_held_lines", "_newest", "_newest_lines", "_newest_regions",
                 "keep")
    # (a held chunk: its bytes, its lines, its key-block regions, its cut lines)

    def __init__(self, keep: int) -> None:
        self.keep = max(0, keep)
        self._done = 0  # lines of every chunk before the newest
        self._held: deque[tuple[bytes, int, list[Region], tuple[Cut, ...]]] = deque()
        self._held_lines = 0
        self._newest: Chunk | None = None
        self._newest_lines = -1  # -1: not counted yet
        self._newest_regions: list[Region] = []

    def add(self, chunk: Chunk, regions: list[Region]) -> None:
        """`regions`: the chunk's lines inside a private-key block (`KeyBlocks.regions`)."""
        prev = self._newest
        if prev is not None:
            n = self._newest_lines
            if n < 0:
                n = chunk.line_no - prev.line_no if _follows(prev, chunk) else -1
                n = n if n > 0 else count_newlines(prev.data)
            self._done += n
            if self.keep:
                kept = min(n, self.keep)  # (a long chunk: its last `keep` lines only)
                self._held.append((prev.data, kept, self._newest_regions, prev.cuts))
                self._held_lines += kept
                held = self._held
                while len(held) > 1 and self._held_lines - held[0][1] >= self.keep:
                    self._held_lines -= held.popleft()[1]
        self._newest_lines = -1
        if self.keep and len(chunk.data) > LONG_CHUNK:
            self._newest_lines = count_newlines(chunk.data)
            data, cuts, regions = _last_of(chunk.data, chunk.cuts, regions,
                                           self._newest_lines, self.keep)
            chunk = structs.replace(chunk, data=data, cuts=cuts)
            self._trim(min(self._newest_lines, self.keep))
        self._newest, self._newest_regions = chunk, regions

    def _trim(self, newest: int) -> None:
        """Let go of held lines the tail no longer needs, the newest chunk holding `newest`
        lines: chunks before them, and the needless head of a long oldest one (a copy)."""
        held = self._held
        while held and self._held_lines - held[0][1] + newest >= self.keep:
            self._held_lines -= held.popleft()[1]
        if held and len(held[0][0]) > LONG_CHUNK:
            data, n, regions, cuts = held[0]
            need = self.keep - newest - (self._held_lines - n)
            if need < n:
                data, cuts, regions = _last_of(data, cuts, regions, n, need)
                held[0] = (data, need, regions, cuts)
                self._held_lines -= n - need

    @property
    def counted(self) -> int:
        """The lines of the newest chunk when they are counted already (-1: not yet)."""
        return self._newest_lines

    @property
    def lines(self) -> int:
        newest = self._newest
        if newest is None:
            return self._done
        if self._newest_lines < 0:
            self._newest_lines = count_newlines(newest.data)
        return self._done + self._newest_lines

    def last(self, cap: int | None = None, n: int | None = None
             ) -> list[tuple[bytes, int, int | None]]:
        """The last `keep` lines (raw bytes, without their newlines; at most the first `cap`
        bytes of each), oldest first, each with the private-key block it lies in (0: none; its
        BEGIN line may be long gone from them) and, for a line the reader cut at
        `maxLineBytes`, the bytes it left out (`Cut.omitted`; None: a whole line). `n`: only
        the last `n` of them."""
        need = self.keep if n is None else min(n, self.keep)
        if self._newest is None or need <= 0:
            return []
        out: list[tuple[bytes, int, int | None]] = []
        chunks = [(self._newest.data, self._newest_regions, self._newest.cuts),
                  *((d, r, c) for d, _, r, c in reversed(self._held))]
        for data, regions, cuts in chunks:
            starts, lines = _last_lines(data, need, cap)
            if regions or cuts:
                omitted = {c.pos: c.omitted for c in cuts}
                out[:0] = [(x, inside(regions, s) if regions else 0, omitted.get(s))
                           for x, s in zip(lines, starts, strict=True)]
            else:
                out[:0] = [(x, 0, None) for x in lines]
            need -= len(lines)
            if need <= 0:
                break
        return out


LONG_CHUNK = 64 * 1024
"""A chunk longer than this keeps only its last `keep` lines in a tail (`RecentLines`)."""


def _last_of(data: bytes, cuts: tuple[Cut, ...], regions: list[Region], lines: int, keep: int
             ) -> tuple[bytes, tuple[Cut, ...], list[Region]]:
    """The last `keep` lines of `data` (`lines` lines; a copy), with their cut lines and
    key-block regions moved with them."""
    drop = lines - keep
    if drop <= 0:
        return data, cuts, regions
    if drop < keep:  # (the fewer newlines to look for)
        at = -1
        for _ in range(drop):
            at = data.find(b"\n", at + 1)
    else:
        at = len(data) - 1
        for _ in range(keep):
            at = data.rfind(b"\n", 0, at)
    base = at + 1
    return (data[base:], tuple(Cut(c.pos - base, c.omitted) for c in cuts if c.pos >= base),
            [(lo - base, hi - base, block) for lo, hi, block in regions if hi >= base])


def _follows(prev: Chunk, chunk: Chunk) -> bool:
    return (
        chunk.offset == prev.end
        and chunk.inode == prev.inode
        and chunk.run == prev.run
        and chunk.path == prev.path
    )


def _last_lines(data: bytes, n: int, cap: int | None = None) -> tuple[list[int], list[bytes]]:
    """Where each of the last `n` lines of `data` (whole lines, each ending in b"\\n") starts,
    and those lines without their newlines (the first `cap` bytes of each: a line may be
    16 MiB, and only its head is shown)."""
    ends = [len(data) - 1]
    for _ in range(n):
        cut = data.rfind(b"\n", 0, ends[-1])
        ends.append(cut)
        if cut < 0:
            break
    ends.reverse()  # the newline before each line (-1: none), then its own
    starts = [e + 1 for e in ends[:-1]]
    cap = len(data) if cap is None else cap
    return starts, [data[a:min(b, a + cap)] for a, b in zip(starts, ends[1:], strict=True)]


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
    if kind == "error" and fields.get("code") == "checkpoint-corrupt" and fields.get("unread"):
        return f"where the last run ended is lost (what was rotated away since is not read): " \
               f"{fields.get('message')}"
    if kind == "error" and fields.get("unread") is True:  # a read that failed
        return f"lines were never read: {fields.get('message')}"
    if kind == "rotate" and lost:
        return f"{lost} bytes were never read: {fields.get('path')} was truncated before them"
    return None
