"""`watchrun mcp` faults found by a tester: requests left unanswered (a line over 4 MiB, a
request the SDK cannot parse), a huge `pattern` checked on the loop with no bound, and the
watchers a killed server added to a live runner left running there."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import anyio
import forkserver
import pytest
from forkedmcp import spawn_mcp
from liverunner import DEADLINE_S, LiveRunner, wait_for, watchrun_bin, write_config
from mcpclient import ThreadServer, alive, mcp_inproc
from test_stuck_calls import HANGS

from watchrun.runtime.client import request

MAX_LINE = 4 << 20


class RawClient:
    """`watchrun mcp` driven by hand-written JSON-RPC lines (what a faulty client sends): a
    process, or with `inproc` served on a thread of this process (mcpclient.ThreadServer: no
    session that starts its own runner)."""

    def __init__(self, cwd: Path, *args: str, argv: list[str] | None = None,
                 inproc: bool = False) -> None:
        err = cwd / f"mcp-{time.monotonic_ns()}.err"
        self.server: ThreadServer | None = None
        if inproc:
            assert argv is None
            self.err: IO[Any] = err.open("w")
            self.server = ThreadServer(cwd, *args, err=self.err)
            self.stdin, self.stdout = self.server.stdin, self.server.stdout
        else:
            self.err = err.open("wb")
            self.proc: subprocess.Popen[bytes] | forkserver.Forked
            got = None if argv is not None else spawn_mcp(
                [watchrun_bin(), "mcp", *args], dict(os.environ), cwd, self.err)
            if got is not None:  # (forked from a server that has imported the SDK)
                self.proc, to_child, from_child = got
                self.proc.stdin = open(to_child, "wb")  # noqa: SIM115
                self.proc.stdout = open(from_child, "rb")  # noqa: SIM115
            else:
                self.proc = subprocess.Popen([*(argv or [watchrun_bin()]), "mcp", *args],
                                             cwd=cwd, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=self.err)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.buf = b""
        self.replies: dict[Any, dict[str, Any]] = {}
        reply = self.ask({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        assert "result" in reply, reply
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

    def send(self, line: bytes) -> None:
        self.stdin.write(line)
        self.stdin.flush()

    def reply(self, rid: Any) -> dict[str, Any]:
        """The reply with id `rid` (null: an error whose request had no usable id)."""
        end = time.monotonic() + DEADLINE_S
        while rid not in self.replies:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                message = json.loads(line)
                self.replies.setdefault(message.get("id"), message)
            if rid in self.replies:
                break
            left = end - time.monotonic()
            assert left > 0, f"no reply with id {rid!r} within {DEADLINE_S}s"
            if select.select([self.stdout], [], [], left)[0]:
                data = os.read(self.stdout.fileno(), 1 << 20)
                assert data, "the server closed stdout"
                self.buf += data
        return self.replies.pop(rid)

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(message).encode() + b"\n")
        return self.reply(message["id"])

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.err.close()
            return
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.err.close()


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One server for the module's protocol-fault tests (a server's start is ~0.7 s of CPU):
    none of them adds a watcher, and each reads every reply it asks for."""
    folder = tmp_path_factory.mktemp("raw")
    write_config(folder, {"watchers": []})
    client = RawClient(folder, inproc=True)
    try:
        yield client
    finally:
        client.close()


def tools_list(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/list"}


def test_a_line_over_4_mib_is_answered_and_the_session_goes_on(raw: RawClient) -> None:
    label = "L" * MAX_LINE
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "watch", "arguments": {"action": "add", "command": "true", "pattern": "x",
                                       "label": label}}}).encode() + b"\n"
    raw.send(line)
    assert raw.reply(7) == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32600, "message": f"the message is longer than {MAX_LINE} bytes (4 MiB); it "
        "was not read"}}
    raw.send(b'{"params": {"x": "' + b"y" * MAX_LINE + b'"}, "id": 8}\n')  # id past the head
    assert raw.reply(None)["error"]["code"] == -32600
    assert "tools" in raw.ask(tools_list(9))["result"]  # the tails were no messages
    assert not raw.replies  # nothing else was answered


