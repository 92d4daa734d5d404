"""A copytruncate copy cut short of what the runner had read (the copy and a write raced: a
write is seen a page at a time) is known as read: the emptied file's next write, which looks
for copies again, did not skip it when its last write shared the truncation's clock tick, and
read it again from its first line (655 lines twice; found under load by
bench_copytruncate.py, 2 rounds in 152)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config


def lines(first: int, last: int) -> bytes:
    return b"".join(b"%09d %s\n" % (i, b"x" * 39) for i in range(first, last + 1))


def recorded(r: LiveRunner, number: int) -> bool:
    return any(m["line"].startswith(f"{number:09d} ") for m in r.matches("app"))


def truncations(r: LiveRunner) -> list[dict[str, Any]]:
    return [x for x in r.records("app") if x["kind"] == "rotate" and x["reason"] == "truncate"]


@pytest.mark.parametrize("poll", [False, True])
def test_a_copy_cut_short_is_not_read_again_after_the_file_was_emptied(tmp_path: Path,
                                                                       poll: bool) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"")
    config = write_config(tmp_path, {"limits": {"pollMs": 100}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "^[0-9]", "fromStart": True}]})
    r = LiveRunner(config, env={"WATCHRUN_FORCE_POLL": "1" if poll else "0"})
    try:
        r.wait_running()
        with log.open("ab") as fh:
            fh.write(lines(1, 700))  # 35 000 bytes
        wait_for(lambda: recorded(r, 700), "every line read")
        copy = log.with_name("app.log.1")
        copy.write_bytes(log.read_bytes()[:32768])  # the copy stopped at a page inside a write
        os.truncate(log, 0)
        tick = log.stat().st_mtime_ns
        os.utime(copy, ns=(tick, tick))  # its last write in the truncation's clock tick
        wait_for(lambda: truncations(r), "the truncation seen, the file empty")
        with log.open("ab") as fh:
            fh.write(lines(701, 800))
        wait_for(lambda: recorded(r, 800), "the next lines")
        assert r.stop() == 0
    finally:
        r.close()
    numbers = [int(m["line"][:9]) for m in r.matches("app")]
    assert sorted(numbers) == list(range(1, 801))  # each line once, none lost
    [truncation] = truncations(r)
    assert (truncation["oldSize"], truncation["unreadBytes"]) == (35000, 0)
