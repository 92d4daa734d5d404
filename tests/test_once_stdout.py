"""A once run's stdout never holds the runner: a reader that does not keep up holds the commands
whose output is echoed (their pipes fill), a reader that stops reading does not keep SIGTERM from
stopping the run, and a slow reader still gets every line, in order, then the report."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import threading
import time
from pathlib import Path

import pytest
from insupervisor import until
from liverunner import DEADLINE_S, LiveRunner, read_records, wait_for, write_config

from watchrun.output import logstream
from watchrun.output.logstream import LogStream


def _reader(r: int, got: bytearray, *, pause: float = 0.0,
            size: int = 16 * 1024) -> threading.Thread:
    """A thread reading `r` to its end into `got`, `pause` seconds between reads of `size`."""
    def read() -> None:
        while chunk := os.read(r, size):
            got.extend(chunk)
            time.sleep(pause)  # (the slow reader is the fault injected, not a wait)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_room_holds_the_writer_while_the_backlog_is_full_and_nothing_is_dropped(
        pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logstream, "BACKLOG_BYTES", 4096)
    r, w = pipe
    out = LogStream(w)  # no note: a stream that never drops
    lines = [b"line %05d\n" % i for i in range(20_000)]  # 220 KB: past the pipe and the backlog
    got = bytearray()

    async def write_all() -> int:
        waits = 0
        for line in lines:
            if out.full:
                waits += 1
            await out.room()
            out.put(line)
        return waits

    async def main() -> int:
        writer = asyncio.create_task(write_all())
        await until(lambda: out.full, "the pipe and the backlog to fill")  # the writer is held
        assert not writer.done()
        readers.append(_reader(r, got))  # now a reader: the writer goes on
        return await writer

    readers: list[threading.Thread] = []
    waits = asyncio.run(main())
    assert waits > 0 and out.dropped == 0
    assert out.drain(DEADLINE_S)
    os.close(w)
    readers[0].join(DEADLINE_S)
    assert bytes(got) == b"".join(lines)


def test_at_exit_a_slow_reader_gets_everything_a_stalled_one_is_given_up_on(
        pipe: tuple[int, int]) -> None:
    r, w = pipe
    out = LogStream(w)
    lines = [b"%06d %s\n" % (i, b"x" * 90) for i in range(1500)]  # 150 KB, past the pipe
    data = [b"".join(lines[k : k + 500]) for k in range(0, 1500, 500)]  # as an echo puts them
    for block in data:
        out.put(block)
    started = time.monotonic()
    assert not out.drain(0.3)  # nobody reads: given up once nothing moved for 0.3 s
    assert 0.3 <= time.monotonic() - started < DEADLINE_S
    got = bytearray()
    reader = _reader(r, got, pause=0.05, size=4096)  # 80 KB/s: 2 s in all, 4 KiB at a time
    assert out.drain(0.3)  # a piece taken every 50 ms: it waits to the end
    os.close(w)
    reader.join(DEADLINE_S)
    assert bytes(got) == b"".join(data)


def _pipe_full(pid: int) -> bool:
    """Whether the pipe on process `pid`'s stdout has no free slot (poll(2) on a second write
    end, opened through /proc, says it cannot be written: nothing is written to it)."""
    fd = os.open(f"/proc/{pid}/fd/1", os.O_WRONLY | os.O_NONBLOCK)
    try:
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        return not poll.poll(0)
    finally:
        os.close(fd)


def _reads_nothing(pid: int) -> bool:
    """Whether process `pid` read no byte over 0.2 s (`rchar` of /proc/PID/io)."""
    def rchar() -> int:
        io = Path(f"/proc/{pid}/io").read_text()
        return int(next(x for x in io.splitlines() if x.startswith("rchar:")).split()[1])

    before = rchar()
    time.sleep(0.2)  # (the interval of the comparison; the wait is `wait_for`'s)
    return rchar() == before


def _config(tmp: Path, command: str) -> Path:
    return write_config(tmp, {"watchers": [{"id": "c", "command": command, "pattern": "^7$"}]})


def test_a_once_run_whose_stdout_nobody_reads_still_stops_on_sigterm(tmp_path: Path) -> None:
    # before: the loop sat in write(2) to the full pipe, and SIGTERM was only recorded
    r = LiveRunner(_config(tmp_path, "seq 1 100000000"), "--once")  # stdout: a pipe never read
    try:
        assert r.proc.stdout is not None
        wait_for(lambda: r.matches("c"), "the match")
        # (not a byte count: how many bytes fill a pipe's slots depends on the writes' sizes,
        # which depend on the host's load; a loaded suite once waited 30 s for 60 KiB)
        wait_for(lambda: _pipe_full(r.pid), "the runner's stdout to fill")
        wait_for(lambda: _reads_nothing(r.pid), "the runner to hold the command")
        r.send(signal.SIGTERM)
        rc = r.proc.wait(timeout=DEADLINE_S)
    finally:
        r.close()
    assert rc == 3, r.stderr()  # interrupted before the command's end: no verdict (fail closed)
    assert r.left == []
    records = read_records(r.out / "watchers" / "c.jsonl")
    exits = [x for x in records if x["kind"] == "exit"]
    assert exits and exits[-1]["signal"] == "SIGTERM" and records[-1]["kind"] == "stop"
    log = r.stderr()
    assert "stopping (SIGTERM)" in log and "were not echoed: stdout was not being read" in log
    assert "Traceback" not in log


def test_a_slow_stdout_reader_gets_every_line_in_order_then_the_report(tmp_path: Path) -> None:
    # PYTHONUNBUFFERED=1, as many container images set it, made stdout's binary layer a raw file
    # whose write may stop part-way when a signal comes (a command's SIGCHLD): before, the rest
    # of that chunk was lost (~1 run in 3 lost 8 192 lines; with a SIGCHLD every 5 ms, every run)
    r = LiveRunner(_config(tmp_path, "seq 1 300000"), "--once",  # 2 MB: past pipe and backlog
                   env={"PYTHONUNBUFFERED": "1"})
    assert r.proc.stdout is not None
    got = bytearray()
    try:
        reader = _reader(r.proc.stdout.fileno(), got, pause=0.002)
        while r.proc.poll() is None:  # signals the runner catches, as children's exits are
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.pid, signal.SIGCHLD)
            time.sleep(0.005)  # (the signals' pace, not a wait)
        reader.join(DEADLINE_S)
    finally:
        r.close()
    assert r.proc.returncode == 0, r.stderr()
    lines = bytes(got).decode().splitlines()
    assert lines[:300000] == [str(i) for i in range(1, 300001)]
    assert lines[300000:] == [
        "watchrun: no gated watchers (add `gate:` to a watcher to gate CI on it)"]
    assert "not echoed" not in r.stderr()
