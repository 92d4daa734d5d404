"""`run --once` fails closed where it could not look at every line: a generation it could not
read, a file cut short or rewritten, lines cut at maxLineBytes or not matched in time, UTF-16,
output never closed, matches a killed run recorded but no verdict judged."""

from __future__ import annotations

import asyncio
import bz2
import errno
import gzip
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filehelpers import Recorder, Tail
from liverunner import read_records, wait_for, watchrun_bin, write_config
from recordcheck import record_errors, validate_records
from test_once import (
    TIMEOUT_S,
    base_env,
    gated,
    once,
    read_then_rotated_past_one_generation,
    rotated_by_rename,
    table_row,
)

from watchrun.config.model import GateSpec, WatcherSpec
from watchrun.events import Chunk
from watchrun.notify import Notifier
from watchrun.runtime.counters import unread
from watchrun.runtime.gate import Evidence, Status, cut_note, judge
from watchrun.sources.checkpoints import CheckpointStore


def test_a_generation_it_could_not_read_fails_the_gate_closed(tmp_path: Path) -> None:
    """Rotated three times between two runs with `maxGenerations: 1`: the generation between is
    skipped (a `gap` record), and the only forbidden line was in it. The gate passed (exit 0,
    "all 1 gates hold") on lines it never read; now the watcher is an ERROR naming the gap."""
    _, config = read_then_rotated_past_one_generation(
        tmp_path, "INFO 0", ["INFO 1", "ERROR 2", "INFO 3"], max_matches=0)
    r = once(tmp_path, config, "--junit", "report.xml")
    assert (r.rc, table_row(r.out, "log")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    why = ("8 bytes were never read: 1 older unread generations skipped "
           "(limits.maxGenerations=1): app.log.2")
    assert f"  - {why}\n" in r.out and f"[log] error: {why}\n" in r.err
    error = ET.parse(tmp_path / "report.xml").getroot().find("testcase[@name='log']/error")
    assert error is not None and error.get("message") == why
    assert once(tmp_path, config).rc == 0  # said once: the next run reads on from there


def _enveloped(fields: dict[str, Any]) -> dict[str, Any]:
    """An `error` record's fields as the sink writes them, envelope and all."""
    return {"schema": 1, "seq": 2, "cursor": "w:0000000000000002",
            "ts": "2026-12-04T08:00:00.000Z", "kind": "error", **fields}


def _judged_error(log: Path, error: dict[str, Any]) -> str | None:
    """The reason an `error` record gives a gated watcher's verdict, checked to be an ERROR
    with that reason alone (and the record to be as the published schema has it)."""
    assert record_errors(_enveloped(error)) == []
    why = unread("error", error)
    spec = WatcherSpec(id="log", label="log", pattern="ERROR", path=log,
                       gate=GateSpec(max_matches=0))
    verdict = judge(spec, Evidence(0, error=why))
    assert verdict is not None and verdict.status is Status.ERROR and verdict.reasons == (why,)
    return why


class TruncatesAtFirstChunk(Recorder):
    """A recorder that truncates the file being read as its first chunk arrives (what a
    `copytruncate` or a `> app.log` does while a once run reads it)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    async def chunk(self, chunk: Chunk) -> None:
        if not self.chunks:
            os.truncate(self.path, 0)
        await super().chunk(chunk)


def test_a_file_truncated_while_a_once_run_reads_it_is_not_read_to_its_end(
        tmp_path: Path) -> None:
    """The once read stopped at the truncation and ended as if it had read the file to its
    end: the lines after the cut (here the only ERROR) were never matched, nothing said so,
    and the gate passed. Now an `error{code: cut-short}` names the bytes not read, and the
    verdict is an ERROR."""
    log = tmp_path / "app.log"
    log.write_text("".join(f"INFO {n}\n" for n in range(100)) + "ERROR late\n")
    size = log.stat().st_size
    rec = TruncatesAtFirstChunk(log)

    async def main() -> None:
        async with Tail(log, Notifier(20, enabled=False), CheckpointStore(tmp_path / "state"),
                        from_start=True, once=True, rec=rec, read_size=64) as tail:
            await tail.until(lambda: tail.task is not None and tail.task.done(), "the read")

    asyncio.run(main())
    assert "ERROR late" not in rec.texts()
    (error,) = rec.of("error")
    read = 64  # one read of `read_size`, then the truncation
    assert error == {"code": "cut-short", "path": str(log), "unreadBytes": size - read,
                     "message": f"{log} was truncated while it was read: {size - read} of its "
                                f"{size} bytes were not read"}
    assert _judged_error(log, error) == f"{size - read} bytes were never read: {error['message']}"


def test_a_read_that_fails_mid_file_is_an_error_naming_the_file_and_what_was_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO from a failing disk after the first read of a once run: the watcher died with an
    `internal` error `OSError(5, 'Input/output error')`, naming neither the file nor what was
    lost. Now an `error` record with the errno's name, the path and `unreadBytes`, and the
    verdict an ERROR that says so. (The seam: `os.pread` fails for this file's bytes past its
    start; a read at its end, which reads no block, returns nothing.)"""
    log = tmp_path / "app.log"
    log.write_text("".join(f"INFO {n}\n" for n in range(100)) + "ERROR late\n")
    size, real = log.stat().st_size, os.pread

    def failing(fd: int, n: int, offset: int) -> bytes:
        if 64 <= offset < size and os.path.samestat(os.fstat(fd), log.stat()):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, n, offset)

    async def once_run(rec: Recorder) -> None:
        async with Tail(log, Notifier(20, enabled=False), CheckpointStore(tmp_path / "state"),
                        once=True, rec=rec, read_size=64) as tail:
            await tail.until(lambda: tail.task is not None and tail.task.done(), "the read")
            assert tail.task is not None and tail.task.exception() is None

    rec, again = Recorder(), Recorder()
    monkeypatch.setattr(os, "pread", failing)
    asyncio.run(once_run(rec))
    monkeypatch.undo()
    asyncio.run(once_run(again))  # the disk answers again: the next run reads the rest
    assert "ERROR late" in again.texts() and "INFO 0" not in again.texts()
    assert "ERROR late" not in rec.texts() and not again.of("error")
    (error,) = rec.of("error")
    lost = size - 64
    assert error == {"code": "EIO", "path": str(log), "unread": True, "offset": 64,
                     "unreadBytes": lost,
                     "message": f"cannot read {log} from offset 64 on: Input/output error: "
                                f"{lost} of its {size} bytes were not read"}
    assert _judged_error(log, error) == f"lines were never read: {error['message']}"


