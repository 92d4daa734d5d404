"""tests/inproc.py answers as the console script does: the same stdout, stderr and exit status
for a command that succeeds, one that fails on its config, a usage error and --version."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import watchrun_bin, write_config


@pytest.mark.parametrize("args", [
    ("validate",),
    ("validate", "--json"),
    ("list", "--json"),
    ("status",),
    ("matches", "nope"),
    ("list", "--bogus"),
    ("--version",),
])
def test_a_command_in_process_answers_as_the_console_script(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    write_config(tmp_path, {"watchers": [{"id": "a", "path": "a.log", "pattern": "ERROR"}]})
    real = subprocess.run([watchrun_bin(), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=False)
    here = inproc(tmp_path, *args)
    assert (here.returncode, here.stdout, here.stderr) == \
        (real.returncode, real.stdout, real.stderr)


def test_a_config_error_in_process_is_the_same_error(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text("watchers:\n  - id: a\n    file: a.log\n")
    real = subprocess.run([watchrun_bin(), "validate"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=False)
    here = inproc(tmp_path, "validate")
    assert real.returncode == 2 and "unknown key `file`" in real.stdout
    assert (here.returncode, here.stdout, here.stderr) == \
        (real.returncode, real.stdout, real.stderr)


def test_a_runner_start_is_refused_in_process(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="starts a runner"):
        inproc(tmp_path, "run", "--once")
