"""`--metrics` against a live runner: which watchers have series and what their counters count,
as `watchrun list` and the log show them: restarts however the watcher started again, a
watcher a reload could not start, `gap` records of records given up on a full disk (a real
tmpfs filled up)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config
from recordcheck import validate_records
from test_disk_full import explained
from test_metrics_live import Scrape, free_port
from tmpfs import fill, full_disk_runner, mount_tmpfs, umount

from watchrun.clock import SystemClock
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.writer import AsyncWriter

DEADLINE_S = 20.0
"""For each wait: generous for a loaded 2-core box; a passing run takes a fraction of it."""


def listed(r: LiveRunner, wid: str) -> dict[str, Any] | None:
    """The watcher's row in the live `list`, or None when it has none."""
    return next((w for w in r.control({"cmd": "list"})["watchers"] if w["id"] == wid), None)


def test_restarts_total_counts_what_list_counts(tmp_path: Path) -> None:
    """An explorer's F2: `watchrun_restarts_total` counted only the restart policy's restarts,
    while `list`'s restarts (and the docs, which say the two count the same) also counts
    `watchrun restart`, a `stop` then `start`, and a reload that changed the watcher: the same
    watcher read 3 in `list` and 0 on /metrics."""
    conf: dict[str, Any] = {"watchers": [
        {"id": "fl", "command": "echo up; exec sleep 600", "pattern": "up"}]}
    port = free_port()
    r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")

    def both() -> tuple[int, float]:
        row = listed(r, "fl")
        assert row is not None
        return row["restarts"], Scrape(port)("watchrun_restarts_total", watcher="fl")

    try:
        r.wait_running()
        assert both() == (0, 0)
        assert r.control({"cmd": "restart", "id": "fl"})["ok"]
        assert both() == (1, 1)
        assert r.control({"cmd": "stop", "id": "fl"})["ok"]
        assert r.control({"cmd": "start", "id": "fl"})["ok"]
        assert both() == (2, 2)
        conf["watchers"][0]["pattern"] = "up|down"  # changed: the reload starts it again
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:", timeout=DEADLINE_S)
        assert both() == (3, 3)
        starts = [x for x in r.records("fl") if x["kind"] == "start"]
        assert len(starts) == 4  # (what was counted: each a start of the watcher again)
        wait_for(lambda: len(r.matches("fl")) == 4, "each run's `up`", DEADLINE_S)
    finally:
        assert r.stop() == 0


def test_a_watcher_a_reload_could_not_start_has_series_and_a_row(tmp_path: Path) -> None:
    """An explorer's F3: a watcher a reload added but could not start (its JSONL could not be
    opened: no inodes left, a directory at its path) had no series at all, so no
    `watchrun_watcher_up == 0` alert fired; `watchrun list` did not list it; and the reload
    counted as successful. Now it has its series (down, counters 0) and a row (`stopped`,
    with why), and the reload is `partial`: `watchrun_config_last_reload_successful` 0 until
    a reload applies whole."""
    (tmp_path / "a.log").write_text("")
    (tmp_path / "b.log").write_text("")
    conf: dict[str, Any] = {"watchers": [{"id": "a", "path": "a.log", "pattern": "ERROR"}]}
    port = free_port()
    r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")
    blocked = r.out / "watchers" / "newbad.jsonl"
    try:
        r.wait_running()
        blocked.mkdir()  # (as a full disk: its JSONL cannot be opened)
        conf["watchers"].append({"id": "newbad", "path": "b.log", "pattern": "ERROR"})
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:", timeout=DEADLINE_S)
        s = Scrape(port)
        assert s.watcher("newbad") == {
            **{f"watchrun_{n}_total": 0.0 for n in (
                "lines", "bytes", "matches", "truncated", "lines_cut", "errors",
                "skipped_duplicates", "restarts", "rotations", "gaps", "redactions")},
            "watchrun_watcher_up": 0.0, "watchrun_last_match_timestamp_seconds": 0.0}
        assert s("watchrun_watcher_up", watcher="a") == 1
        assert s("watchrun_config_last_reload_successful") == 0
        assert [s("watchrun_config_reloads_total", result=x) for x in (
            "ok", "partial", "failed")] == [0, 1, 0]
        row = listed(r, "newbad")
        assert row is not None, "not listed"
        assert row["status"] == "stopped" and row["restarts"] == 0
        assert "could not be started" in row["lastError"] and "newbad.jsonl" in row["lastError"]

        blocked.rmdir()  # space again: `watchrun start` starts it, its first start
        assert r.control({"cmd": "start", "id": "newbad"})["ok"]
        row = listed(r, "newbad")
        assert row is not None and row["status"] == "running" and row["restarts"] == 0
        s = Scrape(port)
        assert s("watchrun_watcher_up", watcher="newbad") == 1
        assert s("watchrun_restarts_total", watcher="newbad") == 0
        assert s("watchrun_config_last_reload_successful") == 0  # (until a reload applies)
        r.send(signal.SIGHUP)
        ok = wait_for(lambda: (s := Scrape(port))(
            "watchrun_config_reloads_total", result="ok") == 1 and s, "the whole reload",
            DEADLINE_S)
        assert ok("watchrun_config_last_reload_successful") == 1
    finally:
        assert r.stop() == 0