def test_a_gate_that_held_on_lines_it_matched_only_in_part_is_not_a_pass(tmp_path: Path) -> None:
    """A 70 000-byte line whose ERROR lies past `maxLineBytes` (64 KiB) was matched on its first
    64 KiB only, and the gate passed on the rest unseen. Now a gate that held over cut lines is
    an ERROR saying how to look at all of it (headed "could not look at every line", not
    "could not run": it ran); one crossed anyway stays FAIL."""
    (tmp_path / "app.log").write_text("x" * 70_000 + " ERROR at the end\nINFO fine\n")
    (tmp_path / "b.log").write_text("ERROR early " + "x" * 70_000 + "\n")
    r = once(tmp_path, {"watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}},
        {"id": "b", "path": "b.log", "pattern": "ERROR", "gate": {"maxMatches": 0}},
        {"id": "free", "path": "app.log", "pattern": "ERROR"}]}, "--junit", "report.xml")
    assert r.rc == 3, r.out + r.err
    assert table_row(r.out, "log")[1:] == ["0", "0", "-", "ERROR"], r.out
    assert table_row(r.out, "b")[1:] == ["1", "0", "-", "FAIL"], r.out
    assert not [ln for ln in r.out.splitlines() if ln.startswith("free ")]  # no gate, no verdict
    why = ("1 line was longer than limits.maxLineBytes (65536): only its first 65536 bytes "
           "were matched (raise limits.maxLineBytes, up to 16MiB, to look at all of it)")
    assert f"\nlog: could not look at every line\n  - {why}\n" in r.out
    assert f"[log] error: {why}\n" in r.err
    assert r.out.splitlines()[-1] == \
        "watchrun: FAILED: 1 of 2 gates crossed, 1 watcher could not look at every line"
    error = ET.parse(tmp_path / "report.xml").getroot().find("testcase[@name='log']/error")
    assert error is not None and error.get("message") == why
    assert error.text == f"could not look at every line\n{why}"
    bigger = once(tmp_path, {"limits": {"maxLineBytes": "128KiB"}, "watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR", "fromStart": True,
         "gate": {"maxMatches": 0}}]})
    assert table_row(bigger.out, "log")[1:] == ["1", "0", "-", "FAIL"], bigger.out + bigger.err


