"""The helper interpreters a runner starts from watchrun's own files (the regex worker, the mock
agent, the compile probe's child, the guardian) import watchrun from where the runner did,
never from their working directory: a `watchrun/` package in the runner's current directory
(a CI checkout, a shared workspace, /tmp) is not run as the runner's user. `python -m` put the
current directory first on the module path (an explorer's P5: root ran a planted file)."""

from __future__ import annotations

import shutil
from pathlib import Path

from liverunner import LiveRunner, cli, read_records, wait_for, write_config

import watchrun

ROOT = Path(__file__).resolve().parent.parent
REAL = Path(watchrun.__file__).parent

PLANTED = """\
import os, sys
with open({marker!r}, "a") as f:
    f.write(f"pid {{os.getpid()}} argv {{sys.argv}}\\n")
__path__.append({real!r})  # then the real package: the helper works, as an attacker's would
exec(open({real!r} + "/__init__.py").read())
"""
"""A `watchrun/__init__.py` planted in a working directory: it notes each process that imports
it, then behaves as the real one (so nothing fails: only the note tells)."""


def plant(folder: Path) -> Path:
    """The planted package in `folder`; the note file it writes to (absent: never imported)."""
    marker = folder / "imported-the-planted-watchrun"
    (folder / "watchrun").mkdir()
    (folder / "watchrun" / "__init__.py").write_text(
        PLANTED.format(marker=str(marker), real=str(REAL)))
    return marker


def test_a_backtracking_watchers_worker_ignores_a_watchrun_in_the_current_directory(
        tmp_path: Path) -> None:
    marker = plant(tmp_path)
    (tmp_path / "app.log").write_text("ERROR! one\nERROR two\nERROR! three\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "bt", "path": "app.log", "fromStart": True, "pattern": "(ERROR)(?=!)",
         "backtracking": True}]})
    done = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    matched = [r["line"] for r in read_records(tmp_path / ".watchrun" / "watchers" / "bt.jsonl")
               if r["kind"] == "match"]
    assert matched == ["ERROR! one", "ERROR! three"]  # (a lookahead: only the worker runs it)
    assert not marker.exists(), marker.read_text()


def test_the_demos_mock_agent_ignores_a_watchrun_in_its_folder(tmp_path: Path) -> None:
    """watch.yaml.example run where it lies (the runner's and the agent's cwd): its mock agent
    answers, from the installed watchrun."""
    marker = plant(tmp_path)
    shutil.copy(ROOT / "watch.yaml.example", tmp_path / "watch.yaml")
    r = LiveRunner(tmp_path / "watch.yaml", cwd=tmp_path)
    try:
        replies = tmp_path / ".watchrun" / "agents" / "triage.jsonl"
        wait_for(lambda: any(x["kind"] == "dispatch-finished" and x["status"] == "done"
                             for x in read_records(replies)), "a turn of the mock agent")
    finally:
        assert r.stop() == 0
    assert not marker.exists(), marker.read_text()

