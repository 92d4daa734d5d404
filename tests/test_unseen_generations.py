"""Files that come to the watched path and are gone again before the runner looks (deleted and
created again several times within a millisecond, or while the runner is frozen) are counted
in a `gap{reason: unseen}` record: every generation's lines are recorded or counted as unseen.
Found 2026-12-05: 8 recreates with no pause in between left the first and the last recorded and
nothing said of the 6 in between."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from filehelpers import Recorder, Tail, notifier_for
from liverunner import LiveRunner, wait_for, write_config
from recordcheck import record_errors

from watchrun.sources.checkpoints import CheckpointStore

N = 8


def _follow(tmp_path: Path) -> tuple[Path, LiveRunner]:
    log = tmp_path / "app.log"
    log.write_text("ERROR gen 0\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR", "fromStart": True}]})
    r = LiveRunner(config)
    wait_for(lambda: _lines(r) == ["ERROR gen 0"], "the first generation's line")
    # Its record is written before the look at the path that makes the first account of the
    # files that came to it (none made yet: arrivals are not counted). A line read after it
    # is read after that look, so what the tests do next is counted from that account on.
    with log.open("a") as f:
        f.write("INFO settled\n")
    wait_for(lambda: _lines_read(r) == 2, "the second line read")
    return log, r


def _lines_read(r: LiveRunner) -> int:
    try:
        return int(json.loads((r.out / "state" / "app.status.json").read_text())["linesRead"])
    except (OSError, ValueError, KeyError):
        return 0


def _lines(r: LiveRunner) -> list[str]:
    try:
        return [x["line"] for x in r.matches("app")]
    except FileNotFoundError:
        return []


def _unseen(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for x in recs:
        assert record_errors(x) == [], x
    return [x for x in recs if x["kind"] == "gap"]


def _recreate(log: Path, k: int) -> None:
    os.unlink(log)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"ERROR gen %d\n" % k)
    os.close(fd)


def _accounted(r: LiveRunner) -> int:
    recs = r.records("app")
    gens = {x["line"] for x in recs if x["kind"] == "match"} - {"ERROR gen 0"}
    return len(gens) + sum(x["generations"] for x in _unseen(recs))


def test_generations_gone_while_frozen_are_counted(tmp_path: Path) -> None:
    log, r = _follow(tmp_path)
    try:
        r.send(signal.SIGSTOP)
        for k in range(1, N + 1):
            _recreate(log, k)
        r.send(signal.SIGCONT)
        wait_for(lambda: _accounted(r) >= N, f"{N} generations recorded or counted")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    recs = r.records("app")
    assert _lines(r) == ["ERROR gen 0", f"ERROR gen {N}"]
    gaps = _unseen(recs)
    assert [(g["reason"], g["generations"], g["path"]) for g in gaps] == [
        ("unseen", N - 1, str(log))]
    assert gaps[0]["message"] == (
        f"{N - 1} file(s) came to {log} and were gone again before the runner looked (created "
        "and deleted, or renamed away): what they held was not read")
    assert f"gap (unseen): {N - 1} file(s) came to" in r.stderr()  # said in the log too


@pytest.mark.parametrize("round_", range(3))
def test_generations_recreated_without_a_pause_are_each_recorded_or_counted(
        tmp_path: Path, round_: int) -> None:
    """As many as the runner saw are recorded, the others counted: never a line twice, never a
    generation both, never one neither (how many it sees depends on the host)."""
    log, r = _follow(tmp_path)
    try:
        for k in range(1, N + 1):
            _recreate(log, k)
        try:
            wait_for(lambda: _accounted(r) >= N and f"ERROR gen {N}" in _lines(r),
                     f"{N} generations recorded or counted")
        except AssertionError as exc:  # (say what was: the lines and the gaps)
            recs = r.records("app")
            raise AssertionError(
                f"{exc}: {_lines(r)}, {_unseen(recs)}, {r.stderr()[-2000:]}") from None
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    lines = _lines(r)
    assert len(lines) == len(set(lines)), lines
    assert _accounted(r) == N
    assert all(g["reason"] == "unseen" for g in _unseen(r.records("app")))


def test_a_file_renamed_away_and_back_while_frozen_is_no_unseen_generation(
        tmp_path: Path) -> None:
    log, r = _follow(tmp_path)
    try:
        r.send(signal.SIGSTOP)
        os.rename(log, tmp_path / "aside")
        os.rename(tmp_path / "aside", log)
        with log.open("a") as f:
            f.write("ERROR after\n")
        r.send(signal.SIGCONT)
        wait_for(lambda: "ERROR after" in _lines(r), "the line written after")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert _lines(r) == ["ERROR gen 0", "ERROR after"]
    assert _unseen(r.records("app")) == []


def test_files_renamed_into_place_and_replaced_while_frozen_are_counted(tmp_path: Path) -> None:
    """A writer that replaces its file atomically (a new file renamed over it), three times
    while the runner is frozen: the first two replacements are gone unseen."""
    log, r = _follow(tmp_path)
    try:
        r.send(signal.SIGSTOP)
        for k in range(1, 4):
            tmp = tmp_path / "app.log.tmp"
            tmp.write_text(f"ERROR gen {k}\n")
            os.rename(tmp, log)
        r.send(signal.SIGCONT)
        try:  # (timed out once in a loaded suite, without saying what it saw)
            wait_for(lambda: _accounted(r) >= 3, "3 generations recorded or counted")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; records: {r.records('app')}; log: {r.stderr()}") \
                from None
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert _lines(r) == ["ERROR gen 0", "ERROR gen 3"]
    assert [g["generations"] for g in _unseen(r.records("app"))] == [2]


def test_a_file_that_comes_while_the_queue_is_read_is_not_taken_for_one_before(
        tmp_path: Path) -> None:
    """The events queued after a rotation were read after the look at the path: a file that
    came in between was counted as if it had come before the one followed, and the next
    account came out one short (a generation gone unseen was never said; found under a loaded
    suite). A file created and deleted, then another one, while the queue is about to be read
    (the notifier's read is the seam): the first is counted, the second followed."""
    log = tmp_path / "app.log"
    log.write_text("ERROR gen 0\n")

    async def body() -> Recorder:
        notifier = notifier_for("inotify")
        armed, read = [False], notifier.drain

        def drain_after_two_more() -> None:
            if armed[0]:
                armed[0] = False
                _recreate(log, 2)  # gone before any look
                _recreate(log, 3)
            read()

        notifier.drain = drain_after_two_more  # type: ignore[method-assign]
        async with Tail(log, notifier, CheckpointStore(tmp_path / "state"),
                        from_start=True) as t:
            await t.lines(1)
            with log.open("a") as f:  # (the look that reads it makes the first account)
                f.write("ERROR gen 0, again\n")
            await t.lines(2)
            _recreate(log, 1)
            armed[0] = True  # the first read after the rotation to generation 1
            await t.until(lambda: "ERROR gen 3" in t.rec.texts(), "generation 3")
            await t.until(lambda: bool(t.rec.of("gap")), "a gap")
        notifier.close()
        return t.rec

    rec = asyncio.run(body())
    assert rec.texts() == ["ERROR gen 0", "ERROR gen 0, again", "ERROR gen 1", "ERROR gen 3"]
    assert [(g["reason"], g["generations"]) for g in rec.of("gap")] == [("unseen", 1)]


@pytest.mark.parametrize("other", ["directory", "fifo"])
def test_a_directory_or_fifo_that_briefly_replaced_the_file_is_no_unseen_file(
        tmp_path: Path, other: str) -> None:
    """The file deleted, a directory (or a FIFO) made in its place, seen (an `error` record:
    EISDIR, EINVAL), removed, a new file made: the runner wrote a `gap{unseen}` saying a file
    came and went unread, though it had seen what came, and it held no lines."""
    log, r = _follow(tmp_path)
    try:
        log.unlink()
        if other == "directory":
            log.mkdir()
        else:
            os.mkfifo(log)
        wait_for(lambda: any(x["kind"] == "error" for x in r.records("app")), "the error")
        if other == "directory":
            log.rmdir()
        else:
            log.unlink()
        log.write_text("ERROR after\n")
        wait_for(lambda: "ERROR after" in _lines(r), "the new file read")
        with log.open("a") as f:
            f.write("ERROR more\n")
        wait_for(lambda: "ERROR more" in _lines(r), "its next line read")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert _lines(r) == ["ERROR gen 0", "ERROR after", "ERROR more"]
    assert _unseen(r.records("app")) == []
