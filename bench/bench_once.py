"""`watchrun run --once` over a big log next to `grep -iE` and `grep -E`, interleaved (not a test).

    .venv/bin/python bench/bench_once.py [--size 1GiB] [--rounds 5] [--log /tmp/watchrun-bench.log]

Generates a deterministic log (bench/loggen.py, seed 1) unless it is there, then runs, in each
round and in turn, `watchrun run --once` (one file watcher, fromStart, the case-insensitive
pattern, a fresh output dir) and `grep -iE` / `grep -E` with the same pattern, every output going
to a file. Wall time includes process start-up. Prints median and min-max wall, MB/s, peak RSS
and the median of the per-round ratios to `grep -iE`, then checks that watchrun recorded exactly
the lines `grep -n -iE` prints (line numbers and texts). Exit status 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    Series,
    Timed,
    context_lines,
    fmt,
    fresh_dir,
    loadavg,
    print_table,
    ratio_median,
    run_timed,
    watchrun_cmd,
    write_config,
)
from loggen import ensure, parse_size

PATTERN = "ERROR|FATAL"


def grep_lines(log: Path, pattern: str) -> dict[int, str]:
    """lineNo -> text of every line `grep -n -iE` prints."""
    out = subprocess.run(["grep", "-n", "-iE", pattern, str(log)], capture_output=True,
                         check=False).stdout  # fmt: skip
    found: dict[int, str] = {}
    for raw in out.splitlines():
        no, _, text = raw.partition(b":")
        found[int(no)] = text.decode("utf-8", "replace")
    return found


def recorded_lines(jsonl: Path) -> dict[int, str]:
    found: dict[int, str] = {}
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("kind") == "match":
                found[int(rec["lineNo"])] = rec["line"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--log", type=Path, default=Path("/tmp/watchrun-bench.log"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-once"))
    parser.add_argument("--pattern", default=PATTERN)
    parser.add_argument("--clean", action="store_true", help="delete the log when done")
    args = parser.parse_args()

    for line in context_lines(sys.argv):
        print(line)
    ensure(args.log, parse_size(args.size))
    size = args.log.stat().st_size
    work = fresh_dir(args.work)
    config = write_config(work / "watch.yaml", {"watchers": [
        {"id": "big", "path": str(args.log), "pattern": args.pattern, "fromStart": True},
    ]})  # fmt: skip
    out_dir = work / "out"

    def watchrun() -> Timed:
        shutil.rmtree(out_dir, ignore_errors=True)  # no checkpoint: read the whole file
        return run_timed(
            [*watchrun_cmd(), "run", "--once", "-c", str(config), "--output-dir", str(out_dir)],
            stdout=work / "watchrun.stdout", stderr=work / "watchrun.stderr")

    competitors: dict[str, Callable[[], Timed]] = {
        "watchrun run --once": watchrun,
        "grep -iE (baseline)": lambda: run_timed(
            ["grep", "-iE", args.pattern, str(args.log)], stdout=work / "grep-i.out"),
        "grep -E (case-sensitive)": lambda: run_timed(
            ["grep", "-E", args.pattern, str(args.log)], stdout=work / "grep.out"),
    }  # fmt: skip
    walls = {name: Series(name) for name in competitors}
    rss = {name: Series(name) for name in competitors}
    # warm the page cache (and the interpreter's .pyc files) once, untimed
    subprocess.run(["cat", str(args.log)], stdout=subprocess.DEVNULL, check=True)
    watchrun()
    for _ in range(args.rounds):
        for name, run in competitors.items():
            t = run()
            if t.status not in (0, 1):
                print(f"{name} failed with status {t.status}", file=sys.stderr)
                return 2
            walls[name].values.append(t.wall)
            rss[name].values.append(t.rss_mib)
    base = walls["grep -iE (baseline)"]
    rows = []
    for name in competitors:
        w = walls[name]
        rows.append([name, fmt(w.median), f"{fmt(w.lo)}-{fmt(w.hi)}",
                     f"{size / 1e6 / w.median:.0f}", fmt(max(rss[name].values), 1),
                     f"{ratio_median(w, base):.2f}x"])  # fmt: skip
    print(f"\nfile: {args.log} ({size / 1e6:.0f} MB), pattern {args.pattern!r} case-insensitive, "
          f"{args.rounds} rounds interleaved, wall includes process start-up")  # fmt: skip
    print_table(["command", "median s", "min-max s", "MB/s", "peak RSS MiB", "÷ grep -iE"], rows)
    print(f"load average at end: {loadavg()}")

    want = grep_lines(args.log, args.pattern)
    got = recorded_lines(out_dir / "watchers" / "big.jsonl")
    same_numbers = set(want) == set(got)
    same_text = same_numbers and all(want[n] == got[n] for n in want)
    print(f"matched lines: grep -n -iE {len(want)}, watchrun {len(got)}; "
          f"line numbers {'identical' if same_numbers else 'DIFFER'}, "
          f"texts {'identical' if same_text else 'DIFFER'}")  # fmt: skip
    if args.clean:
        os.unlink(args.log)
        shutil.rmtree(work, ignore_errors=True)
    return 0 if same_text else 1


if __name__ == "__main__":
    sys.exit(main())
