"""A followed file found at its path under another device number while a live runner follows
it (or, on FUSE and CIFS, another inode number), still holding what was read of it: its file
system mounted again under the runner (`umount -l`, a mount). It is read on there, each line
once, with no `rotate`; the file it was read from until then is read only when it turns out to
be another file (written to apart from the file at the path). A file at the path that does not
hold what was read, or a copy of it on a local disk, is still a rotation. The real runner on
real mounts: an overlay mounted again, a tmpfs swapped for another (root). (At a start:
tests/test_renumbered.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest
from filehelpers import append
from liverunner import LiveRunner, wait_for, write_config
from overlayfs import Overlay
from test_plans import on_fuse, three_lines
from tmpfs import mount_tmpfs, umount


def following(folder: Path, log: Path) -> LiveRunner:
    """A live runner (running) whose new watcher `app` follows `log`, lines 1-3 in it already
    (written before the watcher began: not recorded), for ERROR; rotateWait 1 s."""
    log.write_text("line 1 ERROR\nline 2 ERROR\nline 3 ERROR\n")
    config = write_config(folder, {"output": {"dir": str(folder / "out")},
                                   "limits": {"rotateWait": "1s"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR"}]})
    r = LiveRunner(config)
    r.out = folder / "out"
    r.wait_running()
    return r


def recorded(r: LiveRunner, line: str) -> None:
    wait_for(lambda: line in [m["line"] for m in r.matches("app")], f"{line!r} recorded")


def switched(r: LiveRunner) -> None:
    """Until the runner took the file at the path for the one it follows, or for a new one."""
    wait_for(lambda: "has another" in r.stderr() or "rotated" in r.stderr(),
             "the runner to see the file at the path")


def stopped(r: LiveRunner) -> list[dict[str, Any]]:
    """Stop the runner (exit 0); its watcher's records."""
    assert r.stop() == 0, r.stderr()
    return r.records("app")


def test_a_share_mounted_again_under_a_live_runner_is_read_on(
        tmp_path: Path, overlay: Overlay) -> None:
    """netfs F1c: the log is on an overlay file system; the runner follows it (line 4
    recorded). The file system is unmounted lazily and mounted again: the same file, under
    another device number; lines 5 and 6 are appended, which the old descriptor on the
    detached mount reads too. Lines 4, 5 and 6 are recorded once each, nothing else: no
    rotate, no gap; the log says why once. A restart reads on from the new numbers, saying
    nothing. (Lines 1-3, written before the watcher began, were read from the file at the
    path, and lines 4-6 from both descriptors, after a `rotate{rename}`.)"""
    log = overlay.mnt / "app.log"
    r = following(tmp_path, log)
    try:
        append(log, "line 4 ERROR")
        recorded(r, "line 4 ERROR")
        overlay.again(lazy=True)
        switched(r)
        for n in (5, 6):
            append(log, f"line {n} ERROR")
            recorded(r, f"line {n} ERROR")
        recs, said = stopped(r), r.stderr()
    finally:
        r.close()
    assert [m["line"] for m in recs if m["kind"] == "match"] == [
        "line 4 ERROR", "line 5 ERROR", "line 6 ERROR"], recs
    assert not [x for x in recs if x["kind"] in ("rotate", "gap", "error")], recs
    assert said.count("has another device number") == 1, said
    assert "its content is the same, so reading goes on at line 5" in said, said
    again = LiveRunner(r.config)
    try:
        again.out = r.out
        again.wait_running()
        append(log, "line 7 ERROR")
        recorded(again, "line 7 ERROR")
        recs, said = stopped(again), again.stderr()
    finally:
        again.close()
    lines = [m["line"] for m in recs if m["kind"] == "match"]
    assert lines == [f"line {n} ERROR" for n in (4, 5, 6, 7)], lines
    assert "has another" not in said, said


