"""Token usage: each provider's counters as {input, cached, output}, and as increments."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from msgspec import Struct

__all__ = [
    "Usage",
    "UsageTracker",
    "anthropic_model_usage",
    "anthropic_usage",
    "codex_usage",
    "copilot_usage",
    "cursor_usage",
    "gemini_models_usage",
    "gemini_stats_usage",
    "opencode_usage",
    "pi_usage",
    "refused_counts",
]

MAX_TOKENS = 10**12
"""The largest token count read from an agent: more is no count (`1e300` summed into a turn,
the agent's total and a metric, forever, as a 301-digit number)."""
_refused: ContextVar[list[str] | None] = ContextVar("refused_counts", default=None)


class Usage(Struct, frozen=True):
    """Normalized token counts (SPEC §5).

    `input` counts every prompt token including cache reads and cache writes, `cached` is the
    cache-read part of `input`, `output` includes reasoning tokens. `complete` is False when a
    provider did not report a part (that part is counted as 0, so the numbers are a lower bound)
    or when a count is provisional (Claude's per-message snapshot output count).
    """

    input: int = 0
    cached: int = 0
    output: int = 0
    complete: bool = True

    @property
    def tokens(self) -> int:
        """A turn's `tokens`: input + output."""
        return self.input + self.output

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.cached + other.cached,
            self.output + other.output,
            self.complete and other.complete,
        )

    def minus(self, other: Usage) -> Usage:
        """Field-wise difference, never below zero; keeps this value's `complete`."""
        return Usage(
            max(0, self.input - other.input),
            max(0, self.cached - other.cached),
            max(0, self.output - other.output),
            self.complete,
        )

    def maximum(self, other: Usage) -> Usage:
        """Field-wise maximum; complete when either is."""
        return Usage(
            max(self.input, other.input),
            max(self.cached, other.cached),
            max(self.output, other.output),
            self.complete or other.complete,
        )

    def below(self, other: Usage) -> bool:
        """True when any count is smaller than `other`'s: a counter that was reset."""
        return self.input < other.input or self.cached < other.cached or self.output < other.output

    def is_zero(self) -> bool:
        return self.input == 0 and self.cached == 0 and self.output == 0

    def counts(self) -> dict[str, int]:
        return {"input": self.input, "cached": self.cached, "output": self.output}

    def fields(self) -> dict[str, Any]:
        """The record fields of a `usage` observation."""
        return {**self.counts(), "complete": self.complete}

    @classmethod
    def from_counts(cls, data: Mapping[str, Any], *, complete: bool = True) -> Usage:
        """Inverse of `counts()`; raises ValueError naming the bad field."""
        values = []
        for key in ("input", "cached", "output"):
            value = data.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"usage.{key}: expected a non-negative integer, got {value!r}")
            values.append(value)
        return cls(values[0], values[1], values[2], complete)


@contextmanager
def refused_counts() -> Iterator[list[str]]:
    """While open, a count `_int` refuses (a fraction, a negative, NaN, over MAX_TOKENS) is
    noted in the list it gives: the adapter keeps the line as `malformed-event` with them."""
    notes: list[str] = []
    token = _refused.set(notes)
    try:
        yield notes
    finally:
        _refused.reset(token)


def _int(data: Mapping[str, Any], *keys: str) -> int | None:
    """The first of `keys` present as a token count in `data` (None when none is): a whole
    number from 0 to MAX_TOKENS; another value (another number, a string, true) reads as
    absent, and is noted."""
    for key in keys:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and \
                math.isfinite(value) and value == int(value) and 0 <= value <= MAX_TOKENS:
            return int(value)
        notes = _refused.get()  # (json.loads reads NaN and Infinity too)
        if notes is not None:
            shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:57]}..."
            notes.append(f"{key}: {shown} is not a token count (a whole number from 0 to "
                         f"{MAX_TOKENS}): read as not reported")
        return None
    return None


def _build(inp: int | None, cached: int | None, out: int | None) -> Usage:
    complete = inp is not None and out is not None and cached is not None
    return Usage(inp or 0, cached or 0, out or 0, complete)


def anthropic_usage(data: Mapping[str, Any]) -> Usage:
    """Anthropic `usage`: `input_tokens` excludes cache reads and writes, so they are added."""
    base = _int(data, "input_tokens")
    read = _int(data, "cache_read_input_tokens")
    write = _int(data, "cache_creation_input_tokens")
    inp = None if base is None else base + (read or 0) + (write or 0)
    return _build(inp, read or 0, _int(data, "output_tokens"))


def anthropic_model_usage(models: Mapping[str, Any]) -> Usage | None:
    """Sum of Claude's `result.modelUsage` (camelCase; snake_case tolerated). None when empty."""
    total: Usage | None = None
    for entry in models.values():
        if not isinstance(entry, Mapping):
            continue
        base = _int(entry, "inputTokens", "input_tokens")
        read = _int(entry, "cacheReadInputTokens", "cache_read_input_tokens") or 0
        write = _int(entry, "cacheCreationInputTokens", "cache_creation_input_tokens") or 0
        inp = None if base is None else base + read + write
        one = _build(inp, read, _int(entry, "outputTokens", "output_tokens"))
        total = one if total is None else total + one
    return total


def codex_usage(data: Mapping[str, Any]) -> Usage:
    """Codex `usage`: `input_tokens` already includes `cached_input_tokens` (and any cache
    writes, as OpenAI counts every prompt token); `output_tokens` includes reasoning."""
    return _build(
        _int(data, "input_tokens"), _int(data, "cached_input_tokens"), _int(data, "output_tokens")
    )


