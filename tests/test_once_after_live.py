"""A `run --once` on an output dir a live `watchrun run` used: the live runner's checkpoint
held its place, and the once run went on from there, taking what the live runner had matched
(and what was in the file before it started, which it never read) as judged. No gate judged
them: a live run has no verdict. The once run sets that checkpoint aside and judges the file
whole, as a first run does; its own checkpoint is then gone on from as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for, write_config
from test_once import once, table_row

CONFIG: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                        "gate": {"maxMatches": 0}}]}


def _live(tmp_path: Path, line: str) -> None:
    """A live runner that matches `line`, appended while it runs, and stops cleanly."""
    runner = LiveRunner(write_config(tmp_path, CONFIG))
    try:
        runner.wait_log("1 watcher, 0 agents running")
        with (tmp_path / "app.log").open("a") as fh:
            fh.write(f"{line}\n")
        wait_for(lambda: runner.matches("app"), "the live runner's match")
    finally:
        assert runner.stop() == 0


def test_lines_a_live_runner_matched_or_skipped_are_judged_by_the_next_once_run(
        tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("ERROR before the live runner\nok\n")  # (a live start reads from the end)
    _live(tmp_path, "ERROR while the live runner ran")
    state = json.loads((tmp_path / ".watchrun/state/app.checkpoint.json").read_text())
    assert state["live"] is True
    r = once(tmp_path, CONFIG)
    assert (r.rc, table_row(r.out, "app")[-1]) == (1, "FAIL"), r.out + r.err
    assert "its checkpoint was saved by a live runner (`watchrun run`), whose lines no gate " \
        "judged: set aside" in r.err
    assert "ERROR before the live runner" in r.out and "ERROR while the live runner ran" in r.out
    state = json.loads((tmp_path / ".watchrun/state/app.checkpoint.json").read_text())
    assert "live" not in state
    again = once(tmp_path, CONFIG)  # a once run's checkpoint is gone on from: nothing new
    assert (again.rc, table_row(again.out, "app")[-1]) == (0, "pass"), again.out + again.err
    assert "set aside" not in again.err


def test_a_once_run_after_a_clean_live_run_on_a_clean_log_passes(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("ok\n")
    runner = LiveRunner(write_config(tmp_path, CONFIG))
    try:
        runner.wait_log("1 watcher, 0 agents running")
    finally:
        assert runner.stop() == 0
    r = once(tmp_path, CONFIG)
    assert (r.rc, table_row(r.out, "app")[-1]) == (0, "pass"), r.out + r.err
