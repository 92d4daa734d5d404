"""Start-up of the CLI (not a test): wall time of `watchrun --help`, `validate` and a tiny
`run --once`; CPU time of `run --once` on an empty file next to `python -c pass`; and the start
cost of each file watcher (20 → 500 watchers, time to READY=1). Interleaved rounds.

    .venv/bin/python bench/bench_startup.py [--rounds 10] [--watcher-rounds 5]
    .venv/bin/python bench/bench_startup.py --watchers-only --tree /tmp/base/runner   # an A/B
    /tmp/wr-user/bin/python bench/bench_startup.py --watchers-only --venv /tmp/wr-base  # installed

Every command runs as a fresh process (console script of this venv) with its output going to a
file. CPU is user+system of the process (rusage); the ratio is the median of per-round ratios to
`python -c pass` (target <= 5x). The watcher cost: `watchrun run` with 20 and with 500 file
watchers on empty files is started with NOTIFY_SOCKET pointing at a datagram socket this script
reads; when READY=1 arrives, the wall time since the start and the process's CPU time
(/proc/PID/stat) are taken, and it is stopped. Per watcher = (500-run - 20-run) / 480, medians
over rounds; "restart" keeps the output dir (checkpoints and config cache in place, the runner's
usual start), "fresh" on an empty one at the same path (the last round's moved aside; target
<= 0.5 ms). The variants take turns at going first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    ROOT,
    Series,
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


def _ready(argv: list[str], out: Path, env: dict[str, str]) -> tuple[float, float]:
    """Start `argv` (with `env` added); (wall s, CPU s) when it sends READY=1; then stop it."""
    sock_path = out.parent / f".notify-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(120)
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=child_env({**env, "NOTIFY_SOCKET": str(sock_path)}))  # fmt: skip
    try:
        while b"READY=1" not in sock.recv(4096):
            pass
        wall = time.perf_counter() - started
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        sock.close()
        sock_path.unlink()
    return wall, cpu


Variant = tuple[str, list[str], dict[str, str]]
"""A watchrun to start: its label, its command, what its environment adds."""


def watcher_cost(work: Path, variants: list[Variant], mode: str, rounds: int
                 ) -> dict[str, tuple[float, float]]:
    """ms per file watcher to READY=1 (wall, CPU), from 20 and 500 watchers, of each variant
    (in the same rounds, in turn)."""
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    configs = {}
    for n in (20, 500):
        for i in range(n):
            (logs / f"f{i}.log").touch()
        configs[n] = write_config(work / f"w{n}.yaml", {"limits": {"maxWatchers": 500},
                                  "watchers": [{"id": f"w{i}", "path": str(logs / f"f{i}.log"),
                                                "pattern": "ERROR|FATAL",
                                                "exclude": ["healthcheck"]} for i in range(n)]})
    samples = {(label, n): [] for label, _, _ in variants for n in (20, 500)}
    used: list[Path] = []
    for r in range(rounds + 1):  # the first round warms up (and makes the restart state)
        turn = r % len(variants)  # each variant goes first in turn (no position bias)
        for k, (label, wr, env) in [*enumerate(variants)][turn:] + [*enumerate(variants)][:turn]:
            for n in (20, 500):
                out = work / f"ready-{k}-{n}"
                if mode == "fresh" and out.exists():
                    # Moved aside, removed at the end: the same path (part of the config
                    # cache's key) and no thousands of files removed just before the start
                    # (ext4 then skips their inodes at every create: ~+60 %).
                    used.append(out.rename(out.with_name(f"{out.name}-{r}")))
                taken = _ready([*wr, "run", "-c", str(configs[n]), "--output-dir", str(out)],
                               out, env)  # fmt: skip
                if r:
                    samples[label, n].append(taken)
    for out in used:
        shutil.rmtree(out, ignore_errors=True)
    costs = {}
    for label, _, _ in variants:
        med = {n: (statistics.median(w for w, _ in samples[label, n]),
                   statistics.median(c for _, c in samples[label, n])) for n in (20, 500)}
        per = ((med[500][0] - med[20][0]) / 480 * 1000, (med[500][1] - med[20][1]) / 480 * 1000)
        print(f"\n{label}: start to READY=1, {mode} ({rounds} rounds): 20 watchers "
              f"{med[20][0] * 1000:.0f} ms wall / {med[20][1] * 1000:.0f} ms CPU, 500 watchers "
              f"{med[500][0] * 1000:.0f} / {med[500][1] * 1000:.0f} ms: {per[0]:.2f} ms wall, "
              f"{per[1]:.2f} ms CPU per watcher (target <= 0.5 ms)")  # fmt: skip
        costs[label] = per
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--watcher-rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-startup"))
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="also start the watchrun of this source tree in the watcher rounds "
                             "(the `runner` directory of a `git worktree`: an A/B)")  # fmt: skip
    parser.add_argument("--venv", type=Path, action="append", default=[],
                        help="also start the console script of this virtualenv in the watcher "
                             "rounds (`pip install` of another tree: an A/B as users install "
                             "it)")  # fmt: skip
    parser.add_argument("--watchers-only", action="store_true",
                        help="only the per-watcher start cost")
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
    variants: list[Variant] = [("watchrun", wr, {})]
    variants += [(f"tree {t}", [py, "-m", "watchrun"], {"PYTHONPATH": str(t.resolve())})
                 for t in args.tree]  # fmt: skip
    variants += [(f"venv {v}", [str(v / "bin" / "watchrun")], {}) for v in args.venv]
    if args.watchers_only:
        for mode in ("restart", "fresh"):
            watcher_cost(work, variants, mode, args.watcher_rounds)
        shutil.rmtree(work, ignore_errors=True)
        return 0
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
    empty = work / "empty.log"
    empty.touch()
    once = write_config(work / "once.yaml", {"watchers": [
        {"id": "e", "path": str(empty), "pattern": "ERROR|FATAL", "exclude": ["healthcheck"],
         "fromStart": True}]})  # fmt: skip
    cpu = {"python -c pass": Series("pass"), "watchrun run --once (empty file)": Series("run")}
    for _ in range(args.rounds):
        cpu["python -c pass"].values.append(run_timed([py, "-c", "pass"]).cpu * 1000)
        shutil.rmtree(work / "out", ignore_errors=True)
        cpu["watchrun run --once (empty file)"].values.append(run_timed(
            [*wr, "run", "--once", "-c", str(once), "--output-dir", str(work / "out")],
            stdout=work / "out.txt", stderr=work / "err.txt").cpu * 1000)
    base = cpu["python -c pass"]
    ratio = ratio_median(cpu["watchrun run --once (empty file)"], base)
    print(f"\n{args.rounds} rounds interleaved, CPU ms (user+system) per fresh process")
    print_table(["command", "median CPU ms", "min-max ms", "÷ python -c pass"],
                [[name, fmt(s.median, 1), f"{fmt(s.lo, 1)}-{fmt(s.hi, 1)}",
                  f"{ratio_median(s, base):.2f}x"] for name, s in cpu.items()])  # fmt: skip
    print(f"run --once on an empty file: {ratio:.2f}x python -c pass (target <= 5x): "
          f"{'met' if ratio <= 5 else 'NOT met'}")
    ok = ratio <= 5
    for mode in ("restart", "fresh"):
        per = watcher_cost(work, variants, mode, args.watcher_rounds)["watchrun"]
        ok = ok and (mode != "restart" or per[1] <= 0.5)
    rows = []
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
