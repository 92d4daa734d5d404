"""What an upgrade of watchrun meets: helpers started from the package's files while a runner
runs (the regex worker) whose files were replaced under it, as `pip install -U` replaces them.
Each runner here runs from its own copy of the package, which the test then breaks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from liverunner import LiveRunner, cli, write_config

PKG = Path(__file__).resolve().parent.parent / "runner" / "watchrun"


def package_copy(tmp_path: Path) -> Path:
    """A copy of the watchrun package for one runner (the folder to put on PYTHONPATH)."""
    home = tmp_path / "site"
    shutil.copytree(PKG, home / "watchrun", ignore=shutil.ignore_patterns("__pycache__"))
    return home


def runner_from(home: Path, config: Path) -> LiveRunner:
    return LiveRunner(config, env={"PYTHONPATH": str(home)}, validated=False, forked=False)


def test_a_regex_worker_that_cannot_start_says_its_exit_status_and_last_line(
        tmp_path: Path) -> None:
    """An explorer's F7: a regex worker that failed to import had its traceback read as the
    protocol's length header: `IncompleteReadError('315 bytes read on a total of 1918985061
    expected bytes')`. Now its watcher fails (closed) saying how the worker ended and why."""
    home = package_copy(tmp_path)
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "(ERROR)(?=!)", "backtracking": True}]})
    r = runner_from(home, config)
    try:
        r.wait_running()  # (its worker starts with the first lines to match)
        worker = home / "watchrun" / "runtime" / "regex_worker.py"
        worker.write_text('raise ImportError("new install: watchrun")\n')
        with log.open("a") as f:
            f.write("ERROR! one\n")
        said = "the regex worker did not start (exit status 1: ImportError: new install: watchrun)"
        r.wait_log(f"[app] error: watcher failed: {said}")
        errors = [x for x in r.records("app") if x["kind"] == "error"]
        assert [(x["code"], x["message"]) for x in errors] == [("regex-worker", said)]
        listed = json.loads(cli("list", "-c", config, "--json").stdout)["watchers"]
        assert [(w["status"], w["lastError"]) for w in listed] == [("fatal", said)]
        assert "internal" not in r.stderr() and "IncompleteReadError" not in r.stderr()
        assert r.stop() == 3  # (a watcher that failed)
    finally:
        r.close()
