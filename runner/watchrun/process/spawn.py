"""The OS seam for child processes: spawn in a new session, read output, stop a whole tree."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import functools
import itertools
import os
import signal
import struct
import subprocess
import termios
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from watchrun.process.groups import GroupRegistry
from watchrun.process.tree import (
    LINUX,
    SPAWN_ID,
    SPAWNED,
    Stat,
    become_subreaper,
    die_with_parent,
    family,
    forking,
    read_table,
    reap,
    reap_orphans,
)

__all__ = ["SPAWN_ID", "ExitInfo", "Proc", "SpawnError", "Spawner", "become_subreaper", "end_now",
           "reap_orphans"]

_STRIPPED = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID")
_LIVE: weakref.WeakSet[Proc] = weakref.WeakSet()  # for kill_all: cut grace periods short
_ids = itertools.count(1)
_SIGNAMES = {s.value: s.name for s in signal.Signals}
_REASONS = {
    errno.ENOENT: "not found",
    errno.EACCES: "permission denied (is it executable?)",
    errno.ENOTDIR: "a path component is not a directory",
    errno.ENOEXEC: "not an executable format (missing #! line?)",
}


@dataclass
class SpawnError(Exception):
    """The command could not be started (ENOENT, EACCES, ENOTDIR ...)."""

    errno_name: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class ExitInfo:
    exit_code: int | None
    signal: str | None
    status: str
    """One of: exited, killed (by a signal we sent), signaled (by anyone else)."""
    stragglers: int = 0
    """Processes of the tree still alive after the SIGTERM grace, killed with SIGKILL."""
    signals_sent: tuple[str, ...] = ()


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol plus an exit future that does not wait for the pipes to close
    (Process.wait() does, so a grandchild holding stdout open would hang it)."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class Proc:
    """A spawned child: the leader of its own session and process group."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _Protocol,
                 out: asyncio.StreamReader, spawn_id: str,
                 registry: GroupRegistry | None = None) -> None:
        self.pid = self.pgid = transport.get_pid()
        self._transport, self._protocol, self._out = transport, protocol, out
        self._id = spawn_id
        self._registry = registry
        self._stopping = False
        self._hurry = False  # set by Spawner.kill_all: no more waiting for a grace period
        _LIVE.add(self)
        self._info: ExitInfo | None = None
        self._ids: dict[tuple[int, int], str | None] = {}  # (pid, start time) -> spawn id
        self._group = True  # does a live process still have our pgid?
        self.extra: list[asyncio.BaseTransport | asyncio.Future[None]] = []  # pty, stdin feeder

    async def read(self, n: int) -> bytes:
        """Up to n bytes of output; b"" at EOF."""
        try:
            return await self._out.read(n)
        except OSError as exc:  # a pty master reads EIO once the last slave fd is closed
            if exc.errno == errno.EIO:
                return b""
            raise

    async def read_exactly(self, n: int) -> bytes:
        """Exactly n bytes of output; asyncio.IncompleteReadError at EOF."""
        return await self._out.readexactly(n)

    @property
    def stdin(self) -> asyncio.StreamWriter:
        """The child's stdin (only with `spawn(..., stdin_pipe=True)`)."""
        if self._protocol.stdin is None:
            raise RuntimeError("stdin needs spawn(..., stdin_pipe=True)")
        return self._protocol.stdin

    async def read_stderr(self, n: int) -> bytes:
        if self._protocol.stderr is None:
            raise RuntimeError("read_stderr() needs spawn(..., separate_stderr=True)")
        return await self._protocol.stderr.read(n)

    async def wait(self) -> ExitInfo:
        """The main process's exit, as soon as it is reaped (open pipes do not delay it)."""
        if self._info is None:
            await asyncio.shield(self._protocol.exited)
            rc = self._transport.get_returncode()
            assert rc is not None
            SPAWNED.discard(self.pid)
            name = _SIGNAMES.get(-rc, f"SIG{-rc}")
            status = "killed" if self._stopping else "signaled"
            self._info = ExitInfo(rc, None, "exited") if rc >= 0 else ExitInfo(None, name, status)
        return self._info

    def close(self) -> None:
        """Release the transports (after the process exited and its output was read); the group
        is no longer this runner's to end."""
        if self._registry is not None:
            self._registry.remove(self.pgid)
        self._transport.close()
        for extra in self.extra:
            if isinstance(extra, asyncio.BaseTransport):
                extra.close()
            else:
                extra.cancel()

    async def _live(self) -> tuple[set[int], bool]:
        """Live members of the tree, and whether zombies in it are still to be handed to us
        (their parent is a dying member; the /proc scan is not atomic). Reaps adopted ones.
        The scan (every process's stat, environs of new ones) runs in a thread; reaping, which
        must not race a spawn, on the loop."""
        if not LINUX:
            return set() if self._protocol.exited.done() else {self.pid}, False
        table, fam = await asyncio.to_thread(self._scan, self._protocol.exited.done())
        reap(fam, table)
        live = {p for p in fam if table[p].state != "Z"}
        self._group = any(table[p].pgid == self.pgid for p in live)
        return live, any(table[p].state == "Z" and table[p].ppid in fam for p in fam)

    def _scan(self, exited: bool) -> tuple[dict[int, Stat], set[int]]:
        table = read_table()
        return table, family(table, self.pid, self.pgid, self._id, exited, self._ids)

    def _send(self, pids: set[int], sig: signal.Signals) -> None:
        group = [(os.killpg, self.pgid)] if self._group else []
        for kill, target in [*group, *((os.kill, p) for p in pids)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(target, sig)

    async def terminate(self, grace_s: float) -> ExitInfo:
        """SIGTERM the tree, wait `grace_s`, SIGKILL what is left (escapees included), reap."""
        self._stopping = True
        loop = asyncio.get_running_loop()
        sent: list[str] = []
        live, settling = await self._live()
        if live:
            self._send(live, signal.SIGTERM)
            sent.append("SIGTERM")
            deadline = loop.time() + grace_s
            while live and loop.time() < deadline and not self._hurry:
                await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
                live, settling = await self._live()
        killed: set[int] = set()
        deadline = loop.time() + 10.0
        while (live or settling) and loop.time() < deadline:  # a forking tree may add members
            self._send(live, signal.SIGKILL)
            killed |= live
            await asyncio.sleep(0.01)
            live, settling = await self._live()
        sent += ["SIGKILL"] if killed else []
        info = await self.wait()
        return replace(info, stragglers=len(killed), signals_sent=tuple(sent))


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
        for proc in list(_LIVE):
            proc._hurry = True  # a grace period in progress ends now
        killed = 0
        for pid in list(SPAWNED):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
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
        shown = command if isinstance(command, str) else (argv or [""])[0]
        if not argv or not shown.strip():
            raise SpawnError("EINVAL", "cannot start an empty command")
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
        if pty:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *self.pty_size, 0, 0))
            streams = {"stdin": slave, "stdout": slave, "stderr": slave,
                       "preexec_fn": functools.partial(_ctty, os.getpid())}
        try:
            with forking():  # until the pid is in SPAWNED, reap_orphans() keeps off
                transport, protocol = await loop.subprocess_exec(
                    lambda: _Protocol(self.read_limit, loop), *argv, cwd=cwd, env=child_env,
                    start_new_session=True, **streams)  # type: ignore[arg-type]
                SPAWNED.add(transport.get_pid())
        except (OSError, subprocess.SubprocessError) as exc:
            if master >= 0:
                os.close(master)
            raise _spawn_error(exc, shown, cwd) from None
        finally:
            if slave >= 0:
                os.close(slave)
        if self.registry is not None:
            self.registry.add(transport.get_pid(), spawn_id)
        extra: list[asyncio.BaseTransport | asyncio.Future[None]] = []
        if pty:
            out = asyncio.StreamReader(limit=self.read_limit)
            pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out),
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


