"""The fork server of tests/forkserver.py, run as `python forkserved.py FD MODULE,...`: it
imports those modules once (forkserver.PRELOADS), then forks one child per request on the
socket FD, makes each the process the console script would make, and sends each child's exit
status on that child's own socket."""

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
import sys
import threading
from typing import Any

from forkserver import MAX_REQUEST


def _serve(sock: socket.socket, preload: list[str]) -> None:
    import importlib

    for name in preload:
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
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 4)
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
    _serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2].split(","))
