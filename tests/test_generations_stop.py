"""A stop (or restart) within rotateWait of a delete-and-recreate rotation: the deleted generation,
read to its end, is released at the stop, and the next start writes no `gap` for it. One that had
grown past what was read at the stop is still a `gap{missing}`, counting those bytes. Found by an
explorer (2026-12-07, soak F1): every such stop wrote `gap{missing, unreadBytes: 0}` and a warning
though every line had been read, and the same stop 6 s after the rotation wrote none."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from filehelpers import Recorder, Tail, notifier_for
from liverunner import LiveRunner, wait_for, write_config

from watchrun.config.model import Limits
from watchrun.sources import stopped
from watchrun.sources.checkpoints import CheckpointStore

HELD = Limits(rotate_wait_ms=60_000)
"""The deleted generation is still held (not idle for rotateWait) when the source stops."""


def _recreate(log: Path, text: str) -> None:
    os.unlink(log)
    log.write_text(text)


async def _rotated_then_stopped(log: Path, store: CheckpointStore, late: bytes = b"") -> None:
    """Three lines read, the file deleted and made again with one more, that one read; then
    (`late`, written to the deleted file by a writer still holding it, after the last look)
    the source stops, the deleted generation still held."""
    notifier = notifier_for("inotify")
    log.write_text("")
    writer = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        async with Tail(log, notifier, store, from_start=True, limits=HELD) as t:
            os.write(writer, b"x 1\nx 2\nx 3\n")
            await t.lines(3)
            _recreate(log, "x new 1\n")
            await t.until(lambda: len(t.rec.lines()) == 4 and bool(t.rec.of("rotate")),
                          "the new file's line after its rotate record")
            assert any(" (deleted)" in f for f in _fds()), "the deleted generation is held"
            os.write(writer, late)  # (no await before the stop: the source does not look)
    finally:
        os.close(writer)
        notifier.close()


def _fds() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return out


async def _started_again(log: Path, store: CheckpointStore) -> Recorder:
    notifier = notifier_for("inotify")
    try:
        async with Tail(log, notifier, store, from_start=True, limits=HELD) as t:
            with log.open("a") as f:
                f.write("x new 2\n")
            await t.lines(1)
        return t.rec
    finally:
        notifier.close()


def _run(tmp_path: Path, late: bytes = b"") -> Recorder:
    log, store = tmp_path / "app.log", CheckpointStore(tmp_path / "state")
    asyncio.run(_rotated_then_stopped(log, store, late))
    return asyncio.run(_started_again(log, store))


def test_a_deleted_generation_read_to_its_end_at_a_stop_is_no_gap(tmp_path: Path) -> None:
    rec = _run(tmp_path)
    assert rec.texts() == ["x new 2"]  # read on from the checkpoint, nothing again
    assert rec.of("gap") == []


def test_a_deleted_generation_grown_past_what_was_read_at_a_stop_is_a_gap(
        tmp_path: Path) -> None:
    """Fail-closed: bytes written to it after the last look, there at the stop, were not read."""
    late = b"x 4, written late\n"
    rec = _run(tmp_path, late)
    assert rec.texts() == ["x new 2"]
    gaps: list[dict[str, Any]] = rec.of("gap")
    assert [(g["reason"], g["offset"], g["lineNo"], g["unreadBytes"]) for g in gaps] == [
        ("missing", 12, 4, len(late))]


def test_on_a_network_file_system_its_size_is_not_trusted_at_a_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the descriptor's size may lag what it holds (attributes cached apart from the
    data), nothing past what was read is not known: the gap stays, 0 bytes known. (A seam: the
    stop's look takes the file system for NFS; the source reads it as the local file it is.)"""
    monkeypatch.setattr(stopped, "known_local", lambda fd: False)  # (as on NFS)
    rec = _run(tmp_path)
    assert rec.texts() == ["x new 2"]
    assert [(g["reason"], g["offset"], g["unreadBytes"]) for g in rec.of("gap")] == [
        ("missing", 12, 0)]


def test_a_restart_soon_after_a_recreate_writes_no_gap(tmp_path: Path) -> None:
    """The real runner, stopped (SIGTERM) a moment after a delete-and-recreate rotation and
    started again: no `gap` record, no warning (the explorer's repro2.sh)."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"limits": {"rotateWait": "1m"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as f:
            f.write("line 1 ERROR\nline 2 ERROR\n")
        wait_for(lambda: len(r.matches("app")) == 2, "the first two matches")
        _recreate(log, "new 1 ERROR\n")
        wait_for(lambda: len(r.matches("app")) == 3, "the new file's match")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as f:
            f.write("new 2 ERROR\n")
        wait_for(lambda: len(r.matches("app")) == 4, "the match after the restart")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    recs = r.records("app")
    assert [x["line"] for x in recs if x["kind"] == "match"] == [
        "line 1 ERROR", "line 2 ERROR", "new 1 ERROR", "new 2 ERROR"]
    assert [x for x in recs if x["kind"] == "gap"] == []
    said = r.stderr().replace(str(tmp_path), "<dir>")  # (the folder is named after the test)
    assert "gap" not in said, said
