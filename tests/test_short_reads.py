"""Reads that return fewer bytes than asked (FUSE `direct_io`) and a size that lags the data
(sshfs, FUSE `attr_timeout`, NFS and CIFS attribute caches), on real files: each line is
recorded once, no truncation is made up, a real one is still said. No file system here can be
made to misbehave on cue, so the OS seam is replaced for the watched file only: `os.pread`
returns at most 7 bytes a call, `os.fstat` and `os.stat` report a size set by the test."""

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
_SEQUENCE = {"st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size"}


class Misreads:
    """`os.pread`, `os.fstat` and `os.stat` replaced for the file at `path` (its device and
    inode): while `short` is set, a read returns at most that many bytes; while `size` is set,
    a stat reports that size, whatever the file holds."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        st = path.stat()
        self.ident = (st.st_dev, st.st_ino)
        self.short: int | None = None
        self.size: int | None = None
        real_pread, real_fstat, real_stat = os.pread, os.fstat, os.stat

        def pread(fd: int, n: int, offset: int) -> bytes:
            if self.short is not None and self._ours(real_fstat(fd)):
                n = min(n, self.short)
            return real_pread(fd, n, offset)

        def fstat(fd: int) -> os.stat_result:
            return self._lagged(real_fstat(fd))

        def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            return self._lagged(real_stat(path, *args, **kwargs))

        monkeypatch.setattr(os, "pread", pread)
        monkeypatch.setattr(os, "fstat", fstat)
        monkeypatch.setattr(os, "stat", stat)

    def _ours(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino) == self.ident

    def _lagged(self, st: os.stat_result) -> os.stat_result:
        if self.size is None or not self._ours(st):
            return st
        hidden = {k: getattr(st, k) for k in dir(st) if k.startswith("st_") and k not in _SEQUENCE}
        return os.stat_result((*st[:6], self.size, *st[7:10]), hidden)


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


@pytest.mark.parametrize("mode", MODES)
def test_a_size_that_lags_the_data_is_no_truncation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """netfs F4: on sshfs with `direct_io` a read returns what was appended while `fstat`
    still reports the size it cached; `st_size < pos` was taken for a truncation, and every
    append read the file again from line 1 (`x ERROR 1` recorded 9 times for 8 appends, each
    with a false `rotate{truncate}`). Now the first bytes and those before the read position,
    read back unchanged, say the file is the one read: each line once, nothing else said."""
    log = tmp_path / "app.log"
    log.write_text("l 1\n")
    seam = Misreads(monkeypatch, log)
    seam.size = log.stat().st_size  # (the size cached before the appends, never refreshed)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            for n in range(1, 9):
                append(log, *lines(n, n))
                await t.until(lambda n=n: len(t.rec.lines()) >= n, f"line {n}")
            append(log, "INFO the last")
            await t.lines(9)
            assert t.rec.texts() == [*lines(1, 8), "INFO the last"]
            assert said(t.rec) == []

    run(body())


@pytest.mark.parametrize(("once", "lag"), [(False, "below"), (True, "below"), (True, "at")],
                         ids=["restart-below", "once-below", "once-at"])
def test_a_start_where_the_size_lags_the_checkpoint_reads_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, once: bool, lag: str) -> None:
    """The checkpoint is past the size this host's cache reports (`below`: a runner read past
    it, then a restart or a once run), or that size is still the checkpoint's while appends
    came and the mtime moved (`at`: sshfs, between two once runs). The checkpoint was not
    taken for this file, or the file for one rewritten the same, and it was read again from
    line 1. Now the start reads on from the checkpoint: no line twice, no `rotate`. (A once
    run reads to the size reported: the lines past it are read by the next run, once.)"""
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines(1, 6)) + "\n")
    cached = len("\n".join(lines(1, 3 if lag == "below" else 6))) + 1
    seam = Misreads(monkeypatch, log)

    async def live(rec: Recorder, expect: int) -> None:
        async with Tail(log, notifier_for("poll"), store_in(tmp_path), from_start=True,
                        rec=rec) as t:
            await t.lines(expect)

    first = run(once_run(log, tmp_path)) if once else Recorder()
    if not once:
        run(live(first, 6))
    assert first.texts() == lines(1, 6)
    append(log, *lines(7, 8))
    seam.size = cached
    later = Recorder()
    if once:
        later = run(once_run(log, tmp_path))
        seam.size = None
        last = run(once_run(log, tmp_path))
        assert (later.texts(), last.texts()) == ([], lines(7, 8))
        assert said(last) == []
    else:
        run(live(later, 2))
        assert later.texts() == lines(7, 8)
    assert said(later) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_real_truncation_is_still_said_where_reads_are_short_and_the_size_lags(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The bytes decide, not the size: a file truncated to 0 and written other lines (shorter
    than what was read, then longer) is one `rotate{truncate}`, its lines read from the first,
    with reads of 7 bytes and a size that never moves."""
    log = tmp_path / "app.log"
    log.write_text("l 1\n")
    seam = Misreads(monkeypatch, log)
    seam.short, seam.size = SHORT, log.stat().st_size
    new = [f"new line {n} " + "y" * 24 for n in range(1, 9)]  # (2 shorter than what was read,
    # 8 longer)

    async def body() -> None:
        async with Tail(log, notifier_for(mode), store_in(tmp_path)) as t:
            append(log, *lines(1, 4))
            await t.lines(4)
            with log.open("r+") as fh:
                fh.truncate(0)
            append(log, *new[:2])
            await t.lines(6)
            append(log, *new[2:])
            await t.lines(12)
            assert t.rec.texts() == [*lines(1, 4), *new]
            assert [(k, f["reason"]) for k, f in said(t.rec)] == [("rotate", "truncate")]

    run(body())


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
