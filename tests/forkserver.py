"""Test helper: `watchrun` processes forked from an interpreter that has imported watchrun once
(one per test worker), instead of a new interpreter each: the same `entry()` the console script
calls, in a real process of its own (its pid, session, descriptors, environment, signals and
exit status), without the ~0.15 s of CPU each interpreter start and import costs.

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
import io
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_STARTUP_VARS = ("PYTHON", "LD_", "LC_", "LANG")
"""Environment variables an interpreter reads as it starts: a child whose environment differs
from the server's in one is started the usual way."""
_PRELOAD = ("watchrun.cli", "watchrun.cli.main", "watchrun.cli.run", "watchrun.cli.once_report",
            "watchrun.runtime.supervisor", "watchrun.runtime.workers", "watchrun.config.schema",
            "watchrun.config.validate", "watchrun.config.cache", "watchrun.agents.hub",
            "jsonschema", "yaml")
"""What the server imports before it forks anything."""
_MAX_REQUEST = 64 * 1024
_lock = threading.Lock()


class _Server:
    """This process's server: its socket, and the environment it started with."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid, self.owner = sock, pid, os.getpid()
        self.startup = _startup_env(os.environ)
        self.gone = False


_server: _Server | None = None


def _startup_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_VARS)}


def _connect() -> _Server | None:
    """This process's server (started at first use), or None when it cannot run. The server
    is no child of this process (it forks away from the one started here, which exits): a
    runner in this process, whose end stops the children it did not start, never meets it."""
    global _server
    with _lock:
        if _server is not None and _server.owner == os.getpid() and not _server.gone:
            return _server
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        proc = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
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
        _server = _Server(ours, int(ready[1]))
        return _server


def server_pid() -> int | None:
    """The pid of this process's server, if it runs."""
    return _server.pid if _server is not None and not _server.gone else None


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
          stderr: int | None, new_session: bool = True) -> Forked | None:
    """`argv` (the console script's path, then its arguments) forked by the server, stdin
    /dev/null, stdout and stderr the descriptors given (None: a pipe, `Forked.stdout` and
    `.stderr`); None when it must be started the usual way (the caller does)."""
    if os.environ.get("WATCHRUN_TEST_FORK", "1") == "0":
        return None
    server = _connect()
    if server is None or _startup_env(env) != server.startup:
        return None
    umask = os.umask(0o22)
    os.umask(umask)
    request = json.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd),
                          "session": new_session, "umask": umask,
                          "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)},
                         ).encode("utf-8", "surrogatepass")
    if len(request) > _MAX_REQUEST:
        return None
    mine, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    null = os.open(os.devnull, os.O_RDONLY)
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
        timeout: float) -> subprocess.CompletedProcess[bytes] | None:
    """`subprocess.run(argv, stdout=PIPE, stderr=PIPE or STDOUT, stdin=DEVNULL)` through the
    server (in a new session); None when it must be started the usual way."""
    if merged:
        r, w = os.pipe()
        try:
            forked = spawn(argv, env=env, cwd=cwd, stdout=w, stderr=w)
        finally:
            os.close(w)
        if forked is None:
            os.close(r)
            return None
        forked.stdout = open(r, "rb")  # noqa: SIM115  (stdout and stderr: one pipe)
    else:
        forked = spawn(argv, env=env, cwd=cwd, stdout=None, stderr=None)
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


# The server: `python forkserver.py FD`.

def _serve(sock: socket.socket) -> None:
    import importlib

    for name in _PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    sock.send(b"ready %d" % os.getpid())
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                channel = children.pop(pid, None)
                if channel is not None:
                    with contextlib.suppress(OSError):
                        channel.send(struct.pack("i", os.waitstatus_to_exitcode(status)))
                    channel.close()
        if sock in ready:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST, 4)
            if not data:
                return  # the test worker is gone
            channel = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                _child(json.loads(data.decode("utf-8", "surrogatepass")), fds[1:])
            for fd in fds[1:]:
                os.close(fd)
            children[pid] = channel
            channel.send(struct.pack("i", pid))


def _child(request: dict[str, Any], stdio: list[int]) -> None:
    """In the forked child: become the process the console script would be, run it, exit."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if request["session"]:
        os.setsid()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for name in os.listdir("/proc/self/fd"):  # (the server's socket, the stdio as received)
        if int(name) > 2:
            with contextlib.suppress(OSError):
                os.close(int(name))
    os.umask(request["umask"])
    resource.setrlimit(resource.RLIMIT_NOFILE, tuple(request["nofile"]))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin, sys.stdout, sys.stderr = (_stream(0, "r"), _stream(1, "w"), _stream(2, "w"))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = list(request["argv"])
    code = 0
    try:
        from watchrun.cli import entry

        code = _exit_code(entry())  # (the console script: `sys.exit(entry())`)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(_finish(code))


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _finish(code: int) -> int:
    """The interpreter's exit: threads joined, atexit functions, streams flushed (a flush that
    fails is exit 120); an uncaught KeyboardInterrupt ends the process by SIGINT."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120 if code == 0 else code
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _stream(fd: int, mode: str) -> io.TextIOWrapper:
    """Standard stream `fd` as the interpreter makes it at its start (Python/pylifecycle.c
    `create_stdio`), with the encoding and errors of the server's own."""
    like = (sys.stdin, sys.stdout, sys.stderr)[fd]
    buffered = not os.environ.get("PYTHONUNBUFFERED") or mode == "r"
    raw = io.FileIO(fd, mode, closefd=False)
    binary: Any = (io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)) \
        if buffered else raw
    line = buffered and (raw.isatty() or fd == 2)
    return io.TextIOWrapper(binary, encoding=like.encoding, errors=like.errors,
                            line_buffering=line, write_through=not buffered)


if __name__ == "__main__":
    if os.fork() > 0:  # (the test process waits for this one, and the server is no child of it)
        os._exit(0)
    _serve(socket.socket(fileno=int(sys.argv[1])))
