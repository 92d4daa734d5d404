"""The OS seam for child processes: start each in a new session that dies with the runner."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import functools
import itertools
import os
import re
import shutil
import signal
import struct
import subprocess
import termios
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from watchrun.match.sanitize import shorten
from watchrun.process.groups import GroupRegistry
from watchrun.process.proc import LIVE, ChildProtocol, ExitInfo, Proc, end_now, until_done
from watchrun.process.tree import (
    SPAWN_ID,
    SPAWNED,
    become_subreaper,
    boot_ticks,
    die_with_parent,
    forking,
    reap_orphans,
    short_of_files,
)
from watchrun.process.unwaited import end_unwaited

__all__ = ["SPAWN_ID", "ExitInfo", "Proc", "SpawnError", "Spawner", "become_subreaper", "end_now",
           "reap_orphans"]

_STRIPPED = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID")
_ids = itertools.count(1)
SHOWN_CHARS = 200
"""A command is shown in an error at most this long (a 200 KB shell command is not repeated)."""
_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
    weakref.WeakKeyDictionary()
"""One fork at a time on each loop. A fork holds the loop for as long as it copies the process
(with its pre-exec step); 500 command watchers started at once forked in one turn of the loop
and held it 10 s. Taking turns lets the loop's other work run between two forks."""
_REASONS = {
    errno.ENOENT: "not found",
    errno.EACCES: "permission denied (is it executable?)",
    errno.ENOTDIR: "a path component is not a directory",
    errno.ENOEXEC: "not an executable format (missing #! line?)",
}


class SpawnError(Exception):
    """The command could not be started (ENOENT, EACCES, ENOTDIR ...)."""

    def __init__(self, errno_name: str, message: str) -> None:
        super().__init__(errno_name, message)
        self.errno_name = errno_name
        self.message = message

    def __str__(self) -> str:
        return self.message


