"""Test helper: watchrun processes in pid namespaces of their own (`unshare --pid`), as in
containers that share an output dir with the host or with each other: `watchrun run` as the
first process (PID 1) of its namespace, as a container runs it (`start`, `NsRunner`), and
commands run to their end in a sibling namespace (`run`)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from liverunner import DEADLINE_S, wait_for, watchrun_bin

from watchrun.output import flocks

UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
"""A new pid namespace and its own /proc; the namespace ends when `unshare` is killed."""


def _can() -> bool:
    try:
        done = subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=DEADLINE_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


needs_pid_namespaces = pytest.mark.skipif(
    not _can(), reason="no pid namespace can be made here (`unshare --pid` needs root or "
    "CAP_SYS_ADMIN)")


def start(cwd: Path, *args: str) -> subprocess.Popen[bytes]:
    """`watchrun ARGS` as the first process of a new pid namespace; stderr to `cwd/ns.err`."""
    with open(cwd / "ns.err", "ab") as err:
        return subprocess.Popen([*UNSHARE, watchrun_bin(), *args], cwd=cwd,
                                start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)


def run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGV` (or a program: `argv[0]` an absolute path) to its end in a pid
    namespace of its own, a sibling of every other one: its /proc/locks lists none of their
    locks."""
    cmd = list(argv) if argv[0].startswith("/") else [watchrun_bin(), *argv]
    return subprocess.run([*UNSHARE, *cmd], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=DEADLINE_S, check=False)


def end(proc: subprocess.Popen[bytes], lock: Path) -> None:
    """Kill `proc`'s namespace (every process in it), then wait until `lock` is let go."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not flocks.held(lock), f"{lock.name} to be let go")


class NsRunner:
    """`watchrun run -c CONFIG` as PID 1 of a new pid namespace; `pid` is its pid here."""

    def __init__(self, config: Path) -> None:
        self.out = config.parent / ".watchrun"
        self.err = config.parent / f"ns-runner-{os.getpid()}-{id(self)}.err"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen([*UNSHARE, watchrun_bin(), "run", "-c", str(config)],
                                         cwd=config.parent, start_new_session=True,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err)
        self.pid = int(wait_for(self._child, "unshare's child, the namespace's PID 1"))

    def _child(self) -> int | None:
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        return int(kids.split()[0]) if kids.split() else None

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        from watchrun.runtime.client import request

        return request(self.out / "control.sock", payload, timeout=DEADLINE_S)

    def wait_running(self) -> None:
        def running() -> bool:
            try:
                return self.request({"cmd": "status"}).get("state") == "running"
            except OSError:
                assert self.proc.poll() is None, self.err.read_text()
                return False
        wait_for(running, "the namespace's runner to be running")

    def kill(self) -> None:
        """SIGKILL its PID 1: the kernel kills every process of the namespace (a container
        killed), and the runner cleans nothing up."""
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(DEADLINE_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(DEADLINE_S)
