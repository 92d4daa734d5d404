"""Test helper: a real `watchrun` process in its own session, with condition waits."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import forkserver
import yaml

DEADLINE_S = 30.0


def watchrun_bin() -> str:
    found = shutil.which("watchrun") or str(Path(sys.executable).parent / "watchrun")
    assert Path(found).exists(), "the watchrun console script is not installed"
    return found


def wait_for(cond: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    """Poll `cond` until it returns something truthy; fail naming `what` after `timeout`."""
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def cli(*args: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        timeout: float = DEADLINE_S, merged: bool = False) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` run to its end, as `subprocess.run(..., capture_output=True, text=True,
    stdin=DEVNULL)` returns it (stderr in stdout when `merged`): a process forked by
    tests/forkserver.py when it can be (in a session of its own; ~0.15 s of CPU less than an
    interpreter's start), else the console script started as a child."""
    argv = [watchrun_bin(), *map(str, args)]
    full, where = dict(os.environ if env is None else env), cwd or Path.cwd()
    done = forkserver.run(argv, env=full, cwd=where, merged=merged, timeout=timeout) \
        or subprocess.run(argv, cwd=where, env=full, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                          timeout=timeout, check=False)
    return subprocess.CompletedProcess(argv, done.returncode, _text(done.stdout),
                                       None if merged else _text(done.stderr or b""))


def _text(data: bytes) -> str:
    """`data` as `text=True` reads it: UTF-8, universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def as_nobody() -> list[str]:
    """The argv prefix that runs a program as uid and gid 65534 (`setpriv`); the calling test
    is skipped unless it runs as root where setpriv is installed."""
    import pytest

    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run a child as nobody")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def nobody_runs_watchrun() -> list[str]:
    """`as_nobody()`, once nobody can run this `watchrun` (a checkout in a 0700 folder, as a
    fresh clone under `mktemp -d`, is out of its reach): the calling test is skipped if not."""
    import pytest

    nobody = as_nobody()
    proc = subprocess.run([*nobody, watchrun_bin(), "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    if proc.returncode != 0:
        pytest.skip(f"watchrun cannot run as nobody here: {proc.stderr[-200:]}")
    return nobody


_HELD: dict[Path, Any] = {}


def hold_runner_lock(root: Path) -> None:
    """This process holds `root`'s `control.lock`, as a live runner does (snapshots with its
    pid as `runnerPid` are then live); held until the test process ends."""
    import fcntl

    if root not in _HELD:
        root.mkdir(parents=True, exist_ok=True)
        f = _HELD[root] = open(root / "control.lock", "w")  # noqa: SIM115
        fcntl.flock(f, fcntl.LOCK_EX)


def write_config(folder: Path, config: dict[str, Any], name: str = "watch.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def waking_mock(folder: Path) -> tuple[Path, Path]:
    """A config whose watcher `app` (app.log, empty) wakes the mock agent `ag` on each ERROR
    line: (the log, the config)."""
    log = folder / "app.log"
    log.write_text("")
    return log, write_config(folder, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "ag"}],
        "agents": [{"name": "ag", "provider": "mock", "prompt": "{matches}"}]})


def deliveries(folder: Path) -> list[dict[str, Any]]:
    """The `delivery` records of the agent `ag` under `folder`'s output dir."""
    path = folder / ".watchrun" / "agents" / "ag.jsonl"
    return [r for r in read_records(path) if r["kind"] == "delivery"] if path.exists() else []


def lag_limit() -> float:
    """The worst loop stall an end-to-end test accepts: 100 ms, or 500 ms on a loaded box (more
    runnable processes than cores, as when the suite runs beside two busy loops: there a runner
    waits its turn for a CPU, and a flood's worker thread that holds the GIL is put off the CPU
    holding it; 0.295 s was seen in a full run on a slow host, no stall of the runner's own). The
    stalls these tests guard against (a flood, a history or a backtracking regex handled on the
    loop) hold it for seconds."""
    return 0.1 if os.getloadavg()[0] < (os.cpu_count() or 1) else 0.5


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines(keepends=True):
        if line.endswith(b"\n"):
            out.append(json.loads(line))
    return out


