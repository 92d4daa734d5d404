"""Regression guards for the performance targets of issue #14 (bench/RESULTS.md has the figures).

Each guard is a ratio to an anchor measured in the same test, a median over interleaved rounds,
of CPU time where the target is about work (not wall time: several test suites share this
machine). The bounds are loose, 1.4 to 2.2 times what is measured alone (noted beside each), so
a loaded machine passes. A change that doubles what a guard times fails it whenever the ratio
stood above half the bound: always for the flood, tailing, idle and in-process scan guards, in a
quiet run for the start per watcher, and in part of the runs for the command-line scans and the
empty start, whose ratios move with the host (here one unchanged `run --once` took 148-233 ms of
user CPU in 12 runs in a row, and the 0.2 % scan guard measured 0.42-0.93x in runs minutes
apart): the in-process scan guards are there for that. Each guard takes a few seconds. The
guards that time watchrun's code in-process do it in a fresh interpreter
(`in_fresh_interpreter`), as the runner runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from watchrun.clock import SystemClock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk
from watchrun.match.framing import LineFramer
from watchrun.match.matcher import Matcher
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.runtime.pipeline import WatcherPipeline

ROOT = Path(__file__).resolve().parents[1]
P = TypeVar("P", bound=WatcherPipeline)
PY = sys.executable


def _env() -> dict[str, str]:
    """As an installed runner starts: `.pyc` files written and used."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",
                                                            "NOTIFY_SOCKET")}
    return env


