"""`watchrun run --once` over a big log next to grep, every engine, interleaved (not a test).

    .venv/bin/python bench/bench_scan.py --size 300MiB --error-rate 0.01 --rounds 5
    .venv/bin/python bench/bench_scan.py --size 1GiB --engines all --rounds 5
    .venv/bin/python bench/bench_scan.py --log project --size 1GiB --rounds 5
    git worktree add /tmp/base BASE && .venv/bin/python bench/bench_scan.py --tree /tmp/base/runner

The log is the realistic one of `bench/gen_log.py` (seed 42; access, app, Java and JSON lines,
~15 % non-ASCII; `--error-rate` of ERROR/FATAL lines) or the project's own (`bench/loggen.py`,
seed 1), generated once into /tmp (or $WATCHRUN_BENCH_LOGS) and kept (a `.meta` file records
how). In each round, in turn: `watchrun run --once` with one file watcher (`error|fatal`
ignoring case, exclude `healthcheck`, fromStart, a fresh output dir) for each engine asked for
(hyperscan, the default; `re2` and `stdlib` through WATCHRUN_ENGINES), the anchor `grep -iE
'error|fatal' LOG | grep -iv healthcheck`, and `grep -E 'ERROR|FATAL' LOG` (the anchor of the
fallbacks). Wall time includes the process start; CPU is user+system of the process and its
children. Printed: median and min-max wall, MB/s, median CPU, and the median of the per-round
ratios to the anchor (and to `grep -E`), and of the CPU to the anchor's; then whether watchrun
recorded as many matches as the anchor printed lines (exit 1 when not). `--tree DIR` adds the
watchrun of another source tree (run with PYTHONPATH=DIR) to the same rounds: an A/B of a change
on a noisy host.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    LOGS,
    Series,
    Timed,
    child_env,
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

ANCHOR = "grep -iE | grep -iv"
GREP_E = "grep -E"
ENGINES = {"hyperscan": None, "re2": "re2", "stdlib": "re+prefilter,re"}


def realistic(path: Path, size: int, rate: float, seed: int = 42) -> None:
    """`gen_log.py` output at `path`, unless a `.meta` says it was made the same way."""
    meta = path.with_name(path.name + ".meta")
    want = f"gen_log {size} {rate} {seed}\n"
    if path.exists() and meta.exists() and meta.read_text() == want:
        return
    started = time.monotonic()
    subprocess.run([sys.executable, str(Path(__file__).parent / "gen_log.py"), "--out",
                    str(path), "--size-mb", str(size / (1 << 20)), "--seed", str(seed),
                    "--error-rate", str(rate)], check=True)  # fmt: skip
    meta.write_text(want)
    print(f"generated {path} in {time.monotonic() - started:.0f} s", file=sys.stderr)


def matched(out_dir: Path) -> int:
    return int(json.loads((out_dir / "state" / "big.status.json").read_text())["matchCount"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", choices=("realistic", "project"), default="realistic")
    parser.add_argument("--size", default="300MiB")
    parser.add_argument("--error-rate", type=float, default=0.002)
    parser.add_argument("--engines", default="hyperscan",
                        help="comma list of hyperscan, re2, stdlib; or all")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", type=float, help="ratio to the anchor to meet (hyperscan)")
    parser.add_argument("--fallback-target", type=float, default=3.0,
                        help="ratio to grep -E the re2/stdlib engines must meet")  # fmt: skip
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-scan"))
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="also run the watchrun of this source tree, its default engine "
                             "(the `runner` directory of a `git worktree` of another commit: "
                             "an A/B in the same rounds)")  # fmt: skip
    args = parser.parse_args()
    engines = list(ENGINES) if args.engines == "all" else args.engines.split(",")
    for line in context_lines(sys.argv):
        print(line)
    size = parse_size(args.size)
    if args.log == "realistic":
        log = LOGS / f"watchrun-bench-real-{args.size}-{args.error_rate}.log"
        realistic(log, size, args.error_rate)
    else:
        log = LOGS / f"watchrun-bench-project-{args.size}.log"
        ensure(log, size)
    nbytes = log.stat().st_size
    work = fresh_dir(args.work)
    config = write_config(work / "watch.yaml", {"watchers": [{
        "id": "big", "path": str(log), "pattern": "error|fatal", "exclude": ["healthcheck"],
        "fromStart": True}]})  # fmt: skip

    def watchrun(name: str, engine: str | None, tree: Path | None = None) -> Callable[[], Timed]:
        def run() -> Timed:
            out = work / ("out-" + name.replace("/", "_").replace(" ", "-"))
            shutil.rmtree(out, ignore_errors=True)
            env = child_env({"WATCHRUN_ENGINES": engine} if engine else None)
            cmd = watchrun_cmd()
            if tree is not None:
                env["PYTHONPATH"], cmd = str(tree), [sys.executable, "-m", "watchrun"]
            t = run_timed([*cmd, "run", "--once", "-c", str(config), "--output-dir",
                           str(out)], stdout=work / "watchrun.stdout",
                          stderr=work / "watchrun.stderr", env=env)  # fmt: skip
            counts[name] = matched(out)
            return t
        return run

    counts: dict[str, int] = {}
    competitors: dict[str, Callable[[], Timed]] = {}
    for name in engines:
        competitors[f"watchrun ({name})"] = watchrun(f"watchrun {name}", ENGINES[name])
    for tree in args.tree:
        competitors[f"watchrun (tree {tree})"] = watchrun(f"tree {tree}", None, tree.resolve())
    competitors[ANCHOR] = lambda: run_timed(
        ["/bin/sh", "-c", f"grep -iE 'error|fatal' {log} | grep -iv healthcheck"],
        stdout=work / "anchor.out")  # fmt: skip
    competitors[GREP_E] = lambda: run_timed(["grep", "-E", "ERROR|FATAL", str(log)],
                                            stdout=work / "grep-e.out")  # fmt: skip
    walls = {name: Series(name) for name in competitors}
    cpus = {name: Series(name) for name in competitors}
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # page cache
    for run in competitors.values():  # warm up (.pyc, config and hyperscan caches)
        run()
    for _ in range(args.rounds):
        for name, run in competitors.items():
            t = run()
            if t.status not in (0, 1):
                print(f"{name} failed with status {t.status}", file=sys.stderr)
                return 2
            walls[name].values.append(t.wall)
            cpus[name].values.append(t.cpu)
    rows = []
    for name in competitors:
        w = walls[name]
        rows.append([name, fmt(w.median), f"{fmt(w.lo)}-{fmt(w.hi)}",
                     f"{nbytes / 1e6 / w.median:.0f}", fmt(cpus[name].median),
                     f"{ratio_median(w, walls[ANCHOR]):.2f}x",
                     f"{ratio_median(w, walls[GREP_E]):.2f}x",
                     f"{ratio_median(cpus[name], cpus[ANCHOR]):.2f}x"])  # fmt: skip
    what = (f"realistic log (gen_log.py, seed 42, error rate {args.error_rate})"
            if args.log == "realistic" else "project log (loggen.py, seed 1)")  # fmt: skip
    print(f"\nfile: {log} ({nbytes / 1e6:.0f} MB), {what}; `error|fatal` ignoring case, exclude "
          f"`healthcheck`; {args.rounds} rounds interleaved, wall includes process start-up")
    print_table(["command", "median s", "min-max s", "MB/s", "CPU s", f"÷ {ANCHOR}",
                 f"÷ {GREP_E}", f"CPU ÷ {ANCHOR}"], rows)  # fmt: skip
    print(f"load average at end: {loadavg()}")
    want = sum(1 for _ in (work / "anchor.out").open("rb"))
    ok = all(n == want for n in counts.values())
    print(f"matched lines: anchor {want}, " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + ("" if ok else " (DIFFER)"))
    verdicts = []
    if args.target is not None and "hyperscan" in engines:
        r = ratio_median(walls["watchrun (hyperscan)"], walls[ANCHOR])
        verdicts.append(f"hyperscan {r:.2f}x {ANCHOR} (target <= {args.target:g}x): "
                        f"{'met' if r <= args.target else 'NOT met'}")
    for name in engines:
        if name != "hyperscan":
            r = ratio_median(walls[f"watchrun ({name})"], walls[GREP_E])
            verdicts.append(f"{name} {r:.2f}x {GREP_E} (target <= {args.fallback_target:g}x): "
                            f"{'met' if r <= args.fallback_target else 'NOT met'}")
    for v in verdicts:
        print(v)
    os.environ.pop("WATCHRUN_ENGINES", None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