def cursor_usage(data: Mapping[str, Any]) -> Usage:
    """Cursor `result.usage` (camelCase): `inputTokens` is taken to exclude cache reads and
    writes, as Anthropic counts them, so they are added; without `cacheReadTokens` the cached
    part is unknown (`complete: false`)."""
    base = _int(data, "inputTokens", "input_tokens")
    read = _int(data, "cacheReadTokens", "cache_read_tokens")
    write = _int(data, "cacheWriteTokens", "cache_write_tokens") or 0
    inp = None if base is None else base + (read or 0) + write
    return _build(inp, read, _int(data, "outputTokens", "output_tokens"))


def copilot_usage(data: Mapping[str, Any]) -> Usage:
    """Copilot `assistant.usage` (one model call): `inputTokens` counts the whole prompt
    (OpenAI's convention, which the Copilot API follows), `cacheReadTokens` the cached part of
    it; `outputTokens` includes reasoning."""
    return _build(_int(data, "inputTokens"), _int(data, "cacheReadTokens"),
                  _int(data, "outputTokens"))


def gemini_stats_usage(stats: Mapping[str, Any]) -> Usage:
    """Gemini stream-json `result.stats`: `input_tokens` includes cached ones; `cached` exists
    only since v0.22 (incomplete without it). `output_tokens` is candidates only, so the rest
    of `total_tokens` (thoughts, plus tool-use prompt tokens, usually 0) counts as output."""
    inp = _int(stats, "input_tokens")
    out = _int(stats, "output_tokens")
    total = _int(stats, "total_tokens")
    if total is not None and inp is not None and out is not None and total > inp + out:
        out = total - inp
    return _build(inp, _int(stats, "cached"), out)


def gemini_models_usage(models: Mapping[str, Any]) -> Usage:
    """Gemini `--output-format json` `stats.models[*].tokens`: prompt + tool-use prompt is the
    input, `cached` the cache part, candidates + thoughts the output."""
    total = Usage()
    for entry in models.values():
        tokens = entry.get("tokens") if isinstance(entry, Mapping) else None
        if not isinstance(tokens, Mapping):
            total = total + Usage(complete=False)
            continue
        prompt = _int(tokens, "prompt")
        cand = _int(tokens, "candidates")
        inp = None if prompt is None else prompt + (_int(tokens, "tool") or 0)
        out = None if cand is None else cand + (_int(tokens, "thoughts") or 0)
        total = total + _build(inp, _int(tokens, "cached"), out)
    return total


def opencode_usage(tokens: Mapping[str, Any]) -> Usage:
    """OpenCode `step_finish.part.tokens`: `input` excludes cache reads and writes and
    `output` excludes `reasoning`, so both are added back."""
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, Mapping) else {}
    base = _int(tokens, "input")
    read = _int(cache, "read")
    inp = None if base is None else base + (read or 0) + (_int(cache, "write") or 0)
    out = _int(tokens, "output")
    out = None if out is None else out + (_int(tokens, "reasoning") or 0)
    return _build(inp, read, out)


def pi_usage(data: Mapping[str, Any]) -> Usage:
    """pi assistant-message `usage`: `input` excludes `cacheRead` and `cacheWrite`."""
    base = _int(data, "input")
    read = _int(data, "cacheRead")
    inp = None if base is None else base + (read or 0) + (_int(data, "cacheWrite") or 0)
    return _build(inp, read, _int(data, "output"))


class UsageTracker:
    """Pure bookkeeping that turns cumulative totals and repeated snapshots into increments.

    One tracker is meant to live as long as an agent (across its turns); each turn's adapter
    gets it. Keys name a provider session or thread (e.g. "codex:<thread_id>").
    """

    def __init__(self, max_messages: int = 4096) -> None:
        self._totals: dict[str, Usage] = {}
        self._snapshots: OrderedDict[str, Usage] = OrderedDict()
        self._max_messages = max_messages

    def cumulative(self, key: str, totals: Usage) -> Usage:
        """The increment since the last totals seen for `key`, and `totals` becomes the new
        baseline. First time seen (and no restored baseline), or a counter that went down (a
        new process that starts again from zero): the totals themselves are the increment."""
        previous = self._totals.get(key)
        self._totals[key] = totals
        if previous is None or totals.below(previous):
            return totals
        return totals.minus(previous)

    def snapshot(self, message_id: str, usage: Usage) -> Usage | None:
        """Count a per-message snapshot once: the growth since the last snapshot of that message
        (field-wise maximum), or None when nothing grew."""
        previous = self._snapshots.get(message_id)
        merged = usage if previous is None else previous.maximum(usage)
        self._snapshots[message_id] = merged
        self._snapshots.move_to_end(message_id)
        while len(self._snapshots) > self._max_messages:
            self._snapshots.popitem(last=False)
        increment = merged if previous is None else merged.minus(previous)
        if increment.is_zero():
            return None
        return Usage(increment.input, increment.cached, increment.output, usage.complete)

    def restore(self, key: str, totals: Usage) -> None:
        """Set the baseline of `key` (e.g. from a `usage` record's `total` in the history)."""
        self._totals[key] = totals

    def learn(self, record: Mapping[str, Any]) -> None:
        """Take a baseline from a `usage` record read back from an agent's history: records
        made from a cumulative total carry `sessionKey` and `total`; others are ignored."""
        key, total = record.get("sessionKey"), record.get("total")
        if isinstance(key, str) and isinstance(total, Mapping):
            self.restore(key, Usage.from_counts(total))

    def forget(self, key: str) -> None:
        """Drop the baseline of `key`: the next totals for it count from zero."""
        self._totals.pop(key, None)

    def baseline(self, key: str) -> Usage | None:
        return self._totals.get(key)

    def keys(self) -> Iterable[str]:
        return tuple(self._totals)
