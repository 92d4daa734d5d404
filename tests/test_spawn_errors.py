"""Spawn errors say what is wrong in words a user can act on: an argument or environment
variable too big for exec(2) (E2BIG), the runner out of descriptors (EMFILE), and never repeat a
huge command in full. Real spawns: the kernel refuses them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import fresh_python
from test_once import once, table_row

from watchrun.process.spawn import Spawner, SpawnError

BIG = 200_000  # over the kernel's 128 KiB for one argument or variable (4 KiB pages)
SHORT = 500  # a message that names a command shortened, with its reason


def spawn_error(command: str | list[str], env: dict[str, str] | None = None) -> SpawnError:
    async def attempt() -> None:
        proc = await Spawner().spawn(command, cwd=None, env=env or {})
        await proc.terminate(0)
        proc.close()

    with pytest.raises(SpawnError) as caught:
        asyncio.run(attempt())
    return caught.value


@pytest.fixture(autouse=True)
def four_kib_pages() -> None:
    if os.sysconf("SC_PAGESIZE") != 4096:
        pytest.skip("the messages below give the limit of a kernel with 4 KiB pages")


def test_e2big_names_the_argument_or_the_variable_too_big() -> None:
    over = "over the kernel's limit of 128 KiB for one"
    arg = spawn_error(["echo", "x" * BIG])
    assert (arg.errno_name, str(arg)) == (
        "E2BIG", f"cannot start 'echo': command[1] is {BIG} bytes, {over} argument (E2BIG)")
    shell = spawn_error("echo " + "x" * BIG)
    assert str(shell).endswith(f": the command is {BIG + 5} bytes, {over} argument (E2BIG)")
    assert str(shell).startswith("cannot start 'echo xxx") and "…'" in str(shell)
    assert len(str(shell)) < SHORT
    var = spawn_error("echo hi", {"BIG": "x" * BIG})
    assert str(var) == (f"cannot start 'echo hi': environment variable BIG is {BIG + 4} bytes, "
                        f"{over} variable (E2BIG)")
    assert "executable" not in str(arg) + str(shell) + str(var)


def test_e2big_of_many_arguments_says_they_are_too_many_together() -> None:
    limit = min(os.sysconf("SC_ARG_MAX"), 6 << 20)  # (the kernel caps it at 6 MiB)
    error = spawn_error(["echo", *["x" * 100_000] * (limit // 100_000 + 2)])
    assert error.errno_name == "E2BIG"
    assert " bytes together, too many for exec (the system's limit, ARG_MAX, is " in str(error)


@contextlib.contextmanager
def no_descriptor_left() -> Iterator[None]:
    """The soft RLIMIT_NOFILE lowered to this process's highest descriptor, and every free one
    below it taken: the next pipe(2) fails with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (top + 1, hard))
    try:
        with contextlib.suppress(OSError):
            while True:
                held.append(os.dup(0))
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_out_of_descriptors_says_so_and_where_to_raise_the_limit() -> None:
    """Run in a fresh interpreter: in a test worker, another test's leftover thread may close
    a descriptor meanwhile, and the spawn then finds one free."""
    script = f"""
import asyncio, resource, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_spawn_errors import no_descriptor_left
from watchrun.process.spawn import Spawner, SpawnError

async def attempt(pty):
    try:
        with no_descriptor_left():
            await Spawner().spawn("echo hi", cwd=None, env={{}}, pty=pty)
    except SpawnError as exc:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return exc.errno_name + " " + str(exc).replace(f" {{soft}} ", " N ")
    return "no SpawnError"

for pty in (False, True):
    print(asyncio.run(attempt(pty)))
"""
    for pty, line in zip((False, True), fresh_python(script), strict=True):  # (a pty: openpty)
        errno_name, _, message = line.partition(" ")
        assert errno_name == "EMFILE", (pty, line)
        assert message.startswith("cannot start 'echo hi': Too many open files (EMFILE; "
                                  "this runner may have "), message
        assert message.endswith("files open; each watcher needs a few: raise the limit with "
                                "`ulimit -n`, or LimitNOFILE= in its systemd unit)"), message
        assert "None" not in message and "executable" not in message


def test_a_huge_command_is_not_repeated_in_the_log_records_or_verdict(tmp_path: Path) -> None:
    run = once(tmp_path, {"watchers": [
        {"id": "big", "command": "echo " + "x" * BIG, "pattern": "E", "gate": {"maxMatches": 0}}]})
    assert run.rc == 3, run.err[:2000]
    assert table_row(run.out, "big")[-1] == "ERROR"
    assert f"the command is {BIG + 5} bytes, over the kernel's limit" in run.out
    jsonl = (tmp_path / ".watchrun" / "watchers" / "big.jsonl").read_text()
    for line in (*run.out.splitlines(), *run.err.splitlines(), *jsonl.splitlines()):
        assert len(line) < 2 * SHORT, line[:300]
