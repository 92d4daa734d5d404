"""A first `run --once` (no checkpoint) and generations rotated beside the log: one rotated away
while the run's commands ran (renamed, or copied and truncated) held lines the gate was to
judge and is an ERROR naming it; one rotated before the run began is named in a warning."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from inproc import once_in_process
from test_once import once, table_row

ROTATIONS = {
    "rename": "mv app.log app.log.1; echo 'fresh ok' > app.log",
    "copytruncate": "cp app.log app.log.1; : > app.log; echo 'fresh ok' >> app.log",
}


def config(build: str) -> dict[str, Any]:
    return {"watchers": [
        {"id": "build", "command": ["sh", "-c", f"{build}; echo built"], "pattern": "ZZZ",
         "gate": {"exitCode": True}},
        {"id": "a", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}},
    ]}


@pytest.mark.parametrize("how", sorted(ROTATIONS))
def test_a_log_rotated_while_the_commands_ran_is_not_passed_over(tmp_path: Path,
                                                                 how: str) -> None:
    """The log held `ERROR in old` when the run began; the build step rotated it before the
    file watchers read. The gate read only the new file and passed (exit 0). Now the rotated
    generation is named and the verdict is an ERROR (exit 3): its lines were not read."""
    (tmp_path / "app.log").write_text("old ok\nERROR in old\n")
    r = once(tmp_path, config(ROTATIONS[how]))
    assert (r.rc, table_row(r.out, "a")[-1]) == (3, "ERROR"), r.out + r.err
    old = tmp_path / "app.log.1"
    assert (f"{old} was rotated away from {tmp_path / 'app.log'} while this run was under "
            "way, before it was read: its 20 bytes were not read") in r.out, r.out


def test_a_generation_rotated_before_the_run_is_named_in_a_warning(tmp_path: Path) -> None:
    """`app.log.1` from before the run (an earlier step's rotation): nothing mentioned it. A
    first run judges the file at the path (as documented); the log now names what it left."""
    (tmp_path / "app.log.1").write_text("start\nERROR in old generation\n")
    (tmp_path / "app.log").write_text("ok\n")
    r = once(tmp_path, {"watchers": [
        {"id": "a", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    assert (r.rc, table_row(r.out, "a")[-1]) == (0, "pass"), r.out + r.err
    warned = [ln for ln in r.err.splitlines() if "warning" in ln and "app.log.1" in ln]
    assert len(warned) == 1 and "from before this run, not read" in warned[0], r.err


def test_a_generation_from_before_the_run_is_older_whatever_the_runner_s_clock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`app.log.1` changed just before the run, and the runner's wall clock 30 s behind the
    file system's (an NFS server's clock ahead; the host's own set back since): its ctime was
    after the run's start by the runner's clock, so it was taken for one rotated away during
    the run, an ERROR (exit 3) on a clean log at every first run until the skew was gone. Now
    what was beside the log as the run began is older, with no clock compared."""
    (tmp_path / "app.log.1").write_text("old ok\n")
    (tmp_path / "app.log").write_text("ok\n")
    config = {"watchers": [
        {"id": "a", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}]}
    assert once_in_process(config)  # (the clock set back below is this process's)
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 30 * 10**9)
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "a")[-1]) == (0, "pass"), r.out + r.err
    assert "from before this run, not read" in r.err and "under way" not in r.out + r.err
