"""A once run started short of descriptors, whichever step runs out first (the output dir, the
event loop, the control socket, the scan of state/, a JSONL, the first checkpoint save): exit 3,
the cause named in the verdict and the log as `short_of_files` says it (EMFILE, the limit and
where to raise it), never as an internal error or an exception's repr (explore-limits F2); a
live runner's watchers each saying only their own checkpoint's load failure (explore-scale F4)."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from liverunner import LiveRunner, watchrun_bin, write_config

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


def test_short_of_descriptors_each_watcher_says_only_its_own_checkpoint_unread(
        tmp_path: Path) -> None:
    """20 file watchers, 48 descriptors, a fresh output dir: the watchers whose checkpoint load
    ran out are `error{EMFILE}` naming the limit, but every other watcher recorded their
    failures as its own `error{checkpoint-corrupt}` (a shared list of load problems, read by
    whichever watcher's load ended while another's failed): NxM false errors, and an
    unopened checkpoint called corrupt. Now each records its own, once, as EMFILE."""
    ids = [f"w{n:04d}" for n in range(20)]
    for wid in ids:
        (tmp_path / f"{wid}.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": wid, "path": str(tmp_path / f"{wid}.log"), "pattern": "ERROR"} for wid in ids]})
    r = LiveRunner(config, preexec_fn=lambda: resource.setrlimit(
        resource.RLIMIT_NOFILE, (48, 48)))
    try:
        r.wait_log("20 watchers (")  # (every watcher began: its load done, once at least)
        r.stop()
    finally:
        r.close()
    unread: list[str] = []
    for wid in ids:
        errors = [e for e in r.records(wid) if e["kind"] == "error"]
        assert not [e for e in errors if e["code"] == "checkpoint-corrupt"], errors
        others = [e for e in errors if ".checkpoint.json" in e["message"]
                  and f"state/{wid}.checkpoint.json" not in e["message"]]
        assert not others, others
        unread += [wid for e in errors if e["code"] == "EMFILE" and
                   f"cannot read checkpoint {r.out}/state/{wid}.checkpoint.json: Too many open "
                   "files (this runner may have 48 files open" in e["message"]]
    assert unread, r.stderr()  # (the limit was met while loading: what this is about)
    assert "checkpoint-corrupt" not in r.stderr()
