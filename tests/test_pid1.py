"""watchrun as a container's PID 1 (the first process of a new PID namespace): it stops on
SIGTERM, even one that arrives while it is still importing (a SIGHUP then is a reload once
started), and reaps the orphans reparented to it. The kernel drops a signal sent to a PID 1
that has no handler for it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, read_records, wait_for, watchrun_bin, write_config


def _namespaces_allowed() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Urpf", "--mount-proc", "true"], capture_output=True,
                           timeout=DEADLINE_S)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_allowed(),
                                reason="unprivileged user and PID namespaces are not allowed here")

HOLD = '''
import os, sys

class _Hold:
    """Stops the import of watchrun's argument parser until the test says go."""

    def find_spec(self, name, path=None, target=None):
        if name == "watchrun.cli.parser":
            sys.meta_path.remove(self)
            open(os.environ["HOLD_HERE"], "w").close()
            with open(os.environ["HOLD_GO"], "rb") as go:
                go.read()
        return None

sys.meta_path.insert(0, _Hold())
'''


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rindex(")") + 2]


def _nspid(pid: int) -> str:
    """The pid of a process in its own (innermost) PID namespace; "" when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
    return status.split("NSpid:")[1].split("\n")[0].split()[-1]


def _pid1(unshare: subprocess.Popen[bytes]) -> int:
    """The host pid of the process that unshare forked as PID 1, once it runs watchrun."""
    def ready() -> int | None:
        for pid in _children(unshare.pid):
            with contextlib.suppress(OSError):
                if _nspid(pid) == "1" and "unshare" not in Path(f"/proc/{pid}/comm").read_text():
                    return pid
        return None
    found: int = wait_for(ready, "watchrun running as PID 1")
    return found


@contextlib.contextmanager
def as_pid1(config: Path, env: dict[str, str] | None = None, *more: str
            ) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    err = open(config.parent / "runner.err", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        ["unshare", "-Urpf", "--mount-proc", watchrun_bin(), "run", *more, "-c", str(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=config.parent,
        start_new_session=True, env={**os.environ, **(env or {})})
    try:
        yield proc, _pid1(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the namespace ends with its PID 1
            proc.wait()
        err.close()


def test_as_pid1_it_reaps_orphans_and_stops_on_sigterm(tmp_path: Path) -> None:
    # the inner shell leaves a child behind and exits: the child is reparented to PID 1
    command = "sh -c 'sleep 0.2 & echo orphan $!'; exec sleep 1000"
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": command, "pattern": "orphan"}]})
    out = tmp_path / ".watchrun" / "watchers" / "c.jsonl"
    with as_pid1(config) as (proc, pid):
        matches = wait_for(lambda: [r for r in read_records(out) if r["kind"] == "match"],
                           "the match")
        orphan = matches[0]["line"].split()[1]  # its pid in the namespace

        def reaped() -> bool:  # neither alive nor a zombie: gone from PID 1's children
            kids = _children(pid)
            return bool(kids) and orphan not in [_nspid(k) for k in kids]
        wait_for(reaped, "the orphan to exit and be reaped by PID 1")
        assert all(_state(k) != "Z" for k in _children(pid))
        os.kill(pid, signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE_S) == 0, (tmp_path / "runner.err").read_text()
    kinds = [r["kind"] for r in read_records(out)]
    assert kinds[-2:] == ["exit", "stop"], kinds  # the command ended, then the watcher


def held_at_the_parser(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """The environment that holds watchrun's import of its argument parser (`HOLD`), the file
    that says it is held there and the FIFO whose opening lets it go on."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOLD)
    here, go = tmp_path / "here", tmp_path / "go"
    os.mkfifo(go)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "HOLD_HERE": str(here), "HOLD_GO": str(go)}, here, go


def let_go(go: Path, unshare: subprocess.Popen[bytes]) -> None:
    """Open and close the FIFO's writing end once watchrun has opened its reading end (before,
    the open fails with ENXIO, and a loaded machine can be that slow: watchrun would then wait
    for a writer forever), so its read ends; or not at all once it has stopped."""
    def opened() -> bool:
        try:
            os.close(os.open(go, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return unshare.poll() is not None
        return True
    wait_for(opened, "watchrun to open the FIFO that lets it go on")


@pytest.mark.parametrize("once", [False, True], ids=["run", "once"])
def test_as_pid1_a_sigterm_while_it_is_still_importing_stops_it(tmp_path: Path,
                                                                once: bool) -> None:
    """A once run as PID 1 stopped so passed (exit 0, nothing said): its signals were caught
    when watchrun's first module loaded, as any PID 1's, without knowing it was a once run."""
    env, here, go = held_at_the_parser(tmp_path)
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "sleep 1000", "pattern": "x", "gate": {"maxMatches": 0}}]})
    with as_pid1(config, env, *(["--once"] if once else [])) as (proc, pid):
        wait_for(here.exists, "watchrun to begin importing its argument parser")
        os.kill(pid, signal.SIGTERM)
        let_go(go, proc)
        try:
            status = proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail("the SIGTERM sent while watchrun imported was lost: it runs on")
    said = (tmp_path / "runner.err").read_text()
    assert status == (3 if once else 0), said
    assert ("stopped by SIGTERM before it started: exit 3" in said) == once, said
    assert not (tmp_path / ".watchrun" / "watchers" / "c.jsonl").exists()


AS_THE_CLI_LOADS = '''"""Sends this process a SIGTERM as `watchrun.cli`'s module body returns: after
its PID 1 signal handlers, before `entry` runs."""
import os, signal, sys


