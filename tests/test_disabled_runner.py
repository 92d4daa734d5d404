"""A live runner whose config has `limits.enabled: false` says so wherever a user looks
(docs/config.md `enabled`; docs/cli.md `list`, `status`): an explorer's F6 found `list` telling
the user to `watchrun start a`, which was then refused (exit 3), `status` saying "problems:
none", and a start-up log line with no word of it. Now the ready line, `status` (a problem
while it lasts, `enabled` in `--json`), `list` (its hint, `enabled` in `--json`) and the refused
`start` all say that the runner's watchers are disabled by `limits.enabled: false`; a reload
that enables them clears it."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, cli, wait_for, write_config

SAID = "the runner's watchers are disabled by `limits.enabled: false` in its config"


def test_every_surface_says_the_watchers_are_disabled(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("")
    conf: dict[str, Any] = {"watchers": [{"id": "a", "path": "a.log", "pattern": "x"}]}
    config = write_config(tmp_path, {"limits": {"enabled": False}, **conf})

    def wr(*args: str) -> Any:
        return cli(*args, "-c", config, cwd=tmp_path)

    r = LiveRunner(config)
    try:
        r.wait_running()
        r.wait_log("0 watchers, 0 agents running (change notification: ")
        ready = next(line for line in r.stderr().splitlines() if "agents running" in line)
        assert ready.endswith(f": {SAID}: it runs none, and `start` and `add` are refused (set "
                              "it to true, then reload: SIGHUP)"), ready
        p = wr("list")
        assert p.returncode == 0 and SAID in p.stdout, p.stdout
        assert "watchrun start" not in p.stdout, p.stdout  # (no advice that is then refused)
        p = wr("list", "--json")
        assert json.loads(p.stdout) == {"outputDir": str(tmp_path / ".watchrun"),
                                        "watchers": [], "enabled": False}, p.stdout
        p = wr("start", "a")
        assert p.returncode == 3 and f"watchrun: error: {SAID}" in p.stderr, p.stderr
        p = wr("status")
        assert p.returncode == 0 and "problems: 1\n" in p.stdout and \
            f"  - {SAID}" in p.stdout, p.stdout
        doc = json.loads(wr("status", "--json").stdout)
        assert doc["enabled"] is False and [q for q in doc["problems"] if SAID in q], doc

        write_config(tmp_path, conf)  # enabled again: the reload runs them, nothing to say
        r.send(signal.SIGHUP)
        r.wait_log("reloaded: 1 watcher running")
        doc = json.loads(wr("status", "--json").stdout)
        assert doc["enabled"] is True and doc["problems"] == [], doc
        assert json.loads(wr("list", "--json").stdout)["enabled"] is True

        write_config(tmp_path, {"limits": {"enabled": False}, **conf})
        r.send(signal.SIGHUP)
        wait_for(lambda: r.stderr().count("reloaded:") == 2, "the second reload")
        assert f"reloaded: 0 watchers running: {SAID}" in r.stderr(), r.stderr()
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


def test_a_once_run_says_its_watchers_are_disabled(tmp_path: Path) -> None:
    """(explore-fresh F1) A once run's start line said `0 watchers, 0 agents running` and
    nothing of why; an ungated watcher was passed over in silence (exit 0), a gated one's
    ERROR said `limits.enabled is false` in words of its own."""
    config = write_config(tmp_path, {"limits": {"enabled": False}, "watchers": [
        {"id": "app", "command": "echo hi", "pattern": "hi"},
        {"id": "g", "command": "echo hi", "pattern": "hi", "gate": {"maxMatches": 0}}]})
    said = "its watchers are disabled by `limits.enabled: false` in its config: it runs none"
    run = cli("run", "--once", "-c", config)
    assert run.returncode == 3, run.stdout + run.stderr
    assert f"0 watchers, 0 agents running (change notification: none): {said}" in run.stderr
    assert f"it never ran: {said}" in run.stdout, run.stdout