@pytest.mark.parametrize("path_too", [True, False], ids=["both-written", "old-written"])
def test_a_share_swapped_for_a_copy_while_the_old_file_is_written_to_is_read_too(
        tmp_path: Path, path_too: bool) -> None:
    """The log's file system (a tmpfs) is unmounted lazily and another one mounted in its
    place holding a copy of the log, under the same inode number (a share failed over to a
    replica): the same bytes, another device number, taken for the log mounted again. Its
    writer, which keeps the old file open, writes line 5 to it: that one is another file
    after all. Its line 5 is recorded (at once when the file at the path got another line 5,
    after rotateWait when it got none), and so is the file at the path's; no line twice.
    (Without the switch the copy was read from line 1: lines 1-4 again.)"""
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "256k")
    log = mnt / "app.log"
    r = following(tmp_path, log)  # (its first file: inode number 2, as on the next tmpfs)
    try:
        with open(log, "a", buffering=1) as writer:
            writer.write("line 4 ERROR\n")
            recorded(r, "line 4 ERROR")
            held, inode = log.read_bytes(), log.stat().st_ino
            subprocess.run(["umount", "-l", str(mnt)], check=True, timeout=30)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                           check=True, timeout=30)
            (mnt / ".copy").write_bytes(held)  # (whole before it is at the path)
            os.rename(mnt / ".copy", log)
            if log.stat().st_ino != inode:
                pytest.skip("this tmpfs does not number its inodes per mount")
            switched(r)
            writer.write("old 5 ERROR\n")
        if path_too:
            append(log, "new 5 ERROR")
            recorded(r, "new 5 ERROR")
        recorded(r, "old 5 ERROR")
        recs, said = stopped(r), r.stderr()
    finally:
        r.close()
        umount(mnt)
    lines = [m["line"] for m in recs if m["kind"] == "match"]
    assert sorted(lines) == sorted(["line 4 ERROR", "old 5 ERROR",
                                    *(["new 5 ERROR"] if path_too else [])]), lines
    assert "has another device number" in said, said
    assert "they are two files, so its lines from line 5 on are read too" in said, said


@pytest.mark.parametrize("new", ["other-first-bytes", "copy-moved-over"])
def test_a_new_file_at_the_path_is_still_a_rotation(tmp_path: Path, new: str) -> None:
    """The guards: the log is renamed `app.log.1` and a file that does not begin as it did is
    made at the path; or, on a local disk (inode numbers do not change under a file there), a
    copy of the log is moved over it. A `rotate` record, the new file read from its first
    line, and what the writer adds to the old one read."""
    log = tmp_path / "app.log"
    r = following(tmp_path, log)
    try:
        with open(log, "a", buffering=1) as writer:
            writer.write("line 4 ERROR\n")
            recorded(r, "line 4 ERROR")
            if new == "other-first-bytes":
                log.rename(tmp_path / "app.log.1")
                log.write_text("new 1 ERROR\n")
            else:
                shutil.copyfile(log, tmp_path / "copy")
                os.replace(tmp_path / "copy", log)
            switched(r)
            writer.write("line 5 ERROR\n")
            recorded(r, "line 5 ERROR")
        first = "new 1 ERROR" if new == "other-first-bytes" else "line 1 ERROR"
        recorded(r, first)
        recs, said = stopped(r), r.stderr()
    finally:
        r.close()
    (rotate,) = [x for x in recs if x["kind"] == "rotate"]
    assert [m["inode"] for m in recs if m.get("line") == "line 5 ERROR"] == [
        rotate["oldInode"]], recs
    assert next(m["line"] for m in recs if m["kind"] == "match"
                and m["inode"] == rotate["inode"]) == first, recs
    assert "has another" not in said, said


@pytest.mark.parametrize("original", ["deleted", "renamed-beside"])
def test_on_fuse_a_copy_moved_over_the_followed_file_is_its_generation_unless_beside(
        tmp_path: Path, original: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On FUSE, where another inode number may be the same file: a copy moved over the
    followed file is taken for it while the runner runs, also when the original is deleted
    by that (unlike at a start: its descriptor, still open, tells whether it is written to);
    not when the original was renamed beside the path, which is the generation then."""
    from watchrun.sources.remounted import went_on_at

    on_fuse(monkeypatch)
    log = tmp_path / "app.log"
    cp = three_lines(log)
    shutil.copyfile(log, tmp_path / "copy")
    if original == "renamed-beside":
        log.rename(tmp_path / "app.log.1")
    os.replace(tmp_path / "copy", log)
    found = went_on_at(log, msgspec.structs.replace(cp, deleted=original == "deleted"))
    if original == "renamed-beside":
        assert found is None
        return
    assert found is not None
    o, _ = found
    os.close(o.fd)
    assert o.st.st_ino == log.stat().st_ino != cp.inode
