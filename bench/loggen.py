"""Write a deterministic, realistic application log for the benchmarks (not a test).

    .venv/bin/python bench/loggen.py OUT [--size 1GiB] [--seed 1]

Lines look like `2023-11-14T22:13:20.123Z INFO  [api.http] id=12345678 request served ...`:
INFO/DEBUG/WARN noise, ~0.2 % ERROR/FATAL, ~0.05 % lower-case `error`/`fatal` inside WARN lines
(only a case-insensitive pattern finds them), ~0.01 % `healthcheck ERROR`, ~15 % of lines with
non-ASCII UTF-8. No control characters (so sanitized match records equal grep's lines).
The same seed and size give the same bytes on every machine and Python version.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

WORDS = (
    "request", "served", "user", "cache", "miss", "hit", "db", "query", "took", "ms",
    "session", "opened", "closed", "upstream", "retry", "queue", "depth", "worker", "job",
)  # fmt: skip
UNICODE = ("café", "naïve", "Zürich", "東京", "Ωmega", "→", "✓", "résumé", "日本語", "ß")
LOGGERS = ("api.http", "db.pool", "auth", "scheduler", "cache.redis", "worker.7")
NOISE_LEVELS = ("INFO ", "INFO ", "INFO ", "DEBUG", "DEBUG", "WARN ")
BLOCK = 4096
"""Lines generated per write."""


def parse_size(text: str) -> int:
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
    low = text.strip().lower()
    for unit, factor in units.items():
        if low.endswith(unit):
            return int(float(low[: -len(unit)]) * factor)
    return int(low)


def message(rng: random.Random) -> tuple[str, str]:
    """A (level, message) pair with the documented mix."""
    roll = rng.random()
    if roll < 0.0010:
        return "ERROR", "request failed: connection reset by peer"
    if roll < 0.0020:
        return "FATAL", "worker crashed, restarting"
    if roll < 0.0021:
        return "INFO ", "healthcheck ERROR ignored"
    if roll < 0.0026:
        return "WARN ", rng.choice(("retrying after error", "near fatal load"))
    if roll < 0.0126:
        return "INFO ", f"GET /api/v1/items took {rng.randrange(2000)}ms"
    if roll < 0.0136:
        return "WARN ", "upstream timeout, retrying"
    words = rng.choices(WORDS, k=rng.randint(6, 14))
    return rng.choice(NOISE_LEVELS), " ".join(words)


def lines(rng: random.Random, start: float = 1_700_000_000.0):  # type: ignore[no-untyped-def]
    """An endless iterator of log lines (str, with the trailing newline)."""
    t = start
    second, stamp = -1, ""
    while True:
        t += rng.random() / 100
        if int(t) != second:
            second = int(t)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        level, msg = message(rng)
        if rng.random() < 0.15:
            msg += " " + rng.choice(UNICODE)
        ms = int(t * 1000) % 1000
        yield (f"{stamp}.{ms:03d}Z {level} [{rng.choice(LOGGERS)}] "
               f"id={rng.randrange(10**8)} {msg}\n")  # fmt: skip


def generate(path: Path, size: int, seed: int = 1) -> int:
    """Write at least `size` bytes of whole lines to `path`; return the number of lines."""
    rng = random.Random(seed)
    gen = lines(rng)
    written = count = 0
    with path.open("wb") as out:
        while written < size:
            block = "".join(next(gen) for _ in range(BLOCK)).encode()
            out.write(block)
            written += len(block)
            count += BLOCK
    return count


def ensure(path: Path, size: int, seed: int = 1) -> None:
    """Generate `path` unless it exists with a size written by the same `size` and `seed`
    (a `.meta` file beside it records them)."""
    meta = path.with_name(path.name + ".meta")
    want = f"{size} {seed}\n"
    if path.exists() and meta.exists() and meta.read_text() == want:
        return
    started = time.monotonic()
    n = generate(path, size, seed)
    meta.write_text(want)
    took = time.monotonic() - started
    print(f"generated {path}: {path.stat().st_size} bytes, {n} lines in {took:.0f} s",
          file=sys.stderr)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", default="1GiB", help="e.g. 300MiB, 1GiB (default 1GiB)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    ensure(args.out, parse_size(args.size), args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