class Spawner:
    """Starts children. The only place in watchrun that forks, always from the loop's thread:
    each child gets PR_SET_PDEATHSIG, which fires when the *thread* that forked it ends.
    With a `registry`, every group is recorded until its `Proc` is closed."""

    read_limit = 64 * 1024  # asyncio buffers at most 2x this per pipe, then stops reading
    pty_size = (50, 200)  # rows, columns: wide, so CLIs do not wrap their lines

    def __init__(self, registry: GroupRegistry | None = None) -> None:
        self.registry = registry

    def kill_all(self) -> int:
        """SIGKILL the process group of every live child at once (a second stop signal).
        The normal stop path then reaps them and sweeps escapees."""
        procs = {proc.pgid: proc for proc in list(LIVE)}
        for proc in procs.values():
            proc._hurry = True  # a grace period in progress ends now
        killed = 0
        for pid in list(SPAWNED):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
                if pid in procs:  # its stop records the SIGKILL, even one not begun yet
                    procs[pid]._stopping = procs[pid]._killed = True
        return killed

    async def spawn(self, command: str | Sequence[str], *, cwd: Path | None,
                    env: Mapping[str, str], pty: bool = False, separate_stderr: bool = False,
                    stdin_data: bytes | None = None, stdin_pipe: bool = False) -> Proc:
        """A string runs under /bin/sh -c, a sequence as argv. Raises SpawnError.

        Cancelling a spawn never cancels asyncio's own start-up of the child: on CPython 3.11
        a cancelled `subprocess_exec` can wait forever for pipes that are never connected
        (python/cpython#103847, #125502). The start is shielded and owned here: on
        cancellation it is awaited, the child it produced is killed and reaped, and the
        cancellation goes on."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        program = command if isinstance(command, str) else (argv or [""])[0]
        if not argv or not program.strip():
            raise SpawnError("EINVAL", "cannot start an empty command")
        shown = shorten(program, SHOWN_CHARS)
        if pty and (separate_stderr or stdin_data is not None or stdin_pipe):
            raise ValueError("pty=True takes neither separate_stderr nor stdin")
        if cwd is not None and not Path(cwd).is_dir():
            name, why = ("ENOTDIR", "is not a directory") if Path(cwd).exists() else (
                "ENOENT", "does not exist")
            raise SpawnError(name, f"cannot start {shown!r}: working directory {cwd} {why}")
        starting = asyncio.ensure_future(
            self._start(argv, shown, cwd, env, pty, separate_stderr, stdin_data, stdin_pipe))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            await _discard(starting)
            raise

    async def _start(self, argv: list[str], shown: str, cwd: Path | None,
                     env: Mapping[str, str], pty: bool, separate_stderr: bool,
                     stdin_data: bytes | None, stdin_pipe: bool) -> Proc:
        if self.registry is not None:
            self.registry.prepare()  # the guardian is up before the first child exists
        spawn_id = f"{os.getpid()}.{next(_ids)}.{os.urandom(4).hex()}"
        child_env = {k: v for k, v in {**os.environ, **env}.items() if k not in _STRIPPED}
        child_env[SPAWN_ID] = spawn_id
        loop = asyncio.get_running_loop()
        master = slave = -1
        piped = stdin_data is not None or stdin_pipe
        streams: dict[str, object] = {
            "stdin": subprocess.PIPE if piped else subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            "preexec_fn": functools.partial(die_with_parent, os.getpid()),
        }
        forked_at = boot_ticks()
        try:
            if pty:  # (out of descriptors, openpty fails as pipe(2) would: a SpawnError)
                master, slave = os.openpty()
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *self.pty_size, 0, 0))
                streams = {"stdin": slave, "stdout": slave, "stderr": slave,
                           "preexec_fn": functools.partial(_ctty, os.getpid())}
            turn = _TURNS.setdefault(loop, asyncio.Lock())
            async with turn:
                with forking():  # until the pid is in SPAWNED, reap_orphans() keeps off
                    transport, protocol = await loop.subprocess_exec(
                        lambda: ChildProtocol(self.read_limit, loop), *argv, cwd=cwd,
                        env=child_env, start_new_session=True, **streams)  # type: ignore[arg-type]
                    SPAWNED.add(transport.get_pid())
        except (OSError, subprocess.SubprocessError) as exc:
            if master >= 0:
                os.close(master)
            raise _spawn_error(exc, argv, shown, cwd, child_env) from None
        except RuntimeError as exc:  # forked, then no thread to wait for it: ended, not left
            if master >= 0:
                os.close(master)
            why = await end_unwaited(spawn_id, exc)
            raise SpawnError("EAGAIN", f"cannot start {shown!r}: {why}") from None
        finally:
            if slave >= 0:
                os.close(slave)
        if self.registry is not None:
            self.registry.add(transport.get_pid(), spawn_id, forked_at)
        extra: list[asyncio.BaseTransport | asyncio.Future[None]] = []
        if pty:
            out = asyncio.StreamReader(limit=self.read_limit)
            pipe, _ = await loop.connect_read_pipe(lambda: _PtyProtocol(out),
                                                   os.fdopen(master, "rb", buffering=0))
            extra.append(pipe)
        else:
            assert protocol.stdout is not None
            out = protocol.stdout
        if stdin_data is not None and protocol.stdin is not None:
            extra.append(asyncio.ensure_future(_feed(protocol.stdin, stdin_data)))
        proc = Proc(transport, protocol, out, spawn_id, self.registry)
        proc.extra = extra
        return proc


class _PtyProtocol(asyncio.StreamReaderProtocol):
    """A pty master reads EIO once the child's side is closed: that is the end of its output.
    (As an error, asyncio sets it on the reader, which then raises it before handing out what
    it had read and not yet given: the child's last output was lost when it was not read in
    time.)"""

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, OSError) and exc.errno == errno.EIO:
            exc = None
        super().connection_lost(exc)


async def _discard(starting: asyncio.Future[Proc]) -> None:
    """Let a start whose caller was cancelled finish, then kill and reap its child; the caller
    re-raises the cancellation."""
    await until_done(starting)
    if not starting.cancelled() and starting.exception() is None:
        await until_done(asyncio.ensure_future(end_now(starting.result())))


def _spawn_error(exc: OSError | subprocess.SubprocessError, argv: list[str], shown: str,
                 cwd: Path | None, env: Mapping[str, str]) -> SpawnError:
    if not isinstance(exc, OSError):  # the pre-exec step failed (the runner is going away)
        return SpawnError("ECHILD", f"cannot start {shown!r}: {exc}")
    num = exc.errno or errno.EIO
    name = errno.errorcode.get(num, f"E{num}")
    why = _REASONS.get(num, exc.strerror or os.strerror(num))
    if num == errno.E2BIG:
        return SpawnError(name, f"cannot start {shown!r}: {_too_big(argv, env)} ({name})")
    if (hint := short_of_files(name)) is not None:  # (pipe(2) failed: no file is named)
        return SpawnError(name, f"cannot start {shown!r}: {why} ({name}; {hint})")
    if exc.filename is None:
        return SpawnError(name, f"cannot start {shown!r}: {why} ({name})")
    what = "working directory" if str(exc.filename) == str(cwd) else "executable"
    where = exc.filename
    if what == "executable" and num in (errno.ENOENT, errno.EACCES):
        found = _program(str(exc.filename), cwd, env)
        if found is not None and num == errno.ENOENT and os.path.isfile(found):
            where, interpreter = found, _interpreter(found)
            why = (f"its #! interpreter {interpreter!r} was not found" if interpreter else
                   "it exists, but its dynamic loader was not found (built for another "
                   "system?)")
        elif found is not None and num == errno.EACCES and os.path.isdir(found):
            why = "is a directory"
    return SpawnError(name, f"cannot start {shown!r}: {what} {_plain(where)}: {why} ({name})")


def _too_big(argv: list[str], env: Mapping[str, str]) -> str:
    """Why exec(2) said E2BIG: the first argument or environment variable over the kernel's
    limit for one string (MAX_ARG_STRLEN, 32 pages), else all of them together (ARG_MAX)."""
    one = 32 * os.sysconf("SC_PAGESIZE")
    over = f"over the kernel's limit of {one // 1024} KiB for one"
    shell = argv[:2] == ["/bin/sh", "-c"]
    sizes = [len(os.fsencode(a)) for a in argv]
    for k, size in enumerate(sizes):
        if size >= one:
            what = "the command" if shell and k == 2 else f"command[{k}]"
            return f"{what} is {size} bytes, {over} argument"
    pairs = [(key, len(os.fsencode(key)) + 1 + len(os.fsencode(value)))
             for key, value in env.items()]
    for key, size in pairs:
        if size >= one:
            return f"environment variable {_plain(key)} is {size} bytes, {over} variable"
    total = sum(sizes) + sum(size for _, size in pairs) + len(sizes) + len(pairs)
    return (f"its arguments and environment are {total} bytes together, too many for exec "
            f"(the system's limit, ARG_MAX, is {os.sysconf('SC_ARG_MAX')} bytes)")


def _plain(text: object) -> str:
    """`text` as it is, or quoted with its control characters escaped when it has any: the
    message names the file exec(2) tried, not what a terminal's sanitizer leaves of it."""
    s = str(text)
    return repr(s) if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in s) else s


