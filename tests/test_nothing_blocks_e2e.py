"""Nothing blocks the loop (issue #10), through the real runner: a hostile line for a
backtracking pattern stalls no other watcher, request, signal or watchdog ping, and is skipped
for good; the control socket stays bounded when descriptors run out or strangers knock; a
socket path longer than AF_UNIX allows still works."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config

HOSTILE = "a" * 40 + "!\n"
"""`^(a+)+$(?<=a)` tries about 2**40 ways to split this line before it gives up."""
PATTERN = "^(a+)+$(?<=a)"  # the lookbehind makes it Python-re-only


class Notifications:
    """A NOTIFY_SOCKET read by a thread, so every message has its arrival time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.seen: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                self.seen.append((time.monotonic(), self.sock.recv(4096).decode()))

    def count(self, word: str) -> int:
        return sum(word in m for _, m in list(self.seen))

    def times(self, word: str) -> list[float]:
        return [t for t, m in list(self.seen) if word in m]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[Notifications]:
    n = Notifications(tmp_path / "notify.sock")
    yield n
    n.close()


def append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def timeouts(r: LiveRunner) -> list[dict[str, Any]]:
    return [x for x in r.records("bt") if x["kind"] == "error" and x["code"] == "regex-timeout"]


def test_a_hostile_backtracking_line_stalls_nothing_else_and_is_skipped_for_good(
        tmp_path: Path, notify: Notifications) -> None:
    hostile, calm = tmp_path / "hostile.log", tmp_path / "calm.log"
    hostile.write_text("")
    calm.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "bt", "path": "hostile.log", "pattern": PATTERN, "backtracking": True},
        {"id": "calm", "path": "calm.log", "pattern": "ERROR"}]})
    env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "200000"}  # a ping every 100 ms
    r = LiveRunner(config, env=env)
    try:
        wait_for(lambda: notify.count("READY=1"), "READY=1")
        append(hostile, HOSTILE * 6)
        wait_for(lambda: _worker_cpu(r.pid) > 0.1, "the regex worker deep in a search")
        window = time.monotonic()
        append(calm, "ERROR meanwhile\n")
        wait_for(lambda: r.matches("calm"), "the other watcher's match")
        assert time.monotonic() - window < 1.0
        started = time.monotonic()
        assert r.control({"cmd": "status"})["state"] == "running"
        assert time.monotonic() - started < 1.0
        assert len(timeouts(r)) < 6  # the checks above ran while the hostile lines were matched
        wait_for(lambda: len(timeouts(r)) == 6, "every hostile line skipped")
        pings = [t for t in notify.times("WATCHDOG=1") if t >= window]
        gaps = [b - a for a, b in zip([window, *pings], [*pings, time.monotonic()], strict=True)]
        assert max(gaps) < 0.5, f"watchdog pings stopped for {max(gaps):.2f}s"
        assert [x["lineNo"] for x in timeouts(r)] == [1, 2, 3, 4, 5, 6]
        append(hostile, "aaaa\n")
        wait_for(lambda: r.matches("bt"), "a fine line matched by a new worker")
        assert r.matches("bt")[0]["lineNo"] == 7
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0
    assert r.left == []
    again = LiveRunner(config, env=env)  # the checkpoint is past the hostile lines
    try:
        wait_for(lambda: notify.count("READY=1") == 2, "READY=1 again")
        append(hostile, "aa\n")
        wait_for(lambda: len(again.matches("bt")) == 2, "the next line after a restart")
        assert len(timeouts(again)) == 6  # none of them was matched again
        append(hostile, HOSTILE * 6)
        wait_for(lambda: len(timeouts(again)) > 6, "a hostile line under way")
        again.send(signal.SIGTERM)  # while the worker is deep in a search
        assert again.proc.wait(timeout=10) == 0
    finally:
        again.close()
    assert again.left == []


def _worker_cpu(runner: int) -> float:
    """CPU seconds used by the runner's regex worker (0 when there is none)."""
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if entry.name.isdigit() and b"regex_worker" in (entry / "cmdline").read_bytes():
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()
                if int(fields[1]) == runner:
                    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def test_out_of_descriptors_on_accept_is_logged_once_and_recovers(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "exec sleep 1000", "pattern": "x"}]})
    r = LiveRunner(config)
    held: list[socket.socket] = []
    try:
        r.wait_log("running")
        in_use = len(os.listdir(f"/proc/{r.pid}/fd"))
        soft, hard = resource.prlimit(r.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(r.pid, resource.RLIMIT_NOFILE, (in_use + 4, hard))
        for _ in range(40):  # far more than the runner can accept
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(r.out / "control.sock"))  # the kernel queues it; accept() fails
            held.append(s)
        wait_for(lambda: "cannot accept a connection: Too many open files" in r.stderr(),
                 "the runner to notice")
        for s in held:
            s.close()
        held.clear()
        resource.prlimit(r.pid, resource.RLIMIT_NOFILE, (soft, hard))
        wait_for(lambda: (_status_or_none(r) or {}).get("ok"), "the control socket to serve "
                 "again (it may say `busy` while it sheds the queued connections)")
        assert r.stderr().count("cannot accept a connection") == 1  # once per minute
        assert "Traceback" not in r.stderr()
    finally:
        for s in held:
            s.close()
        assert r.stop() == 0


def _status_or_none(r: LiveRunner) -> dict[str, Any] | None:
    try:
        return r.control({"cmd": "status"})
    except (ConnectionError, OSError, ValueError):
        return None


