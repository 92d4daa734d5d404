"""The runner's log never waits for stderr: a pipe nobody reads neither blocks a log call nor
stops the runner (SIGTERM included); lines wait in order, and what does not fit is said."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, read_records, wait_for, watchrun_bin, write_config

from watchrun.output import logstream
from watchrun.output.logstream import LogStream
from watchrun.output.runlog import RunLog


def _fill(w: int) -> int:
    """Fill the pipe's buffer (no reader yet); the bytes written."""
    flags = fcntl.fcntl(w, fcntl.F_GETFL)
    fcntl.fcntl(w, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    n = 0
    try:
        while True:
            n += os.write(w, b"#" * 4096)
    except BlockingIOError:
        pass
    finally:
        fcntl.fcntl(w, fcntl.F_SETFL, flags)
    return n


def _read_all(r: int, until: bytes | None) -> bytes:
    """Read the pipe until `until` has come, or to its end (in a thread, so a stuck read fails
    the test)."""
    got = bytearray()
    done = threading.Event()

    def reader() -> None:
        while until is None or until not in got:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            got.extend(chunk)
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    assert done.wait(DEADLINE_S), f"{until!r} never came"
    return bytes(got)


def test_a_full_pipe_holds_no_call_and_lines_come_in_order(pipe: tuple[int, int]) -> None:
    r, w = pipe
    filled = _fill(w)
    out = LogStream(w, lambda n: f"{n} dropped\n")
    for i in range(100):  # each would block on the full pipe; none does
        out.write(f"line {i}\n")
    assert out.dropped == 0
    got = _read_all(r, b"line 99\n")[filled:]
    assert got.decode().splitlines() == [f"line {i}" for i in range(100)]
    assert out.drain(DEADLINE_S)


def test_lines_past_the_backlog_are_counted_and_said_in_their_place(
        pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logstream, "BACKLOG_BYTES", 1000)
    r, w = pipe
    filled = _fill(w)
    out = LogStream(w, lambda n: f"-- {n} dropped --\n")
    lines = [f"line {i:03d}\n" for i in range(300)]  # 9 bytes each: ~110 fit
    for line in lines[:200]:
        out.write(line)
    dropped = out.dropped
    assert dropped > 0
    got = _read_all(r, b"dropped --\n")[filled:].decode().splitlines()
    assert got[-1] == f"-- {dropped} dropped --"
    assert got[:-1] == [x.strip() for x in lines[:200 - dropped]]  # the first ones, in order
    for line in lines[200:]:  # read again: written as before
        out.write(line)
    rest = _read_all(r, b"line 299\n").decode().splitlines()
    assert rest == [x.strip() for x in lines[200:]]
    assert out.drain(DEADLINE_S) and out.dropped == 0


def test_the_log_says_how_many_lines_it_dropped_in_its_own_format(
        pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logstream, "BACKLOG_BYTES", 2000)
    r, w = pipe
    filled = _fill(w)
    stream = os.fdopen(w, "w", closefd=False)
    log = RunLog("json", stream, environ={})
    for i in range(100):  # ~100 bytes a line: ~20 fit
        log.info(f"line {i}", "app")
    got = _read_all(r, b'"log-dropped"')[filled:].decode().splitlines()
    records = [json.loads(x) for x in got]
    note = records[-1]
    assert (note["level"], note["event"], note["count"]) == ("warning", "log-dropped",
                                                             100 - len(records[:-1]))
    assert [x["msg"] for x in records[:-1]] == [f"line {i}" for i in range(len(records) - 1)]


def test_a_process_whose_stderr_nobody_reads_still_exits(pipe: tuple[int, int]) -> None:
    r, w = pipe
    code = ("from watchrun.output.runlog import RunLog\n"
            "log = RunLog()\n"
            "for i in range(2000):\n"
            "    log.info(f'line {i} ' + 'x' * 100)\n"
            "print('logged', flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code], stderr=w, stdout=subprocess.PIPE,
                          timeout=DEADLINE_S, check=False)  # (~240 KB: past the pipe's 64)
    assert (done.returncode, done.stdout) == (0, b"logged\n")  # waited EXIT_WAIT_S, then ended
    first = _read_all(r, b"line 0 ").split(b"\n", 1)[0]  # what the pipe held: the first lines
    assert first.endswith(b" watchrun: line 0 " + b"x" * 100)


def test_a_closed_reader_costs_nothing(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.close(r)
    out = LogStream(w, lambda n: f"{n} dropped\n")
    for i in range(10):
        out.write(f"line {i}\n")  # EPIPE: nowhere to write, and no exception
    assert out.drain(DEADLINE_S)


def test_a_log_through_a_stream_without_a_descriptor_writes_at_once() -> None:
    import io

    stream = io.StringIO()
    RunLog(stream=stream, timestamps=False).warning("disk slow")
    assert stream.getvalue() == "watchrun: warning: disk slow\n"


def test_a_runner_whose_stderr_nobody_reads_keeps_recording_and_stops(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r, w = os.pipe()  # the runner's stderr; read only at the end
    proc = subprocess.Popen([watchrun_bin(), "run", "-c", str(config)],
                            stdout=subprocess.DEVNULL, stderr=w, stdin=subprocess.DEVNULL,
                            cwd=tmp_path)
    os.close(w)
    try:
        out = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
        wait_for(lambda: any(x["kind"] == "start" for x in read_records(out)), "the start")
        def matched(n: int) -> Callable[[], bool]:
            return lambda: len([x for x in read_records(out) if x["kind"] == "match"]) >= n

        with open(log, "a") as fh:  # each match is echoed: ~80 KiB, past a pipe's 64 KiB
            for i in range(20):
                fh.write(f"ERROR {i} " + "x" * 4000 + "\n")
                fh.flush()
                wait_for(matched(i + 1), f"match {i}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE_S) == 0
        assert [x["kind"] for x in read_records(out)][-1] == "stop"
        got = _read_all(r, None)
        assert b"writing JSONL under" in got and b"Traceback" not in got
    finally:
        os.close(r)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
