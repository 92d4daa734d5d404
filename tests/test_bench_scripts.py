"""The benchmark scripts bench/RESULTS.md tells how to run still run, on tiny inputs: each
checks what it measures (the same matches as grep, records that parse back, no line lost) and
exits 1 when that fails; and each one's `--help` says what it measures in whole sentences. Not
run here but for their `--help`: bench_startup, bench_idle and bench_memory (10-20 s each, and
they exit 1 on a missed performance target, which a tiny run on a busy machine is not a test
of); `tests/test_perf_guards.py` guards those costs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

SCRIPTS = {
    "bench_records.py": (["--records", "2000", "--rounds", "1"],
                         r"\| watchrun match path \(template\) \|.*\| yes \|"),
    "bench_flood.py": (["--lines", "20000", "--rounds", "1", "--work", "{tmp}/w"],
                       r"match records: \[20000\] \(expected 20000 each\)"),
    "bench_scan.py": (["--size", "1MiB", "--rounds", "1", "--work", "{tmp}/w"],
                      r"matched lines: anchor (\d+), watchrun hyperscan \1\b"),
    "bench_engines.py": (["--size-mb", "1", "--rounds", "1", "--path", "{tmp}/e.log"],
                         r"hyperscan .* matches (\d+)\n\s+re2 .* matches \1\n"),
    "bench_once.py": (["--size", "1MiB", "--rounds", "1", "--log", "{tmp}/o.log", "--work",
                       "{tmp}/w"], r"line numbers identical, texts identical"),
    "bench_overlap.py": (["--size", "1MiB", "--rounds", "1"],
                         r"matching lines, newlines: \[\('\d+', '\d+'\)\]"),
    "bench_tail.py": (["--rate", "5000", "--seconds", "1", "--rounds", "1", "--work", "{tmp}/w"],
                      r"\| watchrun run \|[^\n]*\| 0/\d+ \| \+0 \| 0 \|"),
    "bench_copytruncate.py": (["--rate", "2000", "--seconds", "1", "--every", "0.3",
                               "--rounds", "1"],  # none lost but in the race, none twice
                              r"\| inotify \| 2000 \| \d+ \(\d+-\d+\) \| \d+ \| 0 \| \d+ \| 0 \|"),
}  # fmt: skip


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_benchmark_script_runs_and_checks_its_results(tmp_path: Path, script: str) -> None:
    args, shows = SCRIPTS[script]
    env = {**os.environ, "WATCHRUN_BENCH_LOGS": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCH / script),
                           *(a.format(tmp=tmp_path) for a in args)],
                          capture_output=True, text=True, env=env, timeout=100, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(shows, done.stdout), done.stdout[-3000:]


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")
                                          if "ArgumentParser(" in p.read_text()))
def test_a_benchmark_script_s_help_says_what_it_does_in_whole_sentences(script: str) -> None:
    """`--help` showed the first line of the script's docstring, cut mid-sentence in six of
    them ("… on 5 M lines that all match, next to the same"): it shows the first paragraph,
    which ends a sentence."""
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    description = " ".join(done.stdout.split("\n\n")[1].split())
    assert description.endswith((".", ".)")), description
    first = (BENCH / script).read_text().split('"""')[1].split("\n\n")[0]
    assert description.startswith(" ".join(first.split())[:60]), description