def test_a_cut_line_does_not_hold_up_a_gate_no_line_can_change(tmp_path: Path) -> None:
    """A build that printed one line over 64 KiB (minified, base64) and exited 0 was an ERROR,
    "could not run" (exit 3), under a gate of `exitCode` alone, which no line can cross. The cut
    matters to the gates that read lines only."""
    long_line = "head -c 100000 /dev/zero | tr '\\000' a; echo"
    r = once(tmp_path, {"watchers": [
        {"id": "ec", "command": f"{long_line}; exit 0", "pattern": "ERROR",
         "gate": {"exitCode": True}},
        {"id": "mm", "command": f"{long_line}; exit 0", "pattern": "ERROR",
         "gate": {"exitCode": True, "maxMatches": 0}}]}, "--quiet")
    assert table_row(r.out, "ec")[1:] == ["0", "-", "0", "pass"], r.out + r.err
    assert table_row(r.out, "mm")[1:] == ["0", "0", "0", "ERROR"], r.out + r.err
    assert r.rc == 3
    alone = once(tmp_path, {"watchers": [
        {"id": "ec", "command": f"{long_line}; exit 0", "pattern": "ERROR",
         "gate": {"exitCode": True}}]}, "--quiet")
    assert alone.rc == 0, alone.out + alone.err


