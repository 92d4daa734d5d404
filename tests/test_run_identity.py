"""A snapshot is live only while the runner that wrote it runs, told apart by its run id (the
run lock `state/runner-<id>.lock` it holds), not by its pid: a restarted container's runner is
PID 1 again, and took every snapshot the previous one left for its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from liverunner import DEADLINE_S, cli, hold_runner_lock, wait_for, watchrun_bin, write_config
from pidns import UNSHARE, NsRunner, needs_pid_namespaces

OLD = "while true; do echo ERROR old; sleep 0.2; done"


def _configs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "app.log").write_text("")
    app = {"id": "app", "path": "app.log", "pattern": "ERROR"}
    first = write_config(tmp_path, {"watchers": [
        app, {"id": "old", "command": OLD, "pattern": "ERROR"}]})
    return first, write_config(tmp_path, {"watchers": [app]}, name="watch2.yaml")


def _snapshot(out: Path, wid: str) -> dict[str, object]:
    try:
        found = json.loads((out / "state" / f"{wid}.status.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _status(cwd: Path, wid: str, *args: str) -> dict[str, object]:
    done = cli("status", wid, "--json", *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


@needs_pid_namespaces
def test_a_restarted_containers_runner_does_not_make_the_last_ones_snapshots_live(
        tmp_path: Path) -> None:
    """explore-multirun F2: runner A (PID 1 of its namespace) runs `old` and `rt` (added at
    runtime), and is killed with its namespace; runner B, PID 1 of a new one, runs a config
    without them. `status old` said `running`, `live: yes`, with a pid that was another
    process's; `top` listed them as the live runner's."""
    first, second = _configs(tmp_path)
    out = tmp_path / ".watchrun"
    a = NsRunner(first)
    try:
        a.wait_running()
        added = a.request({"cmd": "add", "watcher": {
            "id": "rt", "command": OLD.replace("old", "rt"), "pattern": "ERROR"}})
        assert added["ok"], added
        for wid in ("old", "rt"):
            wait_for(lambda w=wid: _snapshot(out, w).get("pid"), f"{wid}'s snapshot, running")
        assert _snapshot(out, "old")["runnerPid"] == 1  # (PID 1 of its namespace)
        a.kill()
    finally:
        a.close()
    b = NsRunner(second)
    try:
        b.wait_running()
        earlier = _snapshot(out, "old")["runnerId"]
        wait_for(lambda: _snapshot(out, "app").get("runnerId") not in (None, earlier),
                 "B's snapshot of app")
        assert _snapshot(out, "app")["runnerPid"] == 1  # (PID 1 again)
        locks = sorted(p.name for p in (out / "state").glob("runner-*.lock"))
        assert locks == [f"runner-{_snapshot(out, 'app')['runnerId']}.lock"]  # (A's: removed)
        for wid in ("old", "rt"):
            got = _status(tmp_path, wid, "-c", str(second))
            assert (got["status"], got["live"], got["pid"]) == ("stopped", False, None), got
        here = _status(tmp_path, "app", "-c", str(second))
        assert (here["status"], here["live"]) == ("running", True), here
        from watchrun.tui.feed import Feed
        from watchrun.views.watchers import added_at_runtime

        assert added_at_runtime(out) == {"rt": False}
        assert [r.id for r in Feed(out.resolve()).poll().rows] == ["app"]  # (`top`)
        inside = subprocess.run(["nsenter", "-t", str(b.pid), "-p", "-m", "--",
                                 watchrun_bin(), "status", "old", "--json", "-c", str(second)],
                                cwd=tmp_path, capture_output=True, text=True,
                                timeout=DEADLINE_S, check=False)
        assert inside.returncode == 0, inside.stderr  # (inside B's namespace too)
        assert json.loads(inside.stdout)["live"] is False
    finally:
        b.close()
    assert list((out / "state").glob("runner-*.lock")) == []  # (B's own, at its stop)


ROWS = ("import json, sys; from pathlib import Path; from watchrun.tui.feed import Feed; "
        "print(json.dumps([[r.id, r.status] for r in Feed(Path(sys.argv[1])).poll().rows]))")


@needs_pid_namespaces
def test_a_live_runners_watchers_are_live_from_a_sibling_pid_namespace(tmp_path: Path) -> None:
    """From another container sharing the output dir no holder of `control.lock` is visible
    (its /proc/locks hides other namespaces' locks): `top` there showed every watcher of the
    live runner `starting`, "(no status snapshot yet)". A run lock is a flock, which the kernel
    shows to any namespace."""
    first, _ = _configs(tmp_path)
    out = tmp_path / ".watchrun"
    runner = NsRunner(first)
    try:
        runner.wait_running()
        wait_for(lambda: _snapshot(out, "old").get("pid"), "old's snapshot, running")
        done = subprocess.run([*UNSHARE, sys.executable, "-c", ROWS, str(out.resolve())],
                              capture_output=True, text=True, timeout=DEADLINE_S, check=False)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == [["app", "running"], ["old", "running"]]
    finally:
        runner.close()


def test_a_snapshot_naming_a_run_lock_nobody_holds_is_not_live(tmp_path: Path) -> None:
    """The runner's pid holding `control.lock` is not enough when the snapshot names its run:
    here this process holds the lock and has the snapshot's `runnerPid`, as a new runner with
    the pid of the one that wrote it would."""
    root = tmp_path / ".watchrun"
    (root / "state").mkdir(parents=True)
    hold_runner_lock(root)
    snap = {"id": "app", "kind": "command", "status": "running", "pid": 4242,
            "runnerPid": os.getpid(), "runnerId": "0123456789abcdef"}
    (root / "state" / "app.status.json").write_text(json.dumps(snap))
    got = _status(tmp_path, "app", "--output-dir", str(root))
    assert (got["status"], got["live"], got["pid"]) == ("stopped", False, None), got
