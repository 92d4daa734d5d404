"""A live file watcher says, once a generation, a file no text pattern can read (UTF-16, UTF-32,
compressed) as a live command watcher and a once run do: an `error` record, a warning in the
runner's log, `lastError` in `status`; the file is read on all the same (its lines counted)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, cli, wait_for, write_config
from recordcheck import validate_records

UTF16_BOM = ("is UTF-16 (it starts with a byte order mark); watchrun reads UTF-8: convert it "
             "first (iconv -f UTF-16 -t UTF-8)")
COMPRESSED = ("is compressed; watchrun reads text: watch a command that decompresses it instead "
              "(`command: [zcat, FILE]`, or xzcat, bzcat, zstdcat)")


def lines(first: int, count: int, word: str = "INFO") -> str:
    """`count` CRLF lines, numbered from `first` (as a Windows service writes them)."""
    return "".join(f"{word} line {i}\r\n" for i in range(first, first + count))


def errors(r: LiveRunner, wid: str) -> list[dict[str, Any]]:
    """The watcher's `error` records."""
    return [x for x in r.records(wid) if x["kind"] == "error"]


def warnings(r: LiveRunner, wid: str) -> list[str]:
    """The runner's warning lines about watcher `wid`."""
    return [x for x in r.stderr().splitlines() if f"[{wid}] warning: " in x]


def status(tmp_path: Path, wid: str) -> dict[str, Any]:
    """`watchrun status WID --json`, as a user asks it."""
    done = cli("status", wid, "--json", "-c", "watch.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_live_file_watcher_says_an_unreadable_log_once_a_generation(tmp_path: Path) -> None:
    """A Windows service's UTF-16 log tailed by a sidecar, and `path: app.log.gz`: the live
    watcher matched nothing forever and said nothing (no record, no warning, `list` healthy),
    while a once run said ERROR and a live command `error{not-utf8}`. Now the first look says
    it, once: not again as lines come (they are still counted), again for the file that takes
    the path after a truncation and after a rename rotation. A UTF-8 log says nothing."""
    log, gz, ok = tmp_path / "svc.log", tmp_path / "app.log.gz", tmp_path / "ok.log"
    log.write_bytes(("\ufeff" + lines(0, 40)).encode("utf-16-le"))
    gz.write_bytes(gzip.compress("".join(
        f"ERROR {hashlib.sha256(bytes(i)).hexdigest()}\n" for i in range(20)).encode(), mtime=0))
    ok.write_text(lines(0, 40))
    config = write_config(tmp_path, {"watchers": [
        {"id": "svc", "path": "svc.log", "pattern": "ERROR"},
        {"id": "gz", "path": "app.log.gz", "pattern": "ERROR"},
        {"id": "ok", "path": "ok.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: errors(r, "svc") and errors(r, "gz"), "the two files said")
        (said,) = errors(r, "svc")
        assert (said["code"], said["path"], said["message"]) == (
            "not-utf8", str(log), f"{log} {UTF16_BOM}")
        (packed,) = errors(r, "gz")
        assert (packed["code"], packed["message"]) == ("compressed", f"{gz} {COMPRESSED}")
        assert warnings(r, "svc") == [x for x in r.stderr().splitlines()
                                      if x.endswith(f"[svc] warning: not-utf8: {log} {UTF16_BOM}")]
        assert len(warnings(r, "svc")) == len(warnings(r, "gz")) == 1
        for wid, why in (("svc", f"{log} {UTF16_BOM}"), ("gz", f"{gz} {COMPRESSED}")):
            shown = status(tmp_path, wid)
            assert (shown["status"], shown["lastError"]) == ("running", why)

        for first in (0, 3, 6):  # read on, counted, not said again
            with log.open("ab") as fh:
                fh.write((lines(first, 3, "ERROR")).encode("utf-16-le"))
        wait_for(lambda: status(tmp_path, "svc")["linesRead"] == 9, "the 9 lines appended read")
        assert (len(errors(r, "svc")), len(warnings(r, "svc"))) == (1, 1)

        log.write_bytes(("\ufeff" + lines(100, 20)).encode("utf-16-le"))  # truncated, rewritten
        wait_for(lambda: len(errors(r, "svc")) == 2, "the truncated file said")
        assert [x["kind"] for x in r.records("svc")][-2:] == ["rotate", "error"]
        log.rename(log.with_name("svc.log.1"))
        log.write_bytes(("\ufeff" + lines(200, 20)).encode("utf-16-le"))
        wait_for(lambda: len(errors(r, "svc")) == 3, "the file made at the rotation said")
        assert [x["kind"] for x in r.records("svc")][-2:] == ["rotate", "error"]
        assert [x["message"] for x in errors(r, "svc")] == [f"{log} {UTF16_BOM}"] * 3
        assert len(warnings(r, "svc")) == 3

        with ok.open("a") as fh:
            fh.write(lines(40, 2))
        wait_for(lambda: status(tmp_path, "ok")["linesRead"] == 2, "the UTF-8 lines read")
        assert (errors(r, "ok"), warnings(r, "ok"), status(tmp_path, "ok")["lastError"]) == (
            [], [], None)
    finally:
        assert r.stop() == 0
    for wid in ("svc", "gz", "ok"):
        validate_records(r.out / "watchers" / f"{wid}.jsonl")


@pytest.mark.parametrize(("codec", "why"), [
    ("utf-16-le", "is UTF-16 (a NUL beside each letter of its first line, no byte order mark)"),
    ("utf-32-be", "is UTF-32 (NULs beside each character of its first line, three beside a "
                  "Latin letter, no byte order mark)")], ids=["utf16", "utf32"])
def test_a_live_file_too_short_to_judge_is_judged_when_enough_came(tmp_path: Path, codec: str,
                                                                   why: str) -> None:
    """A log with one line so far (fewer than 256 bytes: too few to tell UTF-16 or UTF-32
    without a byte order mark from text) says nothing yet; once enough of it came, the look
    that read it says it, once, as a command's output is judged."""
    log = tmp_path / "svc.log"
    log.write_bytes(lines(0, 1).encode(codec))
    config = write_config(tmp_path, {"watchers": [
        {"id": "svc", "path": "svc.log", "pattern": "ERROR", "fromStart": True}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: status(tmp_path, "svc")["linesRead"] == 1, "the first line read")
        assert errors(r, "svc") == []
        with log.open("ab") as fh:
            fh.write(lines(1, 10, "ERROR").encode(codec))
        wait_for(lambda: errors(r, "svc"), "the file said")
        (said,) = errors(r, "svc")
        assert (said["code"], said["message"].split("; ")[0]) == ("not-utf8", f"{log} {why}")
        assert len(warnings(r, "svc")) == 1
        wait_for(lambda: status(tmp_path, "svc")["linesRead"] == 11, "every line read")
        assert status(tmp_path, "svc")["lastError"] == said["message"]
    finally:
        assert r.stop() == 0
    validate_records(r.out / "watchers" / "svc.jsonl")