def processes(*files: str) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """Every process: its pid, the fields of its /proc stat after the command name (state,
    ppid, pgrp, session, …) and the /proc files `files` of it (those gone meanwhile left out)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            data = [(entry / name).read_bytes() for name in files]
        except OSError:
            continue
        yield int(entry.name), stat[stat.rindex(b")") + 2 :].split(), data


def session_pids(sid: int) -> list[int]:
    """Every live (non-zombie) process whose session id is `sid`."""
    return [pid for pid, st, _ in processes() if int(st[3]) == sid and st[0] != b"Z"]


def spawned_by(runner_pid: int, running: bytes = b"") -> list[int]:
    """Live processes started by that runner (directly or not) whose command line holds
    `running`: their environment carries WATCHRUN_SPAWN_ID=<runner pid>.…, even after `setsid`
    took them out of the group."""
    needle = f"WATCHRUN_SPAWN_ID={runner_pid}.".encode()
    return [pid for pid, st, (environ, cmdline) in processes("environ", "cmdline")
            if needle in environ and running in cmdline and st[0] != b"Z"]


def guardian_of(runner: int) -> int:
    """The guardian process of that runner (`watchrun.process.guard`, its child), once it runs."""
    def find() -> int | None:
        return next((pid for pid, st, (cmdline,) in processes("cmdline")
                     if b"watchrun.process.guard" in cmdline and int(st[1]) == runner), None)
    return int(wait_for(find, "the guardian process"))


def stored_validated(config: Path, args: Sequence[str], env: Mapping[str, str]) -> None:
    """Validate `config` in this process and store the result where the `run` of `args` with
    the environment `env` finds it, as `watchrun validate` does (not its engine checks, which
    compile every pattern: the runner compiles them); nothing when that run would not look
    there (another cache dir or home, its own output dir, another interpreter setting). A
    config with an error stores nothing: the runner says it."""
    from watchrun.config import load_config
    from watchrun.config.cache import cache_dir

    if (not config.is_absolute() or any(a.startswith(("-o", "--output-dir")) for a in args)
            or cache_dir(env) != cache_dir(os.environ) or env.get("HOME") != os.environ.get("HOME")
            or forkserver.startup_env(env) != forkserver.startup_env(os.environ)):
        return
    with contextlib.suppress(Exception):  # (whatever it is, the runner meets it too, and says it)
        load_config([config], env=env, refresh=True)


class LiveRunner:
    """`watchrun run -c CONFIG` started in a new session (so its pid is the session id)."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None,
                 preexec_fn: Callable[[], None] | None = None, cwd: Path | None = None,
                 validated: bool = True, forked: bool = True) -> None:
        """`validated`: the config is validated here first, as `watchrun validate` before a
        `run` validates it, so the runner starts from the stored entry (README "Start-up
        caches"); False: the runner validates it itself. `forked`: the runner is forked by
        tests/forkserver.py when it can be; False: the console script is started, as a child
        of this process (one that must stay unreaped, a zombie, for instance)."""
        self.config = config
        self.out = config.parent / ".watchrun"
        self.stderr_path = config.parent / f"runner-{time.monotonic_ns()}.err"
        self._err = open(self.stderr_path, "wb")  # noqa: SIM115
        full_env = {**os.environ, **(env or {})}
        if validated:
            stored_validated(config, args, full_env)
        self.left: list[int] = []
        argv = [watchrun_bin(), "run", "-c", str(config), *args]
        child = None if preexec_fn is not None or not forked else forkserver.spawn(
            argv, env=full_env, cwd=cwd or config.parent, stdout=None,
            stderr=self._err.fileno())
        self.proc: subprocess.Popen[bytes] | forkserver.Forked = child or subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self._err, stdin=subprocess.DEVNULL,
            start_new_session=True, env=full_env, cwd=cwd or config.parent, preexec_fn=preexec_fn,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def records(self, wid: str, kind: str = "watchers") -> list[dict[str, Any]]:
        return read_records(self.out / kind / f"{wid}.jsonl")

    def matches(self, wid: str) -> list[dict[str, Any]]:
        return [r for r in self.records(wid) if r["kind"] == "match"]

    def control(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One request on the live runner's control socket."""
        from watchrun.runtime.client import request

        return request(self.out / "control.sock", payload, timeout=DEADLINE_S)

    def assert_lag_ok(self) -> float:
        """The runner's worst loop stall so far is within `lag_limit()`; returns it."""
        lag = float(self.control({"cmd": "status"})["loopLagMaxS"])
        assert lag < lag_limit(), f"the runner's loop stalled {lag:.3f}s"
        return lag

    def wait_running(self) -> None:
        """Until the runner answers on its control socket that it runs (started, READY)."""
        def running() -> bool:
            try:
                return bool(self.control({"cmd": "status"}).get("state") == "running")
            except ConnectionError:
                return False
        wait_for(running, "the runner to be running")

    def wait_log(self, text: str, timeout: float = DEADLINE_S) -> None:
        """Until `text` is in the runner's log, not counting the test's folder in its paths (a
        folder is named after its test: `..._while_stopping_i0` held "stopping" from the start)."""
        def logged() -> bool:
            return text in self.stderr().replace(str(self.config.parent), "<dir>")
        wait_for(logged, f"{text!r} in the runner's log", timeout)

    def send(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = DEADLINE_S) -> int:
        """Signal and wait; returns the exit status. Kills leftovers after asserting."""
        if self.proc.poll() is None:
            self.send(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        """Kill the runner if still running; `self.left` = what survived it (then killed)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.left = self.leftovers()
        for pid in self.left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()

    def leftovers(self) -> list[int]:
        return session_pids(self.proc.pid) + spawned_by(self.proc.pid)


def fresh_python(script: str, cwd: Path | None = None) -> list[str]:
    """The lines `script` prints in a fresh interpreter (which must exit 0): what a module
    loads, away from what the test process already imported."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=DEADLINE_S, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def modules_after_commands(config: Path, cwd: Path) -> list[str]:
    """The modules a fresh interpreter holds after `run --once`, `list` and `validate` of
    `config` (each must exit 0): what a command imports that it should not shows here."""
    script = (
        "import contextlib, io, json, sys\n"
        "from watchrun.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', '--once', '--quiet', '-c', {str(config)!r}]) == 0\n"
        f"    assert main(['list', '-c', {str(config)!r}]) == 0\n"
        f"    assert main(['validate', '-c', {str(config)!r}]) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    names: list[str] = json.loads(fresh_python(script, cwd)[-1])
    return names


def alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
