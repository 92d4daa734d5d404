"""The echo of matched lines on stderr: at most 20 a watcher a second, and the number of the
others always said (README: "the rest are counted"), after a burst too, with nothing after it."""

from __future__ import annotations

import re
from pathlib import Path

from liverunner import LiveRunner, cli, read_records, wait_for, write_config

from watchrun.output.runlog import MATCH_LINES_PER_SECOND

LINES = 100


def _burst(tmp_path: Path) -> Path:
    (tmp_path / "app.log").write_text("".join(f"ERROR {i}\n" for i in range(LINES)))
    return write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})


def _said(err: str) -> tuple[int, int]:
    """(matched lines echoed, matches said to be held) in a text log."""
    shown = len(re.findall(r"\[app\] match \S+: ERROR \d+$", err, re.M))
    held = sum(int(n) for n in re.findall(r"\[app\] \.\.\. and (\d+) more matches", err))
    return shown, held


def test_a_burst_with_nothing_after_it_has_its_held_count_said(tmp_path: Path) -> None:
    runner = LiveRunner(_burst(tmp_path))
    try:
        wait_for(lambda: sum(_said(runner.stderr())) == LINES,
                 "every match echoed or counted, with no match after the burst")
        shown, held = _said(runner.stderr())
        assert MATCH_LINES_PER_SECOND <= shown < LINES and held == LINES - shown
        assert len(runner.matches("app")) == LINES  # all of them in the JSONL
    finally:
        assert runner.stop() == 0


def test_a_once_run_says_the_held_count_before_the_watcher_stops(tmp_path: Path) -> None:
    config = _burst(tmp_path)
    proc = cli("run", "--once", "-c", config, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    shown, held = _said(proc.stderr)
    assert shown + held == LINES and held > 0, proc.stderr
    assert proc.stderr.index("more matches") < proc.stderr.index("[app] stopped")
    records = read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    assert sum(r["kind"] == "match" for r in records) == LINES
