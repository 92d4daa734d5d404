"""The guardian process (`process/guardian.py`) starts beside every runner and `agent run` that
spawns a child, and the test suite starts hundreds: it loads only what ending process groups
needs (os, errno, time, the /proc reader), in an interpreter without site that ignores the
environment. These tests run the command line a runner really gives it, read back from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from liverunner import wait_for

from watchrun.process.guard import Guardian
from watchrun.process.tree import start_time

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

OWN = {"watchrun", "watchrun.process", "watchrun.process.guardian", "watchrun.process.procstat"}
"""What the guardian may load besides the standard modules its work needs."""
HEAVY = ("subprocess", "json", "pathlib", "asyncio", "ctypes", "threading", "typing",
         "collections", "enum", "signal", "contextlib", "msgspec", "site",
         "watchrun.process.tree", "watchrun.process.groups", "watchrun.process.guard",
         "watchrun.output", "watchrun.output.safefs")


def started_command() -> list[bytes]:
    """The guardian's command line as a runner starts it."""
    guardian = Guardian()
    try:
        assert guardian.problem is None and guardian.pid is not None
        cmdline = Path(f"/proc/{guardian.pid}/cmdline")  # (empty for a moment after the exec)
        return list(wait_for(lambda: cmdline.read_bytes().split(b"\0")[:-1], "its cmdline"))
    finally:
        guardian.close()


def imported(argv: list[bytes], stdin: bytes, env: dict[str, str] | None = None
             ) -> tuple[int, set[str]]:
    """Run `argv` with -X importtime: (exit status, every module it imported)."""
    done = subprocess.run([argv[0], b"-X", b"importtime", *argv[1:]], input=stdin,
                          capture_output=True, timeout=60, env=env)
    lines = done.stderr.decode().splitlines()
    assert all(x.startswith("import time:") for x in lines), done.stderr.decode()[-2000:]
    return done.returncode, {x.rsplit("|", 1)[-1].strip() for x in lines[1:]}


def test_the_guardian_loads_only_what_ending_groups_needs() -> None:
    argv = started_command()
    _, needed = imported([argv[0], b"-I", b"-S", b"-c", b"import __future__, errno, os, time"],
                         b"")
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        told = f"+{leader.pid} {start_time(leader.pid)} \n".encode()
        code, loaded = imported(argv, told)  # then end of file: the runner died
        assert code == 0
        assert leader.wait(timeout=10) < 0  # ended by its signal: the guardian did its work
    finally:
        leader.kill()
        leader.wait()
    for heavy in HEAVY:
        assert heavy not in loaded, f"the guardian imports {heavy}"
    assert loaded - needed <= OWN, f"the guardian imports {sorted(loaded - needed - OWN)}"
    assert "watchrun.process.guardian" in loaded


def test_the_guardian_ignores_the_runners_python_environment(tmp_path: Path) -> None:
    """A PYTHONPATH in the runner's environment puts no code into the guardian (-I)."""
    trap = tmp_path / "watchrun"
    trap.mkdir()
    (trap / "__init__.py").write_text("raise SystemExit(7)\n")
    (tmp_path / "sitecustomize.py").write_text("raise SystemExit(8)\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONSTARTUP": str(trap / "__init__.py")}
    done = subprocess.run(started_command(), input=b".\n", capture_output=True, timeout=60,
                          env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.parametrize("writes", [False, True], ids=["no-bytecode", "bytecode"])
def test_the_guardian_writes_bytecode_only_when_the_runner_does(
        monkeypatch: pytest.MonkeyPatch, writes: bool) -> None:
    """`-I` ignores PYTHONDONTWRITEBYTECODE: a guardian started under a file size limit (an
    `agent run` the tests start with RLIMIT_FSIZE) wrote `guardian.cpython-*.pyc` cut short at
    the limit, and every later start from that tree failed (`EOFError: marshal data too
    short`; an explorer's finding). The runner's setting is passed on as `-B`."""
    monkeypatch.setattr(sys, "dont_write_bytecode", not writes)
    assert (b"-B" in started_command()) is not writes
