"""Which files beside a log are its rotated generations: names of a rotation scheme and the
generations the checkpoint knows, never another program's file whose name merely begins with
the log's (`app.log.pos`, `app.log.json`) nor another log's named alike but for its digits
(`worker-2.log.1` beside `worker-1.log`), end to end through `run --once` and a live runner."""

from __future__ import annotations

import gzip
import signal
from pathlib import Path

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config
from test_once import once, table_row

from watchrun.sources.rotated import rotated_name, sibling_name

OTHERS = ["app.log.pos", "app.log.json", "app.log.err", "app.log.swp"]
"""Other programs' files beside app.log: a shipper's position file, a JSON twin, an error
log, an editor's swap file."""


def gate(max_matches: int) -> dict[str, object]:
    return {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                          "gate": {"maxMatches": max_matches}}]}


def lines(folder: Path) -> list[str]:
    return [r["line"] for r in read_records(folder / ".watchrun" / "watchers" / "app.jsonl")
            if r["kind"] == "match"]


def append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


@pytest.mark.parametrize(("name", "is_generation"), [
    ("app.log.1", True), ("app.log.12.gz", True), ("app.log-20261201", True),
    ("app.log-2026120113.xz", True), ("app.log-20261201-1764547200", True),
    ("app.log.2026-12-01", True), ("app.log.2026-12-01_13-00-00", True), ("app.log.gz", True),
    ("app.log.0.bz2", True), ("app.log", False), ("app.log.pos", False),
    ("app.log.json", False), ("app.log.err", False), ("app.log.swp", False),
    ("app.log.bak", False), ("app.log.backup.gz", False), ("app.log.1.gz.tmp", False),
    ("app.logger", False), ("app.log1", False), ("app.log.", False),
])
def test_a_rotated_name_is_one_a_rotation_scheme_makes(name: str, is_generation: bool) -> None:
    assert rotated_name(name, "app.log") is is_generation


@pytest.mark.parametrize(("name", "bases", "targets", "is_generation"), [
    ("worker-1.log.2", ["worker-1.log", "worker-1.log.1"], [], True),
    ("worker-2.log.1", ["worker-1.log", "worker-1.log.1"], [], False),
    ("pod0002.log.1", ["pod0001.log", "pod0001.log.1"], [], False),
    ("pod0001.log.2", ["pod0001.log", "pod0001.log.1"], [], True),
    ("0.log.20261207-000000", ["0.log", "0.log.20261206-000000"], [], True),  # kubelet
    ("1.log.20261207-000000", ["0.log", "0.log.20261206-000000"], [], False),
    ("1.log", ["0.log", "0.log.20261206-000000"], [], False),
    ("app.log-20261202", ["app.log", "app.log-20261201"], [], True),  # dateext
    ("web2.log-20261202", ["web1.log", "web1.log-20261201"], [], False),
    # a symlinked path: between two of its link's targets, the series they count in
    ("gen-0002.log", ["app.log"], ["gen-0001.log", "gen-0003.log"], True),
    ("app-2026-12-01.log", ["app.log"], ["app-2026-11-30.log", "app-2026-12-02.log"], True),
    ("gen-0004.log", ["app.log"], ["gen-0001.log", "gen-0003.log"], False),  # not swapped to
    ("gen-0000.log", ["app.log"], ["gen-0001.log", "gen-0003.log"], False),  # older
    ("gen-0002.log", ["app.log"], ["gen-0003.log"], False),  # one target: which digits count?
    ("worker-2-0002.log", ["w1.log"], ["worker-1-0001.log", "worker-1-0003.log"], False),
])
def test_a_generations_name_is_the_logs_own_never_another_logs_numbered_alike(
        name: str, bases: list[str], targets: list[str], is_generation: bool) -> None:
    """The names a watcher's path and its checkpointed generations had (`bases`) and those its
    symlinked path pointed at (`targets`): a name equal to one of them but for its digits was a
    generation, so w1's `worker-1.log.1` made `worker-2.log.1` w1's."""
    assert sibling_name(name, bases, targets) is is_generation


def test_files_that_merely_begin_with_the_logs_name_are_never_read_as_its_generations(
        tmp_path: Path) -> None:
    """Rotated between two once runs (logrotate `create`), beside other programs' files named
    `app.log.*` and an unrelated `app.log.backup.gz`: their lines were recorded as lines of
    app.log (each after a false `rotate`), the archive made the gate an ERROR ("rotated and
    compressed before it was read"), and the files stayed followed in every later run. Now only
    app.log.1 and app.log are read."""
    log = tmp_path / "app.log"
    log.write_text("ok\n")
    for name in OTHERS:
        (tmp_path / name).write_text(f"ERROR in {name}\n")
    config = gate(2)
    assert once(tmp_path, config).rc == 0
    append(log, "ERROR gen1\n")
    log.rename(tmp_path / "app.log.1")
    log.write_text("ERROR cur\n")
    for name in OTHERS:
        append(tmp_path / name, f"ERROR more in {name}\n")
    (tmp_path / "app.log.backup.gz").write_bytes(gzip.compress(b"ERROR in a backup\n"))
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (0, ["2", "2", "-", "pass"]), r.out + r.err
    assert lines(tmp_path) == ["ERROR gen1", "ERROR cur"]
    for name in OTHERS:  # written to again, no rotation: still not app.log's lines
        append(tmp_path / name, f"ERROR still more in {name}\n")
    append(log, "ok again\n")
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (0, ["0", "2", "-", "pass"]), r.out + r.err


