"""Seqs given up on a disk that was already full when the stream opened: the note (4 KiB
allocated at open) could not be, so what a shutdown gave up was only in the runner's log and the
next start used those seqs again, with no `gap` record. Now the note is allocated as soon as
space comes back; when it never does, the highest seq given up is stamped on the note's
modification time (needs no free space); when not even that can be, `close` counts and says so.
On a real tmpfs that fills (and grows)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config
from recordcheck import validate_records
from test_disk_full import Clock, explained
from tmpfs import fill, grow, immutable, mount_tmpfs, umount

from watchrun.output.outdir import prepare_output_dir
from watchrun.output.sink import JsonlSink, SinkWriteError


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "mnt"
    mount_tmpfs(where, "256k")
    yield where
    umount(where)


def open_sink(path: Path, name: str) -> JsonlSink:
    return JsonlSink(path, name, max_bytes=1 << 30, keep=1, clock=Clock())


def allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def write_a_page(sink: JsonlSink) -> None:
    """One record that leaves too little of its tmpfs page for a gap record (~280 bytes): on a
    full disk, not even the gap record fits."""
    sink.write("output", {"text": "x" * 3950})
    assert 0 < 4096 - sink.path.stat().st_size % 4096 < 200


def give_up(sink: JsonlSink, n: int) -> None:
    """A shutdown while the disk is full: the writer gives up what it could not write."""
    sink.give_up([sink.record("output", {"text": f"lost {i}"}) for i in range(n)])


def seqs_kinds(recs: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(r["seq"], r["kind"]) for r in recs]


def stopped_on_a_full_disk(tmp_path: Path, mnt: Path) -> tuple[Path, int, str]:
    """A runner with one command watcher, started with `mnt` full and SIGTERMed once it could
    not write: its config, its exit status and its log."""
    fill(mnt)
    config = write_config(tmp_path, {"output": {"dir": str(mnt / "out")}, "watchers": [
        {"id": "c", "command": ["sh", "-c", "echo E one; exec sleep 600"], "pattern": "E"}]})
    r = LiveRunner(config)
    try:
        r.wait_log("[c] error: cannot write records: ENOSPC")
        r.send(signal.SIGTERM)
        status = r.proc.wait(timeout=30)
    finally:
        r.close()
    return config, status, r.stderr()


def test_a_command_watcher_on_a_disk_full_from_the_start_reuses_no_seq(
        tmp_path: Path, mnt: Path) -> None:
    """The real runner, the disk full before it starts: the watcher's `start` and `stop`
    records are given up at SIGTERM. The next start (the disk grown) writes a gap record for
    exactly those seqs first, then its own records after them: no seq is used twice."""
    (mnt / "out").mkdir()
    config, status, stderr = stopped_on_a_full_disk(tmp_path, mnt)
    assert status == 0, stderr
    assert "[c] error: the stop record could not be written" in stderr
    jsonl = mnt / "out" / "watchers" / "c.jsonl"
    assert validate_records(jsonl) == []  # nothing could be written
    grow(mnt, "8m")
    r2 = LiveRunner(config)
    try:
        wait_for(lambda: [x for x in validate_records(jsonl, contiguous=False)
                          if x["kind"] == "match"], "the second run's match")
    finally:
        assert r2.stop() == 0, r2.stderr()
    recs = validate_records(jsonl, contiguous=False)
    (gap,) = explained(recs)  # every seq skipped is explained, by one gap record
    assert recs[0] == gap and gap["fromSeq"] == 1 and gap["records"] >= 2, gap  # start, stop
    assert [r["kind"] for r in recs[1:]] == ["start", "match", "exit", "stop"]
    assert len({r["seq"] for r in recs}) == len(recs)


def test_a_runner_whose_given_up_seqs_nothing_can_keep_exits_3(tmp_path: Path,
                                                                mnt: Path) -> None:
    """The disk full from the start and no note possible (it cannot be opened to write: an
    immutable file): the seqs given up at SIGTERM are kept nowhere, so the run fails (exit 3)
    and says why."""
    note = prepare_output_dir(mnt / "out").state / "watchers-c.unwritten"
    note.touch(0o640)
    immutable(note)
    _, status, stderr = stopped_on_a_full_disk(tmp_path, mnt)
    assert status == 3, stderr
    assert "the next start may use their seqs again" in stderr


def test_an_agent_on_a_disk_full_from_the_start_loses_its_turn_visibly(
        tmp_path: Path, mnt: Path) -> None:
    """An agent's turn on a disk full since the start: SIGTERM gives its records up (exit 3:
    records were lost); the next start's first record is the gap record for their seqs."""
    (mnt / "out").mkdir()
    fill(mnt, leave=8192)  # two pages: the agent's lock and processes.json, nothing more
    config = write_config(tmp_path, {"output": {"dir": str(mnt / "out")}, "agents": [
        {"name": "ag", "provider": "mock", "prompt": "look at {matches}"}]})
    jsonl = mnt / "out" / "agents" / "ag.jsonl"
    r = LiveRunner(config)
    r.out = mnt / "out"
    try:
        r.wait_running()
        assert allocated(mnt / "out" / "state" / "agents-ag.unwritten") == 0
        r.control({"cmd": "agent-send", "name": "ag", "text": "first"})
        r.wait_log("[ag] error: cannot write records: ENOSPC")
        r.send(signal.SIGTERM)
        assert r.proc.wait(timeout=30) == 3, r.stderr()
    finally:
        r.close()
    assert "[ag] error: its records could not be written: ENOSPC" in r.stderr()
    assert validate_records(jsonl) == []
    grow(mnt, "8m")
    r2 = LiveRunner(config)
    r2.out = mnt / "out"
    try:
        r2.wait_running()
        r2.control({"cmd": "agent-send", "name": "ag", "text": "second"})
        wait_for(lambda: [x for x in validate_records(jsonl, contiguous=False)
                          if x["kind"] == "dispatch-finished"], "the second turn's end")
    finally:
        assert r2.stop() == 0, r2.stderr()
    recs = validate_records(jsonl, contiguous=False)
    (gap,) = explained(recs)
    assert recs[0] == gap and gap["fromSeq"] == 1 and gap["records"] >= 2, gap
    assert "second" in str([x for x in recs if x["kind"] == "delivery"])
    assert len({r["seq"] for r in recs}) == len(recs)


