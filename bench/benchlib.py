"""Shared helpers for the benchmarks: timed child processes, statistics, tables, run context."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
LOGS = Path(os.environ.get("WATCHRUN_BENCH_LOGS", "/tmp"))
"""Where the generated logs are kept between runs (making one takes seconds to minutes);
the smoke test of the scripts points it at its own directory."""


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for measured commands: like a normal install, Python may write and use
    `.pyc` files (PYTHONDONTWRITEBYTECODE would recompile every changed module on every start),
    and no systemd variables leak in."""
    drop = {"PYTHONDONTWRITEBYTECODE", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra or {})
    return env


def watchrun_cmd() -> list[str]:
    """The installed console script next to this interpreter, else `python -m watchrun`."""
    script = VENV_BIN / "watchrun"
    return [str(script)] if script.exists() else [sys.executable, "-m", "watchrun"]


@dataclass
class Timed:
    """One finished child process: wall seconds, peak RSS (MiB), exit status."""

    wall: float
    rss_mib: float
    status: int
    cpu: float = 0.0
    """User + system seconds of the child (and its waited-for children)."""


def run_timed(
    argv: Sequence[str],
    *,
    stdout: str | Path | None = None,
    stderr: str | Path | None = None,
    env: dict[str, str] | None = None,
    shell: bool = False,
) -> Timed:
    """Start `argv`, wait with wait4 and return its wall time and peak RSS. stdout/stderr go to
    the given files (never /dev/null: GNU grep stops at the first match when it writes there).

    Peak RSS comes from GNU time (`/usr/bin/time -f %M`) when it is installed: a child forked
    from this Python process inherits its RSS high-water mark across exec, so wait4's ru_maxrss
    would never be below the harness's own ~20 MiB. GNU time is a small C program, it adds the
    same ~1 ms to every competitor."""
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115
    err = open(stderr, "wb") if stderr else subprocess.DEVNULL  # noqa: SIM115
    rss_file = None
    if GNU_TIME and not shell:
        fd, rss_file = tempfile.mkstemp(prefix="watchrun-bench-rss.")
        os.close(fd)
        argv = [GNU_TIME, "-q", "-f", "%M", "-o", rss_file, *argv]
    try:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env or child_env(),
                                shell=shell)  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for fh in (out, err):
            if not isinstance(fh, int):
                fh.close()
    rss = usage.ru_maxrss / 1024
    if rss_file is not None:
        with contextlib.suppress(OSError, ValueError):
            rss = int(Path(rss_file).read_text().split()[-1]) / 1024
        os.unlink(rss_file)
    return Timed(wall, rss, proc.returncode, usage.ru_utime + usage.ru_stime)


@dataclass
class Series:
    """Samples of one competitor across rounds."""

    name: str
    values: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def lo(self) -> float:
        return min(self.values) if self.values else float("nan")

    @property
    def hi(self) -> float:
        return max(self.values) if self.values else float("nan")


def ratio_median(ours: Series, base: Series) -> float:
    """The median of per-round ratios ours/base (rounds are interleaved, so noise hits both)."""
    pairs = [a / b for a, b in zip(ours.values, base.values, strict=False) if b > 0]
    return statistics.median(pairs) if pairs else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def git_commit() -> str:
    """`git rev-parse --short HEAD`, with `+dirty` when the work tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
            capture_output=True, text=True, check=False,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def context_lines(argv: Sequence[str]) -> list[str]:
    """Where and when a result was measured: command, commit, machine, load."""
    import platform

    grep = subprocess.run(["grep", "--version"], capture_output=True, text=True, check=False)
    engines = "?"
    try:
        from watchrun.match.matcher import engines_available

        engines = ", ".join(engines_available())
    except ImportError:
        pass
    return [
        f"command: {' '.join(argv)}",
        f"commit: {git_commit()}",
        f"machine: {os.cpu_count()} CPUs, {platform.platform()}, Python "
        f"{platform.python_version()}, {grep.stdout.splitlines()[0] if grep.stdout else 'grep ?'}",
        f"engines available: {engines}",
        f"load average at start: {loadavg()}",
    ]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO = sys.stdout
                ) -> None:
    """A Markdown table (readable as text, pasteable into RESULTS.md)."""
    out.write("| " + " | ".join(h.replace("|", "\\|") for h in headers) + " |\n")
    out.write("|" + "|".join("---" for _ in headers) + "|\n")
    for row in rows:
        out.write("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |\n")
    out.flush()


def fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x != x else f"{x:.{digits}f}"


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def write_config(path: Path, config: dict[str, Any]) -> Path:
    """Write a config in JSON syntax; name it `.yaml` so it is read by the YAML loader (JSON is
    YAML), as a user's `watch.yaml` would be, start-up cost included."""
    path.write_text(json.dumps(config, indent=1) + "\n")
    return path


def free_space(path: Path) -> int:
    return shutil.disk_usage(path).free