_INTERPRETER = re.compile(rb"#![ \t]*([^ \t\n]*)")


def _program(name: str, cwd: Path | None, env: Mapping[str, str]) -> str | None:
    """The file exec(2) tried for `name`: a path (from `cwd`), or a name found on the child's
    PATH. Looked up on the error path only."""
    if "/" in name:
        return name if cwd is None else os.path.join(cwd, name)
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _interpreter(path: str) -> str | None:
    """The #! interpreter `path` begins with (None: none): exec's ENOENT for a file that is
    there is then the interpreter's (a CRLF line end names `sh\\r`). 256 bytes read."""
    try:
        with open(path, "rb") as f:
            found = _INTERPRETER.match(f.read(256))
    except OSError:
        return None
    return found[1].decode("utf-8", "replace") if found is not None and found[1] else None


def _ctty(parent: int) -> None:
    """Runs in the child between fork and exec, after setsid (start_new_session) and after the
    pty slave became fd 0: die with the runner, and make the pty the session's controlling
    terminal. A prctl and an ioctl, no allocation or locks, so it is safe despite asyncio's
    child-watcher threads."""
    die_with_parent(parent)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


async def _feed(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        writer.write(data)
        await writer.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child exited or closed stdin without reading it all: its choice
    finally:
        writer.close()
