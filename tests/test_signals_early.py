"""Signals that reach `watchrun run` while its modules load (a tester's F2 of the operations
round): a SIGHUP there ended the runner (exit 129) and a SIGTERM ended a once run with 143,
since the handlers came only after the arguments were parsed. The child is held inside
`import argparse` (a stand-in module first on its PYTHONPATH, which waits for a file) so the
signal lands in that window every time."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, LiveRunner, wait_for, watchrun_bin, write_config

from watchrun.cli.parser import COMMANDS

HOLD = '''"""Stands in for argparse: says it was reached, waits for a go, loads the real one."""
import importlib.util, os, sys, sysconfig, time
open(os.environ["HOLD_REACHED"], "w").close()
while not os.path.exists(os.environ["HOLD_GO"]):
    time.sleep(0.005)
spec = importlib.util.spec_from_file_location(
    "argparse", os.path.join(sysconfig.get_path("stdlib"), "argparse.py"))
module = importlib.util.module_from_spec(spec)
sys.modules["argparse"] = module
spec.loader.exec_module(module)
'''


STOP_IN_IMPORT = '''"""Sends this process a stop signal (once) when STOP_INSIDE's import imports
STOP_AT, after watchrun took the signals: msgspec's and orjson's C inits import a module."""
import os, signal, sys


def inside(parent):
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "_find_and_load" and frame.f_locals.get("name") == parent:
            return True
        frame = frame.f_back
    return False


def hook(event, args):
    name, sent = os.environ["STOP_AT"], os.environ["STOP_SENT"]
    if event == "import" and args[0] == name and name not in sys.modules \\
            and signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None) \\
            and not os.path.exists(sent) and inside(os.environ["STOP_INSIDE"]):
        open(sent, "w").close()
        os.kill(os.getpid(), signal.SIGTERM)


sys.addaudithook(hook)
if os.environ.get("STOP_LOOK_S"):  # how often a stop deferred there looks again (10 ms)
    import watchrun.cli.stops
    watchrun.cli.stops.LOOK_AGAIN_S = float(os.environ["STOP_LOOK_S"])
'''
IN_C_INITS = [("datetime", "msgspec._core"), ("dataclasses", "orjson.orjson")]
"""A module first imported by a C extension's init, as `watchrun run` loads (the SIGTERM there
was swallowed by msgspec's, and crashed orjson's with SIGSEGV)."""


def shadowed(tmp_path: Path, module: str, text: str) -> str:
    """PYTHONPATH with a folder first in it that holds `module`.py (`text`)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / f"{module}.py").write_text(text)
    return os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH")) if p)


def stop_in_import_env(tmp_path: Path, module: str, parent: str, seam: str = STOP_IN_IMPORT,
                       **more: str) -> dict[str, str]:
    """The environment of a `watchrun` sent a SIGTERM when `parent`'s import imports `module`
    (`seam`: STOP_IN_IMPORT, or one made from it)."""
    return {**os.environ, "PYTHONPATH": shadowed(tmp_path, "sitecustomize", seam),
            "STOP_AT": module, "STOP_INSIDE": parent, "STOP_SENT": str(tmp_path / "sent"), **more}


