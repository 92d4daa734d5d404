"""Ctrl-C while watchrun's modules load (the first ~0.1 s of any command) ends it as a Ctrl-C
later does: exit 130 and no traceback; a SIGHUP then is a reload once started. The signal is a
real one the process sends itself when the import system is asked for one of the command
line's modules."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, wait_for

INTERRUPT_AT = """
import importlib.abc, os, signal, sys

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, while this module is being found
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["watchrun", "--version"]
"""

LAUNCH = {
    # as the console script pip writes does: import the entry point's function, exit with it
    "console script": """
from importlib.metadata import entry_points
(ep,) = entry_points(group="console_scripts", name="watchrun")
module, _, func = ep.value.partition(":")
sys.exit(getattr(__import__(module, fromlist=[func]), func)())
""",
    "python -m watchrun": """
import runpy
runpy.run_module("watchrun", run_name="__main__", alter_sys=True)
""",
}


@pytest.mark.parametrize("launch", sorted(LAUNCH))
@pytest.mark.parametrize("module", ["watchrun.cli.parser", "watchrun.exitcodes"])
def test_ctrl_c_while_the_modules_load_exits_130_without_a_traceback(
        tmp_path: Path, launch: str, module: str) -> None:
    code = INTERRUPT_AT.format(module=module) + LAUNCH[launch]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 130, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""  # interrupted before `--version` printed anything


def test_without_an_interrupt_the_same_launch_runs_the_command(tmp_path: Path) -> None:
    """The seam itself: with a module that is never imported, the command runs to its end."""
    code = INTERRUPT_AT.format(module="no.such.module") + LAUNCH["console script"]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("watchrun ")


HUP_AT = """
import importlib.abc, os, pathlib, signal, sys

class Hup(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "watchrun.runtime.supervisor":  # the config is read; no loop yet
            sys.meta_path.remove(self)
            pathlib.Path({config!r}).write_text({edited!r})  # edited, then a SIGHUP
            os.kill(os.getpid(), signal.SIGHUP)
        return None

sys.meta_path.insert(0, Hup())
sys.argv = ["watchrun", "run", "-c", {config!r}]
"""


def test_a_sighup_while_the_runner_starts_is_a_reload_once_started(tmp_path: Path) -> None:
    """A SIGHUP before the loop took the signals over (logrotate's postrotate, `systemctl
    reload` racing a restart) ended the runner at once, exit 129 and not a word: SIGHUP's
    default. It is recorded now, and the runner reloads once started: its config was read
    before the signal came, here edited in between."""
    (tmp_path / "a.log").write_text("")
    (tmp_path / "b.log").write_text("")
    config = tmp_path / "watch.json"
    config.write_text(json.dumps({"watchers": [{"id": "a", "path": "a.log", "pattern": "E"}]}))
    edited = json.dumps({"watchers": [{"id": "a", "path": "a.log", "pattern": "E"},
                                      {"id": "b", "path": "b.log", "pattern": "E"}]})
    code = HUP_AT.format(config=str(config), edited=edited) + LAUNCH["console script"]
    log = tmp_path / "stderr"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: "reloaded" in log.read_text() or proc.poll() is not None,
                 "the reload once started")
        assert proc.poll() is None, log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=DEADLINE_S)
    assert proc.returncode == 0, log.read_text()
    assert (tmp_path / ".watchrun" / "watchers" / "b.jsonl").exists()  # the edited config's
    assert "Traceback" not in log.read_text()