def test_the_note_is_allocated_after_a_write_once_space_is_back(tiny_fs: Path) -> None:
    """Opened on a full disk, the note has no space; a write that goes through (space came
    back) allocates it, so a later shutdown on a full disk keeps the runs with their kinds."""
    out = prepare_output_dir(tiny_fs / "out")
    path, note = out.jsonl("agent", "a"), out.state / "agents-a.unwritten"
    filler = fill(tiny_fs)
    sink = open_sink(path, "a")
    assert allocated(note) == 0  # the disk is full: not now
    os.truncate(filler, filler.stat().st_size - 16384)
    write_a_page(sink)  # seq 1
    assert allocated(note) >= 4096
    fill(tiny_fs)
    give_up(sink, 2)  # seqs 2..3
    sink.close()  # the gap record cannot be written: the note keeps it
    filler.unlink()
    again = open_sink(path, "a")
    assert again.next_seq == 4
    again.write("status", {"status": "running"})
    again.close()
    recs = validate_records(path, contiguous=False)
    assert seqs_kinds(recs) == [(1, "output"), (3, "gap"), (4, "status")]
    (gap,) = explained(recs)
    assert (gap["fromSeq"], gap["toSeq"], gap["kinds"]) == (2, 3, {"output": 2})


def test_a_note_never_allocated_keeps_the_seqs_in_its_timestamp(tiny_fs: Path) -> None:
    """Full from the open to the close: the highest seq given up is stamped on the note's
    modification time (no free space needed); the next start explains every seq up to it, and
    once the gap record is written the stamp is gone (a third start adds no gap)."""
    out = prepare_output_dir(tiny_fs / "out")
    path, note = out.jsonl("agent", "a"), out.state / "agents-a.unwritten"
    first = open_sink(path, "a")
    write_a_page(first)  # seq 1
    first.close()
    note.unlink()  # (state/ cleaned, or the output dir of a watchrun from before the note)
    filler = fill(tiny_fs)
    sink = open_sink(path, "a")
    assert allocated(note) == 0
    give_up(sink, 3)  # seqs 2..4
    sink.close()
    assert note.stat().st_mtime_ns == -4  # the stamp: seq 4 given up (4 ns before 1970)
    filler.unlink()
    again = open_sink(path, "a")
    assert again.next_seq == 5
    again.write("status", {"status": "idle"})
    again.close()
    assert note.stat().st_mtime_ns > 0
    third = open_sink(path, "a")
    third.write("status", {"status": "running"})
    third.close()
    recs = validate_records(path, contiguous=False)
    assert seqs_kinds(recs) == [(1, "output"), (4, "gap"), (5, "status"), (6, "status")]
    (gap,) = explained(recs)
    assert (gap["fromSeq"], gap["toSeq"], gap["records"], gap["kinds"]) == (2, 4, 3, {"?": 3})


def test_seqs_that_no_note_can_keep_are_counted_and_said(tiny_fs: Path) -> None:
    """No inode left for the note: nothing can keep the seqs given up. `close` counts them and
    raises (the runner logs it; an agent's run exits 3): the loss is never silent."""
    out = prepare_output_dir(tiny_fs / "out")
    path = out.jsonl("agent", "a")
    fill(tiny_fs)
    st = os.statvfs(tiny_fs)
    subprocess.run(["mount", "-o", f"remount,nr_inodes={st.f_files - st.f_ffree + 1}",
                    str(tiny_fs)], check=True, timeout=30)  # one inode left: for the JSONL
    sink = open_sink(path, "a")
    assert not (out.state / "agents-a.unwritten").exists()

    async def shutdown() -> None:
        from watchrun.output.writer import AsyncWriter

        writer = AsyncWriter(sink, initial_delay=0.005, max_delay=0.01)
        writer.give_up_by(0.05)
        with pytest.raises(SinkWriteError):
            await writer.write_lines([sink.record("output", {"text": "lost"}) for _ in "ab"])

    asyncio.run(shutdown())
    with pytest.raises(SinkWriteError, match=r"ENOSPC: 2 records given up \(seq 1 to 2\) are "
                       r"in no gap record and no note .*agents-a\.unwritten: the next start "
                       r"may use their seqs again"):
        sink.close()
    assert sink.unkept == 2