async def _discard(starting: asyncio.Future[Proc]) -> None:
    """Let a start whose caller was cancelled finish, then kill and reap its child; the caller
    re-raises the cancellation."""
    await _until_done(starting)
    if not starting.cancelled() and starting.exception() is None:
        await _until_done(asyncio.ensure_future(end_now(starting.result())))


async def end_now(proc: Proc) -> None:
    """Kill a child's tree at once (no grace), reap it and release it. Not cancellable: it
    finishes first, then a cancellation that arrived meanwhile goes on."""
    ending = asyncio.ensure_future(proc.terminate(0))
    cancelled = await _until_done(ending)
    proc.close()
    if cancelled:
        raise asyncio.CancelledError


async def _until_done(fut: asyncio.Future[Any]) -> bool:
    """Wait for `fut` however often we are cancelled meanwhile; True if we were."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


def _spawn_error(exc: OSError | subprocess.SubprocessError, shown: str,
                 cwd: Path | None) -> SpawnError:
    if not isinstance(exc, OSError):  # the pre-exec step failed (the runner is going away)
        return SpawnError("ECHILD", f"cannot start {shown!r}: {exc}")
    num = exc.errno or errno.EIO
    name = errno.errorcode.get(num, f"E{num}")
    what = "working directory" if str(exc.filename) == str(cwd) else "executable"
    why = _REASONS.get(num, exc.strerror or os.strerror(num))
    return SpawnError(name, f"cannot start {shown!r}: {what} {exc.filename}: {why} ({name})")


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
