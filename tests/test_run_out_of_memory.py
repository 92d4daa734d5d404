"""A run short of memory before its loop (explore-limits F6): reading the config allocated the
16 MiB limit whatever the file's size, and a MemoryError there was a Python traceback and exit
1, which in `run --once` means "a gate is crossed". Now a config takes memory for what is in it,
and what fails before the run begins is one line and exit 3 (`--json`: `run_failed`)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import NoReturn

import pytest
from inproc import inproc
from liverunner import watchrun_bin, write_config

import watchrun.config as config_package
from watchrun.cli import run as run_command
from watchrun.config.loader import MAX_BYTES, read_regular

TIMEOUT_S = 60
GATED = {"watchers": [{"id": "big", "path": "big.log", "pattern": "FATAL",
                       "gate": {"maxMatches": 0}}]}


def test_a_config_read_takes_memory_for_what_is_in_it(tmp_path: Path) -> None:
    path = write_config(tmp_path, GATED)
    tracemalloc.start()
    try:
        data = read_regular(Path(path), MAX_BYTES + 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == Path(path).read_bytes()
    assert peak < 1 << 20, peak  # (it was 16 MiB and more, for a 100-byte file)


@pytest.mark.parametrize("mib", range(20, 72, 4))
def test_a_once_run_short_of_memory_exits_3_in_one_line_never_1(tmp_path: Path, mib: int) -> None:
    """Under a real address-space limit, whatever fails first (a module's load, the config's
    read, a thread's stack): exit 3 and one line, or a run that passes; never Python's 1."""
    (tmp_path / "big.log").write_text("INFO fine\n")
    path = write_config(tmp_path, GATED)
    done = subprocess.run(
        [watchrun_bin(), "run", "--once", "-c", str(path)], capture_output=True, text=True,
        timeout=TIMEOUT_S, cwd=tmp_path,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20)))
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 0:
        assert "watchrun: passed: the 1 gate holds" in done.stdout
        return
    assert done.returncode == 3, done.stdout + done.stderr
    assert "watchrun: error: " in done.stderr.splitlines()[-1], done.stderr


def test_a_memory_error_reading_the_config_is_run_failed_in_the_json_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(tmp_path, GATED)

    def no_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(config_package, "load_config", no_memory)  # (what `run` calls)
    ended: list[int] = []

    def end_now(status: int, line: str | bytes | None) -> NoReturn:
        """As `cli.end_now`, which ends the process (this one is pytest's): with the status."""
        if line is not None:
            print(line.decode().rstrip("\n") if isinstance(line, bytes) else line,
                  file=sys.stderr)
        ended.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(run_command, "end_now", end_now)
    said = "could not start: out of memory (MemoryError); nothing was started"
    text = inproc(tmp_path, "run", "--once", "-c", "watch.yaml")
    assert (text.returncode, text.stdout, text.stderr) == (3, "", f"watchrun: error: {said}\n")
    as_json = inproc(tmp_path, "run", "--once", "--json", "-c", "watch.yaml")
    assert as_json.returncode == 3, as_json.stderr
    assert json.loads(as_json.stdout) == {"error": {"code": "run_failed", "message": said}}
    assert ended == [3, 3]  # (each ended at once: the interpreter's end is short of memory too)


LIBRARY_LOGS = """\
import logging
from watchrun.output.runlog import ForwardToRunLog, RunLog
ForwardToRunLog(RunLog("text")).install()  # (as a run does before it loads its config)
try:
    raise ValueError("unsupported hash type blake2b")
except ValueError:
    logging.exception("code for hash blake2b was not found.")  # (hashlib, short of memory)
logging.getLogger("some.library").warning("a warning")
"""


def test_what_a_library_logs_is_one_line_of_the_runs_log_never_a_traceback() -> None:
    """hashlib, short of memory (a run under a 32 MiB limit), logs `code for hash blake2b was not
    found` with its traceback through the root logger, which printed both: a traceback on a
    run's stderr. A library's log is a line of the run's log, its traceback left out."""
    done = subprocess.run([sys.executable, "-c", LIBRARY_LOGS], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert "Traceback" not in done.stderr, done.stderr
    said = [line.split(" ", 1)[1] for line in done.stderr.splitlines()]
    assert said == ["watchrun: error: code for hash blake2b was not found.",
                    "watchrun: warning: a warning"], done.stderr


LOGGED_AS_IT_LOADS = """\
import importlib.abc, logging, sys
class Logs(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "watchrun.runtime.supervisor":  # (hashlib loads with the supervisor's
            sys.meta_path.remove(self)  # engines, and logs there when short of memory)
            try:
                raise ValueError("unsupported hash type blake2b")
            except ValueError:
                logging.exception("code for hash blake2b was not found.")
        return None
sys.meta_path.insert(0, Logs())
sys.argv = ["watchrun", "run", "--once", "-c", "watch.yaml"]
from watchrun.cli import entry
sys.exit(entry())
"""


def test_what_a_module_logs_as_a_run_loads_it_is_a_line_of_the_runs_log(tmp_path: Path) -> None:
    """A run loads the supervisor's modules (and hashlib with them) once its log takes what
    other loggers say: a run under a 32 MiB limit printed hashlib's traceback, logged while
    those modules loaded, before it."""
    (tmp_path / "big.log").write_text("INFO fine\n")
    write_config(tmp_path, GATED)
    done = subprocess.run([sys.executable, "-c", LOGGED_AS_IT_LOADS], capture_output=True,
                          text=True, timeout=TIMEOUT_S, cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert "watchrun: error: code for hash blake2b was not found." in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr



SHORT = """
import sys
import watchrun.cli
import watchrun.config

def no_memory(*args, **kwargs):
    raise MemoryError

watchrun.cli.not_begun = no_memory  # (short of memory, making the line fails too)
if sys.argv[1] == "loading":  # (a module's load)
    sys.modules["watchrun.cli.main"] = type(sys)("watchrun.cli.main")
    sys.modules["watchrun.cli.main"].main = no_memory
else:  # (the config's read, in `run`)
    watchrun.config.load_config = no_memory
sys.argv = ["watchrun", "run", *sys.argv[2:], "-c", "watch.yaml"]
sys.exit(watchrun.cli.entry())
"""


@pytest.mark.parametrize("where", ["loading", "reading"])
@pytest.mark.parametrize("once", [[], ["--once"]])
def test_a_run_out_of_memory_says_so_with_a_line_made_before(tmp_path: Path, where: str,
                                                             once: list[str]) -> None:
    """Short of memory when the run fails (20 MiB on a loaded host), making the line that says
    so failed too: a traceback and exit 1, a crossed gate's. The line is made before it is
    needed: exit 3 and that line, whatever else cannot be done."""
    write_config(tmp_path, GATED)
    done = subprocess.run([sys.executable, "-c", SHORT, where, *once], capture_output=True,
                          text=True, timeout=TIMEOUT_S, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (3, "watchrun: error: could not start: out of "
                                                 "memory (MemoryError); nothing was started\n")
