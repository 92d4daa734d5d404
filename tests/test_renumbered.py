"""A followed file found under another device number than its checkpoint, its content kept: a
remount (network, FUSE and overlay file systems take the next free device number, in mount
order). It is read on from the checkpoint, said in the log; a file at the path with other first
bytes is still a new generation, and so, on a local disk, is one under another inode number,
however it begins. The real runner on real files: an overlay file system mounted again (root),
files moved in with `os.replace`. (The start plan, and inode numbers made anew on FUSE and
CIFS: tests/test_plans.py.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from filehelpers import append
from liverunner import LiveRunner, cli, read_records, wait_for, write_config
from overlayfs import Overlay

MODES = ["once", "live"]
"""`run --once` twice, or a live runner stopped and started again."""


def watching(folder: Path, log: Path) -> Path:
    """A config whose watcher `app` follows `log` (lines 1 and 2 in it already) for ERROR."""
    log.write_text("line 1 ERROR\nline 2 ERROR\n")
    return write_config(folder, {"output": {"dir": str(folder / "out")}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR", "gate": {"maxMatches": 100}}]})


def records(config: Path) -> list[dict[str, Any]]:
    return read_records(config.parent / "out" / "watchers" / "app.jsonl")


def last_run(config: Path) -> list[dict[str, Any]]:
    recs = records(config)
    starts = [i for i, r in enumerate(recs) if r["kind"] == "start"]
    return recs[starts[-1]:]


def run(mode: str, config: Path, log: Path, line: str) -> str:
    """One run that records `line`, appended to `log` before a once run, or while the live
    runner runs when it is new there (a new watcher follows from the end); its log (stderr)."""
    if mode == "once":
        if line not in log.read_text():
            append(log, line)
        done = cli("run", "--once", "-c", config)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "pass" in done.stdout, done.stdout
        return done.stderr
    r = LiveRunner(config)
    try:
        r.out = config.parent / "out"
        r.wait_running()
        if line not in log.read_text():
            append(log, line)
        wait_for(lambda: line in [m["line"] for m in r.matches("app")], f"{line!r} recorded")
        assert r.stop() == 0, r.stderr()
        return r.stderr()
    finally:
        r.close()


def assert_read_on(config: Path, said: str, number: str, line_no: int) -> None:
    """The last run recorded line `line_no` alone, with no gap, rotate or error, and the log
    said why it went on from the checkpoint; no line was recorded twice."""
    this = last_run(config)
    assert [(m["line"], m["lineNo"]) for m in this if m["kind"] == "match"] == [
        (f"line {line_no} ERROR", line_no)], this
    assert not [x for x in this if x["kind"] in ("gap", "rotate", "error")], this
    lines = [m["line"] for m in records(config) if m["kind"] == "match"]
    assert len(lines) == len(set(lines)), lines
    assert f"has another {number} number" in said, said
    assert f"its content is the same, so reading goes on at line {line_no}" in said, said


@pytest.mark.parametrize("mode", MODES)
def test_a_remount_under_another_device_number_is_read_on(
        tmp_path: Path, overlay: Overlay, mode: str) -> None:
    """The log is on an overlay file system; the runner records line 3 and stops. The file
    system is mounted again under another device number (its inode number and content kept)
    and line 4 is appended. The next run records line 4 alone and passes. (It read the whole
    log again from line 1, after a `gap{missing}` saying the generation read was gone and a
    `rotate{recreate}`: a once run exited 3.)"""
    log = overlay.mnt / "app.log"
    config = watching(tmp_path, log)
    run(mode, config, log, "line 3 ERROR")
    inode = log.stat().st_ino
    overlay.again()
    assert log.stat().st_ino == inode
    append(log, "line 4 ERROR")
    said = run(mode, config, log, "line 4 ERROR")
    assert_read_on(config, said, "device", 4)
    (start,) = [x for x in last_run(config) if x["kind"] == "start"]
    assert start["inode"] == inode


@pytest.mark.parametrize("how", ["moved-away", "replaced"])
@pytest.mark.parametrize("mode", MODES)
def test_a_new_log_that_begins_as_the_old_one_did_is_a_new_file_on_a_local_disk(
        tmp_path: Path, mode: str, how: str) -> None:
    """explore-fresh3 F1: while the runner is down, line 4 is added to the log, which is then
    moved away (logrotate's `olddir`) or replaced (`mv new app.log`) by a new file that begins
    with the same lines (a banner, a header). On a local disk inode numbers do not change under
    a file: another one at the path is another file, read from its first line, and line 4 of
    the old one, never read, is named by a `gap{missing}` (a once run: exit 3). (Taken for the
    old file renumbered, line 4 was lost without a gap, and a once gate passed.)"""
    log = tmp_path / "app.log"
    config = watching(tmp_path, log)
    run(mode, config, log, "line 3 ERROR")
    append(log, "line 4 ERROR")
    (tmp_path / "old").mkdir()
    new = tmp_path / "app.log.new"
    new.write_text("line 1 ERROR\nline 2 ERROR\nline 3 ERROR\nnew 4 ERROR\n")
    if how == "moved-away":
        log.rename(tmp_path / "old" / "app.log.1")
    os.replace(new, log)
    if mode == "once":
        done = cli("run", "--once", "-c", config)
        assert done.returncode == 3, done.stdout + done.stderr
        said = done.stderr
    else:
        said = run(mode, config, log, "new 4 ERROR")
    this = last_run(config)
    assert [m["line"] for m in this if m["kind"] == "match"] == [
        "line 1 ERROR", "line 2 ERROR", "line 3 ERROR", "new 4 ERROR"], this
    [gap] = [x for x in this if x["kind"] == "gap"]
    assert (gap["reason"], gap["lineNo"]) == ("missing", 4), gap
    assert "has another" not in said, said


@pytest.mark.parametrize("mode", MODES)
def test_a_file_of_other_first_bytes_put_in_place_is_read_from_its_first_line(
        tmp_path: Path, mode: str) -> None:
    """The guard: a new file moved over the log that does not begin as it did is a new
    generation, read from its first line after a `rotate` record, whatever it holds after."""
    log = tmp_path / "app.log"
    config = watching(tmp_path, log)
    run(mode, config, log, "line 3 ERROR")
    new = tmp_path / "app.log.new"
    new.write_text("LINE 1 ERROR\n" + log.read_text()[len("line 1 ERROR\n"):])
    os.replace(new, log)
    if mode == "once":  # (exit 3: the old file is gone, a `gap{missing}`)
        cli("run", "--once", "-c", config)
    else:
        run(mode, config, log, "LINE 1 ERROR")
    this = last_run(config)
    assert [m["line"] for m in this if m["kind"] == "match"][:1] == ["LINE 1 ERROR"], this
    kinds = [x["kind"] for x in this]
    assert "rotate" in kinds and kinds.index("rotate") < kinds.index("match"), kinds


def test_a_log_rotated_over_a_remount_is_read_on_in_its_rotated_file(
        tmp_path: Path, overlay: Overlay) -> None:
    """The guard on a remount: the log was rotated too (renamed `app.log.1` after line 4, a new
    `app.log` made). The new file at the path does not hold what was read: the rotated one,
    found by its content (its device number is another now), is read on from line 4, then the
    new file from its first line; nothing twice, nothing missing, the once run passes."""
    log = overlay.mnt / "app.log"
    config = watching(tmp_path, log)
    run("once", config, log, "line 3 ERROR")
    append(log, "line 4 ERROR")
    log.rename(overlay.mnt / "app.log.1")
    log.write_text("new 1 ERROR\n")
    overlay.again()
    said = run("once", config, log, "new 1 ERROR")
    this = last_run(config)
    assert [(m["line"], m["path"]) for m in this if m["kind"] == "match"] == [
        ("line 4 ERROR", str(overlay.mnt / "app.log.1")), ("new 1 ERROR", str(log))], this
    assert not [x for x in this if x["kind"] in ("gap", "error")], this
    assert "has another" not in said, said
