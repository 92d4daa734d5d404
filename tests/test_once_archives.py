"""Nightly `run --once` runs with logrotate's daily `compress` + `delaycompress` between them,
each archive renumbered by the rotations after it (`app.log.2.gz` → `app.log.3.gz`, the same
inode): an archive of what a run read to its end is no loss under any number, and an archive
that holds lines no run read is reported once, by the run that first finds it."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from liverunner import read_records
from test_once import once, table_row

KEEP = 5
"""logrotate's `rotate 5`."""


def config(log: Path) -> dict[str, Any]:
    return {"watchers": [{"id": "app", "path": str(log), "pattern": "ERROR",
                          "gate": {"maxMatches": 100}}]}


def day(log: Path, d: int) -> None:
    """What the application writes during day `d`."""
    with log.open("a") as f:
        f.write(f"ERROR day {d} a\nERROR day {d} b\n")


def logrotate(log: Path, d: int) -> None:
    """logrotate's `daily`, `rotate 5`, `create`, `compress`, `delaycompress`, in its order:
    the archives renumbered, `.1` → `.2`, the file → `.1`, a new file (its first line written
    by the application reopening it, in `postrotate`), then `.2` compressed into `.2.gz`, a
    new file with a new mtime (newer than that first line), `.2` removed."""
    Path(f"{log}.{KEEP}.gz").unlink(missing_ok=True)
    for k in range(KEEP - 1, 1, -1):
        if Path(f"{log}.{k}.gz").exists():
            Path(f"{log}.{k}.gz").rename(f"{log}.{k + 1}.gz")
    one, two = Path(f"{log}.1"), Path(f"{log}.2")
    if one.exists():
        one.rename(two)
    log.rename(one)
    log.write_text(f"day {d} start\n")
    if two.exists():
        Path(f"{log}.2.gz").write_bytes(gzip.compress(two.read_bytes()))
        two.unlink()


def nightly(tmp_path: Path, log: Path) -> tuple[int, list[str]]:
    """The CI run right after logrotate: its exit code and its watcher's row (matches,
    threshold, exit, verdict)."""
    r = once(tmp_path, config(log))
    return r.rc, table_row(r.out, "app")[1:]


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")


def gaps(tmp_path: Path) -> list[tuple[str, str, int]]:
    return sorted((x["reason"], x["path"], x["inode"]) for x in records(tmp_path)
                  if x["kind"] == "gap")


def matched(tmp_path: Path) -> list[str]:
    return [x["line"] for x in records(tmp_path) if x["kind"] == "match"]


def errors(*days: int) -> list[str]:
    return [f"ERROR day {d} {x}" for d in days for x in "ab"]


def test_archives_of_what_was_read_are_no_loss_under_any_number(tmp_path: Path) -> None:
    """Five nightly runs, four rotations: from the fourth run on each was an ERROR (exit 3,
    "lines were never read: …app.log.3.gz was rotated and compressed before it was read"),
    and the archive already judged was reported again once renumbered. Every line was read by
    the run after its day; now every run passes and no `gap` is written."""
    log = tmp_path / "app.log"
    log.write_text("day 0 start\n")
    rows = []
    for d in range(1, 5):
        rows.append(nightly(tmp_path, log))
        day(log, d)
        logrotate(log, d)
    rows.append(nightly(tmp_path, log))
    assert rows == [(0, ["0", "100", "-", "pass"])] + [(0, ["2", "100", "-", "pass"])] * 4
    assert sorted(p.name for p in tmp_path.glob("app.log.*")) == [
        "app.log.1", "app.log.2.gz", "app.log.3.gz", "app.log.4.gz"]
    assert matched(tmp_path) == errors(1, 2, 3, 4)
    assert gaps(tmp_path) == []


