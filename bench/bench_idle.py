"""Idle cost: one `watchrun run` with 20 file watchers (and an agent, so the agents hub runs)
next to 20 `tail -F | grep` pipelines, nothing being written (not a test).

    .venv/bin/python bench/bench_idle.py [--watchers 20] [--seconds 12] [--rounds 5]

Each trial starts the competitor, appends one matching line to every file (so every watcher
has matched, written a record, armed its checkpoint and status timers once), waits `--settle`
seconds for those to fire, then counts over `--seconds` the context switches of every thread
of every process of the competitor (`/proc/<pid>/task/*/status`: voluntary + involuntary: each
is a wake-up) and their CPU time (`/proc/<pid>/task/*/schedstat`). Also RSS (VmRSS, summed over
the processes) at the end. Rounds interleave the two competitors. watchrun's start-up caches
(validated config, compiled databases) are in a directory of this run: a first trial, before
the rounds, starts with them empty (its RSS is printed as "caches cold": a process that
validated its config keeps jsonschema imported); the rounds find them filled, as every start
but the first after a config change does. Exit 1 unless watchrun wakes only for its loop-lag
monitor (10 times a second, `runtime/lag.py`, and its stall guard every 5 s; none per
watcher) and its median RSS over the rounds is at most 32 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tail import group_pids
from benchlib import child_env, context_lines, fmt, loadavg, print_table, watchrun_cmd

RSS_MIB = 32


def task_counters(pids: list[int]) -> tuple[int, float, int]:
    """(context switches, CPU seconds, threads) summed over every thread of `pids`."""
    switches, cpu_ns, threads = 0, 0, 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                status = (task / "status").read_text()
                sched = (task / "schedstat").read_text().split()
            except OSError:
                continue
            threads += 1
            cpu_ns += int(sched[0])
            for line in status.splitlines():
                if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                    switches += int(line.split()[1])
    return switches, cpu_ns / 1e9, threads


def rss_mib(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def start_watchrun(work: Path, logs: list[Path]) -> tuple[list[subprocess.Popen[bytes]], Path]:
    config = work / "watch.yaml"
    watchers = [{"id": f"w{i}", "path": str(p), "pattern": "ERROR|FATAL",
                 "exclude": ["healthcheck"]} for i, p in enumerate(logs)]  # fmt: skip
    agents = [{"name": "triage", "provider": "mock", "prompt": "look: {matches}"}]
    config.write_text(json.dumps({"watchers": watchers, "agents": agents}) + "\n")
    out = work / "out"
    # no NOTIFY_SOCKET / WATCHDOG_USEC: the systemd watchdog is off
    env = child_env({"WATCHRUN_CACHE_DIR": str(work.parent / "cache")})
    proc = subprocess.Popen([*watchrun_cmd(), "run", "-c", str(config), "--output-dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=open(work / "stderr", "wb"),  # noqa: SIM115
                            start_new_session=True, env=env)  # fmt: skip
    last = out / "watchers" / f"w{len(logs) - 1}.jsonl"
    deadline = time.monotonic() + 30
    while not (last.exists() and b'"kind":"start"' in last.read_bytes()):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"watchrun did not start: {(work / 'stderr').read_text()}")
        time.sleep(0.05)
    return [proc], out


def start_tails(work: Path, logs: list[Path]) -> tuple[list[subprocess.Popen[bytes]], Path]:
    procs = []
    for p in logs:
        cmd = (f"tail -n0 -F {p} | grep --line-buffered -iE 'ERROR|FATAL' "
               f"| grep --line-buffered -iv healthcheck >> {p}.out")  # fmt: skip
        procs.append(subprocess.Popen(["/bin/sh", "-c", cmd], start_new_session=True))
    time.sleep(1.0)  # tail has no ready signal; the warm-up lines below show it is reading
    return procs, work


def trial(name: str, work: Path, n: int, settle: float, seconds: float) -> dict[str, float]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logs = [work / f"app{i}.log" for i in range(n)]
    for p in logs:
        p.write_text("INFO boot\n")
    starter = start_watchrun if name == "watchrun" else start_tails
    procs, out = starter(work, logs)
    try:
        for p in logs:
            with p.open("a") as fh:
                fh.write("ERROR warm-up\n")
        time.sleep(settle)  # checkpoint (1 s) and status (1 s) timers fire once, then stop
        pids = [q for proc in procs for q in group_pids(proc.pid)]
        sw0, cpu0, threads = task_counters(pids)
        time.sleep(seconds)
        sw1, cpu1, _ = task_counters(pids)
        rss = rss_mib(pids)
        if name == "watchrun":
            seen = sum((out / "watchers" / f"w{i}.jsonl").read_bytes().count(b"warm-up")
                       for i in range(n))  # fmt: skip
        else:
            seen = sum(Path(f"{p}.out").read_bytes().count(b"warm-up") for p in logs)
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(30)
    return {"wakeups_s": (sw1 - sw0) / seconds, "cpu_s": cpu1 - cpu0, "rss": rss,
            "procs": len(pids), "threads": threads, "seen": seen}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-idle"))
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    names = {"watchrun": "watchrun run (1 process, 20 file watchers + 1 agent)",
             "tail": f"tail -F | grep x{args.watchers} pipelines"}  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {k: [] for k in names}
    shutil.rmtree(args.work, ignore_errors=True)
    cold = trial("watchrun", args.work / "watchrun", args.watchers, args.settle, args.seconds)
    print(f"caches cold: watchrun {cold['wakeups_s']:.2f} wake-ups/s, RSS {cold['rss']:.1f} MiB",
          flush=True)
    for r in range(args.rounds):
        for key in names:
            res = trial(key, args.work / key, args.watchers, args.settle, args.seconds)
            results[key].append(res)
            print(f"round {r + 1} {key}: {res['wakeups_s']:.2f} wake-ups/s, "
                  f"CPU {res['cpu_s']:.4f} s, RSS {res['rss']:.1f} MiB, {res['procs']:.0f} "
                  f"processes / {res['threads']:.0f} threads, warm-up lines seen "
                  f"{res['seen']:.0f}/{args.watchers}", flush=True)  # fmt: skip
    rows = []
    for key, name in names.items():
        rs = results[key]
        wk = sorted(x["wakeups_s"] for x in rs)
        cpu = sorted(x["cpu_s"] for x in rs)
        mem = sorted(x["rss"] for x in rs)
        rows.append([name, fmt(wk[len(wk) // 2], 2), f"{fmt(wk[0], 2)}-{fmt(wk[-1], 2)}",
                     fmt(cpu[len(cpu) // 2], 4),
                     f"{fmt(mem[len(mem) // 2], 1)} ({fmt(mem[0], 1)}-{fmt(mem[-1], 1)})",
                     f"{rs[0]['procs']:.0f} / {rs[0]['threads']:.0f}"])  # fmt: skip
    print(f"\n{args.watchers} idle files, {args.seconds:g} s measured after {args.settle:g} s "
          f"settling, {args.rounds} rounds interleaved")  # fmt: skip
    print_table(["configuration", "wake-ups/s (median)", "min-max", f"CPU s / {args.seconds:g} s",
                 "RSS MiB (sum), median (min-max)", "processes / threads"], rows)  # fmt: skip
    print(f"load average at end: {loadavg()}")
    shutil.rmtree(args.work, ignore_errors=True)
    from watchrun.runtime.lag import INTERVAL_S

    allowed = 1 / INTERVAL_S + 0.5  # the loop-lag monitor's ticks, and nothing per watcher
    worst = max(x["wakeups_s"] for x in results["watchrun"])
    rss = statistics.median(x["rss"] for x in results["watchrun"])
    print(f"watchrun: at most {worst:.2f} wake-ups/s (allowed {allowed:g}: the loop-lag "
          f"monitor), RSS {rss:.1f} MiB, median (target <= {RSS_MIB} MiB; caches cold "
          f"{cold['rss']:.1f} MiB)")
    ok = worst <= allowed and rss <= RSS_MIB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
