"""A new watcher (a fresh output dir, or `watchrun add`) started on a log just rotated by
logrotate's `create` (`mv app.log app.log.1; : > app.log`, and the application writing the old
file once more before it reopens the new one) records only what is written to the log after it
started. The files beside the log then were taken for copytruncate copies made since (modified
after the empty log's mtime, or in its clock tick) at its first line: a `rotate{truncate}`,
every old line recorded as a new match, and a `gap` for an old archive (found by an explorer,
2026-12-07). Real runners; the mtimes are set, not waited for."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config
from msgspec.structs import replace

from watchrun.sources.checkpoint_doc import decode, encode

OLD = b"old ERROR a\nold ERROR b\n"
LATE = b"old ERROR late\n"
TICKS = {"written after it": 1_000_000_000, "in its clock tick": 0}


def just_rotated(logs: Path, after_ns: int) -> Path:
    """`logs/app.log` just made empty by a rotation: `app.log.1` holds the old lines and was
    last written `after_ns` after the new file was made; an older generation compressed
    (`compress`) in the same second. Returns the log."""
    logs.mkdir(exist_ok=True)
    log = logs / "app.log"
    log.write_bytes(OLD)
    log.rename(logs / "app.log.1")
    log.write_bytes(b"")
    made = log.stat().st_mtime_ns
    os.utime(logs / "app.log.1", ns=(made + after_ns, made + after_ns))
    (logs / "app.log.2.gz").write_bytes(gzip.compress(b"older ERROR z\n"))
    os.utime(logs / "app.log.2.gz", ns=(made, made))
    return log


def matched(r: LiveRunner, wid: str) -> list[str]:
    return [m["line"] for m in r.matches(wid)]


def kinds(r: LiveRunner, wid: str, *wanted: str) -> list[dict[str, Any]]:
    return [x for x in r.records(wid) if x["kind"] in wanted]


def late_write_gap(logs: Path) -> dict[str, Any]:
    """The `gap` for what the old file got after the watcher began: not read, said."""
    old = logs / "app.log.1"
    return {"kind": "gap", "reason": "late-write", "path": str(old),
            "inode": old.stat().st_ino, "offset": len(OLD), "unreadBytes": len(LATE)}


def after_start(log: Path, again: bool = True) -> None:
    """The application writes its old file once more (`again`), then reopens the new one and
    logs."""
    if again:
        with log.with_name("app.log.1").open("ab") as fh:
            fh.write(LATE)
    with log.open("ab") as fh:
        fh.write(b"ERROR live 1\n")


def first_start(config: Path) -> None:
    """A runner started on `config` and stopped once it runs: the first checkpoint is saved."""
    first = LiveRunner(config)
    try:
        first.wait_running()
        assert first.stop() == 0
    finally:
        first.close()


def picked(record: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    return {k: record.get(k) for k in like}


@pytest.mark.parametrize(("when", "again"), [
    *((when, again) for when in TICKS for again in (False, True)), ("before it", True)])
def test_a_new_runner_on_a_just_rotated_log_records_only_what_comes_after(
        tmp_path: Path, when: str, again: bool) -> None:
    """The old file's last write before the start came after the log was made, or in its
    clock tick, or before it; one more after the start (`again`) is not read either, and a
    `gap` says so."""
    log = just_rotated(tmp_path / "d", TICKS.get(when, -1_000_000_000))
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "d/app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        after_start(log, again)
        wait_for(lambda: "ERROR live 1" in matched(r, "app"), "the line written after the start")
        assert r.stop() == 0
    finally:
        r.close()
    assert matched(r, "app") == ["ERROR live 1"]
    assert "rotated" not in r.stderr()
    gaps = kinds(r, "app", "gap", "rotate")
    want = [late_write_gap(log.parent)] if again else []
    assert [picked(g, late_write_gap(log.parent)) for g in gaps] == want


@pytest.mark.parametrize("when", TICKS)
def test_a_restart_after_a_first_start_on_a_just_rotated_log_reads_only_what_came_since(
        tmp_path: Path, when: str) -> None:
    """The first start's checkpoint is of the empty log; written while the runner is down, the
    log is looked at again for copies made since: the old file is none of them, written once
    more meanwhile too (a `gap` says that was not read)."""
    log = just_rotated(tmp_path / "d", TICKS[when])
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "d/app.log", "pattern": "ERROR"}]})
    first_start(config)
    with log.with_name("app.log.1").open("ab") as fh:
        fh.write(LATE)
    with log.open("ab") as fh:
        fh.write(b"ERROR while down\n")
    second = LiveRunner(config)
    try:
        second.wait_running()
        wait_for(lambda: "ERROR while down" in matched(second, "app"), "the line written since")
        assert second.stop() == 0
    finally:
        second.close()
    assert matched(second, "app") == ["ERROR while down"]
    gaps = kinds(second, "app", "gap", "rotate")
    assert [picked(g, late_write_gap(log.parent)) for g in gaps] == [late_write_gap(log.parent)]
    assert "was beside the file when the watcher began" in gaps[0]["message"]


@pytest.mark.parametrize("when", TICKS)
def test_watchrun_add_on_a_just_rotated_log_records_only_what_comes_after(
        tmp_path: Path, when: str) -> None:
    (tmp_path / "other.log").write_bytes(b"")
    config = write_config(tmp_path, {"watchers": [
        {"id": "other", "path": "other.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        log = just_rotated(tmp_path / "d", TICKS[when])
        p = cli("add", "app", "--path", "d/app.log", "--pattern", "ERROR", "-c", config,
                cwd=tmp_path)
        assert p.returncode == 0, p.stderr  # (it returns once the start position is held)
        after_start(log)
        wait_for(lambda: "ERROR live 1" in matched(r, "app"), "the line written after the add")
        assert r.stop() == 0
    finally:
        r.close()
    assert matched(r, "app") == ["ERROR live 1"]
    gaps = kinds(r, "app", "gap", "rotate")
    assert [picked(g, late_write_gap(log.parent)) for g in gaps] == [late_write_gap(log.parent)]


def test_a_copy_made_over_a_file_beside_the_log_while_the_runner_was_down_is_read(
        tmp_path: Path) -> None:
    """What a first start knows of a file beside the log is what it held: copied over in
    place while the runner is down (`cp app.log app.log.1` keeps app.log.1's inode), then the
    log truncated (copytruncate), it holds lines written since, read from the copy; the other
    old file, untouched, is still not read."""
    log = just_rotated(tmp_path / "d", 0)
    older = log.with_name("app.log.2")
    older.write_bytes(b"older ERROR y\n")
    made = log.stat().st_mtime_ns
    os.utime(older, ns=(made, made))
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "d/app.log", "pattern": "ERROR"}]})
    first_start(config)
    copy = log.with_name("app.log.1")
    inode = copy.stat().st_ino
    log.write_bytes(b"ERROR copied\n")
    with copy.open("r+b") as fh:  # (as cp writes over a file: same inode, truncated)
        fh.truncate(0)
        fh.write(log.read_bytes())
    os.truncate(log, 0)
    log.write_bytes(b"ERROR after\n")
    assert copy.stat().st_ino == inode
    second = LiveRunner(config)
    try:
        second.wait_running()
        wait_for(lambda: "ERROR after" in matched(second, "app"), "the line written last")
        assert second.stop() == 0
    finally:
        second.close()
    assert matched(second, "app") == ["ERROR copied", "ERROR after"]
    assert [x["reason"] for x in kinds(second, "app", "gap", "rotate")] == ["truncate"]



def test_a_checkpoint_says_which_files_were_beside_and_an_older_one_still_loads() -> None:
    """`beside` is an optional field of a generation (still version 2): an older runner's
    checkpoint, without it, loads with none beside; an older runner reading this one takes
    them for generations read to their end (passed over as well)."""
    text = ('{"version":2,"seq":4,"generations":[{"dev":1,"inode":2,"fingerprint":"ab",'
            '"fingerprintLen":0,"offset":0,"lineNo":1,"path":"/l/app.log","finished":true}]}')
    old = decode(text)
    assert old.current.beside is False
    marked = replace(old, generations=(replace(old.current, beside=True),))
    assert decode(encode(marked).decode()).current.beside is True


def test_a_file_beside_the_log_that_comes_to_its_path_is_read_as_a_new_file_is(
        tmp_path: Path) -> None:
    """`current.log`, a symlink to app-1.log, swapped to app-2.log that was beside it when the
    watcher began: app-2.log is read from its first line (as any file that comes to the path,
    `tail -F`), not from where it ended then. Swapped back, read to its end and released, then
    written to: one `gap` for what came after the release (not a second one, from its size at
    the start, for lines that were read)."""
    one, two, link = tmp_path / "app-1.log", tmp_path / "app-2.log", tmp_path / "current.log"
    one.write_bytes(b"")
    two.write_bytes(b"ERROR two\n")
    link.symlink_to(one.name)
    config = write_config(tmp_path, {"limits": {"rotateWait": "200ms"}, "watchers": [
        {"id": "app", "path": "current.log", "pattern": "ERROR"}]})

    def swap(to: Path) -> None:
        (tmp_path / "next.log").symlink_to(to.name)
        os.replace(tmp_path / "next.log", link)

    def released() -> bool:
        state = json.loads((tmp_path / ".watchrun/state/app.checkpoint.json").read_text())
        return any(g["inode"] == two.stat().st_ino and g["finished"] and not g["beside"]
                   for g in state["generations"])

    r = LiveRunner(config)
    try:
        r.wait_running()
        swap(two)
        with two.open("ab") as fh:
            fh.write(b"ERROR three\n")
        wait_for(lambda: "ERROR three" in matched(r, "app"), "app-2.log read")
        swap(one)
        with one.open("ab") as fh:
            fh.write(b"ERROR four\n")
        wait_for(lambda: "ERROR four" in matched(r, "app"), "app-1.log read again")
        wait_for(released, "app-2.log released")
        assert r.stop() == 0
    finally:
        r.close()
    assert matched(r, "app") == ["ERROR two", "ERROR three", "ERROR four"]
    with two.open("ab") as fh:
        fh.write(LATE)
    again = LiveRunner(config)
    try:
        again.wait_running()
        assert again.stop() == 0
    finally:
        again.close()
    gaps = kinds(again, "app", "gap")
    assert [(g["reason"], g["path"], g["unreadBytes"]) for g in gaps] == [
        ("late-write", str(two), len(LATE))]
    assert "was released at offset 22 after it had not grown" in gaps[0]["message"]


def test_more_files_beside_a_new_runners_log_than_it_knows_by_content_are_not_read_either(
        tmp_path: Path) -> None:
    """70 rotated files modified in the clock tick of the empty log (a log directory copied
    whole, say): the newest 64 are known by their bytes, the others by device, inode, size and
    mtime; none is read at the log's first line."""
    logs = tmp_path / "d"
    logs.mkdir()
    log = logs / "app.log"
    log.write_bytes(b"")
    made = log.stat().st_mtime_ns
    for n in range(1, 71):
        old = logs / f"app.log.{n}"
        old.write_bytes(b"old ERROR %d\n" % n)
        os.utime(old, ns=(made, made))
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "d/app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        after_start(log, again=False)
        wait_for(lambda: "ERROR live 1" in matched(r, "app"), "the line written after the start")
        assert r.stop() == 0
    finally:
        r.close()
    assert matched(r, "app") == ["ERROR live 1"]
    assert kinds(r, "app", "gap", "rotate") == []
