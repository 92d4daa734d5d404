"""How a `watchrun mcp` session ends (README "Watchers end with the session"; explorer mcpend):
every request read before the client's messages end is answered, with its result once its call
is done, whatever stdin is; answers are dropped only when the client takes none of them for
ANSWER_GRACE_S. A slow reader lost its answers, cut mid-line, 2 s after stdin closed; a call
running longer than that got no answer; a file on stdin lost half its answers; a client with
8 MiB of requests unread that read nothing, then closed stdin, kept the session for good."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import termios
import time
from pathlib import Path
from typing import IO, Any

import forkserver
import pytest
from liverunner import DEADLINE_S, LiveRunner, read_records, wait_for, watchrun_bin, write_config
from test_mcp_client_gone import DEAF, call
from test_mcp_faults import RawClient, _unread

from watchrun.mcp.stdin import MAX_LINE

RATE = 400_000
"""Bytes a second a slow client reads (a slow link): the `matches` answer here takes it ~3 s."""
INIT = [{"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def read_all(stream: IO[bytes], rate: float | None = None) -> bytes:
    """Everything on `stream` to its end, read at `rate` bytes a second at most."""
    got, started = bytearray(), time.monotonic()
    end = started + DEADLINE_S
    while (left := end - time.monotonic()) > 0:
        if not select.select([stream], [], [], left)[0]:
            break
        data = os.read(stream.fileno(), 16 << 10)
        if not data:
            return bytes(got)
        got += data
        if rate is not None and (ahead := len(got) / rate - (time.monotonic() - started)) > 0:
            time.sleep(ahead)  # (the pace of the reader, not a wait for the server)
    raise AssertionError(f"stdout did not end within {DEADLINE_S}s")


def answers(out: bytes) -> dict[Any, dict[str, Any]]:
    """The messages with an id in `out`, by id; every line whole (none is cut off)."""
    *lines, tail = out.split(b"\n")
    assert tail == b"", f"a line cut off: {tail[:100]!r}… ({len(tail)} bytes)"
    return {m["id"]: m for m in map(json.loads, lines) if "id" in m}


def err_of(client: RawClient) -> str:
    return Path(client.err.name).read_text()


def add_deaf(client: RawClient, tmp_path: Path) -> None:
    """Add `w1`, a command that ignores SIGTERM (its stop takes the whole stopTimeout), and
    wait until its trap is set (its `up` matched: a SIGTERM before would end it at once)."""
    assert client.ask(json.loads(call(1, action="add", command=DEAF, pattern="up")))[
        "result"]["isError"] is False
    jsonl = tmp_path / ".watchrun" / "watchers" / "w1.jsonl"
    wait_for(lambda: any(r["kind"] == "match" for r in read_records(jsonl)),
             "the command to have set its trap (its `up` matched)")


def test_a_client_reading_slowly_after_closing_stdin_gets_every_answer_whole(
        tmp_path: Path) -> None:
    """The 2 s ran from stdin's end: a client reading a 1.7 MB answer at 400 kB/s got a line
    cut off after 2 s (and the log said it was gone). It runs while no byte is taken."""
    write_config(tmp_path, {"watchers": []})
    (tmp_path / "app.log").write_text("".join(f"E{i:05d} {'x' * 600}\n" for i in range(1200)))
    client = RawClient(tmp_path)
    try:
        added = client.ask(json.loads(call(1, action="add", path="app.log", pattern="^E",
                                           fromStart=True, id="app")))
        assert added["result"]["isError"] is False, added

        def recorded() -> bool:
            status = client.ask(json.loads(call(2, action="status", id="app")))
            return bool(status["result"]["structuredContent"]["watch"]["matchCount"] >= 1200)
        wait_for(recorded, "the 1200 matches to be recorded")
        client.send(call(3, action="matches", id="app", lines=1200))
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        out = client.buf + read_all(client.stdout, RATE)
        assert client.proc.wait(DEADLINE_S) == 0
    finally:
        client.close()
    got = answers(out)[3]["result"]["structuredContent"]
    assert len(out) > 2.5 * RATE  # (the client took longer than the grace to read it)
    assert got["count"] == 1200, str(got)[:300]
    assert "dropped" not in err_of(client) and "is gone" not in err_of(client)


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM"])
def test_a_call_running_when_the_client_ends_is_answered(tmp_path: Path, ending: str) -> None:
    """README: a `stop` still running when stdin closes or SIGTERM comes (3 s: its command
    ignores SIGTERM) is answered with its result once done (on stdin's end it got no answer:
    the 2 s grace cut it)."""
    write_config(tmp_path, {"limits": {"stopTimeout": "3s"}, "watchers": []})
    client = RawClient(tmp_path)
    try:
        add_deaf(client, tmp_path)
        client.send(call(2, action="stop", id="w1"))
        wait_for((tmp_path / "termed").exists, "the stop to be under way (TERM sent)")
        if ending == "SIGTERM":
            client.proc.send_signal(signal.SIGTERM)
        else:
            assert client.proc.stdin is not None
            client.proc.stdin.close()
        out = client.buf + read_all(client.stdout)
        assert client.proc.wait(DEADLINE_S) == 0
    finally:
        client.close()
    answer = answers(out).get(2)
    assert answer is not None and answer["result"]["structuredContent"]["stopped"], answer
    assert "dropped" not in err_of(client)


def test_a_client_that_reads_again_after_the_drop_gets_its_calls_answered(
        tmp_path: Path) -> None:
    """README: once a client that read nothing for 2 s is given up, a call still running is
    answered `Connection closed` if the client takes it within 2 s more (stdout was cut first,
    and the SDK's own answers for what it still handled could not go out)."""
    write_config(tmp_path, {"limits": {"stopTimeout": "5s"}, "watchers": []})
    client = RawClient(tmp_path)
    try:
        add_deaf(client, tmp_path)
        client.send(call(2, action="stop", id="w1") + b"".join(
            call(100 + i, action="list") for i in range(200)))  # (and not one answer read)
        wait_for((tmp_path / "termed").exists, "the stop to be under way (TERM sent)")
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        wait_for(lambda: "the answers still owed are dropped" in err_of(client),
                 "the client to be given up")
        out = client.buf + read_all(client.stdout)  # (it reads again)
        assert client.proc.wait(DEADLINE_S) == 0
    finally:
        client.close()
    assert answers(out).get(2) == {"jsonrpc": "2.0", "id": 2, "error": {
        "code": -32000, "message": "Connection closed"}}
    assert "is gone" not in err_of(client)


@pytest.mark.parametrize("signals", [1, 2])
def test_a_signal_ends_the_clients_messages_as_stdins_end_does(tmp_path: Path,
                                                              signals: int) -> None:
    """README: SIGTERM ends the client's messages as closing stdin does: a `stop` running on a
    live runner (3 s) is answered with its result (it was answered `Connection closed`); a
    second SIGTERM ends the session at once, and the call is answered so."""
    config = write_config(tmp_path, {"limits": {"stopTimeout": "3s"}, "watchers": []})
    runner = LiveRunner(config)
    try:
        runner.wait_running()
        client = RawClient(tmp_path, "-c", str(config))
        try:
            added = client.ask(json.loads(call(1, action="add", command=DEAF, pattern="up")))
            assert added["result"]["structuredContent"]["runner"] == "live", added
            wait_for(lambda: any(r["kind"] == "match" for r in runner.records("w1")),
                     "the command to have set its trap (its `up` matched)")
            client.send(call(2, action="stop", id="w1"))
            wait_for((tmp_path / "termed").exists, "the stop to be under way (TERM sent)")
            client.proc.send_signal(signal.SIGTERM)
            if signals == 2:
                wait_for(lambda: "answers owed go out first" in err_of(client),
                         "the first signal to be taken")
                client.proc.send_signal(signal.SIGTERM)
            out = client.buf + read_all(client.stdout)
            assert client.proc.wait(DEADLINE_S) == 0
        finally:
            client.close()
        answer = answers(out).get(2)
        if signals == 2:
            assert answer == {"jsonrpc": "2.0", "id": 2, "error": {
                "code": -32000, "message": "Connection closed"}}, answer
        else:
            assert answer is not None and answer["result"]["structuredContent"]["stopped"], \
                answer
    finally:
        assert runner.stop() == 0


@pytest.mark.parametrize("stdin", ["file", "terminal"])
def test_requests_from_a_file_or_a_terminal_each_get_their_answer(tmp_path: Path,
                                                                  stdin: str) -> None:
    """`watchrun mcp < requests.jsonl`: a file (or a terminal, ended by Ctrl-D) was read by the
    SDK's own reader, which cancels what it still handles at the end: 15 of 29 answered."""
    write_config(tmp_path, {"watchers": []})
    ids = range(100, 129)
    requests = b"".join(json.dumps(m).encode() + b"\n" for m in [*INIT, *(json.loads(
        call(i, action="list")) for i in ids)])
    (tmp_path / "requests.jsonl").write_bytes(requests)
    with (tmp_path / "requests.jsonl").open("rb") as file, (tmp_path / "mcp.err").open(
            "wb") as err:
        master = -1
        if stdin == "terminal":
            master, fd = os.openpty()
            attrs = termios.tcgetattr(fd)
            attrs[3] &= ~termios.ECHO  # (the lines typed are not written back)
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
        else:
            fd = os.dup(file.fileno())
        argv = [watchrun_bin(), "mcp"]
        proc: Any = forkserver.spawn(argv, env=dict(os.environ), cwd=tmp_path, stdin=fd,
                                     stdout=None, stderr=err.fileno(), kind="mcp")
        if proc is None:
            proc = subprocess.Popen(argv, cwd=tmp_path, stdin=fd, stdout=subprocess.PIPE,
                                    stderr=err)
        os.close(fd)
        try:
            if master >= 0:
                os.write(master, requests + b"\x04")  # (Ctrl-D at a line's start: the end)
            out = read_all(proc.stdout)
            assert proc.wait(DEADLINE_S) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            if master >= 0:
                os.close(master)
    got = answers(out)
    assert sorted(i for i in got if i != "init") == list(ids), out[-500:]
    assert all(got[i]["result"]["isError"] is False for i in ids)
    assert "dropped" not in (tmp_path / "mcp.err").read_text()


def test_a_client_with_8_mib_unread_that_reads_nothing_then_closes_stdin_ends_it(
        tmp_path: Path) -> None:
    """README: a client that stops reading and closes stdin ends the session. With more than
    twice MAX_LINE sent and not read (the answers owed not taken, stdin's reading paused), the
    pipe's end was never read, and the session ran until a signal."""
    write_config(tmp_path, {"watchers": []})
    client = RawClient(tmp_path)
    try:
        small = b"".join(json.dumps({"jsonrpc": "2.0", "id": f"s{i}", "method": "tools/list"}
                                    ).encode() + b"\n" for i in range(40))
        pad = json.dumps({"jsonrpc": "2.0", "id": "pad", "method": "tools/list", "params": {
            "pad": "x" * (1 << 20)}}).encode() + b"\n"
        data = memoryview(small + pad * 10)
        assert client.proc.stdin is not None
        fd = client.proc.stdin.fileno()
        os.set_blocking(fd, False)
        sent = 0

        def paused() -> bool:  # (the server has read more than 2 x MAX_LINE past what it used)
            nonlocal sent
            if sent < len(data) and select.select([], [fd], [], 0)[1]:
                with contextlib.suppress(BlockingIOError):
                    sent += os.write(fd, data[sent:sent + (64 << 10)])
            return sent - _unread(client.proc.stdin) > 2 * MAX_LINE + len(small)
        wait_for(paused, "the server to have read 8 MiB it holds back")
        client.proc.stdin.close()
        started = time.monotonic()
        assert client.proc.wait(DEADLINE_S) == 0
        assert time.monotonic() - started < DEADLINE_S
    finally:
        client.close()
    assert "the answers still owed are dropped" in err_of(client)
    assert "is gone" not in err_of(client)


def test_a_listen_on_a_2025_connection_is_answered_before_the_end(tmp_path: Path) -> None:
    """`subscriptions/listen` is not counted as owed on a 2026-07-28 connection (its stream
    lasts until the client ends it); on a 2025 one it is answered at once (Method not found),
    and that answer was lost when stdin closed right after it."""
    write_config(tmp_path, {"watchers": []})
    client = RawClient(tmp_path)
    try:
        client.send(json.dumps({"jsonrpc": "2.0", "id": 17, "method": "subscriptions/listen",
                                "params": {"notifications": {"resourceSubscriptions": []}}}
                               ).encode() + b"\n")
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        out = client.buf + read_all(client.stdout)
        assert client.proc.wait(DEADLINE_S) == 0
    finally:
        client.close()
    assert answers(out)[17]["error"]["code"] == -32601
