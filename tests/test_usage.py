"""Usage normalisation per provider and the cumulative/snapshot -> increment bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from watchrun.agents.providers.usage import (
    Usage,
    UsageTracker,
    anthropic_model_usage,
    anthropic_usage,
    codex_usage,
    gemini_models_usage,
    gemini_stats_usage,
    opencode_usage,
    pi_usage,
)

U = Usage


@pytest.mark.parametrize(("normalize", "data", "expected"), [
    # Anthropic: input_tokens excludes cache reads and writes
    (anthropic_usage, {"input_tokens": 3, "cache_creation_input_tokens": 7353,
                       "cache_read_input_tokens": 14001, "output_tokens": 8},
     U(21357, 14001, 8)),
    (anthropic_usage, {"input_tokens": 123, "output_tokens": 42}, U(123, 0, 42)),
    (anthropic_usage, {"output_tokens": 5}, U(0, 0, 5, complete=False)),
    # Codex: input_tokens already includes cached; output includes reasoning
    (codex_usage, {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122,
                   "reasoning_output_tokens": 64}, U(24763, 24448, 122)),
    (codex_usage, {"input_tokens": 10}, U(10, 0, 0, complete=False)),
    # Gemini stream stats: thoughts are the rest of total_tokens
    (gemini_stats_usage, {"total_tokens": 8255, "input_tokens": 7862, "output_tokens": 90},
     U(7862, 0, 393, complete=False)),
    (gemini_stats_usage, {"total_tokens": 30, "input_tokens": 20, "output_tokens": 10,
                          "cached": 5, "input": 15}, U(20, 5, 10)),
    # OpenCode: input excludes cache read/write, output excludes reasoning
    (opencode_usage, {"input": 671, "output": 8, "reasoning": 4,
                      "cache": {"read": 21415, "write": 9}}, U(22095, 21415, 12)),
    (opencode_usage, {"input": 12, "output": 3}, U(12, 0, 3, complete=False)),
    # pi: input excludes cacheRead and cacheWrite
    (pi_usage, {"input": 10, "output": 4, "cacheRead": 100, "cacheWrite": 7}, U(117, 100, 4)),
    (pi_usage, {"totalTokens": 9}, U(0, 0, 0, complete=False)),
])
def test_normalization(normalize: Any, data: dict[str, Any], expected: Usage) -> None:
    assert normalize(data) == expected


def test_claude_model_usage_sums_every_model() -> None:
    models = {
        "claude-haiku-4-5-20251001": {"inputTokens": 535, "outputTokens": 13,
                                      "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0},
        "claude-fable-5": {"inputTokens": 9388, "outputTokens": 184,
                           "cacheReadInputTokens": 34904, "cacheCreationInputTokens": 14392},
    }
    assert anthropic_model_usage(models) == U(535 + 9388 + 34904 + 14392, 34904, 197)
    assert anthropic_model_usage({}) is None


def test_gemini_json_models_usage() -> None:
    models = {"m": {"tokens": {"prompt": 100, "candidates": 5, "cached": 40, "thoughts": 7,
                               "tool": 3}}}
    assert gemini_models_usage(models) == U(103, 40, 12)


@pytest.mark.parametrize(("totals", "increments"), [
    # first total is the increment; then differences
    ([(100, 0, 10), (250, 80, 30), (250, 80, 30)], [(100, 0, 10), (150, 80, 20), (0, 0, 0)]),
    # Codex resumed thread: the second run's total counts the whole thread
    ([(18000, 0, 40), (36500, 17900, 75)], [(18000, 0, 40), (18500, 17900, 35)]),
    # a counter that went down (a new process from zero) is a fresh total
    ([(500, 100, 50), (120, 0, 9)], [(500, 100, 50), (120, 0, 9)]),
])
def test_cumulative_to_increments(
    totals: list[tuple[int, int, int]], increments: list[tuple[int, int, int]]
) -> None:
    tracker = UsageTracker()
    got = [tracker.cumulative("codex:T", U(*t)).counts() for t in totals]
    assert [tuple(g.values()) for g in got] == increments


def test_snapshot_repeated_on_three_lines_is_counted_once() -> None:
    tracker = UsageTracker()
    snap = U(21357, 14001, 8, complete=False)
    assert tracker.snapshot("msg_1", snap) == snap
    assert tracker.snapshot("msg_1", snap) is None
    assert tracker.snapshot("msg_1", snap) is None
    # a later, larger snapshot of the same message adds only its growth
    assert tracker.snapshot("msg_1", U(21357, 14001, 13)) == U(0, 0, 5)
    # an earlier, smaller one (partial) takes nothing away
    assert tracker.snapshot("msg_1", U(9386, 0, 2)) is None
    assert tracker.snapshot("msg_2", U(1, 0, 1)) == U(1, 0, 1)


def test_snapshots_are_bounded() -> None:
    tracker = UsageTracker(max_messages=2)
    for mid in ("a", "b", "c"):
        tracker.snapshot(mid, U(1, 0, 1))
    assert tracker.snapshot("c", U(1, 0, 1)) is None
    assert tracker.snapshot("a", U(1, 0, 1)) == U(1, 0, 1)  # evicted: seen afresh


def test_learn_baselines_from_history_records() -> None:
    tracker = UsageTracker()
    history = [
        {"input": 5, "cached": 0, "output": 1, "complete": False, "source": "message"},
        {"input": 90, "cached": 0, "output": 9, "complete": True, "source": "turn",
         "sessionKey": "codex:T", "total": {"input": 100, "cached": 0, "output": 10}},
    ]
    for record in history:
        tracker.learn(record)
    assert list(tracker.keys()) == ["codex:T"]
    assert tracker.cumulative("codex:T", U(130, 20, 12)) == U(30, 20, 2)


def test_usage_arithmetic() -> None:
    a, b = U(10, 4, 3), U(2, 1, 1, complete=False)
    assert a + b == U(12, 5, 4, complete=False)
    assert b.minus(a) == U(0, 0, 0, complete=False)
    assert a.tokens == 13
    assert a.fields() == {"input": 10, "cached": 4, "output": 3, "complete": True}
