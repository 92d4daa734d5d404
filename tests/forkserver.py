"""Test helper: `watchrun` processes forked from an interpreter that has imported watchrun once
(one server per test worker and kind, tests/forkserved.py), instead of a new interpreter each:
the same `entry()` the console script calls, in a real process of its own (its pid, session,
descriptors, environment, signals and exit status), without the ~0.15 s of CPU each
interpreter start and import costs.

What a new interpreter decides at its start is the same: the server was started with this
process's environment and refuses (the caller then starts the console script) an environment
that differs in what the interpreter reads at start (PYTHON*, LD_*, the locale); the child's
standard streams are made as the interpreter makes them (UTF-8, unbuffered when
PYTHONUNBUFFERED is set, line-buffered on a terminal); its exit is the interpreter's (threads
joined, atexit functions run, streams flushed; an uncaught KeyboardInterrupt ends it by
SIGINT). What it cannot be: a run of the console script itself, a test of what a fresh
interpreter imports, or of a signal that comes while the modules load — tests/test_cli_contract,
test_packaging, test_start_cache and test_signals_early keep those on the console script.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

_STARTUP_VARS = ("PYTHON", "LD_", "LC_", "LANG")
"""Environment variables an interpreter reads as it starts: a child whose environment differs
from the server's in one is started the usual way."""
MAX_REQUEST = 64 * 1024
"""The largest request (argv, environment, working directory): a larger one is not forked."""
_RUN = ("watchrun.cli", "watchrun.cli.main", "watchrun.cli.run", "watchrun.config.cache",
        "watchrun.runtime.supervisor", "watchrun.runtime.workers")
PRELOADS = {"run": _RUN, "mcp": (*_RUN, "watchrun.mcp.server")}
"""What each kind of server imports before it forks anything. `run`: what a `run` of a
validated config imports as it starts, and no more (jsonschema, YAML, the agents hub are
imported by the child that needs them, as by a runner of its own; preloaded, every child's
collector would walk them, as no runner's does). `mcp`: that and the MCP SDK, which a
`watchrun mcp` imports as it starts (~1.2 s of CPU), for its children only."""
_lock = threading.Lock()
_PR_GET_CHILD_SUBREAPER = 37


class _Server:
    """One server of this process: its socket, and the environment it started with."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid, self.owner = sock, pid, os.getpid()
        self.startup = startup_env(os.environ)
        self.gone = False


_servers: dict[str, _Server] = {}


def startup_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` an interpreter reads as it starts."""
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_VARS)}


def subreaper() -> bool:
    """Whether this process is a subreaper (PR_GET_CHILD_SUBREAPER: what
    `watchrun.process.tree.become_subreaper` sets)."""
    flag = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


@contextlib.contextmanager
def _no_subreaper() -> Iterator[None]:
    """This process no subreaper meanwhile: a runner served in this process (an MCP session's)
    made it one, and the server, orphaned as the process started here exits, would be
    re-parented to it, and stopped with that runner's children at its end."""
    from watchrun.process.tree import become_subreaper  # (not in the server: forkserved.py)

    was = subreaper()
    if was:
        become_subreaper(False)
    try:
        yield
    finally:
        if was:
            become_subreaper(True)


def _connect(kind: str) -> _Server | None:
    """This process's server of `kind` (started at first use), or None when it cannot run.
    The server is no child of this process (it forks away from the one started here, which
    exits): a runner in this process, whose end stops the children it did not start, never
    meets it."""
    with _lock:
        server = _servers.get(kind)
        if server is not None and server.owner == os.getpid() and not server.gone:
            return server
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with _no_subreaper():
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("forkserved.py")),
                 str(theirs.fileno()), ",".join(PRELOADS[kind])],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            theirs.close()
            proc.wait()
        ours.settimeout(60)
        try:
            ready = ours.recv(32).split()
        except OSError:
            ready = []
        ours.settimeout(None)
        if ready[:1] != [b"ready"]:
            ours.close()
            return None
        server = _servers[kind] = _Server(ours, int(ready[1]))
        return server


def server_pid(kind: str = "run") -> int | None:
    """The pid of this process's server of `kind`, if it runs."""
    server = _servers.get(kind)
    return server.pid if server is not None and not server.gone else None