def body(frame, event, arg):
    if event == "return":
        sys.settrace(None)
        os.kill(os.getpid(), signal.SIGTERM)
    return body


def calls(frame, event, arg):
    code = frame.f_code
    if code.co_name == "<module>" and code.co_filename.endswith(
            os.path.join("watchrun", "cli", "__init__.py")):
        return body
    return None


sys.settrace(calls)
'''


@pytest.mark.parametrize("once", [False, True], ids=["run", "once"])
def test_as_pid1_a_stop_as_its_first_module_loads_is_never_a_pass(tmp_path: Path,
                                                                   once: bool) -> None:
    """The handlers watchrun's first module sets for a PID 1 made a stop there end a once run
    with 0, a pass (a fourth explorer's S2): they now know a once run, as `entry`'s do."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(AS_THE_CLI_LOADS)
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH"))
                                         if p)}
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "sleep 1000", "pattern": "x", "gate": {"maxMatches": 0}}]})
    proc = subprocess.run(["unshare", "-Urpf", "--mount-proc", watchrun_bin(), "run",
                           *(["--once"] if once else []), "-c", str(config)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, **env}, timeout=DEADLINE_S)
    assert proc.returncode == (3 if once else 0), proc.stderr
    assert ("stopped by SIGTERM before it started: exit 3" in proc.stderr) == once, proc.stderr
    assert not (tmp_path / ".watchrun" / "watchers" / "c.jsonl").exists()


def test_as_pid1_a_sighup_while_it_is_still_importing_is_a_reload_once_started(
        tmp_path: Path) -> None:
    """README: a SIGHUP before the runner has started is recorded, never fatal, and is one
    reload once started (as PID 1 the kernel would drop it; anywhere else it would kill)."""
    env, here, go = held_at_the_parser(tmp_path)
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [{"id": "a", "path": "app.log",
                                                   "pattern": "x"}]})
    err = tmp_path / "runner.err"
    with as_pid1(config, env) as (proc, pid):
        wait_for(here.exists, "watchrun to begin importing its argument parser")
        os.kill(pid, signal.SIGHUP)
        let_go(go, proc)
        wait_for(lambda: "reloaded" in err.read_text() or proc.poll() is not None,
                 "the reload once started")
        assert proc.poll() is None, err.read_text()
        os.kill(pid, signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE_S) == 0, err.read_text()
