"""What `list` and `status` say is true at the moments they lied: a watcher being stopped
(its command waiting out `stopTimeout`) is `stopping` in `list` and `status ID`, and `status`
counts it as being stopped (`list` said `running` with its uptime ticking while `status` said
the runner had 0 watchers: helper-87's finding 3); and after `clear --all`, `list` does not
say that no watcher has run (finding 6), nor when it cannot list the output dir's folders (an
explorer's side finding: another user's 0700 dir said "no watchers have run", exit 0). The
`watchrun` commands (reads, and `clear`, which asks the runner) run in this process
(tests/inproc.py), but for the one run as another user."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from inproc import inproc
from liverunner import LiveRunner, cli, nobody_runs_watchrun, wait_for, watchrun_bin, write_config


def test_a_watcher_waiting_out_its_stop_timeout_is_stopping(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"limits": {"stopTimeout": "1m"}, "watchers": [
        {"id": "stubborn", "command": "trap '' TERM; while true; do echo alive ERR; sleep 0.2; "
         "done", "pattern": "ERR"}]})
    r = LiveRunner(config)

    def listed() -> dict[str, Any]:
        return next(w for w in r.control({"cmd": "list"})["watchers"] if w["id"] == "stubborn")
    try:
        r.wait_running()
        pid = wait_for(lambda: listed()["status"] == "running" and listed()["pid"], "its pid")
        stop: dict[str, Any] = {}
        asked = threading.Thread(target=lambda: stop.update(r.control(
            {"cmd": "stop", "id": "stubborn"})))
        asked.start()
        got = wait_for(lambda: (w := listed())["status"] == "stopping" and w, "stopping")
        assert got["pid"] == pid and got["uptimeS"] is None
        status = r.control({"cmd": "status"})
        assert (status["watchers"], status["stopping"]) == ([], ["stubborn"])
        text = inproc(tmp_path, "status", "-c", str(config))
        assert "runner running: 0 watchers (1 more being stopped)" in text.stdout, text
        one = inproc(tmp_path, "status", "stubborn", "-c", str(config))
        assert ["status", "stopping"] in [ln.split() for ln in one.stdout.splitlines()], one
        os.kill(pid, signal.SIGKILL)  # (it ignores SIGTERM: end the wait)
        asked.join(60)
        assert stop.get("ok"), stop
        assert listed()["status"] == "stopped"
        assert r.control({"cmd": "status"})["stopping"] == []
    finally:
        r.stop()


def test_list_after_clear_all_says_what_is_true(tmp_path: Path) -> None:
    """helper-87's finding 6: after `clear --all` on a live runner, `list` said "no watchers
    have run with output dir …" beside their JSONL, and the runner that still holds them."""
    (tmp_path / "app.log").write_text("ERROR one\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: r.matches("app"), "the match")
        cleared = inproc(tmp_path, "clear", "--all")
        assert cleared.returncode == 0, cleared.stderr
        listed = inproc(tmp_path, "list")
        assert listed.stdout == (
            f"the live runner on {tmp_path}/.watchrun lists no watchers (`clear` forgets "
            "stopped ones); `watchrun start ID` starts a config watcher again: app\n"), listed
    finally:
        assert r.stop() == 0
    listed = inproc(tmp_path, "list")
    assert listed.stdout == (f"no status snapshot is in {tmp_path}/.watchrun/state; records of "
                             "app are kept (`watchrun matches ID`)\n"), listed


def test_clear_forgets_a_watcher_whose_command_exited(tmp_path: Path) -> None:
    """helper-91's F4: `top`'s `d` offered "Clear stopped watchers (1)?" for a command watcher
    that had exited, and the runner then cleared 0: `clear` forgot only those stopped by
    `stop`, so an exited one could be cleared from neither the screen nor `watchrun clear`."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "once", "command": "echo ERROR once", "pattern": "ERROR", "restart": "never"}]})
    r = LiveRunner(config)

    def listed() -> dict[str, str]:
        return {w["id"]: w["status"] for w in r.control({"cmd": "list"})["watchers"]}
    try:
        r.wait_running()
        wait_for(lambda: listed() == {"app": "running", "once": "exited"}, "once exited")
        cleared = inproc(tmp_path, "clear")
        assert (cleared.returncode, cleared.stdout) == (0, "cleared 1 watcher\n"), cleared
        assert listed() == {"app": "running"}
        assert r.records("once")[-1]["kind"] == "stop"  # its JSONL stays, ended by a stop
        assert not (tmp_path / ".watchrun" / "state" / "once.status.json").exists()
    finally:
        assert r.stop() == 0


def test_list_of_an_output_dir_it_cannot_read_fails_and_says_why() -> None:
    nobody = nobody_runs_watchrun()
    base = Path(tempfile.mkdtemp(prefix="watchrun-list-"))
    try:
        base.chmod(0o755)
        (base / "app.log").write_text("ERROR x\n")
        config = write_config(base, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR", "fromStart": True}]})
        assert cli("run", "--once", "-c", str(config), cwd=base).returncode == 0
        out = base / ".watchrun"
        assert "app" in cli("list", "--output-dir", str(out), cwd=base).stdout  # root reads it
        out.chmod(0o755)
        (out / "state").chmod(0o700)
        text = subprocess.run([*nobody, watchrun_bin(), "list", "--output-dir", str(out)],
                              capture_output=True, text=True, cwd=base, timeout=60)
        assert text.returncode == 3, text
        assert f"error: cannot list {out / 'state'}: Permission denied" in text.stderr
        assert "no watchers have run" not in text.stdout
        doc = subprocess.run([*nobody, watchrun_bin(), "list", "--output-dir", str(out),
                              "--json"], capture_output=True, text=True, cwd=base, timeout=60)
        assert doc.returncode == 3
        assert json.loads(doc.stdout)["error"]["code"] == "read_failed"
    finally:
        shutil.rmtree(base, ignore_errors=True)
