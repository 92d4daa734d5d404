"""A checkpoint never reaches the disk before the records it covers (explorer ex-durable, F1):
the checkpoint was fsynced once a second, the JSONL only at rotation and close, so after a power
cut the durable checkpoint was past the records the disk kept. The lines those records covered
were never read again, nothing said so, and their seqs (cursors) were given to other records.
Now each save fdatasyncs the JSONL first (in its worker thread), and a stream found to end
before its checkpoint's seq numbers on past it after a `gap{lost}`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from insupervisor import Running, until
from liverunner import LiveRunner, cli, read_records, wait_for, write_config
from recordcheck import validate_records

from watchrun.clock import SystemClock
from watchrun.output.records import retained_files
from watchrun.output.sink import JsonlSink
from watchrun.output.syncer import Syncer
from watchrun.sources.checkpoint_doc import FileState, encode
from watchrun.sources.checkpoints import CheckpointStore


def seqs_in(fd: int) -> set[int]:
    """The seqs of the records in the file `fd` is open on, whole."""
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    return {json.loads(line)["seq"] for line in data.splitlines()}


class Trail:
    """What was made durable, in order: each sync of a JSONL file (fdatasync before a
    checkpoint, fsync of a file rotated away or closed) with the seqs the file held then, and
    each checkpoint save with its seq. Every entry is added from the thread that made the call."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def _after(self, name: str, call: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            call(fd)
            self.events.append((name, seqs_in(fd)))
        return sync

    def sink(self, path: Path, stream_id: str, **kw: Any) -> JsonlSink:
        syncer = Syncer(fsync=self._after("fsync", os.fsync),
                        fdatasync=self._after("fdatasync", os.fdatasync))
        return JsonlSink(path, stream_id, syncer=syncer, **kw)

    def store(self, state_dir: Path) -> CheckpointStore:
        """The checkpoint store, each save recorded once what it runs `first` (the sync of
        the records it covers) has run, and checked to come before its write."""
        trail = self

        class TrailedStore(CheckpointStore):
            def save(self, watcher_id: str, state: FileState, ticket: int | None = None, *,
                     first: Callable[[], None] | None = None) -> bool:
                path = self.path(watcher_id)

                def then() -> None:
                    if first is not None:
                        first()
                    data = encode(state)
                    there = path.exists() and path.read_bytes() == data
                    trail.events.append(("save", (state.seq, data, there)))

                return super().save(watcher_id, state, ticket, first=then)

        return TrailedStore(state_dir)

    def saved(self, seq: int) -> bool:
        return any(what == "save" and value[0] >= seq for what, value in self.events)

    def check(self) -> tuple[int, int]:
        """Every save came after the syncs of the records before its seq, and before its own
        write (its state on disk already only when an earlier save wrote the same): how many
        saves and fdatasyncs there were."""
        synced: set[int] = set()
        written: set[bytes] = set()
        saves = fdatasyncs = 0
        for what, value in self.events:
            if what != "save":
                synced |= value
                fdatasyncs += what == "fdatasync"
                continue
            seq, data, there = value
            assert not there or data in written, f"checkpoint (seq {seq}) written before " \
                "the records it covers were synced"
            early = sorted(set(range(1, seq)) - synced)
            assert not early, f"checkpoint (seq {seq}) saved before records {early[:5]}… " \
                f"({len(early)}) were synced"
            written.add(data)
            saves += 1
        return saves, fdatasyncs


