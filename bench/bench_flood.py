"""A command flooding matches: `watchrun run --once` on 5 M lines that all match, next to the same
pipeline into grep, interleaved (not a test).

    .venv/bin/python bench/bench_flood.py [--lines 5000000] [--rounds 3]

The command is `seq N | sed 's/^/ERROR line /'`: every line matches `ERROR`. watchrun runs it as
a command watcher (its JSONL rotated at 64 MiB, 2 kept, as bench_memory does) and writes one
match record per line; the anchor is `seq N | sed ... | grep ERROR > FILE`. Wall time includes
the process start; CPU is user+system of the process and its children (the command too). The
match count comes from watchrun's status snapshot (rotation drops old records); exit 1 when it
is not N.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    Series,
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

ANCHOR = "seq | sed | grep"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=float, default=8.0, help="ratio to the anchor")
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-flood"))
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    work = fresh_dir(args.work)
    command = f"seq {args.lines} | sed 's/^/ERROR line /'"
    config = write_config(work / "watch.yaml", {
        "output": {"maxBytes": "64MiB", "keep": 2},
        "watchers": [{"id": "flood", "pattern": "ERROR", "command": command}]})  # fmt: skip
    out = work / "out"
    walls = {name: Series(name) for name in ("watchrun run --once", ANCHOR)}
    cpus = {name: Series(name) for name in walls}
    counts: list[int] = []
    for r in range(args.rounds + 1):  # the first round warms up (.pyc, caches)
        shutil.rmtree(out, ignore_errors=True)
        t = run_timed([*watchrun_cmd(), "run", "--once", "--quiet", "-c", str(config),
                       "--output-dir", str(out)], stdout=work / "stdout",
                      stderr=work / "stderr")  # fmt: skip
        a = run_timed(["/bin/sh", "-c", f"{command} | grep ERROR"], stdout=work / "anchor.out")
        if r == 0:
            continue
        counts.append(int(json.loads((out / "state" / "flood.status.json").read_text())
                          ["matchCount"]))  # fmt: skip
        for name, timed in (("watchrun run --once", t), (ANCHOR, a)):
            walls[name].values.append(timed.wall)
            cpus[name].values.append(timed.cpu)
    rows = []
    for name, w in walls.items():
        rows.append([name, fmt(w.median), f"{fmt(w.lo)}-{fmt(w.hi)}", fmt(cpus[name].median),
                     f"{args.lines / w.median / 1e6:.2f}",
                     f"{ratio_median(w, walls[ANCHOR]):.2f}x"])  # fmt: skip
    print(f"\n{args.lines} lines, all matching; {args.rounds} rounds interleaved (after one to "
          "warm up); wall includes process start-up")
    print_table(["command", "median s", "min-max s", "CPU s", "M lines/s", f"÷ {ANCHOR}"], rows)
    r = ratio_median(walls["watchrun run --once"], walls[ANCHOR])
    print(f"load average at end: {loadavg()}")
    ok = all(n == args.lines for n in counts)
    print(f"match records: {counts} (expected {args.lines} each); {r:.2f}x the anchor (target "
          f"<= {args.target:g}x): {'met' if r <= args.target else 'NOT met'}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
