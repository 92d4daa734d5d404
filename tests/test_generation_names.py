"""A line read from a rotated generation (found beside the path after a stop or between two
once runs, or a copytruncate copy) is recorded and reported under the name of the file it was
read from (`app.log.1`), not the watched path's, whose line of that number is another one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, read_records, wait_for, write_config
from test_once import once

GATED: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                       "gate": {"maxMatches": 0}}]}


def _rotate(log: Path, old_tail: str, new: str) -> Path:
    """Append `old_tail` to `log`, rename it to `log.1` (logrotate `create`), write `new` at the
    path; returns the rotated generation."""
    with log.open("a") as f:
        f.write(old_tail)
    rotated = log.with_name(f"{log.name}.1")
    log.rename(rotated)
    log.write_text(new)
    return rotated


def _matches(jsonl: Path) -> list[tuple[str, int, str]]:
    return [(r["path"], r["lineNo"], r["line"]) for r in read_records(jsonl)
            if r["kind"] == "match"]


def test_a_match_in_a_generation_rotated_between_once_runs_names_that_file(
        tmp_path: Path) -> None:
    """The JSONL `path`, `--json` `first` and the `::error file=…,line=…` annotation said
    `app.log` line 2: on the pull request that marked "fine 2" of the new file."""
    log = tmp_path / "app.log"
    log.write_text("ok 1\n")
    assert once(tmp_path, GATED).rc == 0
    rotated = _rotate(log, "ERROR in old generation line 2\n", "fine 1\nfine 2\nfine 3\n")
    r = once(tmp_path, GATED, "--json", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(tmp_path))
    assert r.rc == 1, r.out + r.err
    (first,) = json.loads(r.out)["verdicts"][0]["first"]
    assert (first["where"], first["path"], first["lineNo"]) == ("app.log.1:2", str(rotated), 2)
    assert "::error file=app.log.1,line=2,title=watchrun gate app::1 match of /ERROR/ (at most " \
        "0 allowed)%0Aapp.log.1:2: ERROR in old generation line 2" in r.err.splitlines()
    assert _matches(tmp_path / ".watchrun" / "watchers" / "app.jsonl") == [
        (str(rotated), 2, "ERROR in old generation line 2")]


def test_a_live_runner_restarted_after_a_rotation_names_each_line_s_file(tmp_path: Path) -> None:
    """Stopped, rotated, started again: the rest of the generation it had followed is read from
    `app.log.1`, then the new `app.log` from its start; each match names its own file."""
    log = tmp_path / "app.log"
    log.write_text("ERROR before the stop\n")
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
    for step in range(2):
        r = LiveRunner(config)
        try:
            r.wait_running()
            wait_for(lambda n=step: len(_matches(jsonl)) == 1 + 2 * n, "the matches")
        finally:
            assert r.stop() == 0
        if step == 0:
            rotated = _rotate(log, "ERROR while stopped\n", "ERROR new file\n")
    assert _matches(jsonl) == [(str(log), 1, "ERROR before the stop"),
                               (str(rotated), 2, "ERROR while stopped"),
                               (str(log), 1, "ERROR new file")]