def test_each_checkpoint_is_saved_after_the_records_it_covers_are_durable(
        tmp_path: Path) -> None:
    """A file watcher under a flood of matches, its JSONL rotated again and again: when each
    checkpoint is saved, every record before its seq is in a file already synced (the live one's
    fdatasync in the save's own thread, after the fsyncs of the files rotated away before it);
    one fdatasync per save at most, none per record."""
    log = tmp_path / "app.log"
    log.write_text("")
    trail = Trail()
    config = {"output": {"maxBytes": "64KiB", "keep": 20},
              "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}]}
    pad = "x" * 300

    async def main() -> None:
        async with Running(tmp_path, config, sinks=trail.sink, checkpoints=trail.store) as r:
            for batch in range(1, 5):
                with open(log, "a") as fh:
                    fh.writelines(f"ERROR {batch}.{i} {pad}\n" for i in range(200))
                # start (seq 1), then 200 matches a batch: saved once they are recorded
                await until(lambda b=batch: trail.saved(2 + 200 * b), f"batch {batch} saved")
            jsonl = r.layout.jsonl("watcher", "app")
        assert len(retained_files(jsonl)) > 4  # rotated while the checkpoints were saved
        assert len(validate_records(jsonl)) == 1 + 800 + 1

    asyncio.run(main())
    saves, fdatasyncs = trail.check()
    assert saves >= 5 and 1 <= fdatasyncs <= saves


def test_a_barrier_syncs_only_what_is_new_and_a_failed_sync_is_said(tmp_path: Path) -> None:
    """`JsonlSink.durable`: nothing written since the last sync, no job (an idle watcher's
    checkpoint costs no fdatasync); a failed fdatasync raises, naming the JSONL (the save is not
    made: its error record says why), and the next job syncs again."""
    calls: list[int] = []
    failing = [False]

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        if failing[0]:
            raise OSError(5, os.strerror(5))
        os.fdatasync(fd)

    path = tmp_path / "s.jsonl"
    sink = JsonlSink(path, "s", max_bytes=1 << 20, keep=1, clock=SystemClock(),
                     syncer=Syncer(fdatasync=fdatasync))
    sink.write("output", {"text": "one"})
    job = sink.durable()
    assert job is not None
    job()
    assert len(calls) == 1 and sink.durable() is None  # nothing new: nothing to sync
    sink.write("output", {"text": "two"})
    failing[0] = True
    job = sink.durable()
    assert job is not None
    with pytest.raises(OSError, match=rf"cannot sync {path}: Input/output error"):
        job()
    failing[0] = False
    job = sink.durable()  # (nothing written since, but the last sync failed)
    assert job is not None
    job()
    assert len(calls) == 3 and sink.durable() is None
    fds = len(os.listdir("/proc/self/fd"))
    sink.write("output", {"text": "three"})
    assert sink.durable() is not None  # dropped unrun: its descriptor is closed all the same
    assert len(os.listdir("/proc/self/fd")) == fds
    sink.close()


def killed_after(tmp_path: Path, config: Path, lines: int, wid: str = "app") -> int:
    """Run the watcher until `lines` matches are recorded and its checkpoint covers them, then
    SIGKILL it. Returns the checkpoint's seq."""
    jsonl = tmp_path / "out" / "watchers" / f"{wid}.jsonl"
    checkpoint = tmp_path / "out" / "state" / f"{wid}.checkpoint.json"
    log = tmp_path / "app.log"
    r = LiveRunner(config)
    r.out = tmp_path / "out"
    try:
        r.wait_running()
        with open(log, "a") as fh:
            fh.writelines(f"ERROR line {i}\n" for i in range(1, lines + 1))
        wait_for(lambda: len(read_records(jsonl)) == 1 + lines, "the matches recorded")
        size = log.stat().st_size
        wait_for(lambda: json.loads(checkpoint.read_text())["generations"][-1]["offset"] == size,
                 "the checkpoint to cover them")
        r.send(signal.SIGKILL)
        r.proc.wait(timeout=20)
    finally:
        r.close()
    return int(json.loads(checkpoint.read_text())["seq"])


def cut_to(jsonl: Path, kept: int) -> None:
    """A power cut: the records the disk had not written yet are gone (the checkpoint, synced,
    stays)."""
    lines = jsonl.read_bytes().splitlines(keepends=True)
    jsonl.write_bytes(b"".join(lines[:kept]))


def test_a_stream_that_lost_its_end_gives_no_seq_out_again(tmp_path: Path) -> None:
    """The explorer's reproduction: 100 matches recorded and checkpointed, SIGKILL, the JSONL
    cut to its first 41 records (a disk that did not keep what it was asked to: the checkpoint
    is past them). The next start says so (a warning, a `gap{lost}` for exactly the missing
    seqs, taking the checkpoint's own seq) and numbers on from there: no cursor of the lost
    records (which a shipper may hold) names another record."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "path": str(tmp_path / "app.log"), "fromStart": True,
         "pattern": "ERROR"}]})
    jsonl = tmp_path / "out" / "watchers" / "app.jsonl"
    seq = killed_after(tmp_path, config, 100)
    assert seq == 102  # start, 100 matches: the next record's
    cut_to(jsonl, 41)
    r = LiveRunner(config)
    r.out = tmp_path / "out"
    try:
        r.wait_running()
        with open(tmp_path / "app.log", "a") as fh:
            fh.write("ERROR line 101\n")
        wait_for(lambda: "ERROR line 101" in jsonl.read_text(), "the new line's record")
    finally:
        assert r.stop() == 0, r.stderr()
    recs = validate_records(jsonl, contiguous=False)
    assert [x["seq"] for x in recs[:41]] == list(range(1, 42))
    gap = recs[41]
    assert (gap["kind"], gap["reason"], gap["fromSeq"], gap["toSeq"], gap["records"]) == \
        ("gap", "lost", 42, 101, 60)
    assert gap["seq"] == 102 and gap["cursor"] == "app:0000000000000066"
    later = recs[42:]
    assert [x["kind"] for x in later] == ["start", "match", "stop"]
    assert [x["seq"] for x in later] == [103, 104, 105] and later[1]["line"] == "ERROR line 101"
    assert "[app] warning: gap (lost): 60 records (seq 42 to 101) are not in the stream" \
        in r.stderr()


def test_a_once_run_whose_stream_lost_its_end_fails_closed(tmp_path: Path) -> None:
    """In `run --once` the lost records may be the matches of a killed run that no verdict
    counted (its `stop` record lost with them, nothing tells): the verdict is an ERROR (exit 3),
    not a pass over the matches that happen to be left."""
    log = tmp_path / "app.log"
    log.write_text("".join(f"ERROR line {i}\n" for i in range(1, 31)))
    config = write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR", "gate": {"maxMatches": 500}}]})
    first = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    cut_to(tmp_path / "out" / "watchers" / "app.jsonl", 10)
    with open(log, "a") as fh:
        fh.write("ERROR line 31\n")
    res = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "records of an earlier run are lost, uncounted" in res.stdout
    assert "gap (lost): 21 records (seq 11 to 31) are not in the stream" in res.stderr


def test_a_renamed_watcher_takes_no_seq_of_the_old_ids_stream(tmp_path: Path) -> None:
    """A checkpoint adopted through `previousId` kept the old id's seqs: the renamed watcher's
    first checkpoint said its new stream had reached them, so a SIGKILL before its first line
    made the next start take a whole old stream for lost records (a `gap{lost}` of 50, seqs
    skipped). Its seqs are the new stream's from the adoption on."""
    log = tmp_path / "app.log"
    log.write_text("")
    old = {"id": "api", "path": str(log), "pattern": "ERROR"}
    first = write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [old]})
    assert killed_after(tmp_path, first, 50, "api") == 52
    jsonl = tmp_path / "out" / "watchers" / "api2.jsonl"
    renamed = write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {**old, "id": "api2", "previousId": "api"}]})
    for stop in (signal.SIGKILL, signal.SIGTERM):  # killed before any line, then again
        r = LiveRunner(renamed)
        r.out = tmp_path / "out"
        try:
            r.wait_running()
            with open(log, "a") as fh:
                fh.write(f"ERROR after {stop.name}\n")
            if stop == signal.SIGTERM:
                wait_for(lambda: "ERROR after SIGTERM" in jsonl.read_text(), "the new line")
            r.send(stop)
            r.proc.wait(timeout=20)
        finally:
            r.close()
    recs = validate_records(jsonl)  # contiguous from seq 1: nothing taken for lost
    assert [x["kind"] for x in recs if x["kind"] == "gap"] == []
    assert recs[-2]["line"] == "ERROR after SIGTERM"