def held_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a child held inside `import argparse` until `go` exists."""
    return {"PYTHONPATH": shadowed(tmp_path, "argparse", HOLD),
            "HOLD_REACHED": str(tmp_path / "reached"), "HOLD_GO": str(tmp_path / "go")}


def test_the_guess_of_a_run_knows_every_other_command() -> None:
    from watchrun.cli import _OTHER_COMMANDS

    assert set(COMMANDS) - {"run"} == _OTHER_COMMANDS


def test_a_sighup_while_the_runner_loads_is_a_reload_once_started(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    r = LiveRunner(config, env=held_env(tmp_path))
    try:
        wait_for((tmp_path / "reached").exists, "the runner to be loading argparse")
        r.send(signal.SIGHUP)
        (tmp_path / "go").touch()
        r.wait_running()
        r.wait_log("reload")
        assert r.proc.poll() is None, r.stderr()
    finally:
        assert r.stop() == 0, r.stderr()


def test_a_sigterm_while_a_once_run_loads_is_exit_3_never_a_pass(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("")
    write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                          "gate": {"maxMatches": 0}}]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", "watch.yaml"], cwd=tmp_path,
                            env={**os.environ, **held_env(tmp_path)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for((tmp_path / "reached").exists, "the once run to be loading argparse")
    proc.send_signal(signal.SIGTERM)
    (tmp_path / "go").touch()
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 3, (proc.returncode, out, err)
    assert "stopped by SIGTERM before it started: exit 3" in err


@pytest.mark.parametrize("once", [False, True], ids=["run", "once"])
@pytest.mark.parametrize(("module", "parent"), IN_C_INITS, ids=[m for m, _ in IN_C_INITS])
def test_a_stop_inside_a_c_extensions_import_ends_the_run_before_it_starts(
        tmp_path: Path, module: str, parent: str, once: bool) -> None:
    write_config(tmp_path, {"watchers": [{"id": "c", "command": "touch started; sleep 60",
                                          "pattern": "x", "gate": {"maxMatches": 0}}]})
    proc = subprocess.run([watchrun_bin(), "run", *(["--once"] if once else []), "-c",
                           "watch.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          env=stop_in_import_env(tmp_path, module, parent),
                          timeout=DEADLINE_S)
    assert (tmp_path / "sent").exists(), f"{parent} did not import {module}: {proc.stderr}"
    assert proc.returncode == (3 if once else 0), (proc.returncode, proc.stderr)
    assert not (tmp_path / "started").exists()
    if once:
        assert "stopped by SIGTERM before it started: exit 3" in proc.stderr


@pytest.mark.parametrize("once", [False, True], ids=["run", "once"])
def test_a_stop_deferred_there_is_acted_on_where_a_failed_start_ends(tmp_path: Path,
                                                                     once: bool) -> None:
    """The stop deferred inside an extension's init was acted on only by a later look or by
    the hand-over to the runner: with an invalid config the process ended first, with the
    config's status (2: the stop dropped), or the pending SIGALRM killed it (142), or the look
    raised inside the interpreter's exit (a traceback). It is acted on where the run ends."""
    (tmp_path / "watch.yaml").write_text("watchers:\n  - {id: c, command: 5, patern: up}\n")
    proc = subprocess.run([watchrun_bin(), "run", *(["--once"] if once else []), "-c",
                           "watch.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          env=stop_in_import_env(tmp_path, *IN_C_INITS[0], STOP_LOOK_S="60"),
                          timeout=DEADLINE_S)
    assert (tmp_path / "sent").exists(), proc.stderr
    assert proc.returncode == (3 if once else 0), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr


STOP_IN_SET_NAME = STOP_IN_IMPORT.replace('''sys.addaudithook(hook)''', '''import functools
set_name = functools.cached_property.__set_name__
def __set_name__(self, owner, name):  # (a class with a cached_property is being made)
    sent = os.environ["STOP_SENT"]
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None) \\
            and owner.__module__.startswith("watchrun.") and not os.path.exists(sent):
        open(sent, "w").close()
        os.kill(os.getpid(), signal.SIGTERM)
    return set_name(self, owner, name)
functools.cached_property.__set_name__ = __set_name__''')
"""Sends the first SIGTERM inside a `cached_property`'s `__set_name__` in a class of watchrun's
(`match.redact.Redactor`)."""


def test_a_stop_inside_a_set_name_ends_the_run_as_promised(tmp_path: Path) -> None:
    """Python 3.11 wraps what a `__set_name__` raises in a RuntimeError: a stop that landed in
    one (a class with a `cached_property` being made as the runner loaded) ended it with 1 and
    a traceback (a third explorer's S3)."""
    write_config(tmp_path, {"watchers": [{"id": "c", "command": "touch started; sleep 60",
                                          "pattern": "x"}]})
    env = {**os.environ, "STOP_SENT": str(tmp_path / "sent"),
           "PYTHONPATH": shadowed(tmp_path, "sitecustomize", STOP_IN_SET_NAME)}
    proc = subprocess.run([watchrun_bin(), "run", "-c", "watch.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=DEADLINE_S)
    assert (tmp_path / "sent").exists(), proc.stderr
    assert (proc.returncode, "Traceback" in proc.stderr) == (0, False), proc.stderr
    assert not (tmp_path / "started").exists()


STOP_DROPPED = '''"""Sends this process a SIGTERM when `ssl` is first imported (by asyncio, after
watchrun took the signals) and drops the stop it raises there, as C code that checked for
signals while it made an error drops it (CPython's `import_from` formatting its ImportError in
ssl.py: a fourth explorer's N1a); with STOP_REPLACED, that C code's own error goes on instead,
not chained to the stop."""
import os, signal, sys, time


def hook(event, args):
    sent = os.environ["STOP_SENT"]
    if event == "import" and args[0] == "ssl" and "ssl" not in sys.modules \\
            and signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None) \\
            and not os.path.exists(sent):
        open(sent, "w").close()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            end = time.monotonic() + 5
            while time.monotonic() < end:  # (the stop is raised in here, or 10 ms later)
                pass
        except SystemExit:
            pass
        if os.environ.get("STOP_REPLACED"):
            raise TypeError("expected a message argument")


sys.addaudithook(hook)
'''


@pytest.mark.parametrize("replaced", [False, True], ids=["dropped", "replaced"])
@pytest.mark.parametrize("once", [False, True], ids=["run", "once"])
def test_a_stop_that_c_code_dropped_or_replaced_still_ends_the_run(
        tmp_path: Path, once: bool, replaced: bool) -> None:
    """A stop raised inside C code that then cleared it, or set an error of its own in its
    place, unchained: the runner went on until the stop was raised again (a once run said
    "stopped by SIGTERM" twice), or ended with that error's traceback and exit 1."""
    write_config(tmp_path, {"watchers": [{"id": "c", "command": "touch started; sleep 60",
                                          "pattern": "x", "gate": {"maxMatches": 0}}]})
    env = {**os.environ, "STOP_SENT": str(tmp_path / "sent"),
           "PYTHONPATH": shadowed(tmp_path, "sitecustomize", STOP_DROPPED),
           **({"STOP_REPLACED": "1"} if replaced else {})}
    proc = subprocess.run([watchrun_bin(), "run", *(["--once"] if once else []), "-c",
                           "watch.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=DEADLINE_S)
    assert (tmp_path / "sent").exists(), proc.stderr
    assert proc.returncode == (3 if once else 0), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("stopped by SIGTERM before it started") == (1 if once else 0)
    assert not (tmp_path / "started").exists()


SIGNALLED_AT_THE_EXIT = STOP_IN_IMPORT + '''
import atexit
def again():  # (registered first: the last of the exit's calls)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        os.kill(os.getpid(), sig)
atexit.register(again)
'''
"""STOP_IN_IMPORT that also signals the process again as it exits."""


@pytest.mark.parametrize("once", [False, True], ids=["run", "once"])
def test_signals_after_a_stop_before_the_start_change_nothing(tmp_path: Path,
                                                               once: bool) -> None:
    """Stopped before it started, the process left by the exception and never reached the
    point where later signals are ignored: one at its exit raised again (a traceback, and
    143 or 129 in its last milliseconds: a third explorer's S1)."""
    env = stop_in_import_env(tmp_path, *IN_C_INITS[0], seam=SIGNALLED_AT_THE_EXIT)
    write_config(tmp_path, {"watchers": [{"id": "c", "command": "sleep 60", "pattern": "x"}]})
    proc = subprocess.run([watchrun_bin(), "run", *(["--once"] if once else []), "-c",
                           "watch.yaml"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=DEADLINE_S)
    assert (tmp_path / "sent").exists(), proc.stderr
    assert proc.returncode == (3 if once else 0), proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert proc.stderr.count("stopped by SIGTERM before it started") == once
