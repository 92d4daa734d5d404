"""Clamp limits into their ranges (SPEC §3.1): out of range is a warning, never a rejection."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

from watchrun.config.diagnostics import Reporter
from watchrun.config.model import Limits
from watchrun.config.numbers import short_number
from watchrun.config.tree import KeyPath
from watchrun.config.units import (
    TooLarge,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
    whole,
)

__all__ = ["LIMIT_RULES", "RANGES", "Range", "build_limits", "clamp"]

Unit = Literal["count", "ms", "bytes"]


class Range(Struct, frozen=True):
    """An allowed range of an integer setting, and how its values are written."""

    lo: int
    hi: int
    unit: Unit = "count"

    def show(self, value: int) -> str:
        if self.unit == "ms":
            return format_duration(value) if value else "0"
        if self.unit == "bytes":
            return format_size(value)
        return str(value)


LIMIT_RULES: dict[str, tuple[str, Range | None]] = {
    "enabled": ("enabled", None),
    "wakeOnMatch": ("wake_on_match", None),
    "maxWatchers": ("max_watchers", Range(1, 500)),
    "maxAgents": ("max_agents", Range(1, 64)),
    "maxMatches": ("max_matches", Range(1, 100_000)),
    "maxLogLines": ("max_log_lines", Range(1, 100_000)),
    "matchLines": ("match_lines", Range(1, 2000)),
    "pollMs": ("poll_ms", Range(10, 60_000, "ms")),
    "maxLineBytes": ("max_line_bytes", Range(256, 16 * 1024**2, "bytes")),
    "maxEventBytes": ("max_event_bytes", Range(4096, 256 * 1024**2, "bytes")),
    "stopTimeout": ("stop_timeout_ms", Range(0, 60_000, "ms")),
    "maxGenerations": ("max_generations", Range(1, 100)),
    "rotateWait": ("rotate_wait_ms", Range(0, 600_000, "ms")),
    "onceWriteTimeout": ("once_write_ms", Range(100, 600_000, "ms")),
}
"""`limits` keys: the Limits field each sets, and its range (None for booleans)."""

RANGES: dict[str, Range] = {
    "output.maxBytes": Range(64 * 1024, 1024**4, "bytes"),
    "output.keep": Range(0, 100),
    "watcher.restartDelay": Range(100, 60_000, "ms"),
    "agent.deadline": Range(1000, 86_400_000, "ms"),
    "agent.idleTimeout": Range(1000, 86_400_000, "ms"),
    "agent.maxTurns": Range(1, 10_000),
    "action.throttle": Range(1000, 86_400_000, "ms"),
    "action.timeout": Range(100, 600_000, "ms"),
    "action.concurrency": Range(1, 16),
    "action.queue": Range(0, 10_000),
    "action.retries": Range(0, 10),
    "action.maxBodyBytes": Range(16 * 1024, 64 * 1024**2, "bytes"),
    "action.threshold.count": Range(1, 100_000),
    "action.threshold.window": Range(1000, 86_400_000, "ms"),
}
"""Ranges of the clamped settings outside `limits`."""


def clamp(raw: Any, rng: Range, path: KeyPath, report: Reporter, *, digits: bool = False
          ) -> int | None:
    """`raw` as an int clamped into `rng`, warning when clamped; None if it is not a number.
    With `digits`, a string of digits is a number too (the count of a threshold).

    A wrong type is not reported here: the schema check has already reported it.
    """
    if isinstance(raw, bool):
        return None
    value: int | None
    try:
        value = _number(raw, rng, digits)
    except TooLarge:
        value = None  # larger than any range
    except ValueError:
        return None
    fixed = rng.hi if value is None else min(max(value, rng.lo), rng.hi)
    if fixed != value:
        shown = short_number(raw.strip() if isinstance(raw, str) else str(value))
        if isinstance(raw, str) and rng.unit != "count":
            lo_hi, to = f"{rng.show(rng.lo)}\u2013{rng.show(rng.hi)}", rng.show(fixed)
        else:
            lo_hi, to = f"{rng.lo}\u2013{rng.hi}", str(fixed)
        report.warning(path, f"{shown} clamped to {to} (allowed {lo_hi})")
    return fixed


def _number(raw: Any, rng: Range, digits: bool) -> int:
    """The int `raw` stands for; ValueError if it is none (TooLarge: too large to compute)."""
    if rng.unit == "ms":
        return parse_duration(raw)
    if rng.unit == "bytes":
        return parse_size(raw)
    if isinstance(raw, int) or (isinstance(raw, float) and raw.is_integer()):
        return int(raw)
    if digits and isinstance(raw, str) and raw.isdigit() and raw.isascii():
        return whole(raw)
    raise ValueError(f"{raw!r} is not a number")


def build_limits(raw: Any, report: Reporter) -> Limits:
    """Limits from the `limits` mapping: defaults for what is absent or of the wrong type."""
    values: dict[str, Any] = {}
    if isinstance(raw, dict):
        for key, (field, rng) in LIMIT_RULES.items():
            if key not in raw:
                continue
            if rng is None:
                if isinstance(raw[key], bool):
                    values[field] = raw[key]
                continue
            value = clamp(raw[key], rng, ("limits", key), report)
            if value is not None:
                values[field] = value
    return Limits(**values)
