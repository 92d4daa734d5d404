"""logrotate `copytruncate` + `compress`: the runner looks at the truncation while the copy's
archive is still being written (the runner frozen from the truncation until half the archive
is written; logrotate's own order of events, which a busy runner meets by itself). That
archive, every line of which had been read, was a `gap{compressed}` at once, and a second one
for the same archive once whole, at the emptied file's next write (found by an explorer,
2026-12-07: a false loss claim, an ERROR in a once run). An archive cut short is now judged
once it has not changed for rotateWait, once; one still cut short then is a gap. Its compressor
may only have paused longer than rotateWait (a busy host): the archive completed later was a
second `gap{compressed}` (found 2026-12-07); it is watched on after its gap, and not said lost
again (the log says so when it holds every line read after all), across a restart of the
runner too (it was said lost again: found 2026-12-07, explore-fresh5 F3)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config

LINE = 40


def lines(first: int, last: int) -> bytes:
    return b"".join(b"L%08d %s\n" % (i, b"x" * (LINE - 11)) for i in range(first, last + 1))


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "watchers" / "f.jsonl")


def numbers(tmp_path: Path) -> list[int]:
    return [int(r["line"][1:9]) for r in records(tmp_path) if r["kind"] == "match"]


def gaps(tmp_path: Path) -> list[tuple[str, str]]:
    return [(r["reason"], r["path"]) for r in records(tmp_path) if r["kind"] == "gap"]


def judged(tmp_path: Path, archive: Path) -> bool:
    """The checkpoint keeps the archive as it is now among those judged (the runner judged
    it, and passes over it from then on)."""
    try:
        doc = json.loads((tmp_path / ".watchrun" / "state" / "f.checkpoint.json").read_text())
    except (OSError, ValueError):
        return False
    st = archive.stat()
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns] in doc.get("archives", [])


def truncated_while_compressed(tmp_path: Path, rotate_wait: str, *, plain_copy: bool,
                               part: float, unread: bytes = b""
                               ) -> tuple[LiveRunner, Path, bytes]:
    """A runner that read lines 1-1000 of app.log is frozen; `unread` is written to the file,
    which is copied (kept as `app.log.1` while it is compressed, or sent straight to the
    compressor) and truncated, and `part` of the archive `app.log.1.gz` written; the runner
    goes on and sees the truncation. Returns the runner, the archive and the rest of it, not
    written yet."""
    log, archive = tmp_path / "app.log", tmp_path / "app.log.1.gz"
    log.write_bytes(b"")
    config = write_config(tmp_path, {"limits": {"rotateWait": rotate_wait}, "watchers": [
        {"id": "f", "path": "app.log", "pattern": "^L"}]})
    r = LiveRunner(config)
    r.wait_running()
    with log.open("ab") as f:
        f.write(lines(1, 1000))
    wait_for(lambda: len(numbers(tmp_path)) == 1000, "lines 1-1000 recorded")
    r.send(signal.SIGSTOP)
    with log.open("ab") as f:
        f.write(unread)
    whole = gzip.compress(log.read_bytes())
    if plain_copy:
        shutil.copyfile(log, tmp_path / "app.log.1")
    os.truncate(log, 0)
    cut = int(len(whole) * part)
    archive.write_bytes(whole[:cut])
    r.send(signal.SIGCONT)
    wait_for(lambda: any(x["kind"] == "rotate" for x in records(tmp_path)), "the truncation")
    return r, archive, whole[cut:]


def finish_compressing(tmp_path: Path, archive: Path, rest: bytes) -> None:
    with archive.open("ab") as f:
        f.write(rest)
    Path(tmp_path / "app.log.1").unlink(missing_ok=True)  # (gzip removes what it compressed)


def next_lines(tmp_path: Path) -> None:
    with (tmp_path / "app.log").open("ab") as f:
        f.write(lines(1001, 1010))
    wait_for(lambda: 1010 in numbers(tmp_path), "lines 1001-1010 recorded")


@pytest.mark.parametrize("plain_copy", [False, True], ids=["piped", "copy-kept-meanwhile"])
@pytest.mark.parametrize("whole", [True, False], ids=["completed", "left-cut-short"])
def test_an_archive_seen_being_written_is_judged_once_it_settles(tmp_path: Path, whole: bool,
                                                                 plain_copy: bool) -> None:
    """Completed after the look: no gap (its lines were all read), judged once it held still
    for rotateWait (2 s here, so that a loaded test host does not take that long to complete
    it: 300 ms did, and it was judged half written). Left cut short (its compressor stopped)
    with no copy beside it: one gap, once. With the plain copy beside it (gzip removes it once
    done), which is read on from where the file was read: no gap either way."""
    r, archive, rest = truncated_while_compressed(tmp_path, "2s" if whole else "300ms",
                                                  plain_copy=plain_copy, part=0.5)
    lost = not whole and not plain_copy
    try:
        if whole:
            finish_compressing(tmp_path, archive, rest)
        next_lines(tmp_path)
        wait_for(lambda: judged(tmp_path, archive), "the archive judged, live")
        with (tmp_path / "app.log").open("ab") as f:  # (a later look passes over it)
            f.write(lines(1011, 1020))
        wait_for(lambda: 1020 in numbers(tmp_path), "lines 1011-1020 recorded")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    got = numbers(tmp_path)
    assert sorted(got) == list(range(1, 1021)) == sorted(set(got))
    assert gaps(tmp_path) == ([("compressed", str(archive))] if lost else [])
    [truncation] = [x for x in records(tmp_path) if x["kind"] == "rotate"]
    assert (truncation["reason"], truncation["unreadBytes"]) == ("truncate", 0)


def written_on(tmp_path: Path, r: LiveRunner, more: bool) -> None:
    """The completed archive judged: the log's note when it holds what was read; then lines
    1011-1020 written and recorded, and the runner stopped."""
    if not more:
        r.wait_log("was completed since and holds every line read of <dir>/app.log")
    with (tmp_path / "app.log").open("ab") as f:
        f.write(lines(1011, 1020))
    wait_for(lambda: 1020 in numbers(tmp_path), "lines 1011-1020 recorded")
    assert r.stop() == 0, r.stderr()


@contextlib.contextmanager
def said_lost_half_written(tmp_path: Path, more: bool) -> Iterator[tuple[LiveRunner, Path,
                                                                         bytes]]:
    """A runner that judged an archive half written by a compressor pausing longer than
    rotateWait (one gap: all it can know), with 5 lines never read before it when `more`:
    the runner, the archive and the rest its compressor is to write. Closed at the end."""
    unread = lines(5001, 5005) if more else b""
    r, archive, rest = truncated_while_compressed(tmp_path, "300ms", plain_copy=False,
                                                  part=0.5, unread=unread)
    try:
        wait_for(lambda: judged(tmp_path, archive), "the archive judged half written")
        assert gaps(tmp_path) == [("compressed", str(archive))]
        yield r, archive, rest
    finally:
        r.close()


def said_lost_once(tmp_path: Path, r: LiveRunner, archive: Path, more: bool) -> None:
    """Every line once, the archive one gap, the note only when it held what was read."""
    assert sorted(numbers(tmp_path)) == list(range(1, 1021))
    assert gaps(tmp_path) == [("compressed", str(archive))]
    assert ("was completed since" in r.stderr()) is not more


@pytest.mark.parametrize("more", [False, True], ids=["holds-what-was-read", "holds-more"])
def test_an_archive_said_lost_while_cut_short_is_not_said_lost_again_once_completed(
        tmp_path: Path, more: bool) -> None:
    """The compressor pauses longer than rotateWait: the archive, still cut short when the
    runner judges it, is a gap then (that is all it can know). It goes on, pauses again still
    cut short, then is completed: no second gap (there was one for each change of it, the
    emptied file's next write judging it again); when it holds every line read, the log says
    nothing was lost after all. Holding lines never read (written while the runner was
    frozen), it stays the one gap, with no such note."""
    with said_lost_half_written(tmp_path, more) as (r, archive, rest):
        with archive.open("ab") as f:
            f.write(rest[: len(rest) // 2])
        next_lines(tmp_path)  # (looks for copies of the emptied file: passes over the archive)
        wait_for(lambda: judged(tmp_path, archive), "the archive judged, still cut short")
        assert gaps(tmp_path) == [("compressed", str(archive))]
        finish_compressing(tmp_path, archive, rest[len(rest) // 2 :])
        wait_for(lambda: judged(tmp_path, archive), "the completed archive judged")
        written_on(tmp_path, r, more)
    said_lost_once(tmp_path, r, archive, more)


@pytest.mark.parametrize("more", [False, True], ids=["holds-what-was-read", "holds-more"])
def test_an_archive_said_lost_is_not_said_lost_again_when_completed_across_a_restart(
        tmp_path: Path, more: bool) -> None:
    """The archive said lost while cut short; the runner is stopped (a deploy); the
    compressor completes the archive; the runner is started again and the file written on.
    The checkpoint keeps the archive watched: no second gap, and the log says when it holds
    every line read after all; holding lines never read, it stays the one gap, no note."""
    with said_lost_half_written(tmp_path, more) as (r, archive, rest):
        assert r.stop() == 0, r.stderr()
    finish_compressing(tmp_path, archive, rest)
    r = LiveRunner(tmp_path / "watch.yaml")
    try:
        r.wait_running()
        next_lines(tmp_path)  # (looks for copies of the emptied file: passes over the archive)
        wait_for(lambda: judged(tmp_path, archive), "the completed archive judged")
        written_on(tmp_path, r, more)
    finally:
        r.close()
    said_lost_once(tmp_path, r, archive, more)


def test_an_archive_whole_beside_its_copy_at_the_look_is_no_gap(tmp_path: Path) -> None:
    """gzip has written the whole archive and not yet removed the copy: the copy is found
    and read on; the archive, which holds what the copy does, is no loss (it was a gap: the
    truncated generation was not counted as read for its copy's archive)."""
    r, archive, rest = truncated_while_compressed(tmp_path, "300ms", plain_copy=True, part=1)
    try:
        assert rest == b""
        finish_compressing(tmp_path, archive, rest)
        next_lines(tmp_path)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert sorted(numbers(tmp_path)) == list(range(1, 1011))
    assert gaps(tmp_path) == []


@pytest.mark.parametrize("whole", [True, False], ids=["completed", "cut-short"])
def test_an_archive_still_waiting_at_a_stop_is_judged_then(tmp_path: Path, whole: bool) -> None:
    """The runner stops before rotateWait passed (30 s here): the archive is judged as it is
    then, not left unsaid (nor said before it could be known whole)."""
    r, archive, rest = truncated_while_compressed(tmp_path, "30s", plain_copy=False, part=0.5)
    try:
        if whole:
            finish_compressing(tmp_path, archive, rest)
        next_lines(tmp_path)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert sorted(numbers(tmp_path)) == list(range(1, 1011))
    assert gaps(tmp_path) == ([] if whole else [("compressed", str(archive))])
