"""Reads that return fewer bytes than asked (FUSE `direct_io`), on real files: each line is
recorded once and no truncation is made up. No file system here can be made to read short on
cue, so the OS seam is replaced for the watched file only: `os.pread` returns at most 7 bytes
a call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from filehelpers import MODES, Recorder, Tail, append, notifier_for, run

from watchrun.clock import SystemClock
from watchrun.notify import Notifier
from watchrun.output.sink import JsonlSink
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.views.follow import JsonlFollower

SHORT = 7


class Misreads:
    """`os.pread` replaced for the file at `path` (its device and inode): while `short` is
    set, a read returns at most that many bytes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        st = path.stat()
        self.ident = (st.st_dev, st.st_ino)
        self.short: int | None = None
        real_pread, real_fstat = os.pread, os.fstat

        def pread(fd: int, n: int, offset: int) -> bytes:
            if self.short is not None and self._ours(real_fstat(fd)):
                n = min(n, self.short)
            return real_pread(fd, n, offset)

        monkeypatch.setattr(os, "pread", pread)

    def _ours(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino) == self.ident


def lines(first: int, last: int) -> list[str]:
    return [f"x ERROR {n} long line here to split" for n in range(first, last + 1)]


def store_in(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / "state")


def said(rec: Recorder) -> list[tuple[str, dict[str, Any]]]:
    """What was said beside the lines: `rotate`, `gap` and `error` records."""
    return [(k, f) for k, f in rec.events if k in ("rotate", "gap", "error")]


async def once_run(log: Path, tmp_path: Path) -> Recorder:
    async with Tail(log, Notifier(20, enabled=False), store_in(tmp_path), once=True) as t:
        await t.until(lambda: t.task is not None and t.task.done(), "the once read")
    return t.rec


@pytest.mark.parametrize("mode", MODES)
def test_a_live_follow_whose_reads_return_7_bytes_records_each_line_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """netfs F5: on a FUSE file system with `direct_io` whose server answered 7 bytes a read,
    the head re-check read 7 bytes, took them for other first bytes and made 125 false
    `rotate{truncate}` in 3 s; a line cut at a read boundary was recorded as a whole line,
    over and over, and the real lines never were. Now a short read is asked again for the
    rest: the lines written before the start are not read (a new watcher follows from the
    end), each appended one is recorded once, and nothing else is said."""
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines(1, 3)) + "\n")
    Misreads(monkeypatch, log).short = SHORT

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            for n in range(4, 9):
                append(log, *lines(n, n))
                await t.until(lambda n=n: len(t.rec.lines()) >= n - 3, f"line {n}")
            append(log, "INFO the last")
            await t.lines(6)
            assert t.rec.texts() == [*lines(4, 8), "INFO the last"]
            assert said(t.rec) == []

    run(body())


def test_a_once_run_whose_reads_return_7_bytes_reads_to_the_end_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """netfs F5: a once run's drain stopped at the first short read, and the run said
    `cut-short` ("truncated while it was read", an ERROR) for a file nobody truncated. Now it
    reads every line, once, and the next run reads on from its checkpoint."""
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines(1, 40)) + "\n")
    Misreads(monkeypatch, log).short = SHORT
    first = run(once_run(log, tmp_path))
    assert first.texts() == lines(1, 40)
    assert said(first) == []
    append(log, *lines(41, 42))
    second = run(once_run(log, tmp_path))
    assert second.texts() == lines(41, 42)
    assert said(second) == []


def test_a_stream_followed_whose_reads_return_7_bytes_gives_every_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`matches --follow` and `logs --follow` read a stream until a read came back short of a
    newline and took that for a record still being written: with 7-byte reads they gave
    nothing, ever. Now every record, once, in order."""
    path = tmp_path / "app.jsonl"
    sink = JsonlSink(path, "app", max_bytes=1 << 20, keep=2, clock=SystemClock())
    for n in range(1, 4):
        sink.write("match", {"line": f"line {n}"})
    follower = JsonlFollower(path)
    follower.start_after(0)
    Misreads(monkeypatch, path).short = SHORT
    assert [r["line"] for r in follower.read()] == ["line 1", "line 2", "line 3"]
    sink.write("match", {"line": "line 4"})
    assert [(r["seq"], r["line"]) for r in follower.read()] == [(4, "line 4")]
    sink.close()