DROPPED: list[tuple[Any, Any, int, str]] = [
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, 1, -32602,
     "`params` must be an object"),
    ({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "watch"}, 2, -32602,
     "`params` must be an object"),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, None, -32600,
     "`id` must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None, -32600,
     "`id` must be a string or an integer"),
    ({"jsonrpc": "1.0", "id": "old", "method": "tools/list"}, "old", -32600,
     '`jsonrpc` must be "2.0"'),
    ({"jsonrpc": "2.0", "id": 3, "method": ["tools/list"]}, 3, -32600,
     "`method` must be a string"),
    ([tools_list(4)], None, -32600, "a message is one JSON object (a batch is not supported)"),
    ({}, None, -32600, "a message is a request (`method`, `id`), a notification (`method`) or "
     "a response (`id`, `result` or `error`)"),
    ({"jsonrpc": "2.0", "method": 7}, None, -32600, "a message is a request (`method`, `id`), "
     "a notification (`method`) or a response (`id`, `result` or `error`)"),
    # the SDK takes these for responses, answers nothing, and the request was counted as owed
    # (8 of them: the session read no further message; one: stdin's end held 2 s, then
    # "dropped"): explorer mcpend F3
    ({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "error": {"code": 1, "message": "m"}},
     8, -32600, "a message is a request (`method`) or a response (`result` or `error`), not "
     "both"),
    ({"jsonrpc": "2.0", "id": "r", "method": "tools/list", "result": {}}, "r", -32600,
     "a message is a request (`method`) or a response (`result` or `error`), not both"),
    # the SDK answers these "Invalid request parameters", naming no field (explorer mcp F4)
    ({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
      "params": {"name": "watch", "arguments": [1]}}, 5, -32602,
     "`params.arguments` must be an object (the tool's arguments), not list [1]"),
    ({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {}}, 6, -32602,
     "`params.name` must be a string (the tool's name), not missing"),
    ({"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": 5}}, 7, -32602,
     "`params.uri` must be a string (the resource's URI), not int 5"),
]
"""Requests the SDK would drop unanswered (the client then waits forever): each with the id
of its answer and the error it gets."""


def test_a_request_the_sdk_would_drop_is_answered(raw: RawClient) -> None:
    """One session for the table (each server's start costs about a second of CPU): each
    request is answered, and the session answers the next request after it."""
    for n, (message, rid, code, text) in enumerate(DROPPED):
        raw.send(json.dumps(message).encode() + b"\n")
        assert raw.reply(rid) == {"jsonrpc": "2.0", "id": rid, "error": {
            "code": code, "message": text}}, message
        assert "tools" in raw.ask(tools_list(10 + n))["result"], message
        assert not raw.replies, (message, raw.replies)


def test_a_line_that_is_not_json_is_a_parse_error(raw: RawClient) -> None:
    raw.send(b'{"jsonrpc": "2.0", "id": 5, "method": \n')
    assert raw.reply(None)["error"]["code"] == -32700
    assert "tools" in raw.ask(tools_list(6))["result"]


def test_an_oversized_pattern_is_refused_before_it_is_checked(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": []})

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            text = await c.error(action="add", command="true", pattern="E|" * (1 << 19))
            assert text == ("watch add: `pattern` is 1048576 bytes, over the 16384-byte (16 KiB) "
                            "limit of a watcher added at runtime")
            assert (await c.ok(action="list"))["watches"] == []
    anyio.run(body)


def test_a_killed_server_leaves_no_watcher_on_the_live_runner(tmp_path: Path) -> None:
    """README: the watchers of a session end with it, even when its server is killed; on a
    live runner (`endWithClient`), the runner stops them when the server's process ends."""
    config = write_config(tmp_path, {"limits": {"stopTimeout": "2s"}, "watchers": [
        {"id": "cfg", "command": "exec sleep 600", "pattern": "x"}]})
    runner = LiveRunner(config)
    sock = runner.out / "control.sock"
    try:
        runner.wait_running()
        client = RawClient(tmp_path, "-c", str(config))
        try:
            added = client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "watch", "arguments": {"action": "add", "id": "mine",
                                               "command": "exec sleep 601", "pattern": "x"}}})
            assert added["result"]["structuredContent"]["runner"] == "live", added
            pid = next(w["pid"] for w in request(sock, {"cmd": "list"})["watchers"]
                       if w["id"] == "mine")
            assert alive(pid)
            os.kill(client.proc.pid, signal.SIGKILL)
            client.proc.wait()
        finally:
            client.close()

        def listed() -> dict[str, str]:
            return {w["id"]: w["status"] for w in request(sock, {"cmd": "list"})["watchers"]}
        wait_for(lambda: listed()["mine"] == "stopped", "the runner to stop `mine`")
        assert listed()["cfg"] == "running"
        assert not alive(pid)
        stops = [r for r in runner.records("mine") if r["kind"] == "stop"]
        assert [r["reason"] for r in stops] == ["client-gone"]
        runner.wait_log(f"process {client.proc.pid}, which added mine, has ended")
    finally:
        assert runner.stop() == 0


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM"])
def test_a_client_that_reads_no_answer_still_ends_its_session(tmp_path: Path,
                                                              ending: str) -> None:
    """README "Watchers end with the session": a client that stopped reading stdout (200
    answers owed, more than the pipe holds), then closed stdin or sent SIGTERM, kept the
    session alive, its command running, as long as it kept its end open; a SIGTERM stopped the
    command but not the server, which only SIGKILL ended. The answers still owed get
    ANSWER_GRACE_S, then the session ends: the server exits 0, the command is gone."""
    write_config(tmp_path, {"watchers": []})
    client = RawClient(tmp_path)
    try:
        added = client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "watch", "arguments": {"action": "add", "id": "c", "pattern": "HIT",
                                           "command": "echo HIT; exec sleep 40019"}}})
        assert added["result"]["isError"] is False, added
        sock = tmp_path / ".watchrun" / "control.sock"
        pid = next(w["pid"] for w in request(sock, {"cmd": "list"})["watchers"] if w["id"] == "c")
        calls = b"".join(json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                                     "params": {"name": "watch", "arguments": {
                                         "action": "list"}}}).encode() + b"\n"
                         for i in range(200))
        client.send(calls)  # (and not one answer read)
        wait_for(lambda: _unread(client.stdout) >= 48_000, "the answers filling the pipe")
        started = time.monotonic()
        if ending == "SIGTERM":
            client.proc.send_signal(signal.SIGTERM)
        else:
            assert client.proc.stdin is not None
            client.proc.stdin.close()
        assert client.proc.wait(DEADLINE_S) == 0
        assert time.monotonic() - started < DEADLINE_S
        assert not alive(pid)
        err = (tmp_path / client.err.name).read_text()
        assert "the answers still owed are dropped" in err
        assert "the MCP client is gone" not in err  # (the drop is the server's own)
        whole = client.stdout.read().split(b"\n")[:-1]  # (the last may be cut off by the drop)
        assert len([m for m in map(json.loads, whole) if "id" in m]) < 200  # (so they were)
    finally:
        client.close()


