"""Append-to-record latency and sustained rate: `watchrun` following a file that is being
written, next to `tail -F | grep --line-buffered`, trials interleaved (not a test).

    .venv/bin/python bench/bench_tail.py                                  # 50 000 lines/s, 10 s
    .venv/bin/python bench/bench_tail.py --rate 1000000 --seconds 5       # sustained, 1 M lines/s
    .venv/bin/python bench/bench_tail.py --source realistic --error-rate 0.01   # tailing CPU
    .venv/bin/python bench/bench_tail.py --source realistic --floor   # and a Python floor

A writer process appends lines at `--rate` lines/s: every 1 ms one `writev()` with all the lines
due. The lines are the project log's (bench/loggen.py, ~0.2 % matching) or, with `--source
realistic`, the realistic log's (bench/gen_log.py: access, app, Java and JSON lines, with
`--error-rate` ERROR/FATAL lines). 100 times a second the last line of a write is a probe,
`... ERROR [probe] seq=N t=T`, T being CLOCK_MONOTONIC just before the `writev()`. ~0.2 % of the
other lines match too, and 0.01 % are `healthcheck ERROR` lines that must be excluded.

Competitors, one trial each per round, in turn, each on a fresh empty file:
- watchrun: `watchrun run -c watch.yaml` with one file watcher (pattern `ERROR|FATAL`, exclude
  `healthcheck`, case-insensitive). A probe is seen when its match record is in the watcher's
  JSONL: the harness watches that file with inotify and reads what was appended.
- baseline: `tail -n0 -F LOG | grep --line-buffered -iE 'ERROR|FATAL' | grep --line-buffered
  -iv healthcheck`; a probe is seen when its line comes out of the pipe.
- with `--floor`, python floor: bench/floor_tail.py, the least a Python asyncio tailer pays per
  write (the same matcher; no rotation checks, checkpoints, sanitizing, status or log), seen as
  watchrun's records are.

Latency = seen - T. Per trial: p50, p99, max, probes lost (not seen 3 s after the writer
stopped), all matched lines delivered (count equal to the writer's), excluded lines leaked,
CPU of the watcher while writing (% of one core), peak RSS (VmHWM; summed over the pipeline's
processes). Per competitor: the median over rounds (min-max), and the median of per-round
ratios to the baseline (latency and CPU; the CPU target is <= 2x `tail -F | grep`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    child_env,
    context_lines,
    fmt,
    loadavg,
    percentile,
    print_table,
    watchrun_cmd,
)

PATTERN = re.compile(rb"ERROR|FATAL", re.IGNORECASE)
EXCLUDE = re.compile(rb"healthcheck", re.IGNORECASE)
PROBE = re.compile(r"\[probe\] seq=(\d+) t=([0-9.]+)")
POOL_LINES = 200_000
PROBES_PER_S = 100
GRACE_S = 3.0
TICK_S = 0.001


# -- the writer (a separate process) ----------------------------------------------------------


def _realistic(rng: random.Random, error_rate: float) -> Iterator[str]:
    """gen_log.py's lines, with its mix of kinds for `error_rate`."""
    from gen_log import make_line

    n = 0
    while True:
        r = rng.random()
        kind = ("error" if r < error_rate else "lower" if r < error_rate + 0.0005 else
                "health" if r < error_rate + 0.0006 else "normal")  # fmt: skip
        yield make_line(rng, kind, n // 2000) + "\n"
        n += 1


def build_pool(source: str, error_rate: float, seed: int = 7) -> tuple[bytes, list[int], list[int]]:
    """POOL_LINES lines of `source`: the bytes, line start offsets (+ the end), and a running
    count of lines a watcher must report (pattern and not exclude) before each index."""
    from loggen import lines

    rng = random.Random(seed)
    gen = _realistic(rng, error_rate) if source == "realistic" else lines(rng)
    data = bytearray()
    offsets, wanted = [0], [0]
    for _ in range(POOL_LINES):
        line = next(gen).encode()
        data += line
        offsets.append(len(data))
        hit = PATTERN.search(line) is not None and EXCLUDE.search(line) is None
        wanted.append(wanted[-1] + hit)
    return bytes(data), offsets, wanted


def writer(path: Path, rate: int, seconds: float, source: str, error_rate: float) -> int:
    pool, offsets, wanted = build_pool(source, error_rate)
    view = memoryview(pool)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    total = int(rate * seconds)
    written = probes = expected = 0
    idx = 0  # next pool line
    started = time.monotonic()
    next_probe, next_tick = started, started
    while written < total:
        now = time.monotonic()
        due = min(total, int((now - started) * rate) + 1)
        n = due - written
        if n > 0:
            probe = now >= next_probe
            k = n - 1 if probe else n
            parts: list[Any] = []
            while k > 0:
                take = min(k, POOL_LINES - idx)
                parts.append(view[offsets[idx] : offsets[idx + take]])
                expected += wanted[idx + take] - wanted[idx]
                idx = (idx + take) % POOL_LINES
                k -= take
            if probe:
                stamp = time.monotonic()
                parts.append(b"2024-01-01T00:00:00.000Z ERROR [probe] seq=%d t=%.9f\n"
                             % (probes, stamp))  # fmt: skip
                probes += 1
                expected += 1
                next_probe += 1 / PROBES_PER_S
            size = sum(len(p) for p in parts)
            done = os.writev(fd, parts)
            if done != size:  # a short write to a regular file: finish it
                rest = b"".join(bytes(p) for p in parts)[done:]
                while rest:
                    rest = rest[os.write(fd, rest) :]
            written += n
        next_tick += TICK_S
        delay = next_tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_tick = time.monotonic()
    elapsed = time.monotonic() - started
    os.close(fd)
    print(json.dumps({"lines": written, "probes": probes, "expected": expected,
                      "elapsed": elapsed, "rate": written / elapsed}))  # fmt: skip
    return 0


# -- the competitors ---------------------------------------------------------------------------


@dataclass
class Trial:
    name: str
    lat_ms: list[float] = field(default_factory=list)
    probes: int = 0
    matches: int = 0
    expected: int = 0
    leaked: int = 0
    cpu_pct: float = 0.0
    rss_mib: float = 0.0
    rate: float = 0.0

    @property
    def lost(self) -> int:
        return self.probes - len(self.lat_ms)


def proc_cpu(pids: list[int]) -> float:
    """utime + stime seconds of these processes (all threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def proc_hwm(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def group_pids(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "stat").read_bytes()
            except OSError:
                continue
            fields = raw[raw.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                out.append(int(entry.name))
    return out


class Lines:
    """Splits a byte stream into complete lines."""

    def __init__(self) -> None:
        self.rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        data = self.rest + data
        cut = data.rfind(b"\n") + 1
        self.rest = data[cut:]
        return data[:cut].splitlines() if cut else []


class Watchrun:
    name = "watchrun run"

    def __init__(self, work: Path, log: Path) -> None:
        self.work, self.log = work, log
        config = work / "watch.yaml"
        config.write_text(json.dumps({"watchers": [{
            "id": "tail", "path": str(log), "pattern": "ERROR|FATAL", "exclude": ["healthcheck"],
        }]}) + "\n")  # fmt: skip
        self._start([*watchrun_cmd(), "run", "-c", str(config), "--output-dir", str(work / "out")],
                    work / "out" / "watchers" / "tail.jsonl")  # fmt: skip

    def _start(self, cmd: list[str], jsonl: Path) -> None:
        """Run `cmd`, which writes JSONL records to `jsonl` (a `start` record first)."""
        self.jsonl = jsonl
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=open(self.work / "stderr", "wb"),  # noqa: SIM115
            start_new_session=True, env=child_env(),
        )
        deadline = time.monotonic() + 30
        while not (self.jsonl.exists() and b'"kind":"start"' in self.jsonl.read_bytes()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                err = (self.work / "stderr").read_text()
                raise RuntimeError(f"{self.name} did not start: {err}")
            time.sleep(0.01)
        from watchrun.inotify import INotify

        self.ino = INotify()
        self.ino.add_watch(str(self.jsonl), 0x2)  # IN_MODIFY
        self.fh = self.jsonl.open("rb")
        self.fh.seek(0, os.SEEK_END)
        self.lines = Lines()

    def pids(self) -> list[int]:
        return [self.proc.pid]

    def read(self, timeout_s: float) -> tuple[float, list[str]]:
        """Wait for appended records; return when they were read and the matched lines."""
        self.ino.read(timeout=timeout_s)
        data = self.fh.read()
        seen = time.monotonic()
        out = []
        for rec in self.lines.feed(data):
            if b'"kind":"match"' in rec:
                out.append(json.loads(rec)["line"])
        return seen, out

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.fh.close()
        self.ino.close()


class Floor(Watchrun):
    """bench/floor_tail.py: the least a Python asyncio tailer pays (see its docstring)."""

    name = "python floor (floor_tail.py)"

    def __init__(self, work: Path, log: Path) -> None:
        self.work, self.log = work, log
        here = Path(__file__).resolve().parent
        self._start([sys.executable, str(here / "floor_tail.py"), str(log),
                     str(work / "floor.jsonl")], work / "floor.jsonl")  # fmt: skip


class TailGrep:
    name = "tail -F | grep --line-buffered"

    def __init__(self, work: Path, log: Path) -> None:
        cmd = (f"tail -n0 -F {log} | grep --line-buffered -iE 'ERROR|FATAL' "
               "| grep --line-buffered -iv healthcheck")  # fmt: skip
        self.proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE,
                                     start_new_session=True)  # fmt: skip
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        self.lines = Lines()

    def pids(self) -> list[int]:
        return [p for p in group_pids(self.proc.pid) if p != self.proc.pid]

    def read(self, timeout_s: float) -> tuple[float, list[str]]:
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if not ready:
            return time.monotonic(), []
        data = os.read(self.fd, 1 << 20)
        seen = time.monotonic()
        return seen, [x.decode("utf-8", "replace") for x in self.lines.feed(data)]

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(30)


def trial(kind: type[Watchrun] | type[TailGrep], work: Path, rate: int, seconds: float,
          source: str, error_rate: float) -> Trial:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "app.log"
    log.touch()
    comp = kind(work, log)
    result = Trial(comp.name)
    try:
        # ready: a warm-up line written now comes out (tail -F may not have opened the file yet)
        deadline = time.monotonic() + 30
        while True:
            with log.open("ab") as fh:
                fh.write(b"ERROR warm-up\n")
            _, got = comp.read(0.3)
            if any("warm-up" in x for x in got):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{comp.name} never reported the warm-up line")
        while comp.read(0.2)[1]:  # drain the other warm-up lines
            pass
        cpu0 = proc_cpu(comp.pids())
        wall0 = time.monotonic()
        w = subprocess.Popen([sys.executable, __file__, "--writer", str(log), str(rate),
                              str(seconds), source, str(error_rate)],
                             stdout=subprocess.PIPE)  # fmt: skip
        sent: dict[int, float] = {}
        end: float | None = None
        cpu = 0.0
        while True:
            if end is None and w.poll() is not None:
                end = time.monotonic()
                cpu = proc_cpu(comp.pids()) - cpu0
                cpu_wall = end - wall0
                assert w.stdout is not None
                stats = json.loads(w.stdout.read())
                result.probes, result.expected, result.rate = (
                    stats["probes"], stats["expected"], stats["rate"])
            if end is not None and (len(sent) >= result.probes or
                                    time.monotonic() > end + GRACE_S):  # fmt: skip
                break
            seen, got = comp.read(0.05)
            for text in got:
                m = PROBE.search(text)
                if m is not None:
                    sent[int(m.group(1))] = (seen - float(m.group(2))) * 1000
                if "healthcheck" in text.lower():
                    result.leaked += 1
            result.matches += len(got)
        result.lat_ms = list(sent.values())
        result.cpu_pct = 100 * cpu / cpu_wall
        result.rss_mib = proc_hwm(comp.pids())
    finally:
        comp.stop()
    return result


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        return writer(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5],
                      float(sys.argv[6]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=50_000, help="lines/s (default 50000)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--source", choices=("project", "realistic"), default="project")
    parser.add_argument("--error-rate", type=float, default=0.01,
                        help="share of ERROR/FATAL lines with --source realistic")  # fmt: skip
    parser.add_argument("--work", type=Path, default=Path("/tmp/watchrun-bench-tail"))
    parser.add_argument("--floor", action="store_true",
                        help="also run bench/floor_tail.py, a minimal Python asyncio tailer")
    args = parser.parse_args()
    for line in context_lines(sys.argv):
        print(line)
    kinds: list[type[Watchrun] | type[TailGrep]] = [Watchrun, TailGrep]
    if args.floor:
        kinds.append(Floor)
    trials: dict[str, list[Trial]] = {k.name: [] for k in kinds}
    for r in range(args.rounds):
        for kind in kinds:
            t = trial(kind, args.work / kind.__name__.lower(), args.rate, args.seconds,
                      args.source, args.error_rate)
            trials[kind.name].append(t)
            print(f"round {r + 1} {t.name}: p50 {percentile(t.lat_ms, 50):.2f} ms, "
                  f"p99 {percentile(t.lat_ms, 99):.2f} ms, max {max(t.lat_ms, default=0):.1f} ms,"
                  f" lost {t.lost}/{t.probes}, matched {t.matches}/{t.expected}, "
                  f"writer {t.rate:.0f} lines/s", flush=True)  # fmt: skip
    base = trials[TailGrep.name]
    rows = []
    for name, ts in trials.items():
        p50 = [percentile(t.lat_ms, 50) for t in ts]
        p99 = [percentile(t.lat_ms, 99) for t in ts]
        r50 = sorted(a / percentile(b.lat_ms, 50) for a, b in zip(p50, base, strict=True))
        r99 = sorted(a / percentile(b.lat_ms, 99) for a, b in zip(p99, base, strict=True))
        rcpu = sorted(a.cpu_pct / b.cpu_pct for a, b in zip(ts, base, strict=True)
                      if b.cpu_pct > 0)  # (a short, slow run's anchor can take no CPU tick)
        rows.append([
            name, fmt(_med(p50), 2), f"{fmt(min(p50), 2)}-{fmt(max(p50), 2)}", fmt(_med(p99), 2),
            f"{fmt(min(p99), 2)}-{fmt(max(p99), 2)}",
            fmt(max(max(t.lat_ms, default=0) for t in ts), 1),
            f"{sum(t.lost for t in ts)}/{sum(t.probes for t in ts)}",
            f"{sum(t.matches for t in ts) - sum(t.expected for t in ts):+d}",
            str(sum(t.leaked for t in ts)), fmt(_med([t.cpu_pct for t in ts]), 1),
            fmt(max(t.rss_mib for t in ts), 1), f"{_med(r50):.2f}x", f"{_med(r99):.2f}x",
            f"{_med(rcpu):.2f}x" if rcpu else "n/a",
        ])  # fmt: skip
    rates = [t.rate for ts in trials.values() for t in ts]
    what = (f"realistic lines (gen_log.py), error rate {args.error_rate}"
            if args.source == "realistic" else "project lines (loggen.py)")  # fmt: skip
    print(f"\n{what}; {args.rate} lines/s target (writer achieved "
          f"{min(rates):.0f}-{max(rates):.0f}), "
          f"{args.seconds:g} s per trial, {args.rounds} rounds interleaved, "
          f"{PROBES_PER_S} probes/s")  # fmt: skip
    print_table(["watcher", "p50 ms", "p50 min-max", "p99 ms", "p99 min-max", "max ms",
                 "lost/probes", "matched - expected", "excl. leaked", "CPU % of 1 core",
                 "peak RSS MiB", "p50 ÷ baseline", "p99 ÷ baseline", "CPU ÷ baseline"],
                rows)  # fmt: skip
    print(f"load average at end: {loadavg()}")
    shutil.rmtree(args.work, ignore_errors=True)
    ok = all(t.lost == 0 and t.leaked == 0 and t.matches == t.expected
             for t in trials[Watchrun.name])  # fmt: skip
    return 0 if ok else 1


def _med(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return (ordered[n // 2] + ordered[(n - 1) // 2]) / 2 if n else float("nan")


if __name__ == "__main__":
    sys.exit(main())
