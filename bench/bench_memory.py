"""Bounded memory: peak RSS of `watchrun run --once` fed a 1 GiB line (from a file and from a
command) and a 5 M-line flood from a command, next to grep on the same input (not a test).

    .venv/bin/python bench/bench_memory.py [--rounds 3] [--work /tmp/watchrun-bench-mem]

Cases (every one with the default limits: maxLineBytes 64 KiB):
- file, 1 GiB line: a file holding `ERROR ` + 1 GiB of `a` + newline + `ERROR after`, one file
  watcher reading it from the start; baseline `grep -c ERROR FILE`.
- command, 1 GiB line: the same bytes written by a shell pipeline to the command watcher's
  stdout; baseline the same pipeline `| grep -c ERROR`.
- command, 5 M-line flood: `seq` + `sed` print 5 000 000 lines, 1 % of them `ERROR`; baseline
  `| grep -c ERROR`.
- command, 5 M-line flood, every line matching (5 M match records, ~1 GB of JSONL rotated at
  64 MiB keeping 2; the slowest case, run once).
Peak RSS is GNU time's `%M` of watchrun (its whole process; the commands it runs are separate
processes). The baseline column is grep's own peak on the same bytes (for the command cases
the bytes are first written to a file, then grepped). Each case also checks what watchrun
reports: the match count (from its status snapshot, as rotation may drop old records) and, for
the long line, one match record with `truncated: true` and the omitted byte count.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    context_lines,
    fmt,
    fresh_dir,
    loadavg,
    print_table,
    run_timed,
    watchrun_cmd,
    write_config,
)

GIB = 1 << 30
LONG_LINE = f"printf 'ERROR '; head -c {GIB} /dev/zero | tr '\\0' a; printf '\\nERROR after\\n'"
FLOOD = "seq 5000000 | sed 's/^\\(.*\\)00$/ERROR line \\1/; s/^[0-9]/INFO line &/'"
FLOOD_ALL = "seq 5000000 | sed 's/^/ERROR line /'"
LIMIT_MIB = 128


def count_matches(jsonl: Path) -> tuple[int, list[dict[str, object]]]:
    n, truncated = 0, []
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            if '"kind":"match"' in line:
                n += 1
                if '"truncated":true' in line:
                    rec = json.loads(line)
                    rec.pop("line", None)
                    truncated.append(rec)
    return n, truncated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-mem"))
    parser.add_argument("--skip-all-match", action="store_true",
                        help="leave out the slow case where all 5 M lines match")  # fmt: skip
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    work = fresh_dir(args.work)
    big = work / "long-line.log"
    run_timed(["/bin/sh", "-c", f"{{ {LONG_LINE}; }} > {big}"], shell=False)
    cases: list[tuple[str, dict[str, object], str | None, int, bool]] = [
        ("file, 1 GiB line", {"path": str(big), "fromStart": True}, None, 2, True),
        ("command, 1 GiB line", {"command": LONG_LINE}, LONG_LINE, 2, True),
        ("command, 5 M lines, 1 % matching", {"command": FLOOD}, FLOOD, 50_000, False),
    ]  # fmt: skip
    if not args.skip_all_match:
        cases.append(("command, 5 M lines, all matching", {"command": FLOOD_ALL}, FLOOD_ALL,
                      5_000_000, False))  # fmt: skip
    rows, ok = [], True
    for name, source, feed, expected, long_line in cases:
        config = write_config(work / "watch.yaml", {
            "output": {"maxBytes": "64MiB", "keep": 2},
            "watchers": [{"id": "m", "pattern": "ERROR", **source}],
        })  # fmt: skip
        grep_input = big
        if feed is not None:  # grep the same bytes, from a file
            grep_input = work / "feed"
            run_timed(["/bin/sh", "-c", f"{{ {feed}; }} > {grep_input}"])
        ours, base, walls = [], [], []
        for _ in range(1 if expected == 5_000_000 else args.rounds):  # that one takes ~1 min
            out = fresh_dir(work / "out")
            t = run_timed([*watchrun_cmd(), "run", "--once", "--quiet", "-c", str(config),
                           "--output-dir", str(out)], stdout=work / "stdout",
                          stderr=work / "stderr")  # fmt: skip
            ours.append(t.rss_mib)
            walls.append(t.wall)
            b = run_timed(["grep", "-c", "ERROR", str(grep_input)], stdout=work / "grep.out")
            base.append(b.rss_mib)
        if feed is not None:
            grep_input.unlink()
        status = json.loads((work / "out" / "state" / "m.status.json").read_text())
        n = int(status["matchCount"])  # the JSONL may have rotated older records away
        detail = f"{n} matches (expected {expected})"
        good = n == expected
        if long_line:
            _, truncated = count_matches(work / "out" / "watchers" / "m.jsonl")
            omitted = int(str(truncated[0].get("omittedBytes", 0))) if truncated else 0
            good = good and len(truncated) == 1 and omitted > GIB - (1 << 17)
            detail += (f", the long line truncated, omittedBytes {omitted}" if truncated
                       else ", the long line NOT marked truncated")  # fmt: skip
        good = good and max(ours) <= LIMIT_MIB
        ok = ok and good
        rows.append([name, fmt(max(ours), 1), fmt(max(base), 1),
                     f"≤ {LIMIT_MIB}", fmt(sorted(walls)[len(walls) // 2], 2), detail,
                     "✓" if good else "✗"])  # fmt: skip
        print(f"{name}: peak RSS {max(ours):.1f} MiB, {detail}", flush=True)
    print(f"\n{args.rounds} rounds each (the all-matching flood: 1); peak RSS = GNU time %M "
          "(max over rounds); watchrun runs with --quiet (no echo of the command's output)")
    print_table(["case", "watchrun peak RSS MiB", "grep peak RSS MiB", "target MiB",
                 "watchrun wall s (median)", "records", "ok"], rows)  # fmt: skip
    print(f"load average at end: {loadavg()}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
