"""procs: spawning, output, exit status, spawn errors, and stopping whole process trees."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.procs import (
    PYTHON,
    TREE_SIZE,
    proc_state,
    read_pids,
    survivors,
    tree_command,
    until,
)

from watchrun.process.spawn import (
    SPAWN_ID,
    ExitInfo,
    Proc,
    Spawner,
    SpawnError,
    become_subreaper,
    reap_orphans,
)


@pytest.fixture(autouse=True)
def subreaper() -> Iterator[None]:
    """As the runner does at start: orphans of our children come back to us, not to init."""
    assert become_subreaper(True)
    yield
    become_subreaper(False)


async def read_all(proc: Proc) -> bytes:
    out = b""
    while data := await proc.read(65536):
        out += data
    return out


async def read_until(proc: Proc, token: bytes) -> bytes:
    out = b""
    while token not in out:
        data = await proc.read(65536)
        assert data, f"EOF before {token!r}; got {out!r}"
        out += data
    return out


@contextlib.asynccontextmanager
async def spawned(command: str | list[str], cwd: Path | None = None,
                  env: dict[str, str] | None = None, **kw: Any) -> AsyncIterator[Proc]:
    """A spawned child whose tree is stopped however the test ends (a failed assertion too)."""
    proc = await Spawner().spawn(command, cwd=cwd, env=env or {}, **kw)
    try:
        yield proc
    finally:
        await proc.terminate(0)
        proc.close()


async def run(command: str | list[str], **kw: Any) -> tuple[bytes, ExitInfo]:
    async with spawned(command, **kw) as proc:
        return await read_all(proc), await proc.wait()


def test_stdout_and_stderr_are_merged_in_order() -> None:
    out, info = asyncio.run(run("echo one; echo two >&2; echo three"))
    assert out == b"one\ntwo\nthree\n"
    assert info == ExitInfo(0, None, "exited")


def test_separate_stderr_when_asked() -> None:
    async def go() -> tuple[bytes, bytes]:
        async with spawned("echo out; echo err >&2", separate_stderr=True) as proc:
            out, err = await asyncio.gather(read_all(proc), proc.read_stderr(100))
            return out, err

    assert asyncio.run(go()) == (b"out\n", b"err\n")


def test_argv_is_not_interpreted_by_a_shell() -> None:
    out, _ = asyncio.run(run(["printf", "%s|", "a b; echo injected", "$HOME", "*"]))
    assert out == b"a b; echo injected|$HOME|*|"


def test_string_runs_under_sh() -> None:
    out, _ = asyncio.run(run("for x in a b; do echo $x; done | tr a-z A-Z"))
    assert out == b"A\nB\n"


def test_cwd_env_and_stdin(tmp_path: Path) -> None:
    out, _ = asyncio.run(run('pwd; echo "$FOO"; cat', cwd=tmp_path, env={"FOO": "bar baz"},
                             stdin_data=b"from stdin\n"))
    assert out == f"{tmp_path}\nbar baz\nfrom stdin\n".encode()
    out, _ = asyncio.run(run("cat; echo end"))  # stdin is /dev/null by default: no hang
    assert out == b"end\n"


def test_systemd_variables_are_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("WATCHDOG_USEC", "4000000")
    monkeypatch.setenv("KEEP_ME", "1")
    out, _ = asyncio.run(run(["env"], env={"LISTEN_FDS": "3", "LISTEN_PID": "1"}))
    names = {line.split(b"=", 1)[0] for line in out.splitlines()}
    assert b"KEEP_ME" in names and SPAWN_ID.encode() in names
    assert not names & {b"NOTIFY_SOCKET", b"WATCHDOG_USEC", b"WATCHDOG_PID", b"LISTEN_FDS",
                        b"LISTEN_PID"}


@pytest.mark.parametrize(("command", "expected"), [
    ("exit 3", ExitInfo(3, None, "exited")),
    ("kill -TERM $$", ExitInfo(None, "SIGTERM", "signaled")),
    ("kill -KILL $$", ExitInfo(None, "SIGKILL", "signaled")),
])
def test_exit_code_and_signal(command: str, expected: ExitInfo) -> None:
    assert asyncio.run(run(command))[1] == expected


def test_spawn_errors_name_the_errno_and_the_path(tmp_path: Path) -> None:
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho hi\n")
    a_file = tmp_path / "file"
    a_file.write_text("")

    def error(command: str | list[str], cwd: Path | None = None) -> SpawnError:
        with pytest.raises(SpawnError) as caught:
            asyncio.run(run(command, cwd=cwd))
        return caught.value

    missing = error(["no-such-program-xyz", "arg"])
    assert missing.errno_name == "ENOENT" and "no-such-program-xyz" in str(missing)
    denied = error([str(plain)])
    assert denied.errno_name == "EACCES" and str(plain) in str(denied)
    not_dir = error("true", cwd=a_file)
    assert not_dir.errno_name == "ENOTDIR" and f"working directory {a_file}" in str(not_dir)
    gone = error("true", cwd=tmp_path / "gone")
    assert gone.errno_name == "ENOENT" and "working directory" in str(gone)
    assert len({str(e) for e in (missing, denied, not_dir, gone)}) == 4
    assert "Traceback" not in str(missing)


def test_a_program_that_exists_is_not_said_to_be_missing(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """exec(2) says ENOENT for a script whose #! interpreter (or a binary whose dynamic loader)
    is missing, and EACCES for a directory: the error says what is wrong with the file that is
    there, not that it was not found or should be made executable."""
    script = tmp_path / "build.sh"
    script.write_text("#!/no/such/interpreter\necho hi\n")
    script.chmod(0o755)
    elf = Path(shutil.which("true") or "/bin/true").read_bytes()
    loader = re.search(rb"/lib[^\0]*/ld-[^\0]+\.so\.\d", elf)
    assert loader is not None, "no dynamic loader named in true(1)"
    binary = tmp_path / "foreign"  # a binary whose loader this system does not have
    binary.write_bytes(elf.replace(loader[0], loader[0][:-1] + b"X"))
    binary.chmod(0o755)
    folder = tmp_path / "tools"
    folder.mkdir()

    def error(command: list[str]) -> str:
        with pytest.raises(SpawnError) as caught:
            asyncio.run(run(command))
        return f"{caught.value.errno_name} {caught.value}"

    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    for command in ([str(script)], ["build.sh"]):  # a path, and a name found on PATH
        assert error(command).endswith(f": executable {script}: its #! interpreter "
                                       "'/no/such/interpreter' was not found (ENOENT)")
    assert error([str(binary)]).endswith(f": executable {binary}: it exists, but its dynamic "
                                         "loader was not found (built for another system?) "
                                         "(ENOENT)")
    assert error([str(folder)]).endswith(f": executable {folder}: is a directory (EACCES)")
    assert error(["no-such-program-xyz"]).endswith(": not found (ENOENT)")
    # (a name with an escape sequence was said as /nonexistent/red once a terminal's
    # sanitizer had stripped it: a file that is not the one tried)
    assert error(["/nonexistent/\x1b[31mred"]).endswith(
        ": executable '/nonexistent/\\x1b[31mred': not found (ENOENT)")


def test_a_second_signals_sigkill_is_in_the_exit_even_before_the_stop_looked() -> None:
    """The second stop signal SIGKILLs every group at once (`kill_all`); when it came before the
    stop's first /proc scan (a loaded host), the stop found nothing left to signal and the
    `exit` record said no signal was sent: `signals` and `stragglers` were missing."""
    async def go() -> ExitInfo:
        async with spawned("trap '' TERM; echo up; while :; do sleep 0.2; done") as proc:
            assert await proc.read(3) == b"up\n"
            assert Spawner().kill_all() >= 1
            await proc.wait()  # dead before the stop looks
            return await proc.terminate(30)

    info = asyncio.run(asyncio.wait_for(go(), 20))
    assert (info.signal, info.status) == ("SIGKILL", "killed")
    assert "SIGKILL" in info.signals_sent and info.stragglers >= 1


def test_pty_child_sees_a_terminal_and_controlling_tty() -> None:
    code = ("import os, sys; print(os.isatty(0), os.isatty(1), os.isatty(2)); "
            "open('/dev/tty', 'w').close(); print('ctty', os.getsid(0) == os.getpid())")
    out, info = asyncio.run(run([PYTHON, "-c", code], pty=True))
    assert out.replace(b"\r\n", b"\n") == b"True True True\nctty True\n"
    assert info.exit_code == 0
    out, _ = asyncio.run(run([PYTHON, "-c", "import os; print(os.isatty(1))"]))
    assert out == b"False\n"


def test_a_pty_childs_output_is_kept_when_it_exits_before_it_is_read() -> None:
    """The child writes and exits before anything is read (a busy runner): the pty master then
    reads EIO, which must end the output after what was read, not drop it."""
    async def go() -> bytes:
        async with spawned([PYTHON, "-c", "print('first'); print('last')"], pty=True) as proc:
            await proc.wait()
            pipe = proc.extra[0]
            assert isinstance(pipe, asyncio.BaseTransport)
            await until(pipe.is_closing, "the master's EIO")
            return await read_all(proc)

    assert asyncio.run(go()).replace(b"\r\n", b"\n") == b"first\nlast\n"


def test_wait_does_not_wait_for_a_grandchild_holding_the_pipe() -> None:
    async def go() -> tuple[ExitInfo, ExitInfo]:
        async with spawned("sleep 1000 & echo started") as proc:
            assert await read_until(proc, b"started\n") == b"started\n"
            info = await asyncio.wait_for(proc.wait(), 10)
            stopped = await proc.terminate(5)
            assert await read_all(proc) == b""  # the holder is gone: EOF
            return info, stopped

    info, stopped = asyncio.run(go())
    assert info == ExitInfo(0, None, "exited")
    assert stopped.exit_code == 0 and stopped.stragglers == 0  # sleep took SIGTERM


def test_terminate_leaves_no_survivors_and_no_zombies(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"

    async def go() -> ExitInfo:
        async with spawned(tree_command(pidfile)) as proc:
            assert await read_until(proc, b"ready\n") == b"ready\n"
            await until(lambda: len(read_pids(pidfile)) == TREE_SIZE, "all pids recorded")
            return await proc.terminate(0.3)

    info = asyncio.run(go())
    pids = read_pids(pidfile)
    assert info.status == "killed" and info.signal == "SIGKILL"
    assert info.signals_sent == ("SIGTERM", "SIGKILL")
    assert info.stragglers == TREE_SIZE
    # Everything is dead and reaped by the time terminate() returns: not even a zombie.
    assert survivors(pids) == {}


def test_terminate_is_quick_when_sigterm_works(tmp_path: Path) -> None:
    async def go() -> ExitInfo:
        async with spawned("sleep 1000 & setsid sleep 1000 & echo go; wait") as proc:
            assert await read_until(proc, b"go\n") == b"go\n"
            loop = asyncio.get_running_loop()
            start = loop.time()
            info = await proc.terminate(30)
            assert loop.time() - start < 10  # did not sit out the 30 s grace
            return info

    info = asyncio.run(go())
    assert info == ExitInfo(None, "SIGTERM", "killed", 0, ("SIGTERM",))


def test_orphans_reparented_to_us_are_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan"

    async def go() -> None:
        cmd = f"(sh -c 'echo $$ > {pidfile}; exec true' &); echo go; exec sleep 1000"
        async with spawned(cmd) as proc:
            assert await read_until(proc, b"go\n") == b"go\n"
            await until(lambda: len(read_pids(pidfile)) == 1, "the orphan's pid")
            orphan = read_pids(pidfile)[0]
            await until(lambda: proc_state(orphan) in ("Z", None), "the orphan to exit")
            assert proc_state(orphan) == "Z"  # nobody else reaps it: we are its subreaper
            assert reap_orphans() >= 1
            assert proc_state(orphan) is None

    asyncio.run(go())


def test_escapees_are_attributed_to_their_own_tree(tmp_path: Path) -> None:
    """Stopping one child leaves another's tree alone, escapees included (they carry their
    spawn id). An escapee that left its session, was orphaned AND wiped its environment has
    nothing left to attribute it by: as an adoptee of ours it goes with the next stop."""
    a_pids, b_pids = tmp_path / "a", tmp_path / "b"
    wiped = {f: f.with_suffix(".wiped") for f in (a_pids, b_pids)}

    def cmd(pidfile: Path) -> str:
        p, w = shlex.quote(str(pidfile)), shlex.quote(str(wiped[pidfile]))
        return (f"echo $$ >> {p}; (setsid sh -c 'echo $$ >> {p}; exec sleep 1000' &); "
                f"(env -i setsid sh -c 'echo $$ >> {w}; exec sleep 1000' &); exec sleep 1000")

    def all_pids(pidfile: Path) -> list[int]:
        return read_pids(pidfile) + read_pids(wiped[pidfile])

    async def go() -> None:
        async with spawned(cmd(a_pids)) as a, spawned(cmd(b_pids)) as b:
            await until(lambda: len(all_pids(a_pids)) == len(all_pids(b_pids)) == 3, "pids")
            info = await a.terminate(5)
            assert survivors(all_pids(a_pids)) == {}
            assert info.signals_sent == ("SIGTERM",) and info.stragglers == 0
            left = survivors(read_pids(b_pids))  # b's main process and its escapee
            assert len(left) == 2 and set(left.values()) <= {"R", "S"}
            await b.terminate(5)
        assert survivors(all_pids(b_pids)) == {}

    asyncio.run(go())
