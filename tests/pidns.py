"""Test helper: watchrun processes in pid namespaces of their own (`unshare --pid`), as in
containers that share an output dir with the host or with each other."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

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
