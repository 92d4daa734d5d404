"""copytruncate under a 20k lines/s writer with the runner polling (WATCHRUN_FORCE_POLL=1): the
writer copies its log and truncates it six times, 0.25 s apart, between two of its writes (so
no line falls in the copy/truncate race that no reader can win). Nothing is recorded twice, and
every line not recorded is counted in a `rotate{reason: truncate, unreadBytes}` record; the
loss is bounded (none, when every copy is found)."""

from __future__ import annotations

import collections
import os
import shutil
import time
from pathlib import Path

from liverunner import LiveRunner, read_records, wait_for, write_config

LINE = 50
"""Bytes per line: a 9-digit number, a space, 39 `x`, a newline."""
RATE = 20_000


def lines(first: int, n: int) -> bytes:
    return b"".join(b"%09d %s\n" % (i, b"x" * 39) for i in range(first, first + n))


def test_poll_mode_copytruncate_under_load_loses_nothing_unrecorded(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    config = write_config(tmp_path, {"limits": {"rotateWait": "300ms"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "^[0-9]", "fromStart": True}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "app.jsonl"
    r = LiveRunner(config, env={"WATCHRUN_FORCE_POLL": "1"})
    try:
        r.wait_log("running")
        wait_for(lambda: jsonl.exists() and jsonl.stat().st_size > 0, "the start record")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        n, start = 0, time.monotonic()
        try:
            for k in range(1, 7):
                while (now := time.monotonic()) < start + k * 0.25:
                    os.write(fd, lines(n + 1, 100))
                    n += 100
                    time.sleep(max(0.0, start + n / RATE - now))
                shutil.copyfile(log, tmp_path / f"app.log.{k}")  # logrotate's copytruncate
                os.ftruncate(fd, 0)
            os.write(fd, lines(n + 1, 100))
            n += 100
        finally:
            os.close(fd)
        last = b'"line":"%09d ' % n
        wait_for(lambda: last in jsonl.read_bytes(), f"line {n}, the last written")
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    recs = read_records(jsonl)
    got = [int(x["line"][:9]) for x in recs if x["kind"] == "match"]
    twice = [k for k, c in collections.Counter(got).items() if c > 1]
    assert twice == [], f"{len(twice)} lines recorded twice: {twice[:5]}"
    truncations = [x for x in recs if x["kind"] == "rotate" and x["reason"] == "truncate"]
    assert truncations, "no truncation was seen"
    unread = sum(x.get("unreadBytes", 0) for x in truncations)  # (none on a copy read)
    lost = sorted(set(range(1, n + 1)) - set(got))
    assert len(lost) * LINE <= unread, (
        f"{len(lost)} lines lost ({lost[:3]}..{lost[-3:]}) but only {unread} bytes reported "
        f"unread: {truncations}")
    assert len(lost) <= n // 100, f"{len(lost)} of {n} lines lost"
