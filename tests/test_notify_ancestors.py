"""A followed path whose directories change under it, with inotify: an ancestor renamed away and
made again, a symlinked release directory switched (a Capistrano deploy). The watch notices,
and the runner follows the new file at the path like `tail -F`."""

from __future__ import annotations

import os
import select
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config
from recordcheck import validate_records

from watchrun.notify import Notifier, Watch


def append(path: Path, *lines: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(f"{line}\n" for line in lines))


def lines(first: int, last: int) -> list[str]:
    return [f"L{i} payload" for i in range(first, last + 1)]


def inotify_watch_of(path: Path) -> tuple[Notifier, Watch]:
    """A watch of `path` whose first look is taken: a wake-up from here on is a new one."""
    notifier = Notifier(500)
    if notifier.mode != "inotify":
        notifier.close()
        pytest.skip("inotify only")
    watch = notifier.watch(path)
    watch.looking()
    return notifier, watch


def test_a_renamed_ancestor_makes_the_watch_stale_and_its_siblings_cost_nothing(
        tmp_path: Path) -> None:
    """Names coming and going beside the directories above the file's (as in /tmp) queue no
    event at all: nothing wakes the process for them. A rename of a directory two levels above
    the file's wakes the watch and marks it for re-resolving."""
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    log = tmp_path / "a" / "b" / "c" / "app.log"
    log.write_text("")
    notifier, watch = inotify_watch_of(log)
    try:
        (tmp_path / "a" / "other").mkdir()  # beside b
        (tmp_path / "a" / "b" / "note.txt").write_text("x")  # beside c
        os.rename(tmp_path / "a" / "b" / "note.txt", tmp_path / "a" / "b" / "note.old")
        (tmp_path / "a" / "b" / "note.old").unlink()
        (tmp_path / "elsewhere").mkdir()  # beside a
        assert select.select([notifier._ino.fileno()], [], [], 0)[0] == []  # (queued at once)
        assert not watch.stale
        os.rename(tmp_path / "a" / "b", tmp_path / "a" / "b-old")
        watch.wait_blocking(30)
        assert watch.stale
        watch.close()
    finally:
        notifier.close()


def test_a_watch_goes_stale_when_a_symlinked_ancestor_is_switched(tmp_path: Path) -> None:
    for release in ("v1", "v2"):
        (tmp_path / "releases" / release / "log").mkdir(parents=True)
        (tmp_path / "releases" / release / "log" / "app.log").write_text("")
    (tmp_path / "current").symlink_to("releases/v1")
    notifier, watch = inotify_watch_of(tmp_path / "current" / "log" / "app.log")
    try:
        assert not watch.stale
        (tmp_path / "current.tmp").symlink_to("releases/v2")
        os.rename(tmp_path / "current.tmp", tmp_path / "current")  # atomic, as `mv -T`
        watch.wait_blocking(30)
        assert watch.stale
        watch.close()
    finally:
        notifier.close()


def run_and_check(tmp_path: Path, path: Path, change: Callable[[LiveRunner], None],
                  expected: int) -> list[dict[str, Any]]:
    """Run the runner on `path` (lines L1..L3 in it); `change(runner)` moves things around and
    writes L4..L`expected`. Returns the records after a clean stop, each line recorded once."""
    append(path, *lines(1, 3))
    config = write_config(tmp_path, {"watchers": [
        {"id": "w", "path": str(path), "fromStart": True, "pattern": "^L"}]})
    r = LiveRunner(config)
    try:
        r.wait_log("change notification: inotify")
        wait_for(lambda: len(r.matches("w")) == 3, "the first three lines")
        change(r)
        wait_for(lambda: len(r.matches("w")) >= expected, f"{expected} lines")
    finally:
        assert r.stop() == 0, r.stderr()
    records = validate_records(r.out / "watchers" / "w.jsonl")
    assert [m["line"] for m in records if m["kind"] == "match"] == lines(1, expected)
    assert not [x for x in records if x["kind"] in ("gap", "error")]
    return records


def test_the_runner_follows_the_path_after_its_directory_is_renamed_and_made_again(
        tmp_path: Path) -> None:
    """An archiving job moves the log directory away; the application writes its open file a
    little longer, then opens its log at the configured path in a new directory."""
    (tmp_path / "p" / "log").mkdir(parents=True)
    path = tmp_path / "p" / "log" / "app.log"

    def change(r: LiveRunner) -> None:
        os.rename(tmp_path / "p", tmp_path / "p-old")
        append(tmp_path / "p-old" / "log" / "app.log", *lines(4, 5))
        wait_for(lambda: len(r.matches("w")) == 5, "the lines written to the moved file")
        (tmp_path / "p" / "log").mkdir(parents=True)
        append(path, *lines(6, 8))
        wait_for(lambda: len(r.matches("w")) == 8, "the lines of the new file at the path")
        append(path, *lines(9, 10))

    records = run_and_check(tmp_path, path, change, 10)
    rotates = [x for x in records if x["kind"] == "rotate"]
    assert [(x["inode"], x["oldInode"]) for x in rotates] == [
        (path.stat().st_ino, (tmp_path / "p-old" / "log" / "app.log").stat().st_ino)]
    assert [m["inode"] for m in records if m["kind"] == "match"] == \
        [rotates[0]["oldInode"]] * 5 + [rotates[0]["inode"]] * 5


def test_the_runner_follows_the_path_through_a_switched_release_symlink(tmp_path: Path) -> None:
    """A Capistrano deploy: the path is `current/log/app.log`, `current -> releases/v1` is
    replaced atomically by `current -> releases/v2`, whose log the new release writes."""
    for release in ("v1", "v2"):
        (tmp_path / "releases" / release / "log").mkdir(parents=True)
    (tmp_path / "current").symlink_to("releases/v1")
    path = tmp_path / "current" / "log" / "app.log"
    v2 = tmp_path / "releases" / "v2" / "log" / "app.log"

    def change(r: LiveRunner) -> None:
        append(v2, *lines(4, 5))  # the new release starts before the switch
        (tmp_path / "current.tmp").symlink_to("releases/v2")
        os.rename(tmp_path / "current.tmp", tmp_path / "current")
        wait_for(lambda: len(r.matches("w")) == 5, "the new release's first lines")
        append(path, *lines(6, 8))

    records = run_and_check(tmp_path, path, change, 8)
    v1 = tmp_path / "releases" / "v1" / "log" / "app.log"
    rotates = [x for x in records if x["kind"] == "rotate"]
    assert [(x["inode"], x["oldInode"]) for x in rotates] == [
        (v2.stat().st_ino, v1.stat().st_ino)]
