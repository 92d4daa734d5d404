"""Metrics totals that outlive a watcher's restart, a reload and its stop (counters only grow),
until the watcher is forgotten for good."""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field

from watchrun.runtime.counters import Counters

WATCHER_EVENTS = {"start": "restarts", "rotate": "rotations", "gap": "gaps"}
"""Watcher records counted from the runner's events (the pipeline does not count them): a
`start` only as a restart (with `attempt`: a run the restart policy started again; the
watcher's own starts again are counted by `attach`)."""
EVENT_KEYS = tuple(WATCHER_EVENTS.values())
TOKEN_KINDS = ("input", "cached", "output")


def _counts(c: Counters) -> dict[str, int]:
    return {
        "lines": c.lines, "bytes": c.bytes_read, "matches": c.matches,
        "truncated": c.truncated, "linesCut": c.cut_lines, "errors": c.errors,
        "skippedDuplicates": c.skipped_duplicates, "redactions": sum(c.redacted.values()),
    }


class _Watcher(Struct):
    base: dict[str, int] = field(default_factory=dict)
    """What the watcher's earlier pipelines counted (before a reload rebuilt it)."""
    current: Counters | None = None
    events: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENT_KEYS, 0))
    last_match_at: float | None = None


class _Agent(Struct):
    turns: int = 0
    failures: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KINDS, 0))


class Tally:
    """Per watcher and per agent, from the first time the runner saw it: counters only grow.

    A watcher rebuilt by a reload gets new pipeline counters; `attach` adds the old ones' final
    values to a base, so `lines` and `matches` keep counting. A stopped watcher keeps its
    series, and so does a cleared one the config still names; one forgotten for good (`forget`:
    no config names it, it was not added at runtime) loses them. Rotations, the restart
    policy's restarts, gaps and agent turns are counted from the runner's events
    (`RunLog.add_tap(tally.observe)`), which are the same whatever the log level; the
    watcher's starts again (`start`/`restart`, a reload) by `attach`, so restarts count what
    `list`'s restarts count (but `clear` does not set them back)."""

    def __init__(self) -> None:
        self._watchers: dict[str, _Watcher] = {}
        self._agents: dict[str, _Agent] = {}

    def attach(self, wid: str, counters: Counters, *, again: bool = False) -> None:
        """A (re)built watcher's pipeline counters; the previous pipeline's are kept in totals.
        `again`: it starts again (`watchrun start`/`restart`, a reload that rebuilt it), a
        restart as `list` counts it (`StatusBoard.add`)."""
        w = self._watchers.setdefault(wid, _Watcher())
        w.events["restarts"] += again
        if w.current is not None and w.current is not counters:
            for key, value in _counts(w.current).items():
                w.base[key] = w.base.get(key, 0) + value
            w.last_match_at = w.current.last_match_at or w.last_match_at
        w.current = counters

    def forget(self, wid: str) -> None:
        """A watcher forgotten for good (`clear`, a reload that forgets a watcher whose file is
        gone): its series go, as a gone target's do, or every pod a node ever ran would keep
        13 series (`up` 0: down for an alert) for the runner's life."""
        self._watchers.pop(wid, None)

    def know(self, wids: set[str]) -> None:
        """Watchers the runner is to run, started or not: each has its series from now on."""
        for wid in wids - self._watchers.keys():
            self._watchers[wid] = _Watcher()

    def observe(self, level: str, event: str, subject: str | None, name: str | None,
                fields: dict[str, Any]) -> None:
        """A `RunLog` tap: counts the events metrics report."""
        if name is None:
            return
        if subject == "watcher" and event in WATCHER_EVENTS and (
                event != "start" or fields.get("attempt")):
            w = self._watchers.setdefault(name, _Watcher())
            w.events[WATCHER_EVENTS[event]] += 1
        elif subject == "agent":
            a = self._agents.setdefault(name, _Agent())
            if event == "turn-start":
                a.turns += 1
            elif event == "turn-end":
                a.failures += fields.get("status") == "failed"
                for kind in TOKEN_KINDS:
                    a.tokens[kind] += int(fields.get(kind) or 0)
            elif event == "turn-error":
                a.failures += 1

    def watchers(self) -> dict[str, dict[str, Any]]:
        """Every watcher seen: its counts (earlier pipelines + the current one), event counts
        and `lastMatchAt` (epoch seconds or None)."""
        out: dict[str, dict[str, Any]] = {}
        for wid, w in self._watchers.items():
            counts = dict(w.base)
            last = w.last_match_at
            if w.current is not None:
                for key, value in _counts(w.current).items():
                    counts[key] = counts.get(key, 0) + value
                last = w.current.last_match_at or last
            out[wid] = {**counts, **w.events, "lastMatchAt": last}
        return out

    def agents(self) -> dict[str, dict[str, Any]]:
        """Every agent seen: turns, failures and tokens by kind."""
        return {name: {"turns": a.turns, "failures": a.failures, "tokens": dict(a.tokens)}
                for name, a in self._agents.items()}
