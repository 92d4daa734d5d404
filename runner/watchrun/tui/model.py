"""What the live screen shows, without Textual: rows, the two chips, unreported matches."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec import Struct, field

from watchrun.match.sanitize import edge_name
from watchrun.tui.text import ago, inert

__all__ = ["ENDED", "TROUBLE", "UNREADABLE", "Row", "Snapshot", "Unreported", "chips",
           "format_match", "row_cells"]

ID_CHARS = 32
"""An id's cell at most (ids may have 64 characters: at 80 columns, one such pushed STATUS
and the counts off the screen); the pane's title and `watchrun list` show it whole."""
ENDED = frozenset({"stopped", "exited", "fatal"})
"""Watcher statuses of one that no longer runs: `d` clears them, `x` has nothing to stop."""
TROUBLE = frozenset({"error", "paused"})
"""A watcher that runs but cannot read its file (`error`) or write its records (`paused`): not
at work, so not counted in the ⊚ chip (starting, running, waiting, backoff and stopping are)."""
UNREADABLE = "unreadable"
"""A watcher whose status snapshot cannot be read (`watchrun list` says the same): its counts
are unknown (`?`), it is not counted in the ⊚ chip, and its unreported count is kept for when
its snapshot can be read again."""


class Row(Struct, frozen=True):
    """One watcher or agent as the screen lists it."""

    kind: str
    """`file` or `command` for a watcher, `agent` for an agent."""
    id: str
    status: str
    lines: int | None
    """Watchers: lines read (this run of the runner). Agents: None (turns are in `detail`)."""
    matches: int
    """Watchers: matches (this run). Agents: matched lines delivered to the agent."""
    last_match: str | None
    """The `ts` of the newest match (watchers) or delivery of matches (agents)."""
    detail: str = ""
    run: str = ""
    """Which run of the runner counted `matches` (its pid and start time): counts restart at 0
    when the runner restarts, and `Unreported` must know."""

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def running(self) -> bool:
        return not self.is_agent and self.status not in ENDED


class Snapshot(Struct, frozen=True):
    """One refresh: the rows, and whether a runner answered on control.sock."""

    rows: list[Row]
    live: bool
    note: str
    """The header's word on the runner: its state, or why the view is read-only."""
    errors: list[str] = field(default_factory=list)


class _Count(Struct):
    run: str
    in_run: int
    carried: int

    @property
    def total(self) -> int:
        return self.carried + self.in_run


class Unreported:
    """Matches the person has not been shown yet: those counted after the screen opened (or,
    for a watcher that appeared later, after it appeared), until its matches pane is opened.

    Counts come from the status snapshots, so they need no JSONL scan; when the runner
    restarts (a new `run`) its counts start again at 0 and the old run's count is carried.
    """

    def __init__(self) -> None:
        self._counts: dict[str, _Count] = {}
        self._seen: dict[str, int] = {}
        self._gone: dict[str, tuple[_Count, int]] = {}
        """Watchers missing from the last refresh: their count and seen mark, taken up again
        when the same run of the watcher comes back (state/ unreadable for a moment is not a
        new watcher; a cleared one added again is: it has a new `run`)."""
        self._primed = False

    def observe(self, rows: Iterable[Row]) -> None:
        present = set()
        for row in rows:
            if row.is_agent or row.status == UNREADABLE:  # (no counts: as if missing)
                continue
            present.add(row.id)
            back = self._gone.pop(row.id, None)
            if back is not None and back[0].run == row.run:
                self._counts[row.id], self._seen[row.id] = back
            old = self._counts.get(row.id)
            if old is None:
                carried = 0
            elif old.run != row.run:
                carried = old.total
            else:
                carried = old.carried
            now = self._counts[row.id] = _Count(row.run, row.matches, carried)
            if row.id not in self._seen:
                self._seen[row.id] = now.total if not self._primed else 0
        for gone in set(self._counts) - present:
            self._gone[gone] = (self._counts.pop(gone), self._seen.pop(gone))
        self._primed = True

    def of(self, wid: str) -> int:
        count = self._counts.get(wid)
        return 0 if count is None else max(0, count.total - self._seen.get(wid, 0))

    def total(self) -> int:
        return sum(self.of(wid) for wid in self._counts)

    def mark_seen(self, wid: str) -> None:
        count = self._counts.get(wid)
        if count is not None:
            self._seen[wid] = count.total


def chips(rows: Iterable[Row], unreported: Unreported) -> tuple[str, str]:
    """The seed's two chips: `⊚ N` watchers at work and `! N` unreported matches."""
    running = sum(1 for r in rows
                  if r.running and r.status not in TROUBLE and r.status != UNREADABLE)
    return f"⊚ {running}", f"! {unreported.total()}"


def row_cells(row: Row, unreported: int, now: float) -> list[str]:
    """The cells of a row, as plain text (the screen wraps each in a `Text`, never markup)."""
    matches = f"{row.matches:,}" + (f" (+{unreported})" if unreported else "")
    lines = "-" if row.lines is None else f"{row.lines:,}"
    if row.status == UNREADABLE:  # (no snapshot to say them)
        lines = matches = "?"
    return [inert(row.kind, 8), inert(row.id, ID_CHARS), inert(row.status, 12), lines, matches,
            ago(row.last_match, now), inert(row.detail, 120)]


def format_match(rec: dict[str, Any]) -> str:
    """One line of the matches pane: `ts  file:lineNo  line` (the file's name: the pane's title
    names the watcher; a rotated sibling still shows as itself), or `run N:lineNo`."""
    path = rec.get("path")
    where = edge_name(path.rsplit("/", 1)[-1]) if isinstance(path, str) else \
        f"run {rec.get('run')}"
    line_no = rec.get("lineNo")
    head = f"{rec.get('ts', '?')}  {where}{'' if line_no is None else f':{line_no}'}"
    cut = " [truncated]" if rec.get("truncated") else ""
    return inert(f"{head}  {rec.get('line', '')}", 4000) + cut
