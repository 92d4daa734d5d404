"""copytruncate under write load: lines lost by `watchrun run` with inotify and with polling.

A writer appends numbered lines at --rate lines/s for --seconds; a separate rotator does what
logrotate's copytruncate does every --every seconds (copy the file, then truncate it), so the
lines the writer appends between the copy and the truncation are lost to any reader: the race
no tailer can win. Everything else must be read (from the file, or from the copy). Rounds
interleave the two modes. Figures: lines lost, lines lost in the race (appended after the
copy's end, before the truncation, so lost by design: held whole by no copy), lines lost
outside that race (held by a file, never recorded: a silent loss, exit 1), and the
`unreadBytes` the runner reported in its `rotate{reason: truncate}` records.

    .venv/bin/python bench/bench_copytruncate.py --rate 20000 --seconds 5 --every 0.5 --rounds 3
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
import tempfile
import threading
import time
from pathlib import Path

LINE = 50  # bytes per line: "%09d " + 39 x + "\n"


def writer(log: Path, rate: int, seconds: float, stop: threading.Event) -> int:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    n, start = 0, time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            os.write(fd, b"".join(b"%09d %s\n" % (i, b"x" * 39) for i in range(n + 1, n + 101)))
            n += 100
            time.sleep(max(0.0, start + n / rate - time.monotonic()))
    finally:
        os.close(fd)
        stop.set()
    return n


def rotator(log: Path, every: float, stop: threading.Event) -> None:
    """copy, then truncate: what is appended in between is lost by design."""
    k = 0
    while not stop.wait(every):
        k += 1
        shutil.copyfile(log, log.with_name(f"{log.name}.{k}"))
        os.truncate(log, 0)


def on_disk(log: Path) -> set[int]:
    """The numbers of the lines held whole by the log or one of its copies. A line in none was
    lost in a copy/truncate race: appended after the copy's end, cut by the truncation. (Not
    told by the file's size before the truncation: a write of several pages is seen half done,
    a page at a time, so the size and the copy can both stop at a page boundary inside a write
    whose rest the truncation, waiting for that write, then cuts: 45 lines of a CI run.)"""
    held: set[int] = set()
    for path in log.parent.glob(log.name + "*"):
        for line in path.read_bytes().split(b"\n")[:-1]:
            if len(line) == LINE - 1 and line[:9].isdigit():
                held.add(int(line[:9]))
    return held


def one_round(mode: str, rate: int, seconds: float, every: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="wr-ct-") as tmp:
        d = Path(tmp)
        log = d / "app.log"
        log.write_bytes(b"")
        (d / "watch.json").write_text(json.dumps({"limits": {"pollMs": 500}, "watchers": [
            {"id": "app", "path": str(log), "pattern": "^[0-9]", "fromStart": True}]}))
        env = {**os.environ, "WATCHRUN_FORCE_POLL": "1" if mode == "poll" else "0"}
        exe = Path(sys.executable).with_name("watchrun")
        proc = subprocess.Popen([str(exe), "run", "--quiet", "-c", str(d / "watch.json")], env=env,
                                stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        jsonl = d / ".watchrun" / "watchers" / "app.jsonl"
        while not jsonl.exists():
            time.sleep(0.01)
        stop = threading.Event()
        rot = threading.Thread(target=rotator, args=(log, every, stop))
        rot.start()
        total = writer(log, rate, seconds, stop)
        rot.join()
        last, still = -1, 0
        while still < 10:  # settled: no new record for a second
            size = jsonl.stat().st_size
            still = still + 1 if size == last else 0
            last = size
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        recs = [json.loads(x) for x in jsonl.read_text().splitlines()]
        got = {int(r["line"][:9]) for r in recs if r["kind"] == "match"}
        unread = sum(r.get("unreadBytes", 0) for r in recs if r["kind"] == "rotate")
        written, held = set(range(1, total + 1)), on_disk(log)
        return {"lost": len(written - got), "race": len(written - held),
                "silent": len((written & held) - got), "unread": unread / LINE, "total": total,
                "dup": sum(1 for r in recs if r["kind"] == "match") - len(got)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--every", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    results: dict[str, list[dict[str, float]]] = {"inotify": [], "poll": []}
    for _ in range(a.rounds):
        for mode in results:
            results[mode].append(one_round(mode, a.rate, a.seconds, a.every))
    print(f"load average at end: {os.getloadavg()[0]:.2f}\n")
    print("| mode | lines written | lost (median, min-max) | of which lost in the copy/truncate "
          "race | lost outside it (max) | reported unreadBytes (lines) | duplicates |")
    print("|---|---|---|---|---|---|---|")
    bad = False
    for mode, rs in results.items():
        lost = [r["lost"] for r in rs]
        race = [r["race"] for r in rs]
        print(f"| {mode} | {int(statistics.median(r['total'] for r in rs))} | "
              f"{statistics.median(lost):.0f} ({min(lost):.0f}-{max(lost):.0f}) | "
              f"{statistics.median(race):.0f} | {max(r['silent'] for r in rs):.0f} | "
              f"{statistics.median(r['unread'] for r in rs):.0f} | "
              f"{max(r['dup'] for r in rs):.0f} |")
        bad = bad or any(r["dup"] or r["silent"] for r in rs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