def test_the_control_socket_serves_only_its_own_user_or_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as another user")
    open_dir = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        open_dir.chmod(0o755)
        config = write_config(open_dir, {"watchers": [
            {"id": "c", "command": "exec sleep 1000", "pattern": "x"}]})
        r = LiveRunner(config)
        try:
            r.wait_log("running")
            (open_dir / ".watchrun").chmod(0o777)  # loosened by mistake: the check still holds
            (open_dir / ".watchrun" / "control.sock").chmod(0o777)
            probe = ("import socket; s = socket.socket(socket.AF_UNIX); "  # refused before reading
                     f"s.connect({str(r.out / 'control.sock')!r}); print(s.recv(4096).decode())")
            p = subprocess.run(["python3", "-c", probe], capture_output=True, text=True,
                               timeout=30, user=65534, group=65534)
            assert '"permission_denied"' in p.stdout, p.stderr
            assert r.control({"cmd": "status"})["ok"] is True  # root still may
        finally:
            assert r.stop() == 0
    finally:
        subprocess.run(["rm", "-rf", str(open_dir)], check=True)


def test_an_output_dir_path_longer_than_af_unix_allows_works(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 5))
    deep.mkdir(parents=True)
    config = write_config(deep, {"watchers": [
        {"id": "c", "command": "echo up; exec sleep 1000", "pattern": "up"}]})
    assert len(str(deep / ".watchrun" / "control.sock")) > 108
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("c"), "the command to be up")
        assert r.control({"cmd": "status"})["watchers"] == ["c"]
        second = cli("-c", config)
        assert second.returncode == 3 and "another runner is live" in second.stderr
        stop = cli("stop", "c", "-c", config)
        assert stop.returncode == 0, stop.stderr
        wait_for(lambda: r.records("c")[-1]["kind"] == "stop", "the watcher stopped")
    finally:
        assert r.stop() == 0
    assert not (deep / ".watchrun" / "control.sock").exists()


def test_lines_of_16_mib_that_match_nothing_do_not_hold_the_loop(tmp_path: Path) -> None:
    """A tester's F4: the status snapshot's `.tail` decoded, sanitized and escaped each kept
    line whole before cutting it to 4096 characters: four 16 MiB lines (`maxLineBytes: 16MiB`)
    that matched nothing held the loop for seconds, every other watcher stopped, and the stall
    was blamed on a file system. Only a line's head is read for its tail now."""
    big = tmp_path / "big.log"
    big.write_text("")
    config = write_config(tmp_path, {"limits": {"maxLineBytes": "16MiB"}, "watchers": [
        {"id": "big", "path": "big.log", "pattern": "NEVER-PRESENT"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        line = "head é " + "abcdefghij0123456789" * (800_000 - 1) + "\n"  # ~16 MB each
        append(big, line * 4)
        tail = r.out / "state" / "big.tail"
        wait_for(lambda: tail.exists() and tail.read_text().count("head é abcdefghij") == 4,
                 "the four lines in the watcher's tail")
        r.assert_lag_ok()
        shown = [x for x in tail.read_text().splitlines() if "head é" in x]
        assert all(len(x) < 4096 + 64 for x in shown), [len(x) for x in shown]
    finally:
        assert r.stop() == 0


def test_a_hostile_line_for_a_backtracking_exclude_stalls_nothing_else(tmp_path: Path) -> None:
    """A tester's F6: an `exclude` only Python re can run was searched on the loop (the check of
    whether it ran in linear time compared two bound methods with `is`, never the same object),
    so one hostile line held every watcher, /livez and the control socket: 76 s for five. Now
    the watcher's pattern and excludes go to its worker, as a backtracking pattern's do."""
    hostile, calm = tmp_path / "hostile.log", tmp_path / "calm.log"
    hostile.write_text("")
    calm.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "bt", "path": "hostile.log", "pattern": "!", "exclude": [PATTERN.replace(
            "$", "!$")], "backtracking": True},
        {"id": "calm", "path": "calm.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        append(hostile, HOSTILE * 3)
        wait_for(lambda: _worker_cpu(r.pid) > 0.1, "the regex worker deep in a search")
        window = time.monotonic()
        append(calm, "ERROR meanwhile\n")
        wait_for(lambda: r.matches("calm"), "the other watcher's match")
        assert time.monotonic() - window < 1.0
        wait_for(lambda: len(timeouts(r)) == 3, "every hostile line skipped")
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0


SLOW_RE2 = "a.{1000}x|b.{1000}y|a.{999}z|b.{998}w"
"""Linear for RE2, but its automaton is too large for RE2's DFA: ~50 µs a byte of `a`s and
`b`s (explorer mcp F2: ten 64 KiB lines held the loop 33 s)."""


def test_a_pattern_slow_for_re2_scans_off_the_loop(tmp_path: Path) -> None:
    """Where RE2 is the engine (no hyperscan: non-x86 hosts, or WATCHRUN_ENGINES), a short
    pattern of large bounded repeats scanned its chunk on the loop: every other watcher, the
    control socket and the watchdog waited for it. The scan runs in a worker thread."""
    import random

    slow, calm = tmp_path / "slow.log", tmp_path / "calm.log"
    slow.write_text("")
    calm.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "slow", "path": "slow.log", "pattern": SLOW_RE2},
        {"id": "calm", "path": "calm.log", "pattern": "ERROR"}]})
    r = LiveRunner(config, env={"WATCHRUN_ENGINES": "re2"})
    try:
        r.wait_running()
        rng = random.Random(7)
        append(slow, "".join(rng.choice("ab") for _ in range(12_000)) + "\n")
        append(calm, "ERROR meanwhile\n")
        wait_for(lambda: r.matches("calm"), "the other watcher's match")
        wait_for(lambda: {w["id"]: w for w in r.control({"cmd": "list"})["watchers"]}[
            "slow"]["linesRead"] == 1, "the slow line scanned")
        assert r.matches("slow") == []
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0
