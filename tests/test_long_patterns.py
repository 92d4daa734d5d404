"""Long patterns in a config: the literals a pattern requires were found by joining a long
literal one byte at a time (time quadratic in its length: `validate` of a 300 KB pattern took
45 s, of a 2 MB one it did not end); now in linear time, and a config's regex is at most 65536
characters (the schema says so, naming the length)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from liverunner import cli

from watchrun.match.literals import exact_literals, required_literals
from watchrun.match.regex import analyse


def literal_cost(n: int) -> float:
    """CPU seconds to find the literals of two n-byte literals around a class (best of 3)."""
    analysis = analyse("a" * n + "[bc]" + "d" * n, True)
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        required = required_literals(analysis)
        exact = exact_literals(analysis)
        best = min(best, time.process_time() - began)
    assert required == {b"a" * n + b"b" + b"d" * n, b"a" * n + b"c" + b"d" * n}
    assert exact == required
    return best


def test_the_literals_of_a_long_pattern_cost_linear_time() -> None:
    small, large = literal_cost(16_000), literal_cost(64_000)
    assert large < 8 * max(small, 0.002), (  # linear: ~4x; it was ~14x
        f"4 times the pattern cost {large / max(small, 1e-9):.1f} times the time "
        f"({small:.3f} s -> {large:.3f} s)")


def test_a_pattern_over_65536_characters_is_refused_naming_its_length(tmp_path: Path) -> None:
    config = tmp_path / "watch.json"
    for n, status in ((65_536, 0), (65_537, 2)):
        config.write_text(json.dumps({"watchers": [{"id": "w", "path": "app.log",
                                                    "pattern": "a" * n}]}))
        p = cli("validate", "-c", config, timeout=60)
        assert p.returncode == status, p.stdout + p.stderr
        said = p.stdout + p.stderr
        if status:
            assert f"watchers[0].pattern: string \"{'a' * 79}… is {n} characters long; at " \
                   "most 65536 are allowed" in said, said
            assert len(said) < 400, said