def test_an_archive_of_lines_never_read_is_reported_once_whatever_its_number(
        tmp_path: Path) -> None:
    """Two nightly runs missed (a CI outage): day 2's file was compressed, then renumbered
    `app.log.3.gz`, before any run read its lines, and day 3's is `app.log.2.gz`. The next run
    is an ERROR naming both archives (day 1's, `app.log.4.gz`, was read to its end: no loss);
    the runs after it pass while those archives are renumbered again: each is judged once.
    Day 2's file, which the run before read up to its first line, is one gap: its archive."""
    log = tmp_path / "app.log"
    log.write_text("day 0 start\n")
    rows = [nightly(tmp_path, log)]
    day(log, 1)
    logrotate(log, 1)
    rows.append(nightly(tmp_path, log))
    lost = log.stat().st_ino  # day 2's file, read up to its first line
    for d in (2, 3, 4):  # no run on days 3 and 4
        day(log, d)
        logrotate(log, d)
    archives = {k: Path(f"{log}.{k}.gz").stat().st_ino for k in (2, 3, 4)}
    found = nightly(tmp_path, log)
    first = gaps(tmp_path)
    for d in (5, 6):
        day(log, d)
        logrotate(log, d)
        rows.append(nightly(tmp_path, log))
    assert rows[:2] == [(0, ["0", "100", "-", "pass"]), (0, ["2", "100", "-", "pass"])]
    assert found == (3, ["2", "100", "-", "ERROR"])
    assert first == [("compressed", f"{log}.2.gz", archives[2]),
                     ("compressed", f"{log}.3.gz", archives[3])]  # (day 2's file, once: it
    # was a `missing` gap for its inode too, the same lines counted twice)
    [day2] = [g for g in records(tmp_path) if g["kind"] == "gap" and g["inode"] == archives[3]]
    assert (day2["offset"], day2["lineNo"], day2["unreadBytes"]) == (12, 2, 0)
    assert day2["message"] == (
        f"{log}.3.gz is the generation being read (inode {lost}), rotated and compressed "
        "before it was read to its end: from line 2 (offset 12) on it was not read")
    assert rows[2:] == [(0, ["2", "100", "-", "pass"])] * 2
    assert Path(f"{log}.5.gz").stat().st_ino == archives[3]  # (renumbered twice since)
    assert gaps(tmp_path) == first
    assert matched(tmp_path) == errors(1, 4, 5, 6)


def test_an_empty_log_rotated_and_compressed_is_no_loss(tmp_path: Path) -> None:
    """A quiet service: its log was empty at the last run, then logrotate (`create`,
    `compress`, and `ifempty`, its default) made an empty archive of it. The next run was an
    ERROR (exit 3, `gap{missing}`): an archive was taken as holding what was read only when
    something had been read. An archive that holds nothing holds what a generation seen empty
    held (found by an explorer, 2026-12-06)."""
    log = tmp_path / "app.log"
    log.write_text("")
    first = nightly(tmp_path, log)
    log.rename(f"{log}.1")
    log.write_text("")
    Path(f"{log}.1.gz").write_bytes(gzip.compress(b""))
    Path(f"{log}.1").unlink()
    assert [first, nightly(tmp_path, log)] == [(0, ["0", "100", "-", "pass"])] * 2
    assert gaps(tmp_path) == []


def test_a_path_left_empty_by_a_rename_is_said_in_the_stream(tmp_path: Path) -> None:
    """logrotate's `nocreate` between two runs: the followed generation renamed, nothing made
    at the path until the app writes again. The run read `app.log.1` and its verdict was an
    ERROR, but its stream had no `error` record (there was one when the generation had been
    compressed or deleted: a consumer of the JSONL saw no problem; an explorer, 2026-12-06).
    Each such run says it now, as a start that finds nothing to read does."""
    log = tmp_path / "app.log"
    log.write_text("INFO one\n")
    assert once(tmp_path, config(log)).rc == 0
    with log.open("a") as f:
        f.write("ERROR two\n")
    log.rename(f"{log}.1")
    for run in range(2):
        r = once(tmp_path, config(log))
        assert r.rc == 3, r.out + r.err
        records = read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
        errors = [(x["code"], x["message"]) for x in records if x["kind"] == "error"]
        assert errors == [("ENOENT", f"{log} does not exist")] * (run + 1), errors
    assert [x["line"] for x in records if x["kind"] == "match"] == ["ERROR two"]
