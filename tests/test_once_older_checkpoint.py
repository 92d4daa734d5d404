"""A `run --once` on a checkpoint saved by a watchrun from before 2026-12-06, which recorded
neither whether a live runner saved it (`live`) nor under what matching (`matching`): the once
run applied it "as before", so after an upgrade the gate passed over ERROR lines a live runner
had matched or skipped, or that a looser pattern had judged (found by an explorer, 2026-12-07).
It is set aside now, as one of a live runner is, and the file is judged whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for, write_config
from test_once import once, table_row
from test_rotated_clock_back import v1_checkpoint

CONFIG: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                        "gate": {"maxMatches": 0}}]}
SAID = "its checkpoint was saved by an older watchrun"


def as_saved_before_the_fields(tmp_path: Path) -> None:
    """The checkpoint as a runner before 2026-12-06 saved it: without `live` and `matching`."""
    path = tmp_path / ".watchrun/state/app.checkpoint.json"
    state = json.loads(path.read_text())
    assert "matching" in state
    path.write_text(json.dumps({k: v for k, v in state.items() if k not in ("live", "matching")}))


def judged_whole_then_gone_on_from(tmp_path: Path, *lines: str) -> None:
    """A once run judges the file whole, saying why, and fails on `lines`; the next one goes
    on from its own checkpoint (nothing new: a pass, nothing set aside)."""
    r = once(tmp_path, CONFIG)
    assert (r.rc, table_row(r.out, "app")[-1]) == (1, "FAIL"), r.out + r.err
    assert all(line in r.out for line in lines), r.out
    said = [x for x in r.err.splitlines() if "set aside" in x]
    assert len(said) == 1 and SAID in said[0], r.err
    again = once(tmp_path, CONFIG)
    assert (again.rc, table_row(again.out, "app")[-1]) == (0, "pass"), again.out + again.err
    assert "set aside" not in again.err


def test_lines_an_older_live_runner_matched_or_skipped_are_judged(tmp_path: Path) -> None:
    """An older live runner's checkpoint (it started at the end: the first line was never
    read; the second it matched): the once run passed over both (exit 0)."""
    (tmp_path / "app.log").write_text("ERROR before the live runner\nok\n")
    runner = LiveRunner(write_config(tmp_path, CONFIG))
    try:
        runner.wait_log("1 watcher, 0 agents running")
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR while the live runner ran\n")
        wait_for(lambda: runner.matches("app"), "the live runner's match")
    finally:
        assert runner.stop() == 0
    as_saved_before_the_fields(tmp_path)
    judged_whole_then_gone_on_from(tmp_path, "ERROR before the live runner",
                                   "ERROR while the live runner ran")


def test_lines_an_older_once_run_judged_with_another_pattern_are_judged(tmp_path: Path) -> None:
    """The pattern tightened across the upgrade (FATAL, then ERROR): the older runner's
    checkpoint said nothing of its pattern, and the ERROR line it had read passed."""
    (tmp_path / "app.log").write_text("INFO ok\nERROR disk almost full\n")
    fatal = once(tmp_path, {"watchers": [{**CONFIG["watchers"][0], "pattern": "FATAL"}]})
    assert fatal.rc == 0, fatal.out + fatal.err
    as_saved_before_the_fields(tmp_path)
    judged_whole_then_gone_on_from(tmp_path, "ERROR disk almost full")


def test_a_version_1_checkpoint_is_set_aside_by_a_once_run(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("ERROR read by a runner of 2026-11\nok\n")
    v1_checkpoint(tmp_path / ".watchrun", log, log)
    judged_whole_then_gone_on_from(tmp_path, "ERROR read by a runner of 2026-11")
