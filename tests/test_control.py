"""The control socket's bounds (issue #10): busy past MAX_CLIENTS, idle clients dropped, a
handler's bug or OSError answered (never a traceback or a dropped connection), bad requests
refused, and a socket path longer than AF_UNIX allows bound and reached through /proc/self/fd."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from liverunner import cli, write_config

import watchrun.runtime.control as control
from watchrun.output.runlog import RunLog
from watchrun.runtime.client import is_live, request
from watchrun.runtime.control import ControlServer
from watchrun.runtime.sdnotify import SdNotify


async def echo(req: dict[str, Any]) -> dict[str, Any]:
    if req.get("cmd") == "boom":
        raise KeyError("a bug")
    if req.get("cmd") == "full":
        raise OSError(errno.ENOSPC, "No space left on device")
    if req.get("cmd") == "late":
        raise TimeoutError
    if req.get("cmd") == "slow":
        await asyncio.sleep(30)
    return {"ok": True, "echo": req}


async def ask(path: Path, data: bytes) -> dict[str, Any]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(data)
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return dict(json.loads(line))


def serve(tmp_path: Path, body: Any, log: RunLog | None = None) -> None:
    async def main() -> None:
        server = ControlServer(tmp_path / "control.sock", echo, log)
        await server.start()
        try:
            await body(server)
        finally:
            await server.close()
        assert not (tmp_path / "control.sock").exists()

    asyncio.run(main())


def test_requests_are_answered_and_bugs_and_bad_requests_refused(tmp_path: Path) -> None:
    stream = io.StringIO()
    sock = tmp_path / "control.sock"

    async def body(server: ControlServer) -> None:
        assert (await ask(sock, b'{"cmd": "hi"}\n'))["echo"] == {"cmd": "hi"}
        assert (await ask(sock, b'{"cmd": "boom"}\n'))["error"]["code"] == "internal"
        assert (await ask(sock, b'{"cmd": "full"}\n'))["error"] == {
            "code": "os_error", "message": "[Errno 28] No space left on device"}
        assert (await ask(sock, b'{"cmd": "late"}\n'))["error"] == {
            "code": "os_error", "message": "TimeoutError"}
        assert (await ask(sock, b"[1, 2]\n"))["error"]["code"] == "bad_request"
        assert (await ask(sock, b"{nope\n"))["error"]["code"] == "bad_request"
        assert (sock.stat().st_mode & 0o777) == 0o600

    serve(tmp_path, body, RunLog(stream=stream))
    assert "control request failed: KeyError('a bug')" in stream.getvalue()
    assert "control request 'full' failed: [Errno 28] No space left on device" in stream.getvalue()
    assert "Traceback" not in stream.getvalue()


def test_the_socket_is_created_0600_under_an_open_umask_never_changed_after(
        tmp_path: Path) -> None:
    """docs/security.md: `control.sock` is created 0600, never briefly wider. Under umask 0 the
    socket is 0600 and the kernel saw no change of its mode after it was made (a chmod after
    the bind, which leaves a moment wider than 0600, is an IN_ATTRIB event on its name)."""
    from watchrun.inotify import INotify

    in_attrib, in_create = 0x4, 0x100
    ino = INotify()
    ino.add_watch(tmp_path, in_attrib | in_create)
    old = os.umask(0)
    try:
        async def body(server: ControlServer) -> None:
            assert (tmp_path / "control.sock").stat().st_mode & 0o777 == 0o600

        serve(tmp_path, body)
    finally:
        os.umask(old)
    events = [(ev.name, ev.mask & (in_attrib | in_create)) for ev in ino.read()]
    ino.close()
    assert ("control.sock", in_create) in events
    assert ("control.sock", in_attrib) not in events, events


def test_past_max_clients_the_next_one_is_told_busy(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "DRAIN_S", 0.1)  # the held requests are cut short at close
    sock = tmp_path / "control.sock"

    async def body(server: ControlServer) -> None:
        held = [await asyncio.open_unix_connection(str(sock))
                for _ in range(control.MAX_CLIENTS)]
        for _, w in held:
            w.write(b'{"cmd": "slow"}\n')  # each one busy in the handler
        deadline = time.monotonic() + 30
        while len(server._clients) < control.MAX_CLIENTS:  # every held one accepted
            assert time.monotonic() < deadline, f"{len(server._clients)} clients accepted"
            await asyncio.sleep(0.005)
        assert (await ask(sock, b'{"cmd": "hi"}\n'))["error"]["code"] == "busy"
        for _, w in held:
            w.close()

    serve(tmp_path, body)


def test_an_idle_client_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "IDLE_S", 0.2)
    sock = tmp_path / "control.sock"

    async def body(server: ControlServer) -> None:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(b'{"cmd": "half a req')  # and then nothing
        reply = json.loads(await asyncio.wait_for(reader.readline(), 5))
        assert reply["error"]["code"] == "timeout"
        assert await reader.read() == b""  # closed
        writer.close()

    serve(tmp_path, body)


@pytest.mark.parametrize("size", [1 << 20, 32 << 20])
def test_the_client_reads_the_refusal_of_a_request_too_large(tmp_path: Path, size: int) -> None:
    """The runner stops reading a request past MAX_REQUEST and answers `request_too_large`;
    `request()` was still sending, got EPIPE and said the runner did not answer (NoReply:
    `watchrun add` with ten 100 KB `--exclude`s said `the runner did not answer`)."""
    sock = tmp_path / "control.sock"

    async def body(server: ControlServer) -> None:
        reply = await asyncio.to_thread(request, sock, {"cmd": "hi", "pad": "x" * size}, 10)
        assert reply["error"]["code"] == "request_too_large"
        assert await asyncio.to_thread(request, sock, {"cmd": "hi"}) == {
            "ok": True, "echo": {"cmd": "hi"}}

    serve(tmp_path, body)


def test_a_socket_path_longer_than_af_unix_allows(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["x" * 40] * 3))
    deep.mkdir(parents=True)
    sock = deep / "control.sock"
    assert len(str(sock)) > 108

    async def main() -> None:
        server = ControlServer(sock, echo)
        await server.start()
        try:
            assert await asyncio.to_thread(is_live, sock)
            reply = await asyncio.to_thread(request, sock, {"cmd": "hi"})
            assert reply == {"ok": True, "echo": {"cmd": "hi"}}
            with pytest.raises(OSError, match="another runner is live"):
                await ControlServer(sock, echo).start()
        finally:
            await server.close()
        assert not sock.exists()

    asyncio.run(main())
    with pytest.raises(ConnectionError, match="no live runner"):
        request(sock, {"cmd": "hi"})


def test_a_start_that_loses_the_race_leaves_the_live_servers_socket_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runners started at once: the second looked at the socket before the first listened
    on it (`is_live` False), then unlinked the live runner's socket and bound its own (or, its
    bind failing, unlinked it on the way out): two runners on one output dir, the first one
    unreachable. The output dir's lock refuses the second before it touches the socket."""
    sock = tmp_path / "control.sock"

    async def main() -> None:
        first = ControlServer(sock, echo)
        await first.start()
        try:
            monkeypatch.setattr(control, "is_live", lambda path: False)
            with pytest.raises(OSError, match=f"another runner is live .*pid {os.getpid()}"):
                await ControlServer(sock, echo).start()
            reply = await asyncio.to_thread(request, sock, {"cmd": "hi"})
            assert reply == {"ok": True, "echo": {"cmd": "hi"}}
        finally:
            await first.close()
        assert not sock.exists()
        second = ControlServer(sock, echo)  # the lock went with the first: a next runner starts
        await second.start()
        await second.close()

    asyncio.run(main())


