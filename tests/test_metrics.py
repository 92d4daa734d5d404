"""`--metrics`: prometheus_client exposition over a capped HTTP server, with real requests on
loopback; counters that survive reload, stop and `clear` (of a watcher the config names)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, wait_for, write_config
from liverunner import cli as process_cli

from watchrun.runtime.counters import Counters
from watchrun.runtime.metrics import (
    MAX_CONNECTIONS,
    MAX_HEAD_BYTES,
    REQUEST_TIMEOUT_S,
    MetricsServer,
    parse_address,
)
from watchrun.runtime.recent_lines import RecentLines
from watchrun.runtime.tally import Tally

SNAPSHOT: dict[str, Any] = {
    "up": True,
    "watchers": {"app": {"up": True}},
    "totals": {"app": {"lines": 10, "matches": 2, "restarts": 1, "lastMatchAt": 1.5e9},
               "gone": {"lines": 4}},
    "agents": [{"name": "triage"}],
    "agentTotals": {"triage": {"turns": 3, "failures": 1,
                               "tokens": {"input": 100, "cached": 40, "output": 7}}},
    "loop_lag_max_s": 0.25,
}


@contextlib.contextmanager
def served(snapshot: dict[str, Any] | Callable[[], dict[str, Any]], timeout_s: float = 10.0,
           host: str = "127.0.0.1") -> Iterator[MetricsServer]:
    """A MetricsServer on `host` (a free port) serving `snapshot` (or what it returns), its
    loop in a thread; closed on exit."""
    loop = asyncio.new_event_loop()
    take = snapshot if callable(snapshot) else lambda: snapshot
    server = MetricsServer(host, 0, take, up=lambda: bool(take().get("up")),
                           timeout_s=timeout_s)
    ready = threading.Event()

    async def main() -> None:
        await server.start()
        ready.set()
        try:
            await asyncio.Event().wait()
        finally:
            await server.close()

    task: list[asyncio.Task[None]] = []
    thread = threading.Thread(target=lambda: loop.run_until_complete(
        _own(loop, main(), task)), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(task[0].cancel)
        thread.join(10)
        loop.close()


async def _own(loop: asyncio.AbstractEventLoop, coro: Any, out: list[asyncio.Task[None]]) -> None:
    out.append(loop.create_task(coro))
    with contextlib.suppress(asyncio.CancelledError):
        await out[0]


def request(port: int, method: str, path: str,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_metrics_are_prometheus_text_with_process_metrics_and_every_series() -> None:
    with served(SNAPSHOT) as srv:
        status, headers, body = request(srv.port, "GET", "/metrics")
    text = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    for line in (
        'watchrun_up 1.0', 'watchrun_watcher_up{watcher="app"} 1.0',
        'watchrun_watcher_up{watcher="gone"} 0.0',  # stopped: still there, down
        'watchrun_lines_total{watcher="app"} 10.0', 'watchrun_lines_total{watcher="gone"} 4.0',
        'watchrun_restarts_total{watcher="app"} 1.0', 'watchrun_gaps_total{watcher="app"} 0.0',
        'watchrun_rotations_total{watcher="gone"} 0.0',
        'watchrun_last_match_timestamp_seconds{watcher="app"} 1.5e+09',
        'watchrun_agent_turns_total{agent="triage"} 3.0',
        'watchrun_agent_failures_total{agent="triage"} 1.0',
        'watchrun_agent_tokens_total{agent="triage",kind="cached"} 40.0',
        'watchrun_agent_tokens_total{agent="triage",kind="output"} 7.0',
        'watchrun_loop_lag_max_seconds 0.25', 'watchrun_redactions_total{watcher="app"} 0.0',
    ):
        assert line in text.splitlines(), line
    assert re.search(r"^process_resident_memory_bytes \d", text, re.M)
    assert re.search(r"^process_open_fds \d", text, re.M)
    assert 'watchrun_info{version="' in text


def test_head_query_strings_filters_openmetrics_and_gzip() -> None:
    with served(SNAPSHOT) as srv:
        status, headers, body = request(srv.port, "HEAD", "/metrics")
        assert (status, body) == (200, b"") and int(headers["content-length"]) > 1000
        status, _, body = request(srv.port, "GET", "/metrics?debug=1&x")
        assert status == 200 and b"watchrun_up 1.0" in body
        _, _, body = request(srv.port, "GET", "/metrics?name[]=watchrun_up")
        assert body.decode().splitlines()[-1] == "watchrun_up 1.0" and b"process_" not in body
        _, headers, body = request(srv.port, "GET", "/metrics", {
            "Accept": "application/openmetrics-text; version=1.0.0"})
        assert headers["content-type"].startswith("application/openmetrics-text")
        assert body.endswith(b"# EOF\n")
        _, headers, body = request(srv.port, "GET", "/metrics", {"Accept-Encoding": "gzip"})
        assert headers["content-encoding"] == "gzip"
        assert b"watchrun_up 1.0" in gzip.decompress(body)


def test_methods_paths_and_health() -> None:
    with served(SNAPSHOT) as srv:
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            status, headers, _ = request(srv.port, method, "/metrics")
            assert (status, headers["allow"]) == (405, "GET, HEAD")
        assert request(srv.port, "GET", "/nope")[0] == 404
        assert request(srv.port, "GET", "/metricsx")[0] == 404
        assert request(srv.port, "GET", "/healthz")[::2] == (200, b"ok\n")
        assert request(srv.port, "GET", "/healthz?verbose")[0] == 200
        assert raw(srv.port, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert raw(srv.port, b"GET /metrics SPDY/3\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    with served({**SNAPSHOT, "up": False}) as srv:  # (starting, reloading or stopping)
        assert request(srv.port, "GET", "/healthz")[::2] == (503, b"not running\n")
        assert request(srv.port, "GET", "/livez")[::2] == (200, b"alive\n")  # not restarted


def test_a_request_head_past_the_cap_gets_431() -> None:
    with served(SNAPSHOT) as srv:
        big = b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n"
        assert raw(srv.port, big).startswith(b"HTTP/1.1 431 ")
        many = b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * (MAX_HEAD_BYTES // 6 + 1) + b"\r\n"
        assert raw(srv.port, many).startswith(b"HTTP/1.1 431 ")
        assert request(srv.port, "GET", "/metrics")[0] == 200  # and it goes on serving


def test_idle_connections_cannot_keep_a_probe_out() -> None:
    """16 connections that send nothing (reopened as they are closed) held every slot: the 17th,
    a liveness probe's `/livez`, was closed unanswered, over and over, and the Kubernetes
    manifests' probe restarted a healthy runner. A new connection past the cap now cuts off the
    oldest one still sending its request head; one whose head is in is served to its end."""
    with served(SNAPSHOT, timeout_s=60) as srv:
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                for _ in range(MAX_CONNECTIONS)]
        try:
            for _ in range(3):  # an attacker reopening what was closed changes nothing
                assert raw(srv.port, b"GET /livez HTTP/1.1\r\n\r\n").startswith(
                    b"HTTP/1.1 200 ")
                # (the probe's connection gone on the server's side too: an answered one
                # lingering would make room first)
                wait_for(lambda: len(srv._clients) < MAX_CONNECTIONS, "the probe's close seen")
                idle.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))

            def cut_off(s: socket.socket) -> bool:
                try:
                    return s.recv(1) == b""
                except ConnectionResetError:
                    return True
            assert all(cut_off(s) for s in idle[:3])  # the three oldest, closed to make room
            idle[5].settimeout(0.2)
            with pytest.raises(TimeoutError):
                idle[5].recv(1)  # the others still held, untouched
        finally:
            for s in idle:
                s.close()


def test_answered_clients_that_do_not_close_cannot_keep_a_probe_out() -> None:
    """A tester's F1: 16 clients that read their response and kept the connection open held
    every slot through the lingering close, and /livez was refused for 10 s. One past the cap
    now closes the oldest answered connection (its response was whole: a FIN, no reset)."""
    with served(SNAPSHOT, timeout_s=60) as srv:
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                for _ in range(MAX_CONNECTIONS)]
        try:
            for s in held:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            for s in held:  # each answered whole, then held open by the client
                got = b""
                while not got.endswith(b"\r\n\r\nok\n"):
                    got += s.recv(4096)
                assert got.startswith(b"HTTP/1.1 200 "), got
            for _ in range(3):  # (the 16 stay open on their side: their FIN came long ago)
                assert raw(srv.port, b"GET /livez HTTP/1.1\r\n\r\n").startswith(
                    b"HTTP/1.1 200 ")
        finally:
            for s in held:
                s.close()


def test_scrapers_that_do_not_read_their_response_cannot_keep_a_probe_out() -> None:
    """An explorer's F2: 16 scrapers that sent `GET /metrics` and read nothing held every slot
    while their response was being written (a body larger than the kernel buffers: ~100 KB at
    a network's MSS, here 300 watchers over MSS 1460 and a small receive buffer), and every
    /livez was reset for 10 s at a time. One past the cap now cuts off the oldest of them."""
    ids = [f"pod-kube-system-coredns-5d78c9869d-{i:05d}" for i in range(300)]
    many = {**SNAPSHOT, "watchers": {w: {"up": True} for w in ids},
            "totals": {w: {"lines": 10, "matches": 2} for w in ids}}
    with served(many, timeout_s=60) as srv:
        stalled = []
        try:
            for _ in range(MAX_CONNECTIONS):
                s = socket.socket()
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1460)  # (loopback: 64 KiB)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
                s.settimeout(10)
                s.connect(("127.0.0.1", srv.port))
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                stalled.append(s)
            for s in stalled:  # each one's response is going out, and it takes no more
                assert s.recv(5, socket.MSG_PEEK) == b"HTTP/"
            for _ in range(3):
                assert raw(srv.port, b"GET /livez HTTP/1.1\r\n\r\n").startswith(
                    b"HTTP/1.1 200 ")
        finally:
            for s in stalled:
                s.close()


def test_ten_clients_scraping_back_to_back_are_never_reset() -> None:
    """An explorer's F1: 10 scrapers (each: connect, GET, read to the end, close, again) got a
    reset in about one scrape in ten, below the 16-connection cap: finished connections linger
    until the loop sees the client's FIN, and the cap cut off a scraper whose request was
    already on its way rather than one of those. Answered connections now make room first."""
    errors: list[BaseException] = []
    counts: list[int] = []

    done = [0]

    def scrape_for(port: int, until: float) -> None:
        """Scrape for 2 s and until the ten have done 100 between them (a loaded host takes
        longer: the resets came one in ten), 30 s at most."""
        n = 0
        try:
            while time.monotonic() < until or (done[0] < 100 and time.monotonic() < until + 28):
                status, _, body = request(port, "GET", "/metrics")
                assert status == 200 and b"watchrun_up 1.0" in body
                n += 1
                done[0] += 1  # (under the GIL: a count, if not an exact one)
        except BaseException as exc:  # (reported by the test's thread)
            errors.append(exc)
        counts.append(n)

    with served(SNAPSHOT) as srv:
        until = time.monotonic() + 2.0
        threads = [threading.Thread(target=scrape_for, args=(srv.port, until))
                   for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert not errors, f"{len(errors)} failed scrapes of {sum(counts)}: {errors[:3]}"
    assert len(counts) == 10 and sum(counts) >= 100, counts


def test_back_to_back_scrapes_take_a_bounded_share_of_the_loop() -> None:
    """An explorer's F9: every scrape was built on the loop, whatever the rate: 0.11 ms per
    watcher (57 ms at 500), so back-to-back scrapers held the loop most of the time, and a
    flood that took 1.4 s unscraped took 41 s with 16 scrapers (its command blocked on its
    pipe meanwhile). Building bodies now takes at most a tenth of the loop's time: the next is
    built no sooner than nine times the last one's build time after it; a scrape that comes
    sooner waits for it, and is answered with what was so when it came, or later."""
    spent: list[float] = []
    seen = {"matches": 0}

    def big() -> dict[str, Any]:  # a large runner's snapshot: 4 ms of the loop each
        began = time.perf_counter()
        while time.perf_counter() - began < 0.004:
            pass
        spent.append(time.perf_counter() - began)
        return {**SNAPSHOT, "totals": {"app": {"matches": seen["matches"]}}}

    errors: list[BaseException] = []

    def scrape_for(port: int, until: float) -> None:
        try:
            while time.monotonic() < until:
                assert request(port, "GET", "/metrics")[0] == 200
        except BaseException as exc:  # (reported by the test's thread)
            errors.append(exc)

    with served(big) as srv:
        began = time.monotonic()
        threads = [threading.Thread(target=scrape_for, args=(srv.port, began + 1.5))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        elapsed = time.monotonic() - began
        assert not errors, errors[:3]
        assert sum(spent) <= 0.2 * elapsed, (len(spent), sum(spent), elapsed)
        for n in (1, 2, 3):  # never older than the request: asked right after a change
            seen["matches"] = n
            body = request(srv.port, "GET", "/metrics")[2].decode()
            assert f'watchrun_matches_total{{watcher="app"}} {n}.0' in body.splitlines()
        assert request(srv.port, "GET", "/healthz")[::2] == (200, b"ok\n")


def test_scrapes_waiting_for_their_turn_do_not_hold_the_close() -> None:
    """Scrapes waiting for their turn to build a body (0.2 s each here, so 1.8 s apart) are
    ended by the runner's stop, not built one by one first (4 of them: about 7 s)."""
    def slow() -> dict[str, Any]:
        began = time.perf_counter()
        while time.perf_counter() - began < 0.2:
            pass
        return SNAPSHOT

    ended: list[BaseException | int] = []

    def scrape(port: int) -> None:
        try:
            ended.append(request(port, "GET", "/metrics")[0])
        except (OSError, http.client.HTTPException) as exc:  # (cut off by the close)
            ended.append(exc)

    with served(slow) as srv:
        assert request(srv.port, "GET", "/metrics")[0] == 200  # the next: 1.8 s from now
        threads = [threading.Thread(target=scrape, args=(srv.port,)) for _ in range(4)]
        for t in threads:
            t.start()
        wait_for(lambda: len(srv._clients) == 4, "the 4 scrapes waiting")
        closing = time.monotonic()
    took = time.monotonic() - closing
    for t in threads:
        t.join(30)
    assert took < 1.5 and len(ended) == 4, (took, ended)


@pytest.mark.parametrize("sent", [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"])
def test_an_idle_or_slow_client_is_cut_off(sent: bytes) -> None:
    with served(SNAPSHOT, timeout_s=0.5) as srv, socket.create_connection(
            ("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(sent)
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert s.recv(1) == b""  # closed by the server, no response
        assert time.monotonic() - started < 9


def test_the_tally_keeps_counting_across_a_rebuilt_watcher() -> None:
    tally = Tally()
    first = Counters(RecentLines(10))
    first.matches, first.bytes_read, first.last_match_at = 3, 30, 100.0
    tally.attach("w", first)
    tally.observe("info", "rotate", "watcher", "w", {})
    tally.observe("warning", "gap", "watcher", "w", {"bytes": 10})
    second = Counters(RecentLines(10))
    tally.attach("w", second)  # a reload rebuilt it: the first pipeline's counts stay
    second.matches = 2
    tally.observe("info", "turn-start", "agent", "a", {})
    tally.observe("warning", "turn-end", "agent", "a", {"status": "failed", "input": 5,
                                                       "cached": 1, "output": 2})
    w = tally.watchers()["w"]
    assert (w["matches"], w["bytes"], w["rotations"], w["gaps"], w["lastMatchAt"]) == (
        5, 30, 1, 1, 100.0)
    assert tally.agents()["a"] == {"turns": 1, "failures": 1,
                                   "tokens": {"input": 5, "cached": 1, "output": 2}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    _, _, body = request(port, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` from `cwd`: a `run` as a process of its own (liverunner.cli: its start
    fails or it would run on), the rest (`stop`, `clear`, `agent send`, `status`: they ask the
    runner) in this process (tests/inproc.py)."""
    if args[0] != "run":
        return inproc(cwd, *args)
    return process_cli(*args, cwd=cwd)


def test_a_live_runner_counts_across_reload_stop_and_clear(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    conf: dict[str, Any] = {
        "watchers": [
            {"id": "file", "path": "app.log", "pattern": "ERROR"},
            {"id": "flaky", "command": "echo ERROR crash; exit 1", "pattern": "ERROR",
             "restart": "always", "restartDelay": "100ms"},
        ],
        "agents": [{"name": "triage", "provider": "mock", "prompt": "{matches}"}]}
    config = write_config(tmp_path, conf)
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_log("running")
        with open(log, "a") as fh:
            fh.write("ERROR 1\nfine\n")
        wait_for(lambda: scrape(port).get('watchrun_matches_total{watcher="file"}') == 1,
                 "the first match counted")
        os.rename(log, tmp_path / "app.log.1")
        log.write_text("ERROR 2\n")
        wait_for(lambda: scrape(port).get('watchrun_rotations_total{watcher="file"}') == 1,
                 "the rotation counted")
        wait_for(lambda: scrape(port).get('watchrun_restarts_total{watcher="flaky"}', 0) >= 2,
                 "restarts counted")
        wait_for(lambda: scrape(port)['watchrun_watcher_up{watcher="flaky"}'] == 0,
                 "the crashing command down (backing off or given up)")
        assert scrape(port)['watchrun_watcher_up{watcher="file"}'] == 1
        conf["watchers"][0]["pattern"] = "ERROR|WARN"  # the file watcher is rebuilt
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded")
        with open(log, "a") as fh:
            fh.write("WARN 3\n")
        m = wait_for(lambda: (s := scrape(port))['watchrun_matches_total{watcher="file"}'] >= 3
                     and s, "matches counted across the reload")
        assert m['watchrun_lines_total{watcher="file"}'] >= 3  # not reset by the rebuild
        assert m['watchrun_rotations_total{watcher="file"}'] == 1
        assert m['watchrun_last_match_timestamp_seconds{watcher="file"}'] > time.time() - 60
        assert cli("stop", "file", "-c", "watch.yaml", cwd=tmp_path).returncode == 0
        assert cli("clear", "-c", "watch.yaml", cwd=tmp_path).returncode == 0
        after = scrape(port)
        assert after['watchrun_watcher_up{watcher="file"}'] == 0  # still there: not vanished
        assert after['watchrun_matches_total{watcher="file"}'] == m[
            'watchrun_matches_total{watcher="file"}']
        assert after['watchrun_agent_turns_total{agent="triage"}'] == 0
        assert after["watchrun_up"] == 1 and after["process_open_fds"] > 0
        assert cli("agent", "send", "triage", "hello", "-c", "watch.yaml",
                   cwd=tmp_path).returncode == 0
        done = wait_for(lambda: (s := scrape(port)).get(
            'watchrun_agent_tokens_total{agent="triage",kind="output"}', 0) > 0 and s,
            "a finished turn's tokens")
        assert done['watchrun_agent_turns_total{agent="triage"}'] == 1
        assert done['watchrun_agent_failures_total{agent="triage"}'] == 0
    finally:
        assert r.stop() == 0


@pytest.mark.parametrize("source", ["file", "command"])
def test_redactions_and_lines_cut_are_counted(tmp_path: Path, source: str) -> None:
    """`watchrun_redactions_total` read an attribute no counter had: it said 0 whatever was
    redacted. A line cut at `maxLineBytes` that did not match was counted nowhere, though its
    pattern may have been in the part that was cut off. A file's lines and a command's alike."""
    text = "ERROR db password=hunter2hunter2\n" + "x" * 3000 + " ERROR late\n"
    log = tmp_path / "app.log"
    log.write_text("")
    watcher: dict[str, Any] = {"id": "app", "path": "app.log", "pattern": "ERROR"}
    if source == "command":
        del watcher["path"]
        watcher["command"] = [sys.executable, "-c", f"print({text[:-1]!r})"]
    config = write_config(tmp_path, {
        "limits": {"maxLineBytes": "1KiB"}, "output": {"redact": True}, "watchers": [watcher]})
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_log("running")
        with open(log, "a") as fh:
            fh.write(text)
        m = wait_for(lambda: (s := scrape(port)).get(
            'watchrun_lines_cut_total{watcher="app"}') == 1 and s, "the cut line counted")
        assert m['watchrun_redactions_total{watcher="app"}'] == 1
        assert m['watchrun_matches_total{watcher="app"}'] == 1  # "ERROR late" was cut off
        status = json.loads(cli("status", "app", "--json", "-c", "watch.yaml",
                                cwd=tmp_path).stdout)
        assert (status["linesCut"], status["bytesCut"]) == (1, 3011 - 1024)
    finally:
        assert r.stop() == 0


def _served_peers(pid: int, port: int) -> set[int]:
    """The client ports of the connections on `port` that the runner holds open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
                if int(local.rsplit(":", 1)[1], 16) == port and state == "01" and inode in inodes:
                    peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers


def _at_eof(s: socket.socket) -> bool:
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False


def test_a_scrape_short_of_descriptors_is_closed_and_said_once(tmp_path: Path) -> None:
    """Out of descriptors, asyncio's accept loop reported each failed accept to the runner's
    exception handler: ~500 `internal error: socket.accept() out of system resource` lines a
    second (the log's buffer full, other lines dropped; `status` filled with them) while the
    scraper hung. Now the scraper is closed at once (EOF) and one warning a minute says it."""
    import resource

    (tmp_path / "app.log").write_text("")  # (a file: no child whose pipes come and go)
    config = write_config(tmp_path, {"watchers": [{"id": "f", "path": "app.log",
                                                   "pattern": "x"}]})
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    held: list[socket.socket] = []
    try:
        r.wait_running()
        soft, hard = resource.prlimit(r.pid, resource.RLIMIT_NOFILE)
        used = len(os.listdir(f"/proc/{r.pid}/fd"))
        resource.prlimit(r.pid, resource.RLIMIT_NOFILE, (used + 2, hard))
        # Scrapers take the free descriptors until one is refused. The count is not exact (a
        # status write may hold one when it is taken), so each connection is told apart by
        # what the runner does with it: held open (served) or closed at once (refused).
        while True:
            s = socket.create_connection(("127.0.0.1", port))
            me = s.getsockname()[1]
            fate = wait_for(lambda: "refused" if _at_eof(s)  # noqa: B023
                            else "held" if me in _served_peers(r.pid, port) else None,  # noqa: B023
                            "the scraper held or refused")
            if fate == "refused":
                s.close()
                break
            held.append(s)
            assert len(held) <= 4, "the descriptor limit never refused a scraper"
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                assert s.recv(100) == b""  # closed at once: no hang until the scrape timeout
        r.wait_log("cannot accept a connection", timeout=5)
        resource.prlimit(r.pid, resource.RLIMIT_NOFILE, (soft, hard))
        for s in held:
            s.close()
        assert scrape(port)["watchrun_up"] == 1
        assert r.control({"cmd": "status"})["problems"] == []
    finally:
        for s in held:
            s.close()
        assert r.stop() == 0
    err = r.stderr()
    assert "internal error" not in err and err.count("cannot accept a connection") == 1, err


def _ipv6() -> bool:
    """This host can listen on IPv6's unspecified address."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6(), reason="no IPv6 on this host")
def test_the_ipv6_unspecified_address_serves_ipv4_too() -> None:
    """An explorer's F5: `--metrics [::]:PORT` was IPv6 only (IPV6_V6ONLY set on every IPv6
    socket), so an IPv4 scraper or kubelet probe was refused, unlike Go exporters and Vector,
    and no address served both families. `[::]` is dual-stack now; `[::1]` stays IPv6 only."""
    with served(SNAPSHOT, host="::") as srv:
        assert raw(srv.port, b"GET /livez HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 200 ")
        with socket.create_connection(("::1", srv.port), timeout=10) as s:
            s.sendall(b"GET /livez HTTP/1.1\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200 ")
    with served(SNAPSHOT, host="::1") as srv:  # (a specific address: that one only)
        assert srv._socks[0].getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1


def test_a_busy_metrics_port_fails_the_start_with_exit_3(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "c", "command": "true", "pattern": "x"}]})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = cli("run", "-c", str(config), "--metrics", f"127.0.0.1:{port}", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "address already in use" in p.stderr.lower() and "Traceback" not in p.stderr


@pytest.mark.parametrize(("address", "bound"), [
    (":9464", ("127.0.0.1", 9464)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9", ("::1", 9))])
def test_an_address_without_a_host_is_loopback(address: str, bound: tuple[str, int]) -> None:
    assert parse_address(address) == bound


@pytest.mark.parametrize(("address", "said"), [
    ("nonsense", "expected HOST:PORT"), ("host:", "expected HOST:PORT"),
    ("", "expected HOST:PORT"),  # (it started with no metrics, exit 0: explorer ops 1)
    # a Unicode digit was a bare `invalid literal for int()`; fullwidth ones were port 9464;
    # an unbalanced bracket was taken as if it were balanced (an explorer's F6)
    ("127.0.0.1:\u00b2", "expected HOST:PORT"),  # ²
    ("127.0.0.1:\uff19\uff14\uff16\uff14", "expected HOST:PORT"),  # fullwidth 9464
    ("127.0.0.1:\u0669\u0664\u0666\u0664", "expected HOST:PORT"),  # Arabic-Indic 9464
    ("[::1:9464", "expected HOST:PORT"),
    ("::1]:9464", "expected HOST:PORT"), ("[]:9464", "expected HOST:PORT"),
    ("[::1]x:9464", "expected HOST:PORT"),
    ("127.0.0.1:0", "port 0 is out of range: use 1 to 65535"),
    ("[::1]:99999", "port 99999 is out of range: use 1 to 65535")])
def test_a_bad_metrics_address_is_a_usage_error(tmp_path: Path, address: str, said: str) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "c", "command": "true", "pattern": "x"}]})
    p = cli("run", "-c", str(config), "--metrics", address, cwd=tmp_path)
    assert p.returncode == 2 and f"--metrics {address!r}: {said}" in p.stderr, p.stderr


def test_every_family_is_in_the_readme_s_metrics_table() -> None:
    """What a scrape can hold is what README's `### Metrics` table says (a family added
    without a row is not documented)."""
    from watchrun.runtime.metrics_families import _families

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme.split("### Metrics", 1)[1].split("\n#", 1)[0]
    snap = {"loop_lag_max_s": 0.0, "watchers": {"w": {}}, "totals": {"w": {}},
            "agents": [{"name": "a"}], "actions": {"w": {"x": {}}}}
    suffix = {"counter": "_total", "info": "_info"}  # (as the exposition names their samples)
    names = {f.name + suffix.get(f.type, "") for f in _families(snap)}
    missing = sorted(n for n in names if f"`{n}`" not in table)
    assert not missing, missing


def test_the_security_page_names_the_metrics_listener_and_its_caps() -> None:
    """An explorer's F8: docs/security.md's threat model ("who controls what") left out the
    runner's one network listener, unauthenticated plain HTTP on `0.0.0.0:9464` in the image
    and the manifests, and what it reveals. Its row and its guard say the caps the code has."""
    security = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    who = security.split("## Who controls what", 1)[1].split("\n## ", 1)[0]
    assert any(line.startswith("| the metrics endpoint (`--metrics") for line in who.splitlines())
    guard = security.split("### 8. The metrics endpoint", 1)[1].split("\n## ", 1)[0]
    for said in (f"at most {MAX_CONNECTIONS} connections", f"{MAX_HEAD_BYTES // 1024} KiB",
                 f"{REQUEST_TIMEOUT_S:g} s for a request", "NetworkPolicy", "0.0.0.0:9464"):
        assert said in " ".join(guard.split()), said