def cpu_of(argv: list[str], **kw: object) -> float:
    """CPU seconds (user + system) of a child process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                   check=False, **kw)  # type: ignore[call-overload]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_ratio(ours: Callable[[], float], anchor: Callable[[], float], rounds: int) -> float:
    """Median of per-round ratios, the two measured in turn in each round."""
    ratios = []
    for _ in range(rounds):
        a = anchor()
        ratios.append(ours() / max(a, 1e-6))
    return statistics.median(ratios)


def realistic_log(path: Path, size: int, error_rate: float, copies: int = 1) -> Path:
    """bench/gen_log.py's lines (seeded), `size` bytes of them `copies` times over, written once
    per session."""
    if path.exists():
        return path
    spec = importlib.util.spec_from_file_location("gen_log", ROOT / "bench" / "gen_log.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    rng = random.Random(42)
    out, n, written = [], 0, 0
    while written < size:
        r = rng.random()
        kind = ("error" if r < error_rate else "lower" if r < error_rate + 0.0005 else
                "health" if r < error_rate + 0.0006 else "normal")  # fmt: skip
        line = gen.make_line(rng, kind, n // 2000).encode() + b"\n"
        out.append(line)
        written += len(line)
        n += 1
    path.write_bytes(b"".join(out) * copies)
    return path


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[float, Path]:
    """128 MiB each (8 MiB of lines 16 times over: making the lines costs ~0.2 s of CPU a MiB
    in Python): the scan's CPU must stand well above the noise of the start-up subtracted from
    it. With 8 MiB in all a loaded machine put the 0.2 % ratio anywhere from 1.3x to 3.2x; with
    32 MiB, once the scans got 2-4x faster, the re2 ratio (0.9x alone) reached 2.4x in a loaded
    suite."""
    d = tmp_path_factory.mktemp("logs")
    return {rate: realistic_log(d / f"real-{rate}.log", 8 << 20, rate, copies=16)
            for rate in (0.002, 0.1)}


def once(tmp: Path, log: Path, engines: str | None = None) -> float:
    config = tmp / "w.yaml"
    config.write_text(json.dumps({"watchers": [{
        "id": "big", "path": str(log), "pattern": "error|fatal", "exclude": ["healthcheck"],
        "fromStart": True}]}))  # fmt: skip
    shutil.rmtree(tmp / "out", ignore_errors=True)
    argv = [PY, "-m", "watchrun", "run", "--once", "-c", str(config), "--output-dir",
            str(tmp / "out")]
    if engines is None:
        return cpu_of(argv)
    return cpu_of(["env", f"WATCHRUN_ENGINES={engines}", *argv])


@pytest.mark.parametrize(("rate", "engines", "anchor", "bound"), [
    # measured alone / beside two busy loops: 0.73x / 0.69x, 1.71x / 1.94x, 1.9-2.0x / 2.3x,
    # 2.93x / 3.07x (the stdlib: the regex worker's start, amortised over the 128 MiB). re2's
    # was 0.96x / 1.17x while it scanned on the loop; in a worker thread (docs/decisions.md,
    # "Linear is not fast enough to run on the loop") each 1 MiB chunk's hop costs ~0.3 ms of
    # CPU more, so its bound is the target itself, 3x `grep -E`
    (0.002, None, "grep -iE 'error|fatal' {log} | grep -iv healthcheck", 1.5),
    (0.1, None, "grep -iE 'error|fatal' {log} | grep -iv healthcheck", 3.6),
    (0.002, "re2", "grep -E 'ERROR|FATAL' {log}", 3.0),
    (0.002, "re+prefilter,re", "grep -E 'ERROR|FATAL' {log}", 6.0),
])  # fmt: skip
def test_scanning_a_log_costs_a_small_multiple_of_grep(
        tmp_path: Path, logs: dict[float, Path], rate: float, engines: str | None, anchor: str,
        bound: float) -> None:
    """`run --once` on a realistic log, its start-up subtracted (an empty file's run), next to
    grep's CPU on the same file (its start subtracted too): targets <= 0.8-1.2x the grep
    pipeline at 0.2-1 % matching lines, <= 2x at 10 %, <= 3x `grep -E` without hyperscan."""
    log, empty = logs[rate], tmp_path / "empty.log"
    empty.write_bytes(b"")
    for path in (empty, log):  # warm-up: .pyc files, config and hyperscan caches
        once(tmp_path, path, engines)
    out = tmp_path / "grep.out"  # (grep writing to /dev/null stops at the first match)

    def ours() -> float:
        return once(tmp_path, log, engines) - once(tmp_path, empty, engines)

    def grep() -> float:
        return (cpu_of(["/bin/sh", "-c", f"{anchor.format(log=log)} > {out}"])
                - cpu_of(["/bin/sh", "-c", f"{anchor.format(log=empty)} > {out}"]))

    ratio = median_ratio(ours, grep, 3)  # (the least of the rounds is no steadier: each is a
    # difference of two runs, and the empty run's noise made it negative at 0.2 %; 3 rounds,
    # not 5: the four guards cost 23 s of CPU, the most of any tests, on a CPU-bound suite)
    assert ratio <= bound, f"scanning costs {ratio:.2f}x the anchor's CPU (bound {bound}x)"


def _pipeline(tmp: Path, spec: WatcherSpec, kind: type[P]) -> P:
    """`spec`'s pipeline, its sink `tmp/w.jsonl` (closed by the caller: `pipe.sink.close()`)."""
    sink = JsonlSink(tmp / "w.jsonl", "w", max_bytes=1 << 40, keep=1, clock=SystemClock())
    return kind(spec, Limits(), sink, AsyncWriter(sink),
                Matcher(spec.pattern, spec.exclude, spec.case_sensitive), RunLog(quiet=True))


def in_fresh_interpreter(probe: Callable[..., float], *paths: Path) -> float:
    """What `probe(*paths)` (a function of this module) returns, run in a new interpreter: in
    the test worker an in-process ratio moved with what earlier tests left on its heap (the
    flood's measured 1.4x alone and 4.3x late in a CI suite; a heap of 3-10 M objects put it at
    2-3.9x), where the runner's own heap is small, and frozen after its start."""
    code = ("import pathlib, sys; sys.path.insert(0, sys.argv[1]); import test_perf_guards as g; "
            "print(getattr(g, sys.argv[2])(*map(pathlib.Path, sys.argv[3:])))")
    done = subprocess.run([PY, "-c", code, str(Path(__file__).parent), probe.__name__,
                           *map(str, paths)],
                          capture_output=True, text=True, env=_env(), check=False, timeout=100)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


def scan_ratio(tmp_path: Path, log: Path) -> float:
    """CPU of a once-mode file source and its pipeline reading `log` to its end (`error|fatal`
    ignoring case, exclude `healthcheck`), next to reading it in 1 MiB blocks and scanning them
    with a hyperscan database of both patterns, keeping each hit's end: the least a scanner in
    Python does (median of rounds, after one of each to warm up). In one process the two see
    the same host: the ratio moved 2.41-2.56x at 0.2 % in runs minutes apart, where the
    command-line guard's moved 0.42-0.93x."""
    import hyperscan as hs

    from watchrun.notify import Notifier
    from watchrun.sources.checkpoints import CheckpointStore
    from watchrun.sources.file import FileSource

    spec = WatcherSpec(id="w", label="w", pattern="error|fatal", exclude=("healthcheck",),
                       path=log, from_start=True)

    def ours() -> float:
        d = tmp_path / "scan"
        (d / "state").mkdir(parents=True)
        pipe = _pipeline(d, spec, WatcherPipeline)
        source = FileSource(spec, Limits(), CheckpointStore(d / "state"),
                            Notifier(500, enabled=False), SystemClock(), once=True)
        started = time.process_time()
        asyncio.run(source.run(pipe))
        took = time.process_time() - started
        pipe.sink.close()
        assert pipe.counters.matches > 0
        shutil.rmtree(d)
        return took

    database = hs.Database()
    database.compile(expressions=[b"error|fatal", b"healthcheck"], ids=[0, 1],
                     flags=[hs.HS_FLAG_CASELESS | hs.HS_FLAG_MULTILINE] * 2)

    def anchor() -> float:
        hits: list[int] = []

        def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            hits.append(to)

        started = time.process_time()
        fd, pos = os.open(log, os.O_RDONLY), 0
        try:
            while data := os.pread(fd, 1 << 20, pos):
                pos += len(data)
                database.scan(data, match_event_handler=on_match)
        finally:
            os.close(fd)
        assert hits
        return time.process_time() - started

    anchor(), ours()  # warm-up: the page cache, the matcher's first chunk
    return median_ratio(ours, anchor, 5)


@pytest.mark.parametrize(("rate", "bound"), [
    # alone / beside two busy loops and a suite: 2.41-2.56x / 2.78-2.91x, 5.18-5.55x / 5.38-6.52x
    (0.002, 4.0), (0.1, 9.0),
])  # fmt: skip
def test_scanning_in_process_costs_a_small_multiple_of_the_engine_alone(
        tmp_path: Path, logs: dict[float, Path], rate: float, bound: float) -> None:
    """The scan rows again, without the process start and the host's drift: what the source
    and the pipeline add to reading and scanning the same log (a doubled cost fails this)."""
    pytest.importorskip("hyperscan")  # (elsewhere the engine is RE2: the guards above)
    ratio = in_fresh_interpreter(scan_ratio, tmp_path, logs[rate])
    assert ratio <= bound, (f"scanning costs {ratio:.2f}x reading and scanning alone "
                            f"(bound {bound}x; ~2.5x at 0.2 %, ~5.4x at 10 %)")


def flood_ratio(tmp_path: Path) -> float:
    """CPU of the pipeline with every line matching, next to formatting the same records' bytes
    with one `%` each (the least any JSON writer in Python does per record) and writing them to
    a file beside (median of rounds). Each round's files are removed after it: left in place,
    the writeback of the rounds before raised the pipeline's system time from ~10 to ~80 ms."""
    lines = [b"ERROR line %d" % i for i in range(200_000)]
    data = b"".join(x + b"\n" for x in lines)

    def ours() -> float:
        d = tmp_path / "ours"
        d.mkdir()
        spec = WatcherSpec(id="w", label="w", pattern="ERROR", command="flood")
        pipe = _pipeline(d, spec, WatcherPipeline)
        framer = LineFramer(65536)
        framer.stamp(run=1)
        started = time.process_time()

        async def feed() -> None:
            for k in range(0, len(data), 64 * 1024):
                chunk = framer.feed(data[k : k + 64 * 1024])
                if chunk is not None:
                    await pipe.chunk(chunk)
                    framer.settle(pipe.lines_in_last_chunk())

        asyncio.run(feed())
        took = time.process_time() - started
        pipe.sink.close()
        assert pipe.counters.matches == len(lines)
        shutil.rmtree(d)
        return took

    template = b'{"seq":%d,"line":"%b","lineNo":%d,"offset":%d}\n'

    def anchor() -> float:
        out = tmp_path / "anchor.jsonl"
        started = time.process_time()
        with out.open("wb") as f:
            f.write(b"".join([template % (i, x, i, i * 20) for i, x in enumerate(lines)]))
        took = time.process_time() - started
        out.unlink()
        return took

    return median_ratio(ours, anchor, 7)


def test_a_flood_of_matches_costs_a_small_multiple_of_formatting_its_records(
        tmp_path: Path) -> None:
    """Every line of a command's output matching (target: 5 M lines <= 8x the time of
    `seq | sed | grep`): the pipeline's CPU per line, next to formatting its records' bytes."""
    ratio = in_fresh_interpreter(flood_ratio, tmp_path)
    assert ratio <= 2.5, f"a flood costs {ratio:.2f}x formatting its records (bound 2.5x; ~1.45x)"


def test_run_once_on_an_empty_file_costs_a_few_interpreter_starts(tmp_path: Path) -> None:
    """Instant start (the issue's target: <= 5x `python -c pass` in CPU; bench/RESULTS.md has
    where it stands): imports only for what runs, the config validated once (cache), no cyclic
    GC while starting. Measured next to `python -c "import asyncio"`, the runner's floor:
    `python -c pass` alone moves with how the packages are installed (an editable install's
    finder doubles it), asyncio's import does not, so the guard holds on any install."""
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    once(tmp_path, empty)  # warm-up: .pyc files, the config cache
    ratio = median_ratio(lambda: once(tmp_path, empty),
                         lambda: cpu_of([PY, "-c", "import asyncio"]), 5)
    assert ratio <= 3.0, (f"run --once on an empty file costs {ratio:.2f}x an interpreter that "
                          "imports asyncio (~2x)")


@contextlib.contextmanager
def _ready(config: Path, out: Path) -> Iterator[int]:
    """`watchrun run` started and past READY=1 (its pid); stopped with SIGTERM afterwards."""
    sock_path = out.parent / f"n{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(60)
    proc = subprocess.Popen([PY, "-m", "watchrun", "run", "-c", str(config), "--output-dir",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**_env(), "NOTIFY_SOCKET": str(sock_path)})  # fmt: skip
    try:
        while b"READY=1" not in sock.recv(4096):
            pass
        yield proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()


def _ready_cpu(config: Path, out: Path) -> float:
    """CPU seconds of `watchrun run` from its start to READY=1."""
    with _ready(config, out) as pid:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def test_each_file_watcher_adds_little_to_the_start(tmp_path: Path) -> None:
    """Start cost per file watcher (target <= 0.5 ms, 20 -> 500 watchers): here 20 -> 300, to
    READY=1, a restart (checkpoints and caches in place), per watcher next to the whole start
    of the 20-watcher runner (the same interpreter, imports and config work: a unit that moves
    with the machine, not with how the packages are installed). One compiled database for the
    identical patterns, no listing of the JSONL directory per sink, no fsync for state that did
    not change, no records read after a clean stop, the watchers' reads at start sharing one
    worker thread (`watchrun.offload`) rather than a thread hop each."""
    configs = {}
    for n in (20, 300):
        for i in range(n):
            (tmp_path / f"f{i}.log").touch()
        configs[n] = tmp_path / f"w{n}.yaml"
        configs[n].write_text(json.dumps({"limits": {"maxWatchers": 500}, "watchers": [
            {"id": f"w{i}", "path": str(tmp_path / f"f{i}.log"), "pattern": "ERROR|FATAL",
             "exclude": ["healthcheck"]} for i in range(n)]}))  # fmt: skip
    for n in (20, 300):  # warm-up, and the state a restart finds
        _ready_cpu(configs[n], tmp_path / f"out{n}")
    ratios = []
    for _ in range(3):
        small = _ready_cpu(configs[20], tmp_path / "out20")
        big = _ready_cpu(configs[300], tmp_path / "out300")
        ratios.append((big - small) / 280 / max(small, 1e-3))
    ratio = statistics.median(ratios)
    assert ratio <= 0.009, (f"each watcher costs {ratio:.4f}x the start of a 20-watcher runner "
                            "(bound 0.009x; 0.0066x alone on the test host, 2026-12-06)")


def tailing_ratio(tmp_path: Path) -> float:
    """CPU of a file source and its pipeline following a file written in blocks of 25 lines,
    next to the floor of the same loop (inotify, one read per event, no matching; median of
    rounds). The writer waits for each block to be read before it writes the next, so each round
    handles the same 1 200 events: with a timed writer the rounds' ratios ran from 1.6x to 3.0x,
    as a busy machine batched the events differently for the two."""
    from watchrun.notify import Notifier
    from watchrun.sources.checkpoints import CheckpointStore
    from watchrun.sources.file import FileSource

    rng = random.Random(5)
    lines = [(b"2025-11-29T00:00:00.000Z %s [worker-%d] app: request %d served\n"
              % (b"ERROR" if rng.random() < 0.01 else b"INFO ", i % 16, i)) for i in range(30_000)]
    writes = [b"".join(lines[k : k + 25]) for k in range(0, len(lines), 25)]

    async def lockstep(path: Path, read: Callable[[], int], was_read: asyncio.Event) -> float:
        """CPU seconds to write every block, each once the reader has read all before it."""
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        started, written = time.process_time(), 0
        try:
            for block in writes:
                written += os.write(fd, block)
                while read() < written:
                    await asyncio.wait_for(was_read.wait(), 60)
                    was_read.clear()
        finally:
            os.close(fd)
        return time.process_time() - started

    class Stepped(WatcherPipeline):
        was_read: asyncio.Event  # set in the round's loop

        async def chunk(self, chunk: Chunk) -> None:
            await super().chunk(chunk)
            self.was_read.set()

    def ours() -> float:
        d = tmp_path / f"s{time.monotonic_ns()}"
        (d / "state").mkdir(parents=True)
        log = d / "app.log"
        log.touch()
        spec = WatcherSpec(id="w", label="w", pattern="ERROR|FATAL", exclude=("healthcheck",),
                           path=log)
        pipe = _pipeline(d, spec, Stepped)

        async def main() -> float:
            notifier = Notifier(500)
            pipe.was_read = asyncio.Event()
            source = FileSource(spec, Limits(), CheckpointStore(d / "state"), notifier,
                                SystemClock())
            task = asyncio.create_task(source.run(pipe))
            await source.ready.wait()
            took = await lockstep(log, lambda: pipe.counters.bytes_read, pipe.was_read)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            notifier.close()
            return took

        took = asyncio.run(main())
        pipe.sink.close()
        return took

    def floor() -> float:
        log = tmp_path / f"f{time.monotonic_ns()}.log"
        log.touch()

        async def main() -> float:
            notifier = Notifier(500)
            watch = notifier.watch(log)
            fd = os.open(log, os.O_RDONLY)
            pos, was_read = 0, asyncio.Event()

            async def follow() -> None:
                nonlocal pos
                while True:
                    await watch.wait()
                    while data := os.pread(fd, 256 * 1024, pos):
                        pos += len(data)
                    was_read.set()

            task = asyncio.create_task(follow())
            took = await lockstep(log, lambda: pos, was_read)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            os.close(fd)
            watch.close()
            notifier.close()
            return took

        return asyncio.run(main())

    return median_ratio(ours, floor, 15)  # rounds of 0.1 s: 15 hold the median steady


def test_tailing_costs_a_small_multiple_of_the_event_loop_floor(tmp_path: Path) -> None:
    """Tailing CPU (target <= 2x `tail -F | grep` at 50k lines/s, 1 % matching), next to the
    floor of the same event loop following the same writes."""
    ratio = in_fresh_interpreter(tailing_ratio, tmp_path)  # (~2.5x; a doubled cost is ~5x;
    # 3.79x was seen on a host whose 2 cores ran the suite, a benchmark and a soak at once)
    assert ratio <= 4.5, f"tailing costs {ratio:.2f}x the loop's floor (bound 4.5x; ~2.5x)"


def test_an_idle_runner_of_20_watchers_stays_small(tmp_path: Path) -> None:
    """Idle RSS of 20 file watchers (target <= 32 MiB), next to an interpreter that imported
    asyncio (~20 MiB): the watchers, their shared database and the runner add little."""
    for i in range(20):
        (tmp_path / f"f{i}.log").touch()
    config = tmp_path / "w.yaml"
    config.write_text(json.dumps({"watchers": [
        {"id": f"w{i}", "path": str(tmp_path / f"f{i}.log"), "pattern": "ERROR|FATAL",
         "exclude": ["healthcheck"]} for i in range(20)]}))  # fmt: skip

    def ours() -> float:
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        with _ready(config, tmp_path / "out") as pid:
            return _rss_mib(pid)

    def anchor() -> float:
        proc = subprocess.Popen([PY, "-c", "import asyncio, sys; print(flush=True); "
                                 "sys.stdin.read()"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=_env())  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdout.readline()  # asyncio imported
            return _rss_mib(proc.pid)
        finally:
            proc.stdin.close()
            proc.wait(60)
            proc.stdout.close()

    ours()  # warm-up: the config cache and the compiled database
    ratio = median_ratio(ours, anchor, 3)
    assert ratio <= 1.75, f"20 idle watchers use {ratio:.2f}x the RSS of python + asyncio (~1.45x)"
