"""Start-up time of the CLI: `watchrun --help`, `watchrun validate`, a tiny `run --once`, next
to the bare interpreter, interleaved (not a test).

    .venv/bin/python bench/bench_startup.py [--rounds 10]

Every command runs as a fresh process (console script of this venv) with its output going to a
file; the median, min-max and the target are printed. `python -c pass` and
`python -c "import asyncio"` show the floor every Python CLI pays.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    ROOT,
    Series,
    context_lines,
    fmt,
    fresh_dir,
    loadavg,
    print_table,
    run_timed,
    watchrun_cmd,
    write_config,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-startup"))
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    work = fresh_dir(args.work)
    (work / "app.log").write_text("INFO a\nERROR b\n")
    tiny = write_config(work / "watch.yaml", {"watchers": [
        {"id": "app", "path": str(work / "app.log"), "pattern": "ERROR", "fromStart": True}]})
    example = ROOT / "watch.yaml.example"
    wr = watchrun_cmd()
    py = sys.executable
    commands: dict[str, tuple[list[str], float | None]] = {
        "python -c pass": ([py, "-c", "pass"], None),
        "python -c 'import asyncio'": ([py, "-c", "import asyncio"], None),
        "watchrun --help": ([*wr, "--help"], 0.100),
        "watchrun validate -c watch.yaml.example": ([*wr, "validate", "-c", str(example)], 0.250),
        "watchrun run --once (2-line file)": (
            [*wr, "run", "--once", "-c", str(tiny), "--output-dir", str(work / "out")], None),
    }  # fmt: skip
    series = {name: Series(name) for name in commands}
    for argv, _ in commands.values():  # warm-up: .pyc files, page cache
        run_timed(argv, stdout=work / "out.txt", stderr=work / "err.txt")
    for _ in range(args.rounds):
        for name, (argv, _) in commands.items():
            shutil.rmtree(work / "out", ignore_errors=True)
            t = run_timed(argv, stdout=work / "out.txt", stderr=work / "err.txt")
            if t.status not in (0, 1):
                print(f"{name} exited {t.status}: {(work / 'err.txt').read_text()}")
                return 2
            series[name].values.append(t.wall * 1000)
    rows, ok = [], True
    for name, (_, target) in commands.items():
        s = series[name]
        met = target is None or s.median <= target * 1000
        ok = ok and met
        rows.append([name, fmt(s.median, 1), f"{fmt(s.lo, 1)}-{fmt(s.hi, 1)}",
                     "-" if target is None else f"<= {target * 1000:.0f}",
                     "-" if target is None else ("yes" if met else "NO")])  # fmt: skip
    print(f"\n{args.rounds} rounds interleaved, wall ms per fresh process")
    print_table(["command", "median ms", "min-max ms", "target ms", "met"], rows)
    print(f"load average at end: {loadavg()}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
