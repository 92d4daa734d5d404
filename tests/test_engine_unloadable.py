"""An engine that is installed but cannot be loaded (google-re2 whose shared object cannot be
mapped: a memory limit, a broken install) is a failure of the run, said in one line, exit 3:
it was taken for an engine not installed, so the config was judged without it (a pattern
refused, `invalid config`, exit 2) and `validate` ended in a traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from liverunner import watchrun_bin

SAID = "re2 is installed but could not be loaded: libre2.so.11: cannot open shared object file"


@pytest.mark.parametrize("command", [["validate"], ["run", "--once"]])
def test_an_installed_re2_that_cannot_be_loaded_is_said_in_one_line(
        tmp_path: Path, command: list[str]) -> None:
    broken = tmp_path / "site" / "re2"  # (found first on the path: installed, not loadable)
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise ImportError("libre2.so.11: cannot open shared object file")\n')
    (tmp_path / "app.log").write_text("FATAL once\n")
    (tmp_path / "watch.yaml").write_text(
        "watchers:\n  - {id: app, path: app.log, pattern: FATAL, gate: {maxMatches: 0}}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([watchrun_bin(), *command, "-c", "watch.yaml"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    said = "cannot check the config" if command == ["validate"] else "could not start"
    assert f"watchrun: error: {said}: {SAID}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "invalid config" not in done.stderr
