"""A once run started short of descriptors, whichever step runs out first (the output dir, the
event loop, the control socket, the scan of state/, a JSONL, the first checkpoint save): exit 3,
the cause named in the verdict and the log as `short_of_files` says it (EMFILE, the limit and
where to raise it), never as an internal error or an exception's repr (explore-limits F2)."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from liverunner import watchrun_bin, write_config

TIMEOUT_S = 60


@pytest.mark.parametrize("limit", range(5, 21))
def test_a_once_run_short_of_descriptors_names_the_limit_at_every_step(
        tmp_path: Path, limit: int) -> None:
    (tmp_path / "big.log").write_text("INFO fine\n")
    path = write_config(tmp_path, {"watchers": [
        {"id": "big", "path": "big.log", "pattern": "FATAL", "gate": {"maxMatches": 0}}]})
    done = subprocess.run(
        [watchrun_bin(), "run", "--once", "-c", str(path)], capture_output=True, text=True,
        timeout=TIMEOUT_S, cwd=tmp_path,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    said = f"Too many open files (this runner may have {limit} files open; each watcher " \
        "needs a few: raise the limit with `ulimit -n`, or LimitNOFILE= in its systemd unit)"
    log = [ln for ln in done.stderr.splitlines() if "watchrun: " in ln]
    assert not [ln for ln in log if "internal" in ln or "OSError(" in ln], done.stderr
    if done.returncode == 0:  # enough of them: the gate judged
        assert "watchrun: passed: the 1 gate holds" in done.stdout
        return
    assert done.returncode == 3, done.stdout + done.stderr
    reasons = [ln for ln in done.stdout.splitlines() if ln.startswith("  - ")]
    assert len(reasons) == 1 and reasons[0].endswith(said), done.stdout
    assert any(ln.endswith(said) and "error: " in ln for ln in log), done.stderr
