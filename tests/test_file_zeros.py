"""NUL bytes in a followed file (`sources/zeros.py`), with real files and a real runner: zeros a
writer put at the end of its file to fill later (extended ahead with ftruncate, stores through
mmap) are not read until they are filled, so each fill is an append and each line is recorded
once; a hole before a line (a writer without O_APPEND after a copytruncate) is passed over and
counted, and the line after it is matched whole."""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config

MODES = {"inotify": {}, "poll": {"WATCHRUN_FORCE_POLL": "1"}}
SOON_S = 10.0
"""How long a test waits for what the fixed runner does within a poll interval (the unfixed
one never does it)."""


def watching(folder: Path, **limits: Any) -> Path:
    """The config of one watcher `app` of `app.log` (pattern ERR), polling every 50 ms."""
    return write_config(folder, {"limits": {"pollMs": "50ms", **limits}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERR"}]})


def matched(r: LiveRunner) -> list[str]:
    return [m["line"] for m in r.matches("app")]


def rotations(r: LiveRunner) -> list[dict[str, Any]]:
    return [x for x in r.records("app") if x["kind"] == "rotate"]


def listed(r: LiveRunner) -> dict[str, Any]:
    """The watcher as the live runner lists it (the control socket's `list`)."""
    (app,) = r.control({"cmd": "list"})["watchers"]
    return dict(app)


def fill(fd: int, at: int, line: bytes) -> int:
    """Write `line` over the zeros at `at` (pwrite, as a writer that extended its file ahead);
    the offset after it."""
    os.pwrite(fd, line, at)
    return at + len(line)


@pytest.mark.parametrize("mode", MODES)
def test_zeros_filled_line_by_line_are_read_once_each(tmp_path: Path, mode: str) -> None:
    """A writer that extends its file with zeros and fills them later (ftruncate ahead, then
    pwrite): every fill had been taken for a rewrite (a `rotate{truncate}` each time) and every
    line before it recorded again (5 lines: 15 matches). Now each line is recorded once, no
    rotation is said, and a restart goes on from the last line, before the zeros."""
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    config = watching(tmp_path)
    lines = [b"ERR filled line %d\n" % i for i in range(7)]
    fd = os.open(log, os.O_RDWR)
    try:
        r = LiveRunner(config, env=MODES[mode])
        try:
            r.wait_running()
            os.ftruncate(fd, 4096)
            at = 0
            for line in lines[:5]:
                at = fill(fd, at, line)
                text = line.decode().rstrip("\n")
                wait_for(lambda t=text: t in matched(r), f"{text!r} recorded")  # (read it,
                # and the zeros after it, before the next fill)
            assert r.stop() == 0, r.stderr()
        finally:
            r.close()
        for line in lines[5:]:  # filled while the runner is stopped
            at = fill(fd, at, line)
        r = LiveRunner(config, env=MODES[mode])
        try:
            r.wait_running()
            wait_for(lambda: len(matched(r)) >= 7, "the lines filled while it was stopped")
            assert r.stop() == 0, r.stderr()
        finally:
            r.close()
    finally:
        os.close(fd)
    assert matched(r) == [x.decode().rstrip("\n") for x in lines]
    assert [m["lineNo"] for m in r.matches("app")] == list(range(1, 8))
    assert rotations(r) == []
    assert "rotated" not in r.stderr()


def test_lines_stored_through_mmap_are_seen_with_inotify(tmp_path: Path) -> None:
    """An mmap logger (log4j2's MemoryMappedFileAppender) stores its lines into zeros it mapped
    ahead: no inotify event comes of a store. While NUL bytes wait at the end of the file, the
    runner looks again every pollMs; before, the lines were never seen while it ran."""
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    config = watching(tmp_path)
    lines = [b"ERR mapped line %d\n" % i for i in range(3)]
    fd = os.open(log, os.O_RDWR)
    r = LiveRunner(config)
    try:
        r.wait_running()
        os.ftruncate(fd, 8192)
        with mmap.mmap(fd, 8192) as mapped:
            at = 0
            for line in lines:
                mapped[at : at + len(line)] = line
                at += len(line)
                text = line.decode().rstrip("\n")
                wait_for(lambda t=text: t in matched(r), f"{text!r} recorded", SOON_S)
        assert r.stop() == 0, r.stderr()
    finally:
        os.close(fd)
        r.close()
    assert matched(r) == [x.decode().rstrip("\n") for x in lines]
    assert rotations(r) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_new_watcher_starts_before_zeros_far_ahead(tmp_path: Path, mode: str) -> None:
    """A new watcher follows from the end: of a file extended 2 MiB ahead of its last line, the
    end is where its zeros begin; it had started past them, and the lines filled in were never
    read."""
    log = tmp_path / "app.log"
    log.write_bytes(b"INFO before the watcher\n")
    os.truncate(log, 2 << 20)
    r = LiveRunner(watching(tmp_path), env=MODES[mode])
    try:
        r.wait_running()
        (start,) = [x for x in r.records("app") if x["kind"] == "start"]
        assert start["offset"] == 24
        with open(log, "r+b") as f:
            f.seek(24)
            f.write(b"ERR filled after the start\n")
        wait_for(lambda: matched(r), "the filled line recorded", SOON_S)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert [(m["line"], m["lineNo"], m["offset"]) for m in r.matches("app")] == [
        ("ERR filled after the start", 2, 24)]


def test_a_once_run_reads_a_file_with_zeros_at_its_end_as_its_lines(tmp_path: Path) -> None:
    """`run --once` of a file whose writer extended it ahead: its zeros are no line (they had
    been read as one more line, of 4096 NUL bytes), and not a file cut short either."""
    (tmp_path / "app.log").write_bytes(b"ERR one\nINFO two\nERR three\n" + bytes(4096))
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERR", "gate": {"maxMatches": 2}}]})
    done = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads((tmp_path / ".watchrun" / "state" / "app.status.json").read_text())
    assert (status["linesRead"], status["matchCount"], status["errors"]) == (3, 2, 0)


@pytest.mark.parametrize("mode", MODES)
def test_a_hole_before_a_line_is_passed_over_and_counted(tmp_path: Path, mode: str) -> None:
    """copytruncate under a writer without O_APPEND: after the truncation it writes at its old
    offset, so its next line follows a hole of that many NUL bytes. They had been taken for the
    line's start: past maxLineBytes, the line was cut to NUL bytes and never matched. Now they
    are passed over, counted in `status`'s `skippedNulBytes`, and the line is matched whole."""
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    r = LiveRunner(watching(tmp_path, maxLineBytes=256), env=MODES[mode])
    fd = os.open(log, os.O_WRONLY)  # (no O_APPEND)
    try:
        r.wait_running()
        os.write(fd, b"".join(b"INFO %094d\n" % i for i in range(10)))  # 1000 bytes
        wait_for(lambda: listed(r)["linesRead"] == 10, "the first lines read")
        os.truncate(log, 0)
        wait_for(lambda: rotations(r), "the truncation seen")
        os.write(fd, b"ERR after the truncation 1\nERR after the truncation 2\n")
        wait_for(lambda: len(matched(r)) == 2, "both lines after the hole", SOON_S)
        shown = listed(r)
        assert r.stop() == 0, r.stderr()
    finally:
        os.close(fd)
        r.close()
    assert [(m["line"], m["lineNo"], m["offset"]) for m in r.matches("app")] == [
        ("ERR after the truncation 1", 1, 1000), ("ERR after the truncation 2", 2, 1027)]
    assert (shown["skippedNulBytes"], shown["linesCut"]) == (1000, 0)


def test_a_once_run_passes_over_every_hole_before_a_line(tmp_path: Path) -> None:
    """Runs of 8 or more NUL bytes before lines, many within one read and across reads: the
    line after each is matched whole (`^ERR` matches it; it had not, the NUL bytes being its
    first bytes) and the NUL bytes are counted; fewer than 8 are the line's bytes (a UTF-16 or
    UTF-32 newline is followed by one to three)."""
    holes = [8 + i * 7 % 3000 for i in range(2000)]  # (8 bytes to 3 KB: 3 MB, many reads)
    (tmp_path / "app.log").write_bytes(b"".join(bytes(n) + b"ERR %d\n" % i
                                                for i, n in enumerate(holes))
                                       + bytes(3) + b"ERR after three NUL bytes\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "^ERR", "gate": {"maxMatches": 5000}}]})
    done = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads((tmp_path / ".watchrun" / "state" / "app.status.json").read_text())
    assert (status["linesRead"], status["matchCount"], status["skippedNulBytes"]) == (
        2001, 2000, sum(holes))
