"""A full disk on a real tmpfs: whole records that fit are written, reading pauses, the
checkpoint never passes an unwritten record, and a shutdown that gives records up leaves a `gap`
record for their seqs. The tmpfs fills, then grows (remount with a bigger size)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import resource
import signal
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, wait_for, watchrun_bin, write_config
from recordcheck import validate_records
from test_metrics import scrape
from tmpfs import fill, full_disk_runner, grow, mount_tmpfs, umount

from watchrun.output import safefs
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter


class Clock:
    def monotonic(self) -> float:
        return 0.0

    def now(self) -> float:
        return 1.8e9


def gave_up_after(err: str, who: str) -> float:
    """Seconds from `who`'s first failed write to its records given up, by the log's stamps."""
    stamps = {}
    for line in err.splitlines():
        for event, said in (("failed", "; retrying for "),
                            ("gave up", "its records could not be written")):
            if f"watchrun: {who} error: " in line and said in line:
                stamps.setdefault(event, datetime.fromisoformat(line.split()[0]))
    return (stamps["gave up"] - stamps["failed"]).total_seconds()


def explained(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every seq skip is explained by the record that skips: a `gap` for exactly the missing
    seqs (it takes the last one). Returns the gap records."""
    gaps, prev = [], 0
    for r in recs:
        if r["seq"] != prev + 1:
            assert r["kind"] == "gap" and r["reason"] == "unwritten", (prev, r)
            assert (r["fromSeq"], r["toSeq"]) == (prev + 1, r["seq"]), (prev, r)
        if r["kind"] == "gap":
            gaps.append(r)
        prev = r["seq"]
    return gaps


def test_a_batch_bigger_than_the_free_space_is_written_as_space_comes(tiny_fs: Path) -> None:
    """No livelock: each try keeps the whole records that fit, so a 200 KiB batch gets through
    a disk with 16 KiB free at a time."""
    path = prepare_output_dir(tiny_fs / "out").jsonl("watcher", "w")
    sink = JsonlSink(path, "w", max_bytes=1 << 30, keep=1, clock=Clock())
    sink.write("start", {"path": "/x", "inode": 1, "offset": 0})
    filler = fill(tiny_fs)
    lines = [sink.record("match", {"line": "x" * 1000, "lineNo": n, "offset": n, "path": "/x",
                                   "inode": 1}) for n in range(1, 201)]

    async def main() -> None:
        writer = AsyncWriter(sink, initial_delay=0.005, max_delay=0.01)
        task = asyncio.create_task(writer.write_lines(lines))
        seen = 1
        while not task.done():
            await asyncio.sleep(0.01)
            n = len(validate_records(path))
            assert n >= seen  # never goes back, never a torn line
            if n == seen and not task.done():
                os.truncate(filler, max(0, filler.stat().st_size - 16384))  # 16 KiB more
                writer.retry_now()
            seen = n
        await task
        assert writer.retries > 5  # it did take many partial tries

    asyncio.run(main())
    sink.close()
    assert [r["seq"] for r in validate_records(path)] == list(range(1, 202))


def test_records_given_up_get_a_gap_record_now_or_at_the_next_start(tiny_fs: Path) -> None:
    out = prepare_output_dir(tiny_fs / "out")
    path = out.jsonl("agent", "a")
    sink = JsonlSink(path, "a", max_bytes=1 << 30, keep=1, clock=Clock())
    sink.write("status", {"status": "idle"})
    filler = fill(tiny_fs)

    async def give_up(n: int) -> None:
        writer = AsyncWriter(sink, initial_delay=0.005, max_delay=0.01)
        batch = [sink.record("output", {"text": f"lost {i} " + "x" * 5000}) for i in range(n)]
        task = asyncio.create_task(writer.write_lines(batch))
        await asyncio.sleep(0.05)
        task.cancel()  # a shutdown while the disk is full
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(give_up(3))  # seqs 2..4
    filler.unlink()
    sink.write("status", {"status": "running"})  # seq 5: the gap (seq 4) goes first
    filler = fill(tiny_fs)
    asyncio.run(give_up(2))  # seqs 6..7
    sink.close()  # cannot write the gap now: the note keeps it
    filler.unlink()
    again = JsonlSink(path, "a", max_bytes=1 << 30, keep=1, clock=Clock())
    assert again.next_seq == 8  # seqs given up are never used again
    again.write("status", {"status": "idle"})
    again.close()
    recs = validate_records(path, contiguous=False)
    assert [(r["seq"], r["kind"]) for r in recs] == [
        (1, "status"), (4, "gap"), (5, "status"), (7, "gap"), (8, "status")]
    gaps = explained(recs)
    assert [(g["fromSeq"], g["toSeq"], g["records"], g["kinds"]) for g in gaps] == [
        (2, 4, 3, {"output": 3}), (6, 7, 2, {"output": 2})]