def test_a_client_that_closes_stdin_after_its_requests_gets_every_answer(tmp_path: Path) -> None:
    """`watchrun mcp` as a filter: requests piped in, stdin closed at once, the answers read
    after. The SDK cancels what it is still handling when its input ends (7 of 29 went
    unanswered, unsaid); it sees the end only once every answer owed went out."""
    write_config(tmp_path, {"watchers": []})
    client = RawClient(tmp_path)
    try:
        ids = range(100, 129)
        client.send(b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                         "params": {"name": "watch", "arguments": {
                                             "action": "list"}}}).encode() + b"\n"
                             for i in ids))
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        assert client.proc.wait(DEADLINE_S) == 0
        read = [json.loads(line) for line in client.stdout.read().splitlines()]
        answers = [m for m in read if "id" in m]
        assert sorted(a["id"] for a in answers) == list(ids)
        assert all(a["result"]["isError"] is False for a in answers), answers
        assert "dropped" not in (tmp_path / client.err.name).read_text()
    finally:
        client.close()


def _unread(pipe: IO[bytes]) -> int:
    """Bytes waiting in `pipe` (FIONREAD)."""
    import fcntl
    import termios

    got = fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(got, sys.byteorder)


def test_a_session_whose_jsonl_close_hangs_still_ends_and_says_so(tmp_path: Path) -> None:
    """The session's own runner stops with the session; a JSONL close that never returns (a
    dead file system) held `watchrun mcp` alive forever after its client closed stdin (asyncio's
    executor and the stop waited for the call without a bound). It ends with 3 and names it."""
    write_config(tmp_path, {"watchers": []})
    (tmp_path / "app.log").write_text("")
    code = HANGS.format(module="watchrun.output.sink", cls="JsonlSink", method="close")
    client = RawClient(tmp_path, argv=[sys.executable, "-c", code])
    try:
        added = client.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "watch", "arguments": {"action": "add", "path": "app.log",
                                           "pattern": "ERROR"}}})
        assert added["result"]["structuredContent"]["watch"]["id"], added
        (tmp_path / "hang").touch()  # from now on a JSONL's close never returns
        assert client.proc.stdin is not None
        client.proc.stdin.close()  # the session ends: its watcher stops, its JSONL is closed
        rc = client.proc.wait(60)  # it used to wait for the hung call forever
    finally:
        client.close()
    err = Path(client.err.name).read_text()
    assert rc == 3, err
    assert "Dead.close did not return in 1.5 s" in err and "1 blocking call still running at " \
        "the end of the stop (Dead.close): a file system that does not answer?" in err, err


def test_a_read_of_a_runner_that_does_not_answer_gives_up_before_a_clients_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Explorer mcp U1: a live runner that never answers (stopped by SIGSTOP) held every call
    75 s, `list` too, past a Gemini CLI's 30 s timeout. A read (`list`, `status`) waits
    READ_TIMEOUT_S (10 s; here made short), a change as long as its stops may take (`wait_s`)."""
    import asyncio
    import socket as sockets

    from watchrun.mcp import runners
    from watchrun.runtime.client import wait_s

    monkeypatch.setattr(runners, "READ_TIMEOUT_S", 0.2)
    assert wait_s("stop", None) > runners.READ_TIMEOUT_S
    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as silent:
        silent.bind(str(tmp_path / "control.sock"))
        silent.listen(4)  # (accepted by the kernel, never read: a stopped runner)
        started = time.monotonic()
        with pytest.raises(runners.NoAnswer, match="did not answer: timed out"):
            asyncio.run(runners.LiveRunner(tmp_path / "control.sock", None).request(
                {"cmd": "list"}))
        assert time.monotonic() - started < 5
