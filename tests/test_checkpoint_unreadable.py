"""A checkpoint the runner may not read is said as what it is (the read's errno), not as corrupt."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from liverunner import nobody_runs_watchrun, read_records, watchrun_bin, write_config


def test_a_checkpoint_that_cannot_be_read_is_its_errno_and_fails_the_once_verdict() -> None:
    """Run as nobody, a once run whose checkpoint is mode 000 (EACCES even for its owner)
    records `error{EACCES}` naming the checkpoint, not `checkpoint-corrupt` (nothing is set
    aside: the file is as it was), and its verdict is an ERROR: where the last run ended is
    lost."""
    nobody = nobody_runs_watchrun()
    tmp_path = Path(tempfile.mkdtemp(prefix="watchrun-cp-eacces-"))  # (nobody can reach it)
    try:
        _check(nobody, tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _check(nobody: list[str], tmp_path: Path) -> None:
    os.chown(tmp_path, 65534, 65534)
    log = tmp_path / "app.log"
    log.write_text("INFO fine\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    for p in (log, config):
        os.chown(p, 65534, 65534)

    def once() -> subprocess.CompletedProcess[str]:
        return subprocess.run([*nobody, watchrun_bin(), "run", "--once", "-c", str(config)],
                              capture_output=True, text=True, timeout=120, check=False)

    first = once()
    assert first.returncode == 0, first.stderr
    checkpoint = tmp_path / ".watchrun" / "state" / "app.checkpoint.json"
    checkpoint.chmod(0)
    second = once()
    assert second.returncode == 3, second.stderr
    errors = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
              if r["kind"] == "error"]
    assert [(e["code"], e["unread"]) for e in errors] == [("EACCES", True)], errors
    assert errors[0]["message"] == f"cannot read checkpoint {checkpoint}: Permission denied"
    assert "where the last run ended is lost" in second.stderr, second.stderr
    assert "corrupt" not in second.stderr, second.stderr
    assert not list(checkpoint.parent.glob("*.corrupt-*"))