def test_runner_on_a_full_disk_pauses_stops_and_loses_nothing(tmp_path: Path) -> None:
    """The real runner: the disk fills while lines arrive; SIGTERM still stops it promptly;
    the disk grows; the next start records every line exactly once and every seq is
    explained."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "512k")
    try:
        log = tmp_path / "app.log"
        log.write_text("")
        config = write_config(tmp_path, {"output": {"dir": str(mnt / "out")}, "watchers": [
            {"id": "app", "path": str(log), "pattern": "ERROR"}]})
        jsonl = mnt / "out" / "watchers" / "app.jsonl"
        r = LiveRunner(config)
        try:
            r.wait_log("running")
            wait_for(lambda: jsonl.exists() and jsonl.stat().st_size > 0, "the start record")
            with open(log, "a") as fh:
                fh.writelines(f"ERROR line {n} {'x' * 200}\n" for n in range(1, 201))
            wait_for(lambda: len([x for x in validate_records(jsonl) if x["kind"] == "match"])
                     == 200, "the first 200 matches")
            fill(mnt, leave=20_000)  # room for a few dozen records, not for 2000
            with open(log, "a") as fh:
                fh.writelines(f"ERROR line {n} {'x' * 200}\n" for n in range(201, 2201))
            r.wait_log("cannot write records")
            r.send(signal.SIGTERM)
            assert r.proc.wait(timeout=20) == 0, r.stderr()
        finally:
            r.close()
        assert not [p.name for p in (mnt / "out").rglob("*.tmp")]  # (none left to pile up)
        recs = validate_records(jsonl, contiguous=False)
        assert 200 <= len([x for x in recs if x["kind"] == "match"]) < 2200  # it did fill
        grow(mnt, "8m")
        r2 = LiveRunner(config)
        try:
            wait_for(lambda: len({int(x["line"].split()[2]) for x in validate_records(
                jsonl, contiguous=False) if x["kind"] == "match"}) == 2200, "every line")
        finally:
            assert r2.stop() == 0, r2.stderr()
        recs = validate_records(jsonl, contiguous=False)
        numbers = [int(x["line"].split()[2]) for x in recs if x["kind"] == "match"]
        assert sorted(numbers) == list(range(1, 2201))  # each exactly once
        gaps = explained(recs)  # the matches in flight and the stop record, given up: one
        # gap record, or two when the first was written before the stop record was given up
        kinds = [k for g in gaps for k, n in g["kinds"].items() for _ in range(n)]
        assert 1 <= len(gaps) <= 2 and kinds.count("stop") == 1 and "match" in kinds, gaps
        said = re.search(r"\[app\] error: (\d+) records \(seq (\d+) to (\d+)\) could not be "
                         r"written and were given up at the stop; the next start records their "
                         "gap", r.stderr())  # (records.md: "the log says how many")
        assert said, r.stderr()
        n, lo, hi = map(int, said.groups())
        assert n == sum(g["records"] for g in gaps if lo <= g["fromSeq"] <= g["toSeq"] <= hi)
    finally:
        umount(mnt)


def test_a_full_disk_is_said_by_list_status_and_metrics_while_it_lasts(tmp_path: Path) -> None:
    """A disk that fills while the runner follows a file: `list` says `paused` with the write
    error, `status` lists it as a problem, `watchrun_watcher_up` is 0; once there is room
    again, the watcher is `running` and up, and every line is recorded."""
    with full_disk_runner(tmp_path) as (mnt, log, port, r):
        assert listed(tmp_path)["app"]["status"] == "running"
        filler = fill(mnt)
        with open(log, "a") as fh:
            fh.writelines(f"ERROR line {n} {'x' * 200}\n" for n in range(1, 401))
        wait_for(lambda: listed(tmp_path)["app"]["status"] == "paused", "status paused")
        app = listed(tmp_path)["app"]
        assert app["lastError"].startswith("cannot write records: ENOSPC"), app
        runner = cli(tmp_path, "status", "--json")
        assert any(p.startswith("app: cannot write records: ENOSPC")
                   for p in runner["problems"]), runner
        assert scrape(port)['watchrun_watcher_up{watcher="app"}'] == 0.0
        filler.unlink()
        wait_for(lambda: listed(tmp_path)["app"]["status"] == "running", "status running")
        assert scrape(port)['watchrun_watcher_up{watcher="app"}'] == 1.0
        wait_for(lambda: len(r.matches("app")) == 400, "every line recorded")
        r.wait_log("[app] writing records again")


def test_a_replace_that_finds_the_disk_full_leaves_no_tmp_file(tiny_fs: Path) -> None:
    """Status snapshots and checkpoints are replaced through a tmp file: on a full disk the
    write fails, the old file stays, and no empty `.NAME.tmp` is left to pile up."""
    target = tiny_fs / "app.status.json"
    safefs.write_atomic(target, b"old\n")
    fill(tiny_fs)
    with pytest.raises(OSError) as err:
        safefs.write_atomic(target, b"new " * 4096)
    assert err.value.errno == errno.ENOSPC
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["app.status.json", "filler"]


def listed(cwd: Path) -> dict[str, dict[str, Any]]:
    """`watchrun list --json`, by watcher."""
    return {w["id"]: w for w in cli(cwd, "list", "--json")["watchers"]}


def cli(cwd: Path, *args: str) -> Any:
    """`watchrun ARGS -c watch.yaml` from `cwd` (a read: in this process, tests/inproc.py),
    its JSON output."""
    res = inproc(cwd, *args, "-c", "watch.yaml")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_a_once_run_on_a_full_disk_fails_in_seconds_and_the_next_run_loses_nothing(
        tmp_path: Path) -> None:
    """A once run retried a full disk for as long as it took: a CI gate that never ended (it
    ran until the job's own timeout). Now a write fails after `limits.onceWriteTimeout` (5 s by
    default): exit 3, saying why;
    the seqs given up are explained, and the next run (once + fromStart: a fresh look at the
    whole file) records every line."""
    from test_once import once

    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "64k")
    try:
        (tmp_path / "big.log").write_text("".join(f"E line {n}\n" for n in range(5000)))
        conf = {"output": {"dir": str(mnt / "out")}, "watchers": [
            {"id": "f", "path": "big.log", "pattern": "E", "fromStart": True,
             "gate": {"maxMatches": 100_000}}]}
        run = once(tmp_path, conf, "--quiet")
        assert run.rc == 3, (run.out, run.err)
        assert run.took < 30
        assert "its records could not be written: ENOSPC" in run.out
        assert "retrying for 5 s, then it fails" in run.err
        assert 4.9 <= gave_up_after(run.err, "[f]") < 5.9  # (not the backoff's next step: 6.3)
        grow(mnt, "8m")
        again = once(tmp_path, conf, "--quiet")
        assert again.rc == 0, (again.out, again.err)
        recs = validate_records(mnt / "out" / "watchers" / "f.jsonl", contiguous=False)
        for gap in explained(recs):  # (not "at shutdown": given up while the run went on)
            assert "given up at a stop, or after limits.onceWriteTimeout" in gap["message"]
        starts = [i for i, r in enumerate(recs) if r["kind"] == "start"]
        assert len(starts) == 2
        assert [r["line"] for r in recs[starts[1]:] if r["kind"] == "match"] == [
            f"E line {n}" for n in range(5000)]
    finally:
        umount(mnt)


def test_a_once_run_whose_agent_cannot_write_ends_and_fails(tmp_path: Path) -> None:
    """An agent's records were retried forever: a once run with a woken agent on a full disk
    never ended, and SIGTERM did not end it either (the stop waited for the records). Now they
    are given up after `limits.onceWriteTimeout` (a `gap` at the next start explains their
    seqs) and the run exits 3."""
    from test_once import once

    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "256k")
    try:
        (tmp_path / "app.log").write_text("E one\n")
        conf = {"output": {"dir": str(mnt / "out")}, "limits": {"onceWriteTimeout": "1s"},
                "watchers": [{"id": "f", "path": "app.log", "pattern": "E", "fromStart": True,
                              "wake": "ag"}],
                "agents": [{"name": "ag", "provider": "mock",
                            "prompt": "x" * 60_000 + "\n{matches}"}]}  # a 60 KB prompt record
        (mnt / "out").mkdir()
        fill(mnt, leave=36_864)  # room for the watcher's files, not for the agent's turn
        run = once(tmp_path, conf, "--quiet")
        assert run.rc == 3, (run.out, run.err)
        assert run.took < 40
        assert "[ag] error: its records could not be written: ENOSPC" in run.err
        assert 0.9 <= gave_up_after(run.err, "[ag]") < 1.9  # (its limits.onceWriteTimeout)
        grow(mnt, "8m")
        again = once(tmp_path, {**conf, "watchers": []})
        assert again.rc == 0, again.err
        recs = validate_records(mnt / "out" / "agents" / "ag.jsonl", contiguous=False)
        (gap,) = explained(recs)  # the seqs given up, in a gap record
        assert gap["reason"] == "unwritten" and gap["records"] > 0
    finally:
        umount(mnt)


def test_an_agent_run_whose_records_cannot_be_written_gives_up_after_once_write_timeout(
        tmp_path: Path) -> None:
    """`agent run` is one turn that must end: its records, which cannot grow past 8 KiB
    (RLIMIT_FSIZE: EFBIG), are retried for `limits.onceWriteTimeout` (2 s here), then given up,
    exit 3, saying why. (No bytecode written: a `.pyc` written under the limit is cut short.)"""
    from test_once import base_env

    config = write_config(tmp_path, {"output": {"dir": "out"},
                                     "limits": {"onceWriteTimeout": "2s"},
                                     "agents": [{"name": "ag", "provider": "mock",
                                                 "prompt": "hello"}]})

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.RLIM_INFINITY))

    run = subprocess.run([watchrun_bin(), "agent", "run", "ag", "-c", str(config), "--prompt",
                          "y" * 12_000], cwd=tmp_path, env=base_env(PYTHONDONTWRITEBYTECODE="1"),
                         capture_output=True, text=True, timeout=60, check=False,
                         preexec_fn=small_files)
    assert run.returncode == 3, (run.stdout, run.stderr)
    assert "retrying for 2 s, then it fails" in run.stderr
    assert "agent ag: its records could not be written: EFBIG" in run.stderr
    assert 1.9 <= gave_up_after(run.stderr, "[ag]") < 2.9


def test_a_runner_whose_agent_cannot_write_still_stops_on_sigterm(tmp_path: Path) -> None:
    """The stop waited for every agent record to be written: on a full disk, SIGTERM did not
    end the runner (the ending turn waited for its records). Now a stop gives the agents'
    writes CLOSE_WRITE_S, then they give up (exit 3: records were lost). Meanwhile `status`
    lists the agent's failing writes as a problem."""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "256k")
    try:
        log = tmp_path / "app.log"
        log.write_text("")
        config = write_config(tmp_path, {
            "output": {"dir": str(mnt / "out")},
            "watchers": [{"id": "f", "path": str(log), "pattern": "E", "wake": "ag"}],
            "agents": [{"name": "ag", "provider": "mock",
                        "prompt": "x" * 60_000 + "\n{matches}"}]})  # a 60 KB prompt record
        r = LiveRunner(config)
        try:
            r.wait_log("running")
            fill(mnt, leave=8192)
            log.write_text("E one\n")
            r.wait_log("[ag] error: cannot write records: ENOSPC")
            problems = cli(tmp_path, "status", "--json")["problems"]  # (said there too)
            assert any(p.startswith("agent ag: cannot write records: ENOSPC")
                       for p in problems), problems
            r.send(signal.SIGTERM)
            assert r.proc.wait(timeout=20) == 3, r.stderr()
        finally:
            r.close()
        assert "[ag] error: its records could not be written: ENOSPC" in r.stderr()
    finally:
        umount(mnt)
