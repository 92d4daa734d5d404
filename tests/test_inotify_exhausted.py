"""Out of inotify watches, many watchers poll: the runner says how many, not one path alone."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from liverunner import cli, read_records, wait_for, watchrun_bin, write_config

WATCHERS = 30


def _userns() -> None:
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            "echo 1 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not available here: {probe.stderr.strip()}")


def test_watchers_short_of_inotify_watches_are_counted_in_the_log_status_and_ready_line(
        tmp_path: Path) -> None:
    """30 file watchers in a user namespace allowed 10 inotify watches (per user namespace,
    so the machine is not affected): most poll; one warning, the ready line and `status`
    count them, and the count goes as they stop."""
    _userns()
    logs = tmp_path / "logs"
    logs.mkdir()
    watchers = []
    for i in range(WATCHERS):
        name = f"app-{chr(97 + i // 26)}{chr(97 + i % 26)}.log"
        (logs / name).write_text("")
        watchers.append({"id": f"w{i}", "path": f"logs/{name}", "pattern": "ERROR"})
    limits = {"pollMs": 20, "maxWatchers": WATCHERS}
    config = write_config(tmp_path, {"watchers": watchers, "limits": limits})
    script = 'echo 10 > /proc/sys/user/max_inotify_watches && exec "$0" run -c "$1"'
    err_path = tmp_path / "err"
    err = open(err_path, "wb")  # noqa: SIM115
    proc = subprocess.Popen(["unshare", "--user", "--map-root-user", "sh", "-c", script,
                             watchrun_bin(), str(config)], stderr=err, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        ready = wait_for(lambda: re.search(r"running \(change notification: (.*)\)",
                                           err_path.read_text()), "the ready line")
        said = re.fullmatch(r"inotify, (\d+) polling", ready[1])
        assert said is not None, err_path.read_text()  # not "inotify" alone
        polling = int(said[1])
        assert 0 < polling < WATCHERS, ready[0]
        status = cli("status", "-c", config)
        assert (f"{polling} watchers poll: the inotify watch limit is reached "
                "(fs.inotify.max_user_watches); raise it") in status.stdout, status.stdout
        out = tmp_path / ".watchrun" / "watchers"
        wait_for(lambda: all(read_records(out / f"w{i}.jsonl") for i in range(WATCHERS)),
                 "every watcher's start record")
        for w in watchers:
            with open(tmp_path / str(w["path"]), "a") as fh:
                fh.write("ERROR seen\n")
        wait_for(lambda: all(any(r["kind"] == "match" for r in read_records(out / f"w{i}.jsonl"))
                             for i in range(WATCHERS)), "a match from every watcher")
        for i in range(WATCHERS):  # stopped, a polling watcher is no longer counted
            assert cli("stop", f"w{i}", "-c", config).returncode == 0
        status = cli("status", "-c", config)
        assert "watch limit" not in status.stdout, status.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
    log = err_path.read_text()
    warned = [line for line in log.splitlines() if "warning: cannot watch" in line]
    assert len(warned) == 1, log  # one warning, not one per watcher
    assert "the inotify watch limit is reached (raise fs.inotify.max_user_watches)" in warned[0]
    assert "counted in `watchrun status`" in warned[0]


def test_a_follower_short_of_inotify_watches_does_not_point_at_watchrun_status(
        tmp_path: Path) -> None:
    """`logs --follow` with no inotify watch to be had polls and says so; what it says is not
    the runner's warning ("counted in `watchrun status`": a view's watches are not)."""
    _userns()
    config = write_config(tmp_path, {"watchers": [
        {"id": "w", "path": "app.log", "pattern": "ERROR"}], "limits": {"pollMs": 20}})
    script = 'echo 0 > /proc/sys/user/max_inotify_watches && exec "$0" logs w --follow -c "$1"'
    err_path = tmp_path / "err"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(["unshare", "--user", "--map-root-user", "sh", "-c", script,
                                 watchrun_bin(), str(config)], stderr=err,
                                stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            warned = wait_for(lambda: [line for line in err_path.read_text().splitlines()
                                       if "inotify watch limit is reached" in line],
                              "the follower's warning")
        finally:
            proc.kill()
            proc.wait()
    assert "watchrun status" not in warned[0], warned[0]
    assert "polled" in warned[0], warned[0]