def test_a_generation_renamed_to_a_name_of_no_scheme_is_still_found(tmp_path: Path) -> None:
    """The file the checkpoint knows, renamed `app.log.old` between two runs with a line not
    read yet: found by its inode and read on from where the last run ended."""
    log = tmp_path / "app.log"
    log.write_text("ok\n")
    config = gate(0)
    assert once(tmp_path, config).rc == 0
    append(log, "ERROR unread\n")
    log.rename(tmp_path / "app.log.old")
    log.write_text("ok new\n")
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (1, ["1", "0", "-", "FAIL"]), r.out + r.err
    assert lines(tmp_path) == ["ERROR unread"]


def test_a_dateext_generation_rotated_while_stopped_is_read(tmp_path: Path) -> None:
    """logrotate `dateext` (`app.log-20261201`) while the runner is stopped: read oldest first."""
    log = tmp_path / "app.log"
    log.write_text("ok\n")
    config = gate(10)
    assert once(tmp_path, config).rc == 0
    append(log, "ERROR day 1\n")
    log.rename(tmp_path / "app.log-20261201")
    log.write_text("ERROR day 2\n")
    log.rename(tmp_path / "app.log-20261202")
    log.write_text("ERROR day 3\n")
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1]) == (0, "3"), r.out + r.err
    assert lines(tmp_path) == ["ERROR day 1", "ERROR day 2", "ERROR day 3"]


@pytest.mark.parametrize("away", ["stopped", "frozen"])
def test_a_live_runner_reads_no_other_file_after_a_rotation_it_did_not_see(
        tmp_path: Path, away: str) -> None:
    """Rotated while the runner was stopped (SIGTERM, then a restart) or frozen (SIGSTOP): the
    position file `app.log.pos` written meanwhile was read as a generation of app.log."""
    log, pos = tmp_path / "app.log", tmp_path / "app.log.pos"
    log.write_text("ok\n")
    pos.write_text("ERROR other-log 1\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        if away == "stopped":
            assert r.stop() == 0, r.stderr()
        else:
            r.send(signal.SIGSTOP)
        append(log, "ERROR gen1\n")
        log.rename(tmp_path / "app.log.1")
        log.write_text("ERROR cur\n")
        append(pos, "ERROR other-log 2\n")
        if away == "stopped":
            r = LiveRunner(config)
        else:
            r.send(signal.SIGCONT)
        wait_for(lambda: "ERROR cur" in lines(tmp_path), "the new file read")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert lines(tmp_path) == ["ERROR gen1", "ERROR cur"]


def test_a_watcher_never_reads_a_log_named_alike_but_for_its_digits(tmp_path: Path) -> None:
    """worker-1.log and worker-2.log, each rotated by rename: once w1 had `worker-1.log.1` in
    its checkpoint, w2's `worker-2.log.1` was taken for a generation of worker-1.log at its
    next rotation, and its line recorded by w1 too. Now each records only its own lines."""
    logs = tmp_path / "logs"
    logs.mkdir()
    one, two = logs / "worker-1.log", logs / "worker-2.log"
    one.write_text("")
    two.write_text("")
    config = write_config(tmp_path, {"limits": {"rotateWait": "0s"}, "watchers": [
        {"id": "w1", "path": str(one), "pattern": "ERROR"},
        {"id": "w2", "path": str(two), "pattern": "ERROR"}]})

    def rotate(log: Path, n: int) -> None:
        log.rename(log.with_name(f"{log.name}.{n}"))
        log.write_text("")

    def recorded(wid: str, text: str) -> None:
        wait_for(lambda: text in [m["line"] for m in r.matches(wid)], f"{text!r} for {wid}")

    r = LiveRunner(config)
    try:
        r.wait_running()
        rotate(one, 1)
        append(one, "ERROR a from worker-1\n")
        recorded("w1", "ERROR a from worker-1")
        append(two, "ERROR b from worker-2\n")
        recorded("w2", "ERROR b from worker-2")
        rotate(two, 1)
        append(two, "ERROR c from worker-2\n")
        recorded("w2", "ERROR c from worker-2")
        rotate(one, 2)
        append(one, "ERROR d from worker-1\n")
        recorded("w1", "ERROR d from worker-1")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    w1 = r.records("w1")
    assert [(m["path"], m["line"]) for m in w1 if m["kind"] == "match"] == [
        (str(one), "ERROR a from worker-1"), (str(one), "ERROR d from worker-1")]
    assert all("worker-2" not in str(rec) for rec in w1), w1
    assert [m["line"] for m in r.matches("w2")] == ["ERROR b from worker-2",
                                                    "ERROR c from worker-2"]
