"""When an action fires (pure, over the time it is given: `Clock.elapsed`, which counts a
suspend): `when` thresholds (N matches within a sliding window) and `throttle` windows (at most
one firing per window; what is suppressed is counted and sent as one firing when the window
ends)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from msgspec import Struct, field

from watchrun.config.model import ThresholdSpec
from watchrun.events import MatchInfo

__all__ = ["Carried", "Firing", "Gate", "Suppression", "fit"]


class Firing(Struct):
    """Matches handed to an action at once. At most `keep` of them are kept, and no more text
    than `budget` characters (the first is always kept: the body clips it); `count` is how
    many it stands for."""

    reason: str
    """`match` (a batch of matches), `threshold` (N within the window) or `throttle-end` (what
    the throttle suppressed, sent when its window ended)."""
    keep: int
    budget: int
    matches: list[MatchInfo] = field(default_factory=list)
    size: int = 0
    """Characters of the kept lines."""
    count: int = 0
    suppressed: int = 0
    """Firings the throttle suppressed and merged into this one."""
    suppressed_matches: int = 0
    first_cursor: str = ""
    last_cursor: str = ""
    """Cursors of the first and the last match it stands for (kept or not)."""

    def add(self, matches: Sequence[MatchInfo], count: int | None = None,
            span: tuple[str, str] | None = None) -> None:
        """Add matches; `count` and `span` (first and last cursor) when only some are given."""
        kept = fit(matches, self.keep - len(self.matches), self.budget - self.size,
                   not self.matches)
        self.matches.extend(kept)
        self.size += sum(len(m.line) for m in kept)
        self.count += len(matches) if count is None else count
        first, last = span if span is not None else _span(matches)
        self.first_cursor = self.first_cursor or first
        self.last_cursor = last or self.last_cursor


def fit(matches: Sequence[MatchInfo], lines: int, chars: int, first: bool) -> list[MatchInfo]:
    """The leading matches that fit in `lines` lines of `chars` characters in all; with
    `first`, the first is kept whatever its length (a firing always shows a line)."""
    kept: list[MatchInfo] = []
    for m in matches[:max(0, lines)]:
        chars -= len(m.line)
        if chars < 0 and not (first and not kept):
            break
        kept.append(m)
    return kept


def _span(matches: Sequence[MatchInfo]) -> tuple[str, str]:
    return (matches[0].cursor, matches[-1].cursor) if matches else ("", "")


class Suppression(Struct, frozen=True):
    """A firing the throttle held back."""

    count: int
    """Matches it stood for."""
    suppressed: int
    """Firings suppressed in this window so far (this one included)."""
    window_end: float
    """When the window ends (elapsed seconds): then the held firings go out as one."""


class Carried(Struct, frozen=True):
    """A gate's windows, for the gate of the same action after a reload."""

    window_end: float | None
    """When the throttle window open then ends (elapsed seconds), or None."""
    counted: list[tuple[float, int, list[MatchInfo], tuple[str, str]]]
    """The batches the threshold counted in its window: (time, matches, kept, span)."""
    held: Firing | None = None
    """What the throttle window held: it goes out when the window ends, after the reload."""


class Gate:
    """One action's `when` and `throttle`. `offer` takes each batch of matches and says what
    happens now; `due` gives the firing a throttle window held when it ends (call it at
    `next_due()`)."""

    def __init__(self, threshold: ThresholdSpec | None, throttle_ms: int | None, keep: int,
                 budget: int) -> None:
        self.threshold, self.keep, self.budget = threshold, max(0, keep), budget
        self.throttle_s = throttle_ms / 1000 if throttle_ms else None
        self._window: deque[tuple[float, int, list[MatchInfo], tuple[str, str]]] = deque()
        self._in_window = 0  # matches in `_window`
        self._kept = 0  # lines kept in `_window`
        self._size = 0  # their characters
        self._window_end: float | None = None  # throttle: no firing before this
        self._held: Firing | None = None

    def offer(self, now: float, matches: Sequence[MatchInfo]) -> list[Firing | Suppression]:
        """A batch of matches at `now`: the firings and suppressions it causes, in order (a
        throttle window that ended before `now` sends what it held first)."""
        out: list[Firing | Suppression] = []
        ended = self.due(now)
        if ended is not None:
            out.append(ended)
        candidate = self._when(now, matches)
        if candidate is not None:
            out.append(self._throttle(now, candidate))
        return out

    def _when(self, now: float, matches: Sequence[MatchInfo]) -> Firing | None:
        if self.threshold is None:
            firing = Firing("match", self.keep, self.budget)
            firing.add(matches)
            return firing
        horizon = now - self.threshold.window_ms / 1000
        while self._window and self._window[0][0] < horizon:
            _, n, kept, _ = self._window.popleft()
            self._in_window -= n
            self._kept -= len(kept)
            self._size -= sum(len(m.line) for m in kept)
        kept = fit(matches, self.keep - self._kept, self.budget - self._size, not self._kept)
        self._window.append((now, len(matches), kept, _span(matches)))
        self._in_window += len(matches)
        self._kept += len(kept)
        self._size += sum(len(m.line) for m in kept)
        if self._in_window < self.threshold.count:
            return None
        firing = Firing("threshold", self.keep, self.budget)
        for _, n, lines, span in self._window:
            firing.add(lines, n, span)
        self._window.clear()  # counting starts again after a firing
        self._in_window = self._kept = self._size = 0
        return firing

    def _throttle(self, now: float, firing: Firing) -> Firing | Suppression:
        if self.throttle_s is None:
            return firing
        if self._window_end is None or now >= self._window_end:
            self._window_end = now + self.throttle_s
            return firing
        held = self._held
        if held is None:
            held = self._held = Firing("throttle-end", self.keep, self.budget)
        held.add(firing.matches, firing.count, (firing.first_cursor, firing.last_cursor))
        held.suppressed += 1
        held.suppressed_matches += firing.count
        return Suppression(firing.count, held.suppressed, self._window_end)

    def due(self, now: float) -> Firing | None:
        """When the throttle window has ended: what it held, as one firing (which opens the
        next window), else None."""
        if self._window_end is None or now < self._window_end:
            return None
        held, self._held = self._held, None
        self._window_end = None if held is None else now + (self.throttle_s or 0.0)
        return held

    def carry(self) -> Carried:
        """What the gate of the same action goes on with after a reload (`resume`): the held
        firing is taken along (this gate holds nothing more)."""
        held, self._held = self._held, None
        return Carried(self._window_end, list(self._window), held)

    def resume(self, carried: Carried) -> None:
        """Go on from the gate of the same action before a reload: its throttle window, what
        the window held, and the matches its threshold counted."""
        self._window_end, self._held = carried.window_end, carried.held
        self._window = deque(carried.counted)
        self._in_window = sum(n for _, n, _, _ in self._window)
        self._kept = sum(len(kept) for _, _, kept, _ in self._window)
        self._size = sum(len(m.line) for _, _, kept, _ in self._window for m in kept)

    def next_due(self) -> float | None:
        """When `due` has something to give (elapsed seconds), or None."""
        return self._window_end if self._held is not None else None
