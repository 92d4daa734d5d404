"""Ctrl-C while watchrun's modules load (the first ~0.1 s of any command) ends it as a Ctrl-C
later does: exit 130 and no traceback. The interrupt is a real SIGINT the process sends itself
when the import system is asked for one of the command line's modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from liverunner import DEADLINE_S

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