def test_a_planted_symlink_at_the_socket_path_is_replaced_never_connected_through(
        tmp_path: Path) -> None:
    """`control.sock` a symlink to some other live socket: the start connected through it, took
    whatever answered for a live runner and refused to start (`another runner is live`). Nothing
    under the output dir is followed: the link is replaced by the runner's own socket, and the
    other socket never sees a connection."""
    sock = tmp_path / "control.sock"
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(str(tmp_path / "other.sock"))
        other.listen()
        other.setblocking(False)
        sock.symlink_to(tmp_path / "other.sock")

        async def main() -> None:
            server = ControlServer(sock, echo)
            await server.start()
            try:
                assert not sock.is_symlink()
                reply = await asyncio.to_thread(request, sock, {"cmd": "hi"})
                assert reply == {"ok": True, "echo": {"cmd": "hi"}}
            finally:
                await server.close()

        asyncio.run(main())
        with pytest.raises(BlockingIOError):
            other.accept()  # nobody connected to it


def test_a_planted_symlink_at_the_lock_path_is_refused_by_its_own_name(tmp_path: Path) -> None:
    """`control.lock` a symlink: the runner refuses to start (it would create or lock the
    link's target) and names the lock, not the socket beside it; the target is not made."""
    (tmp_path / "a.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "a", "path": str(tmp_path / "a.log"), "pattern": "E"}]})
    out = tmp_path / ".watchrun"
    out.mkdir(mode=0o750)
    (out / "control.lock").symlink_to(tmp_path / "target")
    res = cli("run", "-c", config, timeout=60)
    assert res.returncode == 3, res.stderr
    assert f"control socket {out / 'control.sock'}: {out / 'control.lock'}: is a symlink (to " \
        f"{tmp_path / 'target'})" in res.stderr, res.stderr
    assert not (tmp_path / "target").exists()


def test_is_live_is_bounded_when_the_listeners_backlog_is_full(tmp_path: Path) -> None:
    """A blocking AF_UNIX connect waits while the listener's backlog is full (a runner whose loop
    is stalled; a socket planted at the path): `is_live` waited, and with it a runner's start
    (on its loop, SIGTERM unheard) and `agent run`, for ever. It never waits now: such a
    listener is live."""
    sock = tmp_path / "control.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(sock))
        listener.listen(0)
        queued = []
        with contextlib.suppress(BlockingIOError):
            for _ in range(8):  # fill its backlog
                c = socket.socket(socket.AF_UNIX)
                queued.append(c)
                c.setblocking(False)
                c.connect(str(sock))
        answer: list[bool] = []
        thread = threading.Thread(target=lambda: answer.append(is_live(sock)), daemon=True)
        thread.start()
        thread.join(5)
        for c in queued:
            c.close()
    assert not thread.is_alive() and answer == [True]


def test_sd_notify_never_blocks_when_its_reader_falls_behind(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as reader:
        reader.bind(str(path))  # and never read
        sd = SdNotify({"NOTIFY_SOCKET": str(path)})
        for _ in range(10_000):
            sd.watchdog()  # a blocking send would hang here once the queue is full
        assert sd.dropped > 0
        sd.close()


@pytest.mark.parametrize(("levels", "leaf", "ok"), [
    (32, "", True), (32, "1", True), (33, "", False), (33, "1", False)])
def test_a_request_is_at_most_32_levels_deep(tmp_path: Path, levels: int, leaf: str,
                                             ok: bool) -> None:
    """docs/control.md: one JSON object "at most 32 levels deep" (the request object is the
    first level; a value in the innermost array is no level: 32 with one was refused)."""
    nested = "[" * (levels - 1) + leaf + "]" * (levels - 1)
    sock = tmp_path / "control.sock"

    async def body(server: ControlServer) -> None:
        reply = await ask(sock, f'{{"cmd": "deep", "x": {nested}}}\n'.encode())
        assert ("echo" in reply) is ok
        if not ok:
            assert reply["error"] == {"code": "bad_request",
                                      "message": "JSON nested deeper than 32 levels"}

    serve(tmp_path, body)


@pytest.mark.parametrize(("sent", "said"), [
    (b"null", "a request is a JSON object"),  # (it was "nested deeper than 32 levels")
    (b'{"cmd": "stop", "id": "a", "id": "b"}', "the key 'id' is given twice"),
    (b'{"cmd": "x", "w": {"k": 1, "k": 2}}', "the key 'k' is given twice"),
])
def test_a_request_that_is_no_object_or_gives_a_key_twice_is_refused(
        tmp_path: Path, sent: bytes, said: str) -> None:
    """A key given twice was taken as its last value without a word (`"id": "ticker", "id":
    "applog"` stopped applog); `null` was said to be nested too deep."""
    async def body(server: ControlServer) -> None:
        reply = await ask(tmp_path / "control.sock", sent + b"\n")
        assert reply["error"] == {"code": "bad_request", "message": said}

    serve(tmp_path, body)


def test_the_documented_bounds_are_the_servers() -> None:
    """README and docs/control.md give these numbers (16 clients, 256 KiB, 10 s, 32 levels; the
    metrics endpoint: 16 connections, an 8 KiB head, 10 s); the tests above and in
    test_metrics.py exercise the constants, this keeps the docs' numbers the constants."""
    from watchrun.runtime import control_request, metrics

    assert (control.MAX_CLIENTS, control.MAX_REQUEST, control.IDLE_S,
            control_request.MAX_DEPTH) == (
        16, 256 * 1024, 10.0, 32)
    assert (metrics.MAX_CONNECTIONS, metrics.MAX_HEAD_BYTES, metrics.REQUEST_TIMEOUT_S) == (
        16, 8 * 1024, 10.0)