def test_a_crlf_line_of_exactly_max_line_bytes_is_not_a_cut_line(tmp_path: Path) -> None:
    """The CR of a CRLF ending was counted as a byte cut from a line of exactly `maxLineBytes`:
    the line was marked `truncated` and a gate that held was an ERROR (exit 3)."""
    (tmp_path / "app.log").write_bytes(b"ERROR " + b"x" * 250 + b"\r\nINFO ok\r\n")
    r = once(tmp_path, {"limits": {"maxLineBytes": 256}, "watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 1}}]})
    assert (r.rc, table_row(r.out, "log")[1:]) == (0, ["1", "1", "-", "pass"]), r.out + r.err
    (match,) = [m for m in read_records(tmp_path / ".watchrun/watchers/log.jsonl")
                if m["kind"] == "match"]
    assert match["line"] == "ERROR " + "x" * 250 and "truncated" not in match, match


def test_a_line_the_pattern_could_not_match_in_time_fails_the_gate_closed(
        tmp_path: Path) -> None:
    """`backtracking: true` skips a line not matched within 250 ms (`error{regex-timeout}`):
    the gate passed (exit 0) on a line it never decided. Now the watcher is an ERROR."""
    (tmp_path / "app.log").write_text("a" * 40 + "!ERROR\n")
    r = once(tmp_path, {"watchers": [{"id": "log", "path": "app.log", "backtracking": True,
                                      "pattern": "^(a|aa)+(?=x)ERROR",
                                      "gate": {"maxMatches": 0}}]})
    assert (r.rc, table_row(r.out, "log")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    why = ("a line was never matched: line 1 was not matched within 250 ms; skipped (the "
           "pattern backtracks on it)")
    assert f"  - {why}\n" in r.out and f"[log] error: {why}\n" in r.err


def test_matches_a_killed_run_recorded_but_never_judged_count_in_the_next_run(
        tmp_path: Path) -> None:
    """A once run SIGKILLed (a CI timeout) after recording a match and before saving its
    checkpoint or giving a verdict (injected: the checkpoint of the run before is put back and
    the stream ends at the match, with no `stop` record). The re-run skipped that line as
    already recorded, so no run ever judged it: exit 0. Now it counts toward the gate (and is
    not recorded twice)."""
    log, out = tmp_path / "app.log", tmp_path / ".watchrun"
    config = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    log.write_text("INFO 1\n")
    assert once(tmp_path, config).rc == 0
    lagging = (out / "state" / "app.checkpoint.json").read_bytes()
    with open(log, "a") as fh:
        fh.write("ERROR 2\nINFO 3\n")
    assert once(tmp_path, config).rc == 1
    (out / "state" / "app.checkpoint.json").write_bytes(lagging)
    jsonl = out / "watchers" / "app.jsonl"
    lines = jsonl.read_bytes().splitlines(keepends=True)
    assert b'"kind":"stop"' in lines[-1] and b'"kind":"match"' in lines[-2]
    jsonl.write_bytes(b"".join(lines[:-1]))  # killed right after the match was written
    third = once(tmp_path, config)
    assert third.rc == 1, third.out + third.err
    assert table_row(third.out, "app")[1:] == ["1", "0", "-", "FAIL"], third.out
    assert "app.log:2: ERROR 2" in third.out
    records = [r for r in read_records(jsonl) if r["kind"] == "match"]
    assert [r["line"] for r in records] == ["ERROR 2"]  # not recorded again


def killed_once_run(folder: Path, config: dict[str, Any], ready: Callable[[], bool]) -> None:
    """`run --once` started, then SIGKILLed (a CI timeout) with its whole group once `ready`."""
    cfg = write_config(folder, config)
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "--quiet", "-c", str(cfg)],
                            cwd=folder,
                            env=base_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(ready, "the run to get that far")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT_S)


def test_matches_of_a_killed_run_count_in_the_next_even_behind_its_checkpoint(
        tmp_path: Path) -> None:
    """A once run waits for its actions and woken agents before its verdict; its file watchers
    have read to their end and saved their checkpoints past the matches meanwhile. SIGKILLed
    then (a CI timeout), the re-run found no record past the checkpoint, so no run ever judged
    the match: exit 0. Every match the killed run recorded counts in the next run's gate."""
    log, out = tmp_path / "app.log", tmp_path / ".watchrun"
    log.write_text("ok\nERROR one\nok\n")
    fired = tmp_path / "fired"
    action = {"type": "exec", "command": ["sh", "-c", f"touch {fired}; exec sleep 60"],
              "timeout": "1m"}
    watcher = {"id": "app", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}
    checkpoint = out / "state" / "app.checkpoint.json"

    def past_the_match() -> bool:
        saved = json.loads(checkpoint.read_text()) if checkpoint.exists() else {}
        return fired.exists() and any(g["offset"] == log.stat().st_size
                                      for g in saved.get("generations", []))
    killed_once_run(tmp_path, {"watchers": [{**watcher, "actions": [action]}]}, past_the_match)
    jsonl = out / "watchers" / "app.jsonl"
    assert [r["kind"] for r in read_records(jsonl)][-1] != "stop"  # (no verdict was given)
    again = once(tmp_path, {"watchers": [watcher]})
    assert again.rc == 1, again.out + again.err
    assert table_row(again.out, "app")[1:] == ["1", "0", "-", "FAIL"], again.out
    assert "app.log:2: ERROR one" in again.out
    assert [r["line"] for r in read_records(jsonl) if r["kind"] == "match"] == ["ERROR one"]


def test_matches_of_a_killed_run_rotated_away_before_they_were_counted_fail_closed(
        tmp_path: Path) -> None:
    """The JSONL of a once run SIGKILLed before its verdict rotated (`output.maxBytes`) and its
    oldest files were removed (`keep: 1`): the next run counted the matches of the files left
    and passed on a gate the lost ones had crossed. It cannot count them: an ERROR (exit 3)
    that says why, and the matches it could count are still counted."""
    log, out = tmp_path / "app.log", tmp_path / ".watchrun"
    log.write_text("".join(f"ERROR {i} {'x' * 100}\n" for i in range(2000)))
    fired = tmp_path / "fired"
    action = {"type": "exec", "command": ["sh", "-c", f"touch {fired}; exec sleep 60"],
              "timeout": "1m", "when": {"threshold": "2000 in 1h"}}
    watcher = {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": False,
               "gate": {"maxMatches": 1999}}
    output = {"maxBytes": "64KiB", "keep": 1}
    jsonl = out / "watchers" / "app.jsonl"
    killed_once_run(tmp_path, {"output": output, "watchers": [{**watcher, "actions": [action]}]},
                    fired.exists)
    kept = [r for r in read_records(jsonl.with_name("app.jsonl.1")) + read_records(jsonl)]
    assert kept[0]["kind"] != "start" and kept[-1]["kind"] != "stop"  # (the fault is there)
    counted = sum(r["kind"] == "match" for r in kept)
    assert 0 < counted < 2000
    again = once(tmp_path, {"output": output, "watchers": [watcher]})
    assert again.rc == 3, again.out + again.err
    assert table_row(again.out, "app")[1:] == [str(counted), "1999", "-", "ERROR"], again.out
    why = ("the run before this one did not end by itself (killed, or interrupted by a signal), "
           "and the first of its records were rotated away (output.keep) before they could be "
           f"counted: {counted} of its "
           "matches are counted, the others are not known")
    assert f"  - matches were never counted: {why}\n" in again.out
    assert f"[app] error: matches were never counted: {why}\n" in again.err


@pytest.mark.parametrize("how", ["truncated", "replaced"])
def test_a_log_rewritten_the_same_between_two_runs_is_judged_again(
        tmp_path: Path, how: str) -> None:
    """A re-run of a failed build on the same checkout writes the same `build.log` again
    (`make > build.log`: same inode, same bytes). The checkpoint's fingerprints matched, so the
    run took it for the file it had read, with nothing new: exit 0 on the same warning. A file
    written since (its mtime moved) that did not grow past the checkpoint was rewritten: it is
    read whole. An untouched one is not read again. "replaced": a tool that writes a new file
    and renames it over the log (another inode number, the same bytes): on a local disk another
    file, read whole, and the one read before is gone — what it held past the checkpoint is not
    known, so the run could not look at every line (FAIL+ERROR, exit 3), never a pass."""
    log = tmp_path / "build.log"
    config = {"watchers": [{"id": "log", "path": "build.log", "pattern": "warning:",
                            "gate": {"maxMatches": 0}}]}
    text = "cc a.c\na.c:1: warning: unused x\n"
    log.write_text(text)
    assert once(tmp_path, config).rc == 1
    before = log.stat()
    if how == "truncated":
        with open(log, "r+") as fh:  # what `>` does: truncate the same inode, write it again
            fh.truncate(0)
            fh.write(text)
    else:
        (tmp_path / "build.log.new").write_text(text)
        os.replace(tmp_path / "build.log.new", log)
    assert log.stat().st_mtime_ns != before.st_mtime_ns
    assert (log.stat().st_ino == before.st_ino) is (how == "truncated")
    again = once(tmp_path, config)
    assert again.rc == (1 if how == "truncated" else 3), again.out + again.err
    assert table_row(again.out, "log")[1:] == [
        "1", "0", "-", "FAIL" if how == "truncated" else "FAIL+ERROR"], again.out
    untouched = once(tmp_path, config)
    assert (untouched.rc, table_row(untouched.out, "log")[1]) == (0, "0"), untouched.out


def error_codes(folder: Path, wid: str) -> list[str]:
    """The `code` of each `error` record of watcher `wid` (in `folder`'s `.watchrun`)."""
    return [r["code"] for r in read_records(folder / ".watchrun" / "watchers" / f"{wid}.jsonl")
            if r["kind"] == "error"]


def test_a_utf16_log_is_not_a_pass(tmp_path: Path) -> None:
    """A log written as UTF-16 (Windows PowerShell's `>`: a byte order mark, then two bytes a
    character) never matches a UTF-8 pattern: "ERROR" is `E\\0R\\0R\\0O\\0R\\0` in it, and the gate
    passed on a file it could not read. Now the watcher is an ERROR that says how to convert it."""
    (tmp_path / "b.log").write_bytes("\ufeffbuild\r\nERROR: failed\r\n".encode("utf-16-le"))
    r = once(tmp_path, {"watchers": [{"id": "log", "path": "b.log", "pattern": "ERROR",
                                      "gate": {"maxMatches": 0}}]})
    assert (r.rc, table_row(r.out, "log")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    why = (f"lines were never read: {tmp_path}/b.log is UTF-16 (it starts with a byte order "
           "mark); watchrun reads UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)")
    assert f"  - {why}\n" in r.out, r.out
    assert error_codes(tmp_path, "log") == ["not-utf8"]  # (docs/records.md's `error` codes)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_a_utf16_log_without_a_byte_order_mark_is_not_a_pass(tmp_path: Path, codec: str) -> None:
    """UTF-16 without a byte order mark (written by a tool that leaves it out) passed the gate
    unread: only a file that starts with a mark was an ERROR. A start whose letters each have
    a NUL beside them is UTF-16 too now; a UTF-8 log that begins with a hole of NULs (a crash)
    is not taken for it."""
    (tmp_path / "b.log").write_bytes("ok\nERROR in utf16\n".encode(codec))
    (tmp_path / "hole.log").write_bytes(b"\0" * 300 + b"ok\nall good\n")
    r = once(tmp_path, {"watchers": [
        {"id": "log", "path": "b.log", "pattern": "ERROR", "gate": {"maxMatches": 0}},
        {"id": "hole", "path": "hole.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    assert r.rc == 3, r.out + r.err
    assert table_row(r.out, "log")[1:] == ["0", "0", "-", "ERROR"], r.out
    assert table_row(r.out, "hole")[1:] == ["0", "0", "-", "pass"], r.out
    why = (f"lines were never read: {tmp_path}/b.log is UTF-16 (a NUL beside each letter of its "
           "first line, no byte order mark); watchrun reads UTF-8: convert it first (iconv -f "
           "UTF-16LE -t UTF-8, or UTF-16BE)")
    assert f"  - {why}\n" in r.out, r.out
    assert (error_codes(tmp_path, "log"), error_codes(tmp_path, "hole")) == (["not-utf8"], [])


@pytest.mark.parametrize(("codec", "bom", "how"), [
    ("utf-32-be", True, "it starts with a byte order mark"),
    ("utf-32-le", True, "it starts with a byte order mark"),
    ("utf-32-le", False, "NULs beside each character"),
    ("utf-32-be", False, "NULs beside each character")], ids=["be-bom", "le-bom", "le", "be"])
def test_a_utf32_log_is_not_a_pass(tmp_path: Path, codec: str, bom: bool, how: str) -> None:
    """A log in UTF-32 (.NET's `Encoding.UTF32`) with an ERROR in it passed the gate (exit 0,
    "the 1 gate holds"): three NULs beside each letter are no UTF-16, and its LE byte order
    mark was taken for UTF-16's, with advice (`iconv -f UTF-16`) that leaves it unreadable.
    Now it is an ERROR that names UTF-32 and its iconv."""
    text = "".join(f"INFO step {i}\r\n" for i in range(5)) + "ERROR deploy failed\r\n"
    (tmp_path / "b.log").write_bytes((("\ufeff" if bom else "") + text).encode(codec))
    r = once(tmp_path, {"watchers": [{"id": "log", "path": "b.log", "pattern": "ERROR",
                                      "gate": {"maxMatches": 0}}]})
    assert (r.rc, table_row(r.out, "log")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    advice = "iconv -f UTF-32 -t UTF-8" if bom else "iconv -f UTF-32LE -t UTF-8, or UTF-32BE"
    (said,) = [x for x in r.out.splitlines() if "lines were never read" in x]
    assert said.startswith(f"  - lines were never read: {tmp_path}/b.log is UTF-32 ({how}"), said
    assert said.endswith(f"watchrun reads UTF-8: convert it first ({advice})"), said
    assert error_codes(tmp_path, "log") == ["not-utf8"]


@pytest.mark.parametrize("via", ["printed", "zcat"])
def test_a_commands_utf16_output_is_not_a_pass(tmp_path: Path, via: str) -> None:
    """The same UTF-16 as a command's output (a program that prints it; `zcat` of a compressed
    PowerShell log, as the README advises for a compressed one) passed the gate (exit 0): only
    a file's first bytes were looked at. Now the run's first bytes are too: an ERROR, as for the
    file, and the line that could not match is said."""
    text = "\ufeffbuild\r\nERROR: failed\r\n".encode("utf-16-le")
    (tmp_path / "ps.log.gz").write_bytes(gzip.compress(text))
    printer = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({text!r})"]
    command = printer if via == "printed" else ["zcat", "ps.log.gz"]
    r = once(tmp_path, {"watchers": [{"id": "cmd", "command": command, "pattern": "ERROR",
                                      "gate": {"maxMatches": 0}}]})
    assert (r.rc, table_row(r.out, "cmd")[1:]) == (3, ["0", "0", "0", "ERROR"]), r.out + r.err
    why = ("lines were never read: run 1: the command's output is UTF-16 (it starts with a byte "
           "order mark); watchrun reads UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)")
    assert f"  - {why}\n" in r.out, r.out
    assert error_codes(tmp_path, "cmd") == ["not-utf8"]
    utf8 = once(tmp_path, {"watchers": [{"id": "cmd", "command": [
        sys.executable, "-c", "print('\\ufeffbuild'); print('all good')"], "pattern": "ERROR",
        "gate": {"maxMatches": 0}}]})  # (a UTF-8 byte order mark is no UTF-16)
    assert (utf8.rc, error_codes(tmp_path, "cmd")) == (0, ["not-utf8"]), utf8.out + utf8.err


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_a_compressed_log_is_not_a_pass(tmp_path: Path, compress: Callable[[bytes], bytes]
                                        ) -> None:
    """`path: build.log.gz`: no text pattern matches compressed bytes, and the gate passed
    (exit 0, no warning) on a log with an ERROR in it. Now the watcher is an ERROR that says
    to watch a command that decompresses it, which matches."""
    (tmp_path / "b.log.gz").write_bytes(compress(b"build\nERROR: failed\n"))
    r = once(tmp_path, {"watchers": [{"id": "log", "path": "b.log.gz", "pattern": "ERROR",
                                      "gate": {"maxMatches": 0}}]})
    # (xz keeps so short a text as it is: its ERROR matches, a gate crossed beside the ERROR)
    crossed = compress is lzma.compress
    assert (r.rc, table_row(r.out, "log")[-1]) == (3, "FAIL+ERROR" if crossed else "ERROR"), \
        r.out + r.err
    why = (f"lines were never read: {tmp_path}/b.log.gz is compressed; watchrun reads text: "
           "watch a command that decompresses it instead (`command: [zcat, FILE]`, or xzcat, "
           "bzcat, zstdcat)")
    assert f"  - {why}\n" in r.out, r.out
    assert error_codes(tmp_path, "log") == ["compressed"]
    tool = {gzip.compress: "zcat", bz2.compress: "bzcat", lzma.compress: "xzcat"}[compress]
    if shutil.which(tool):
        ok = once(tmp_path, {"watchers": [{"id": "log", "command": [tool, "b.log.gz"],
                                           "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
        assert (ok.rc, table_row(ok.out, "log")[1:]) == (1, ["1", "0", "0", "FAIL"]), ok.out


def test_a_background_process_stopped_while_it_held_the_output_is_no_pass(
        tmp_path: Path) -> None:
    """A script started a shard with `&` and exited without `wait`: the runner stopped the
    shard, which still held the output, after the drain (`output-held-open`), and the gate
    passed (exit 0) on output whose failure line was never written. Now it is an ERROR, headed
    "could not look at every line" (it said "could not run" of a command that ran)."""
    r = once(tmp_path, {"limits": {"stopTimeout": "100ms"}, "watchers": [
        gated("late", "(sleep 7731; echo ERROR late; exit 1) & echo early", "ERROR",
              maxMatches=0, exitCode=True)]}, "--junit", "report.xml")
    assert (r.rc, table_row(r.out, "late")[1:]) == (3, ["0", "0", "0", "ERROR"]), r.out + r.err
    assert "\nlate: could not look at every line\n" in r.out, r.out
    assert "watchrun: FAILED: 1 watcher could not look at every line" in r.out
    error = ET.parse(tmp_path / "report.xml").getroot().find("testcase[@name='late']/error")
    assert error is not None and (error.text or "").startswith("could not look at every line\n")
    assert ("  - the command's output was cut short (what the processes it left running would "
            "still have written was never read): run 1: the command exited but 2 processes it "
            "started kept its output open for 0.5s; stopped them") in r.out, r.out  # (sh, sleep)


def test_a_command_output_never_closed_is_not_read_to_its_end_and_no_pass(
        tmp_path: Path) -> None:
    """The command hands its stdout to a process outside its tree (over a unix socket, as a
    multiplexing client hands it to its master) and exits 0. The runner stops the tree, waits,
    and stops reading the still-open output (`error{output-held-open}`): the gate passed on
    output it never read to its end. Now the verdict is an ERROR."""
    sock = tmp_path / "hold.sock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys\n"
        "srv = socket.socket(socket.AF_UNIX)\n"
        f"srv.bind({str(sock)!r}); srv.listen(1); print('ready', flush=True)\n"
        "conn, _ = srv.accept(); _, fds, _, _ = socket.recv_fds(conn, 16, 1)\n"
        "print('held', flush=True); sys.stdin.read()\n")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == b"ready\n"
        hand = (f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(sock)!r}); "
                "print('handing over', flush=True); socket.send_fds(s, [b'x'], [1])")
        r = once(tmp_path, {"limits": {"stopTimeout": "100ms"}, "watchers": [
            gated("c", [sys.executable, "-c", hand], "ERROR", maxMatches=0)]})
        assert holder.stdout.readline() == b"held\n"
    finally:
        holder.stdin.close()
        holder.wait(TIMEOUT_S)
    assert (r.rc, table_row(r.out, "c")[-1]) == (3, "ERROR"), r.out + r.err
    assert "  - the command's output was not read to its end: run 1: output still open" in r.out
    records = validate_records(tmp_path / ".watchrun" / "watchers" / "c.jsonl")  # the schema
    assert [x.get("unread") for x in records if x["kind"] == "error"][-1] is True  # has `unread`


def test_a_generation_compressed_before_it_was_read_fails_the_gate_closed(
        tmp_path: Path) -> None:
    """docs/records.md: in `run --once`, a generation's `gap` — here one rotated and gzipped
    between two runs, before the second read it — makes the watcher an ERROR (exit 3) naming
    the archive: the forbidden line was in what it could not read."""
    import gzip

    log = tmp_path / "app.log"
    log.write_text("INFO 0\n")
    config = {"watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    assert once(tmp_path, config).rc == 0
    with log.open("a") as f:
        f.write("ERROR 1 never read\n")
    archive = Path(f"{log}.1.gz")
    archive.write_bytes(gzip.compress(log.read_bytes()))  # logrotate with compress
    log.unlink()
    log.write_text("INFO 2\n")
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "log")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    assert str(archive) in r.out, r.out
    assert once(tmp_path, config).rc == 0  # said once: the next run reads on from there


CUT = cut_note(1, 1024)


@pytest.mark.parametrize(("gate", "evidence", "status", "reason"), [
    (GateSpec(require="tests passed"), Evidence(0, exit_code=0, cut=CUT), Status.ERROR,
     f"required pattern /tests passed/ was not seen in what was read, and {CUT}"),
    (GateSpec(require="tests passed"), Evidence(0, exit_code=0), Status.FAIL,
     "required pattern /tests passed/ never appeared"),
    (GateSpec(require="tests passed", max_matches=0), Evidence(1, exit_code=0, cut=CUT),
     Status.FAIL, "1 match of /ERROR/ (at most 0 allowed)"),
    (GateSpec(require="tests passed"), Evidence(0, exit_code=0, require_seen=True, cut=CUT),
     Status.ERROR, CUT),
])
def test_a_required_line_not_seen_where_lines_were_cut_is_no_fail_but_an_error(
        gate: GateSpec, evidence: Evidence, status: Status, reason: str) -> None:
    """`require` not seen while lines were cut at maxLineBytes: the required text may be in what
    was cut (5000 bytes of `x` then "tests passed", cut at 1 KiB), so "never appeared" was
    untrue; it cannot be told (ERROR, naming the cut). A gate crossed otherwise stays FAIL."""
    spec = WatcherSpec(id="log", label="log", pattern="ERROR", command="make", gate=gate)
    verdict = judge(spec, evidence)
    assert verdict is not None and verdict.status is status and verdict.reasons[0] == reason



def test_a_corrupt_checkpoint_fails_the_gate_closed(tmp_path: Path) -> None:
    """The checkpoint cut short (a crash, a full disk, a partial CI cache restore) after the
    log was rotated with an unread ERROR line: the run set it aside (an `error` record) and
    passed (exit 0), never reading app.log.1. Now the verdict is an ERROR naming the checkpoint;
    the next run goes on from the checkpoint this one saved."""
    log = tmp_path / "app.log"
    log.write_text("ok\n")
    config = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    assert once(tmp_path, config).rc == 0
    rotated_by_rename(log, "ERROR unread", "ok new")
    saved = tmp_path / ".watchrun" / "state" / "app.checkpoint.json"
    saved.write_bytes(saved.read_bytes()[:40])
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "app")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    assert (f"  - where the last run ended is lost (what was rotated away since is not read): "
            f"checkpoint {saved} is corrupt: not valid JSON") in r.out, r.out
    assert once(tmp_path, config).rc == 0
