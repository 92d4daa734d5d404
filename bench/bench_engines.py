"""Benchmark the matcher engines on a generated log, next to grep (not a test).

    .venv/bin/python bench/bench_engines.py [--size-mb 100] [--rounds 3] [--path FILE]

Writes a deterministic log (seeded; INFO/DEBUG/WARN lines, ~0.2 % ERROR/FATAL, ~0.05 %
lower-case `error`/`fatal`, ~0.01 % `healthcheck ERROR`, ~15 % of lines with non-ASCII UTF-8),
then scans it in 256 KiB chunks cut at the last newline with every available engine, rounds
interleaved, and prints the best time, MB/s and match count of each. Every engine must find the
same lines (the script exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from watchrun.match.matcher import Matcher, engines_available

CHUNK = 256 * 1024
WORDS = (
    "request",
    "served",
    "user",
    "cache",
    "miss",
    "hit",
    "db",
    "query",
    "took",
    "ms",
    "session",
    "opened",
    "closed",
    "upstream",
    "retry",
    "queue",
    "depth",
    "worker",
    "job",
)
UNICODE = ("café", "naïve", "Zürich", "東京", "Ωmega", "→", "✓", "résumé", "日本語", "ß")
LOGGERS = ("api.http", "db.pool", "auth", "scheduler", "cache.redis", "worker.7")


def generate(path: Path, size: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    with path.open("wb") as out:
        written, t = 0, 1_700_000_000.0
        while written < size:
            lines = []
            for _ in range(4096):
                t += rng.random() / 100
                roll = rng.random()
                if roll < 0.0010:
                    level, msg = "ERROR", "request failed: connection reset by peer"
                elif roll < 0.0020:
                    level, msg = "FATAL", "worker crashed, restarting"
                elif roll < 0.0021:
                    level, msg = "INFO", "healthcheck ERROR ignored"
                elif roll < 0.0026:
                    level, msg = "WARN", rng.choice(("retrying after error", "near fatal load"))
                elif roll < 0.0126:
                    level, msg = "INFO", f"GET /api/v1/items took {rng.randrange(2000)}ms"
                elif roll < 0.0136:
                    level, msg = "WARN", "upstream timeout, retrying"
                else:
                    level = rng.choice(("INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARN"))
                    msg = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
                if rng.random() < 0.15:
                    msg += " " + rng.choice(UNICODE)
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
                lines.append(
                    f"{stamp}.{int(t * 1000) % 1000:03d}Z {level:5} "
                    f"[{rng.choice(LOGGERS)}] id={rng.randrange(10**8)} {msg}\n"
                )
            block = "".join(lines).encode()
            out.write(block)
            written += len(block)


def read_floor(path: Path) -> int:
    """Read in chunks, cut at the last newline, count lines: the cost every engine pays too."""
    lines, carry = 0, b""
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            buf = carry + block
            cut = buf.rfind(b"\n") + 1
            lines += buf.count(b"\n", 0, cut)
            carry = buf[cut:]
    return lines


def scan(path: Path, matcher: Matcher) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    offset, carry = 0, b""
    find = matcher.find
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            buf = carry + block
            cut = buf.rfind(b"\n") + 1
            found.extend((offset + s, offset + e) for s, e in find(buf[:cut]))
            offset += cut
            carry = buf[cut:]
    return found


def grep(args: list[str]) -> Callable[[], int]:
    def run() -> int:
        done = subprocess.run(args, capture_output=True, check=False, env={**os.environ})
        return int(done.stdout.split()[0]) if done.stdout else 0

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--path", type=Path, default=Path("/tmp/watchrun-bench.log"))
    args = parser.parse_args()
    size = args.size_mb * 1024 * 1024
    if not args.path.exists() or args.path.stat().st_size < size:
        generate(args.path, size)
    mb = args.path.stat().st_size / 1e6
    lines = read_floor(args.path)
    print(f"file {args.path}: {mb:.1f} MB, {lines} lines, chunks {CHUNK // 1024} KiB")
    print(f"engines available: {', '.join(engines_available())}")
    ok = True
    suites = [
        ("ERROR|FATAL", ["healthcheck"], False, "error|fatal"),
        ("ERROR|FATAL", ["healthcheck"], True, "ERROR|FATAL"),
        (r"took \d{4,} ?ms|timeout", [], False, None),
        (r"\bid=\d*777\b", [], False, None),
    ]
    for pattern, exclude, cs, grep_pattern in suites:
        path = str(args.path)
        runs: dict[str, Callable[[], object]] = {"read floor": lambda: read_floor(args.path)}
        for engine in engines_available():
            try:
                matcher = Matcher(pattern, exclude, cs, engine=engine)
            except ValueError:
                continue
            runs[engine] = lambda m=matcher: scan(args.path, m)  # type: ignore[misc]
        if grep_pattern:
            flags = "-cE" if cs else "-ciE"
            runs[f"grep {flags}"] = grep(["grep", flags, grep_pattern, path])
            runs[f"LC_ALL=C grep {flags}"] = grep(
                ["env", "LC_ALL=C", "grep", flags, grep_pattern, path]
            )
        best: dict[str, float] = {}
        results: dict[str, object] = {}
        for _ in range(args.rounds):
            for name, run in runs.items():
                started = time.perf_counter()
                results[name] = run()
                best[name] = min(best.get(name, 1e9), time.perf_counter() - started)
        sense = "case-sensitive" if cs else "case-insensitive"
        print(
            f"\npattern {pattern!r} exclude {exclude} ({sense}); "
            f"best of {args.rounds}, in-process (no interpreter start-up)"
        )
        base = best["read floor"]
        for name in runs:
            result = results[name]
            shown = len(result) if isinstance(result, list) else result
            what = "lines" if name == "read floor" else "matches"
            print(
                f"  {name:22} {best[name]:7.3f} s {mb / best[name]:8.0f} MB/s "
                f"{best[name] / base:6.2f}x floor  {what} {shown}"
            )
        if grep_pattern:
            print("  (grep counts include the excluded lines: it has no exclude)")
        found = [results[n] for n in runs if n in engines_available()]
        if any(f != found[0] for f in found):
            print("  MISMATCH: the engines found different lines")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
