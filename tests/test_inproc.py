"""tests/inproc.py answers as the console script does: the same stdout, stderr and exit status
for a command that succeeds, one that fails on its config, a usage error, --version and a
`run --once` over files; and the once run leaves the test process as it found it."""

from __future__ import annotations

import ctypes
import logging
import re
import resource
import signal
import subprocess
from pathlib import Path

import pytest
from inproc import inproc, once_in_process
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


def test_a_live_runner_start_is_refused_in_process(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="starts a live runner"):
        inproc(tmp_path, "run")


def _said(text: str, folder: Path) -> str:
    """Without what differs between two runs: the time each line was said and the folder."""
    varying = r'\d{4}-\d\d-\d\dT[\d:.]+Z|"(?:durationMs|took|inode|device|dev|mtimeNs)": ?\d+'
    return re.sub(varying, "", text).replace(str(folder), "DIR")


@pytest.mark.parametrize("args", [(), ("--json",), ("--quiet",)])
def test_a_once_run_over_files_in_process_answers_as_the_console_script(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    config = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    assert once_in_process(config)
    runs = []
    for name in ("real", "here"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "app.log").write_text("ok\nERROR one\nfine\n")
        write_config(folder, config)
        if name == "real":
            done = subprocess.run([watchrun_bin(), "run", "--once", *args], capture_output=True,
                                  text=True, cwd=folder, timeout=60, check=False)
        else:
            done = inproc(folder, "run", "--once", *args)
        runs.append((done.returncode, _said(done.stdout, folder), _said(done.stderr, folder)))
    real, here = runs
    assert real[0] == 1 and "ERROR one" in real[1] + real[2]
    assert here == real


def test_a_once_run_in_process_leaves_the_process_as_it_was(tmp_path: Path) -> None:
    taken = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE)
    logger = logging.getLogger("watchrun")
    before = ({sig: signal.getsignal(sig) for sig in taken},
              resource.getrlimit(resource.RLIMIT_NOFILE), Path.cwd(), list(logger.handlers))
    (tmp_path / "app.log").write_text("ERROR\n")
    write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    assert inproc(tmp_path, "run", "--once").returncode == 0
    after = ({sig: signal.getsignal(sig) for sig in taken},
             resource.getrlimit(resource.RLIMIT_NOFILE), Path.cwd(), list(logger.handlers))
    assert after == before
    flag = ctypes.c_int(-1)
    assert ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    assert flag.value == 0


@pytest.mark.parametrize(("config", "env", "here"), [
    ({"watchers": [{"id": "a", "path": "a.log", "pattern": "E"}]}, {}, True),
    ({"watchers": [{"id": "a", "command": "true", "pattern": "E"}]}, {}, False),
    ({"watchers": [{"id": "a", "path": "a.log", "pattern": "E"}],
      "agents": [{"name": "x", "provider": "claude"}]}, {}, False),
    ({"watchers": [{"id": "a", "path": "a.log", "pattern": "E",
                    "actions": [{"type": "exec", "command": ["true"]}]}]}, {}, False),
    ({"watchers": [{"id": "a", "path": "a.log", "pattern": "E"}]}, {"PYTHONPATH": "/x"}, False),
])
def test_only_a_once_run_that_starts_no_child_runs_in_process(
        config: dict[str, object], env: dict[str, str], here: bool) -> None:
    assert once_in_process(config, env) is here
