"""One file watcher flooded with short matching lines does not hold the runner: another
watcher's line is recorded while the flood is still being recorded, the loop keeps running."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, lag_limit, read_records, wait_for, write_config

FLOOD_LINES = 2 << 20
"""2-byte matching lines (`x\\n`): 4 MiB, 2 M match records (8 reads of 1 MiB, each of which
was all its records matched, formatted and written in one loop turn: seconds)."""
PROBE_S = 1.0
"""The probe's line is recorded within this (on an idle runner: milliseconds)."""


def test_a_flood_of_short_matching_lines_does_not_hold_the_other_watchers(
        tmp_path: Path) -> None:
    flood, app = tmp_path / "flood.log", tmp_path / "app.log"
    flood.write_bytes(b"")
    app.write_bytes(b"")
    config = write_config(tmp_path, {
        "output": {"maxBytes": "64MiB", "keep": 1},
        "watchers": [{"id": "flood", "path": "flood.log", "pattern": "x"},
                     {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    runner = LiveRunner(config)
    try:
        runner.wait_running()
        with flood.open("ab") as f:
            f.write(b"x\n" * FLOOD_LINES)
        recorded = runner.out / "watchers" / "flood.jsonl"
        wait_for(lambda: recorded.exists() and recorded.stat().st_size > 0,
                 "the flood's first records")
        started = time.monotonic()
        with app.open("ab") as f:
            f.write(b"ERROR probe\n")
        wait_for(lambda: runner.matches("app"), "the probe's record")
        took = time.monotonic() - started
        status = runner.control({"cmd": "status"})
        flooded = runner.control({"cmd": "list"})
        assert took < PROBE_S, f"the probe's line was recorded {took:.2f} s after it was written"
        assert runner.matches("app")[0]["line"] == "ERROR probe"
        assert float(status["loopLagMaxS"]) < lag_limit(), (
            f"the loop stalled {status['loopLagMaxS']} s during the flood")
        wait_for(lambda: _matches(runner.control({"cmd": "list"}), "flood") == FLOOD_LINES,
                 "every flood line recorded", timeout=120)
        assert _matches(flooded, "flood") < FLOOD_LINES  # (the probe came before the flood's end)
        runner.assert_lag_ok()
        assert "loop-stalled" not in runner.stderr()
    finally:
        assert runner.stop() == 0


def _matches(listed: dict[str, Any], wid: str) -> int:
    """A watcher's `matchCount` in a control `list` answer."""
    return int(next(w["matchCount"] for w in listed["watchers"] if w["id"] == wid))


def test_the_slices_of_one_read_number_their_lines_as_one(tmp_path: Path) -> None:
    """A read of 9 000 matching lines goes out in three slices of records, each slice's columns
    built as it goes (the line count going on from the slice before): every record has its
    line's number and offset, as one pass over the read gave them."""
    from test_once import once

    (tmp_path / "app.log").write_bytes(b"".join(b"x%d\n" % n for n in range(1, 9001)))
    run = once(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "x",
                                        "fromStart": True}]})
    assert run.rc == 0, run.err
    matches = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
               if r["kind"] == "match"]
    assert [(r["lineNo"], r["line"]) for r in matches] == [
        (n, f"x{n}") for n in range(1, 9001)]
    lines = [b"x%d\n" % n for n in range(1, 9001)]
    assert [r["offset"] for r in matches] == list(itertools.accumulate(
        map(len, lines[:-1]), initial=0))
