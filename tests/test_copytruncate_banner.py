"""A copytruncate while the runner was stopped, of a file that is written the same banner
after each truncation (rotation-4 S8): stopped just past the banner, the runner found the file
at the path holding the bytes it had read, took it for the file it was reading, and the lines
written before the copy were lost with no gap. Now the copy says it: its lines are read (or,
compressed, a `gap{compressed}` names it and where the loss began)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config

BANNER = "".join(f"# app 1.0, config /etc/app.conf, pid file /run/app-{i:03}.pid\n"
                 for i in range(19)) + "# app started\n"
"""More than the 1 KiB of the head fingerprint; its last line matches."""


def lines(tag: str, n: int) -> str:
    return "".join(f"{tag}{i:02} ERROR payload\n" for i in range(n))


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")


def matched(tmp_path: Path) -> list[str]:
    return [r["line"] for r in records(tmp_path) if r["kind"] == "match"]


def run_until(config: Path, tmp_path: Path, last: str) -> None:
    """A live runner of `config`, until `last` is recorded; then stopped."""
    r = LiveRunner(config)
    try:
        wait_for(lambda: last in matched(tmp_path), f"{last!r} recorded")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_copy_made_while_stopped_of_a_file_whose_banner_came_back_is_not_lost(
        tmp_path: Path, compressed: bool) -> None:
    log = tmp_path / "app.log"
    log.write_text(BANNER)
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR|started", "fromStart": True}]})
    run_until(config, tmp_path, "# app started")  # (the checkpoint: just past the banner)
    with log.open("a") as f:  # while it is stopped: B, copytruncate, the banner again, C
        f.write(lines("B", 10))
    copy = tmp_path / "app.log.1"
    copy.write_bytes(log.read_bytes())
    if compressed:
        Path(f"{copy}.gz").write_bytes(gzip.compress(copy.read_bytes()))
        os.unlink(copy)
    with log.open("r+") as f:
        f.truncate(0)
    log.write_text(BANNER + lines("C", 15))
    run_until(config, tmp_path, "C14 ERROR payload")
    got = matched(tmp_path)
    b, c = lines("B", 10).splitlines(), lines("C", 15).splitlines()
    assert got == ["# app started", *([] if compressed else b), "# app started", *c]
    gaps = [r for r in records(tmp_path) if r["kind"] == "gap"]
    rotates = [r for r in records(tmp_path) if r["kind"] == "rotate"]
    assert [r["reason"] for r in rotates] == ["truncate"]
    if compressed:
        (gap,) = gaps
        assert gap["reason"] == "compressed" and gap["path"] == f"{copy}.gz"
        assert (gap["offset"], gap["lineNo"]) == (len(BANNER), 21)
    else:
        assert gaps == []


def test_a_copy_made_while_stopped_of_a_file_left_empty_whose_banner_came_back_is_read(
        tmp_path: Path) -> None:
    """The same, the runner stopped while the file was empty (its checkpoint has no bytes to
    recognise it by): the copy began as the file does, was taken for a backup, and the banner
    and B were lost with no gap."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR|started", "fromStart": True}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    log.write_text(BANNER + lines("B", 10))  # while it is stopped
    copy = tmp_path / "app.log.1"
    copy.write_bytes(log.read_bytes())
    with log.open("r+") as f:
        f.truncate(0)
    log.write_text(BANNER + lines("C", 15))
    run_until(config, tmp_path, "C14 ERROR payload")
    b, c = lines("B", 10).splitlines(), lines("C", 15).splitlines()
    assert matched(tmp_path) == ["# app started", *b, "# app started", *c]
    assert [r["reason"] for r in records(tmp_path) if r["kind"] == "rotate"] == ["truncate"]
    assert [r for r in records(tmp_path) if r["kind"] == "gap"] == []
