"""Would a two-stage pipeline (a thread scanning while another counts lines) beat the serial
backlog loop? The stages alone, in-process, on the realistic log (not a test).

    .venv/bin/python bench/bench_overlap.py --size 300MiB --rounds 7
    .venv/bin/python bench/bench_overlap.py --size 1GiB --rounds 5

Each round runs every way in turn, each in a fresh interpreter; each way reads the log in 1 MiB
reads (cut after the last newline, no framer), finds the lines of `error|fatal` ignoring case
without `healthcheck` with the runner's Matcher (hyperscan), and counts every newline (what
exact line numbers cost) — no records, no event loop, no hand-off to asyncio: an upper bound
of what the runner could gain. The ways:

- serial: read, scan, count, one after the other (what the runner does);
- scan-thread: a thread reads and scans (hyperscan releases the GIL), the main thread counts;
- scan-thread-si: the same with the GIL switch interval at 0.1 ms instead of 5 ms;
- count-thread: a thread reads and counts, the main thread scans;
- read-thread: a thread reads (`pread` releases the GIL), the main thread scans and counts;
- read+scan, read+count: half of the work each, serial: no overlap can take less than the
  longer of the two.

Queues of 4 chunks between the stages. Printed: median and min-max wall and CPU, the median
of per-round ratios to serial; exit 1 when a way found other matches or lines than serial.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scan import realistic
from benchlib import LOGS, Series, context_lines, fmt, loadavg, print_table, ratio_median
from loggen import parse_size

READ = 1 << 20


def chunks(path: str) -> Iterator[bytes]:
    fd = os.open(path, os.O_RDONLY)
    pos = 0
    while data := os.pread(fd, READ, pos):
        last = data.rfind(b"\n")
        pos += last + 1
        yield data if last + 1 == len(data) else data[: last + 1]
    os.close(fd)


Pair = tuple[int, int]  # (matching lines, newlines)


def staged(path: str, first: Callable[[bytes], Pair], second: Callable[[bytes], Pair]) -> Pair:
    """A thread reads and runs `first` on each chunk, this one runs `second`; the sums."""
    q: queue.Queue[tuple[bytes, Pair] | None] = queue.Queue(4)

    def stage1() -> None:
        for c in chunks(path):
            q.put((c, first(c)))
        q.put(None)

    t = threading.Thread(target=stage1)
    t.start()
    a = b = 0
    while (item := q.get()) is not None:
        (a1, b1), (a2, b2) = item[1], second(item[0])
        a, b = a + a1 + a2, b + b1 + b2
    t.join()
    return a, b


def way(name: str, path: str) -> Pair:
    """What `name` found; prints its wall and CPU time (after the imports and compiling)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
    from watchrun.match.matcher import Matcher
    from watchrun.sources.reading import hold_heap

    hold_heap()  # as the runner does for a backlog
    m = Matcher("error|fatal", ["healthcheck"])

    def scan(c: bytes) -> Pair:
        return len(m.find(c)), 0

    def count(c: bytes) -> Pair:
        return 0, c.count(b"\n")

    def both(c: bytes) -> Pair:
        return len(m.find(c)), c.count(b"\n")

    if name == "scan-thread-si":
        sys.setswitchinterval(1e-4)
    ways = {"scan-thread": (scan, count), "scan-thread-si": (scan, count),
            "count-thread": (count, scan), "read-thread": (lambda c: (0, 0), both)}
    serial = {"serial": both, "read+scan": scan, "read+count": count}
    t0, c0 = time.perf_counter(), time.process_time()
    if name in serial:
        found = lines = 0
        for c in chunks(path):
            f, n = serial[name](c)
            found, lines = found + f, lines + n
    else:
        found, lines = staged(path, *ways[name])
    print(time.perf_counter() - t0, time.process_time() - c0, end=" ")
    return found, lines


WAYS = ["serial", "scan-thread", "scan-thread-si", "count-thread", "read-thread", "read+scan",
        "read+count"]
WHOLE = WAYS[:5]


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--way":
        print(*way(sys.argv[2], sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="300MiB")
    parser.add_argument("--error-rate", type=float, default=0.002)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    log = LOGS / f"watchrun-bench-real-{args.size}-{args.error_rate}.log"
    realistic(log, parse_size(args.size), args.error_rate)
    walls = {w: Series(w) for w in WAYS}
    cpus = {w: Series(w) for w in WAYS}
    results: dict[str, set[tuple[str, str]]] = {w: set() for w in WAYS}
    for r in range(args.rounds + 1):  # round 0 warms the page cache and the .pyc files
        for w in WAYS:
            out = subprocess.run([sys.executable, __file__, "--way", w, str(log)], check=True,
                                 capture_output=True, text=True).stdout.split()  # fmt: skip
            results[w].add((out[2], out[3]))
            if r:
                walls[w].values.append(float(out[0]))
                cpus[w].values.append(float(out[1]))
    print(f"load average at end: {loadavg()}")
    print_table(["way", "median wall s", "min-max s", "CPU s", "÷ serial"], [
        [w, fmt(walls[w].median), f"{fmt(walls[w].lo)}-{fmt(walls[w].hi)}",
         fmt(cpus[w].median), f"{ratio_median(walls[w], walls['serial']):.2f}x"]
        for w in WAYS])  # fmt: skip
    agreed = {r for w in WHOLE for r in results[w]}
    print(f"matching lines, newlines: {sorted(agreed)}")
    return 0 if len(agreed) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
