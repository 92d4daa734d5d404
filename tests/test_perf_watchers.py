"""Regression guards for the CPU that many file watchers in one folder cost per byte read
(bench/RESULTS.md, "Many watchers, the same bytes"): a watcher given fewer than maxLogLines lines
renders each of them into its `.tail`, its matches are echoed in the runner's log (up to 20 a
second per watcher), its first append to an empty file lists its folder, and each append is a
checkpoint save. Ratios to an anchor timed in the same test (median of interleaved rounds, CPU
time), as in test_perf_guards.py."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_perf_guards import median_ratio

from watchrun.events import MatchInfo
from watchrun.match.plain import plain_texts
from watchrun.output import safefs
from watchrun.output.runlog import RunLog
from watchrun.runtime.snapshot_text import tail_lines
from watchrun.sources.checkpoint_doc import Checkpoint, FileState, encode
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.keeper import Keeper
from watchrun.sources.rotated import scan

LINES = [f"{'ERROR' if k % 2 else 'INFO'} app-7 line {k} ".ljust(1023, "x").encode()
         for k in range(100)]


def _cpu(call: Callable[[], object], times: int) -> Callable[[], float]:
    def timed() -> float:
        start = time.process_time()
        for _ in range(times):
            call()
        return time.process_time() - start
    return timed


def test_a_tail_of_plain_lines_renders_at_the_cost_of_their_records() -> None:
    """100 plain lines of 1 KiB rendered for a `.tail`, next to the match records' fast path
    on the same lines (`plain_texts`): was ~120x (each line through the regexes of `sanitize`
    and `edge_text`, ~55 us), ~9x now."""
    tail = [(line, 0, None) for line in LINES]
    sizes = [len(line) for line in LINES]
    ratio = median_ratio(_cpu(lambda: tail_lines(tail, None), 50),
                         _cpu(lambda: plain_texts(LINES, sizes, 1 << 20), 50), 7)
    assert ratio <= 30, f"a .tail renders at {ratio:.1f}x the records' fast path (bound 30x)"


def test_echoing_plain_matches_costs_little_more_than_writing_them(tmp_path: Path) -> None:
    """20 matched lines of 1 KiB echoed in the runner's log (a file), next to writing the same
    lines to that file: was ~12x, ~3.5x now."""
    found = [MatchInfo(line=line.decode(), line_no=k, offset=k * 1024,
                       where=f"/var/log/app.log:{k}") for k, line in enumerate(LINES[:20])]
    names = (f"w{i}" for i in range(1_000_000))  # (each a new watcher: a whole second's budget)
    with (tmp_path / "log").open("w") as stream:
        log = RunLog(stream=stream, timestamps=True, environ={})

        def echo() -> None:
            log.matches(next(names), found)

        def plain() -> None:
            for m in found:
                stream.write(f"watchrun: [w] match {m.where}: {m.line}\n")
                stream.flush()

        ratio = median_ratio(_cpu(echo, 50), _cpu(plain, 50), 7)
    assert ratio <= 7, f"echoing matches costs {ratio:.1f}x writing them (bound 7x)"


def test_looking_for_a_logs_copies_costs_about_one_listing_of_its_folder(tmp_path: Path) -> None:
    """The siblings of one of 300 logs in a folder (`rotated.scan`, made at each watcher's first
    append to an empty file), next to `os.listdir` of that folder: was ~7x (each name judged in
    Python), ~2x now."""
    for i in range(300):
        (tmp_path / f"worker-{i}.log").touch()
    path = tmp_path / "worker-7.log"
    ratio = median_ratio(_cpu(lambda: scan(path, []), 30),
                         _cpu(lambda: os.listdir(tmp_path), 30), 7)
    assert ratio <= 4, f"a scan costs {ratio:.2f}x a listing of its folder (bound 4x)"


def test_saving_the_checkpoints_of_many_watchers_costs_about_writing_their_files(
        tmp_path: Path) -> None:
    """64 watchers' checkpoints saved in one turn of the loop (their keepers' saves after an
    append to each log), next to the same 64 files written atomically (tmp, fsync, rename) and
    state/ fsynced once: was ~1.8-2.1x (per save a worker-thread hop, state/ made and checked,
    and an fsync of state/), ~1.1x now (one job and one fsync of state/ for the batch)."""
    state, anchor_dir = tmp_path / "state", tmp_path / "anchor"
    state.mkdir()
    anchor_dir.mkdir()
    store = CheckpointStore(state)
    keepers = [Keeper(store, f"w{i}", 1.0) for i in range(64)]
    seqs = itertools.count(1)

    def at(seq: int) -> FileState:
        return FileState((Checkpoint(1, 2, "ab" * 32, seq * 1024, seq, "/var/log/app.log", 0),),
                         seq, "/var/log/app.log")

    async def save(seq: int) -> None:
        await asyncio.gather(*(k.save(at(seq)) for k in keepers))

    def ours() -> float:
        start = time.process_time()
        loop.run_until_complete(save(next(seqs)))
        return time.process_time() - start

    def anchor() -> float:
        data = encode(at(next(seqs)))
        start = time.process_time()
        for k in keepers:
            safefs.write_atomic(anchor_dir / f"{k.id}.checkpoint.json", data)
        safefs.fsync_dir(anchor_dir)
        return time.process_time() - start

    loop = asyncio.new_event_loop()
    try:
        ours()  # (the worker threads started)
        ratio = median_ratio(ours, anchor, 9)
    finally:
        loop.close()
    assert all(k.saved is not None for k in keepers)
    assert ratio <= 1.8, f"saving 64 checkpoints costs {ratio:.2f}x writing them (bound 1.8x)"


class Hops(asyncio.SelectorEventLoop):
    """A loop that counts the calls it hands to worker threads."""

    hops = 0

    def run_in_executor(self, *args: Any) -> Any:
        self.hops += 1
        return super().run_in_executor(*args)


def test_the_checkpoints_of_many_watchers_take_one_hop_and_one_fsync_of_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the CPU above is made of, counted: 64 watchers' saves in one turn take one thread
    hop (was 64) and 65 fsyncs, each file's and one of state/ (was 128: state/ after each)."""
    fsyncs: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])
    store = CheckpointStore(tmp_path)
    keepers = [Keeper(store, f"w{i}", 1.0) for i in range(64)]
    state = FileState((Checkpoint(1, 2, "ab" * 32, 1024, 1, "/var/log/app.log", 0),), 1,
                      "/var/log/app.log")

    async def save() -> None:
        await asyncio.gather(*(k.save(state) for k in keepers))

    with asyncio.Runner(loop_factory=Hops) as runner:
        runner.run(save())
        loop = runner.get_loop()
        assert isinstance(loop, Hops)
        hops = loop.hops
    assert all(k.saved == state for k in keepers)
    assert (hops, len(fsyncs)) == (1, 65), f"{hops} thread hops, {len(fsyncs)} fsyncs"