class Forked:
    """What tests use of a `subprocess.Popen`, for a process the server forked: its exit status
    comes on a socket of its own (the server is its parent, and reaps it)."""

    def __init__(self, args: list[str], pid: int, channel: socket.socket,
                 stdout: IO[bytes] | None) -> None:
        self.args, self.pid, self.stdout = args, pid, stdout
        self.stdin: IO[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.returncode: int | None = None
        self._channel = channel

    def poll(self) -> int | None:
        return self.wait(0.0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int:  # type: ignore[return]
        if self.returncode is not None:
            return self.returncode
        ready, _, _ = select.select([self._channel], [], [], timeout)
        if not ready:
            if timeout == 0.0:
                return None  # type: ignore[return-value]  # (poll's answer)
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        data = self._channel.recv(16)
        if not data:
            raise RuntimeError(f"the fork server that started {self.pid} is gone")
        self.returncode = struct.unpack("i", data)[0]
        self._channel.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # (as Popen: never a pid that was reaped, and maybe reused)
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, stdout: int | None,
          stderr: int | None, new_session: bool = True, stdin: int | None = None,
          kind: str = "run") -> Forked | None:
    """`argv` (the console script's path, then its arguments) forked by the server of `kind`
    (PRELOADS), stdin the descriptor given (None: /dev/null), stdout and stderr the descriptors
    given (None: a pipe, `Forked.stdout` and `.stderr`); None when it must be started the usual
    way (the caller does)."""
    if os.environ.get("WATCHRUN_TEST_FORK", "1") == "0":
        return None
    server = _connect(kind)
    if server is None or startup_env(env) != server.startup:
        return None
    umask = os.umask(0o22)
    os.umask(umask)
    request = json.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd),
                          "session": new_session, "umask": umask,
                          "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)},
                         ).encode("utf-8", "surrogatepass")
    if len(request) > MAX_REQUEST:
        return None
    mine, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    null = os.open(os.devnull, os.O_RDONLY) if stdin is None else os.dup(stdin)
    pipes = [os.pipe() if fd is None else (-1, fd) for fd in (stdout, stderr)]
    try:
        with _lock:
            try:
                socket.send_fds(server.sock, [request], [child_end.fileno(), null,
                                                         pipes[0][1], pipes[1][1]])
            except OSError:  # the server is gone: the next spawn starts another
                server.gone = True
        data = b"" if server.gone else mine.recv(16)
    finally:
        child_end.close()
        os.close(null)
        for (r, w) in pipes:
            if r >= 0:
                os.close(w)
    if not data:  # the server could not fork
        mine.close()
        for (r, _) in pipes:
            if r >= 0:
                os.close(r)
        return None
    ends = [open(r, "rb") if r >= 0 else None for (r, _) in pipes]  # noqa: SIM115
    forked = Forked(list(argv), struct.unpack("i", data)[0], mine, ends[0])
    forked.stderr = ends[1]
    return forked


def run(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, merged: bool = False,
        timeout: float, kind: str = "run") -> subprocess.CompletedProcess[bytes] | None:
    """`subprocess.run(argv, stdout=PIPE, stderr=PIPE or STDOUT, stdin=DEVNULL)` through the
    server of `kind` (in a new session); None when it must be started the usual way."""
    if merged:
        r, w = os.pipe()
        try:
            forked = spawn(argv, env=env, cwd=cwd, stdout=w, stderr=w, kind=kind)
        finally:
            os.close(w)
        if forked is None:
            os.close(r)
            return None
        forked.stdout = open(r, "rb")  # noqa: SIM115  (stdout and stderr: one pipe)
    else:
        forked = spawn(argv, env=env, cwd=cwd, stdout=None, stderr=None, kind=kind)
        if forked is None:
            return None
    got: dict[int, bytes] = {}
    streams = [s for s in (forked.stdout, forked.stderr) if s is not None]
    readers = [threading.Thread(target=lambda i=i, s=s: got.__setitem__(i, s.read()),
                                daemon=True) for i, s in enumerate(streams)]
    for t in readers:
        t.start()
    try:
        code = forked.wait(timeout)
    except subprocess.TimeoutExpired:
        forked.kill()
        forked.wait()
        raise
    finally:
        for t in readers:
            t.join(timeout)
        for s in streams:
            s.close()
    return subprocess.CompletedProcess(list(argv), code, got.get(0, b""),
                                       None if merged else got.get(1, b""))