def test_gaps_of_records_given_up_on_a_full_disk_are_counted_and_logged(
        tmp_path: Path) -> None:
    """An explorer's F4: the `gap{unwritten}` record that says thousands of match records were
    never written (given up at a stop on a full disk, written at the next start) was in the
    JSONL only: `watchrun_gaps_total` stayed 0 and the runner's log had no `gap` line, since
    the sink writes it ahead of the next record, not through the watcher's events. Now it is
    counted and logged as every other gap is."""
    with full_disk_runner(tmp_path) as (mnt, log, port, r):
        filler = fill(mnt, leave=20_000)  # room for a few dozen records, not for 400
        with open(log, "a") as fh:
            fh.writelines(f"ERROR line {n} {'x' * 200}\n" for n in range(1, 401))
        r.wait_log("cannot write records: ENOSPC", timeout=DEADLINE_S)
        assert r.control({"cmd": "stop", "id": "app"})["ok"]  # what waits is given up
        r.wait_log("the next start records their gap", timeout=DEADLINE_S)
        assert Scrape(port)("watchrun_gaps_total", watcher="app") == 0
        filler.unlink()
        assert r.control({"cmd": "start", "id": "app"})["ok"]
        jsonl = r.out / "watchers" / "app.jsonl"
        gaps = wait_for(lambda: explained(validate_records(jsonl, contiguous=False)),
                        "the gap record written", DEADLINE_S)
        assert all(g["reason"] == "unwritten" for g in gaps), gaps
        wait_for(lambda: Scrape(port)("watchrun_gaps_total", watcher="app") == len(gaps),
                 "the gap counted", DEADLINE_S)
        for g in gaps:
            r.wait_log(f"[app] warning: gap (unwritten): {g['message']}", timeout=DEADLINE_S)
        row = listed(r, "app")
        assert row is not None and row["status"] == "running"


def test_a_gap_record_the_close_writes_is_told(tmp_path: Path) -> None:
    """The same for the `gap` a sink's close writes (the records given up at the stop, when
    there is room by then): the writer's close tells of it, so it is logged and counted."""
    fs = tmp_path / "mnt"
    mount_tmpfs(fs, "256k")
    try:
        path = prepare_output_dir(fs / "out").jsonl("watcher", "w")
        sink = JsonlSink(path, "w", max_bytes=1 << 30, keep=1, clock=SystemClock())
        sink.write("start", {"path": "/x", "inode": 1, "offset": 0})
        filler = fill(fs)
        told: list[dict[str, Any]] = []

        async def main() -> None:
            writer = AsyncWriter(sink)
            writer.on_gap = told.append
            lines = [sink.record("match", {"line": "x" * 1000, "lineNo": n, "offset": n,
                                           "path": "/x", "inode": 1}) for n in range(1, 41)]
            with pytest.raises(SinkWriteError):  # one try, then given up
                await writer.write_lines(lines, give_up_after=0)
            assert told == []
            filler.unlink()  # room again by the close
            await writer.close()

        asyncio.run(main())
        gaps = explained(validate_records(path, contiguous=False))
        assert len(gaps) == 1 and gaps[0]["kinds"] == {"match": gaps[0]["records"]}, gaps
        internal = ("schema", "seq", "cursor", "ts", "kind")
        assert told == [{k: v for k, v in gaps[0].items() if k not in internal}]
    finally:
        umount(fs)
