"""A log copied and truncated more often than its copies are kept between two looks (logrotate
`copytruncate` + `rotate 1` and a runner down, frozen, or between two `run --once` runs for two
rotations): the copy that held what followed what was read is overwritten by the next one, and
those lines are gone. Only `rotate{truncate, unreadBytes: 0}` was written, and a once run's
gate passed (exit 0) over an ERROR line nobody read, where the rename analog is a
`gap{missing}` and exit 3 (found by an explorer, 2026-12-07). Now a copy made since that does
not begin as the truncated file did says so: `gap{missing}` (unreadBytes 0: not known;
`laterCopy`, that copy), and the once run's ERROR advises keeping more copies, not the
`make clean` advice of a log deleted. The cases that lose nothing stay without a gap."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config
from recordcheck import validate_records
from test_once import once, table_row

CONFIG = {"watchers": [{"id": "f", "path": "app.log", "pattern": "ERROR",
                        "gate": {"maxMatches": 0}}]}
FIRST = "".join(f"ok {n} {'.' * 16}\n" for n in range(1, 101))
"""What the first run reads: 100 lines, 2 200 bytes (more than the 1 KiB head fingerprint)."""


def append(log: Path, text: str) -> None:
    with log.open("a") as f:
        f.write(text)


def copytruncate(log: Path, keep: int = 1) -> None:
    """logrotate's copytruncate with `rotate keep`: the copies kept move up a number (the
    oldest is overwritten), the file is copied to `.1` and truncated in place."""
    for n in range(keep - 1, 0, -1):
        older = log.with_name(f"{log.name}.{n}")
        if older.exists():
            older.rename(log.with_name(f"{log.name}.{n + 1}"))
    shutil.copyfile(log, log.with_name(f"{log.name}.1"))
    os.truncate(log, 0)


def twice_one_kept(log: Path) -> None:
    append(log, "ERROR lost line\n")
    copytruncate(log)
    append(log, "ok after 1\n")
    copytruncate(log)  # (overwrites the copy holding the ERROR line)
    append(log, "ok after 2\n")


def twice_two_kept(log: Path) -> None:
    append(log, "ERROR kept line\n")
    copytruncate(log, keep=2)
    append(log, "ok after 1\n")
    copytruncate(log, keep=2)
    append(log, "ok after 2\n")


def once_copied(log: Path) -> None:
    append(log, "ERROR kept line\n")
    copytruncate(log)
    append(log, "ok after 1\n")


def written_anew(log: Path) -> None:
    log.write_text("ok rebuilt\n")  # (`make > build.log`: the same inode, truncated)


def same_head_rewritten(log: Path) -> None:
    kept = FIRST[:1100]
    with log.open("r+") as f:
        f.write(kept + "".join(f"ok again {n} {'.' * 20}\n" for n in range(60)))


def truncated_where_read_then_copied(log: Path) -> None:
    os.truncate(log, 0)  # (nothing was written past what was read)
    append(log, "ok after 1\n")
    copytruncate(log)
    append(log, "ok after 2\n")


CASES: dict[str, tuple[Callable[[Path], None], int, bool]] = {
    "twice, one copy kept": (twice_one_kept, 3, True),
    "twice, one copy kept, copied over last week's": (twice_one_kept, 3, True),
    "twice, two copies kept": (twice_two_kept, 1, False),  # (ERROR read from app.log.2)
    "once": (once_copied, 1, False),  # (ERROR read from the copy)
    "written anew, no copy": (written_anew, 0, False),
    "rewritten with the same head": (same_head_rewritten, 0, False),
    "truncated where it was read, then copied": (truncated_where_read_then_copied, 3, True),
}
"""What happens to the log between two once runs: the second run's exit status, and whether
it writes the `gap{missing}`. "last week's": `app.log.1` was there before the first run, and
the copies are written over it (`cp` keeps its inode, and the time it was made). The last case
cannot be told from the first one (the file was truncated, and a copy made since does not
begin as it did): it fails closed, as a generation gone does."""


@pytest.mark.parametrize("case", list(CASES))
def test_a_copy_overwritten_between_two_once_runs_fails_the_gate_closed(tmp_path: Path,
                                                                        case: str) -> None:
    log = tmp_path / "app.log"
    if "last week's" in case:
        log.with_name("app.log.1").write_text("ok last week\n")
    log.write_text(FIRST)
    os.utime(log, ns=(10**18, 10**18))  # (older than any copy made next, whatever the clock)
    assert once(tmp_path, CONFIG).rc == 0
    change, rc, lost = CASES[case]
    change(log)
    second = once(tmp_path, CONFIG)
    assert second.rc == rc, second.out + second.err
    recs = read_records(tmp_path / ".watchrun" / "watchers" / "f.jsonl")
    gaps = [x for x in recs if x["kind"] == "gap"]
    if not lost:
        assert gaps == []
        return
    assert table_row(second.out, "f")[-1] == "ERROR"
    validate_records(tmp_path / ".watchrun" / "watchers" / "f.jsonl")  # (`laterCopy` too)
    [gap] = gaps
    assert (gap["reason"], gap["path"], gap["inode"], gap["offset"], gap["lineNo"],
            gap["unreadBytes"], gap["laterCopy"]) == (
        "missing", str(log), log.stat().st_ino, len(FIRST), 101, 0, f"{log}.1")
    assert f"{log}.1, written since, does not begin as it did" in gap["message"]
    # the ERROR's advice is for copies kept too few, not for a log deleted (`make clean`)
    assert f"f: could not look at every line\n  - lines of {log} may never have been read: " \
           f"{gap['message']} (the log was copied and truncated more often between two looks, " \
           "as between two runs, than its copies are kept: keep more copies, logrotate's " \
           "`rotate N`, or run the gate on the finished log before it is rotated)\n" \
           in second.out, second.out
    assert not [x for x in recs if x["kind"] == "match"]  # (the ERROR line was never read)


def matched(tmp_path: Path) -> list[str]:
    return [x["line"] for x in read_records(tmp_path / ".watchrun" / "watchers" / "f.jsonl")
            if x["kind"] == "match"]


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_a_copy_overwritten_while_the_runner_was_frozen_is_a_gap(tmp_path: Path,
                                                                 poll: bool) -> None:
    """The live runner frozen (SIGSTOP) across two copytruncates with one copy kept: 50
    lines written and copied away before it looked are lost, and the gap says from where."""
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"limits": {"pollMs": 50}, "watchers": [
        {"id": "f", "path": "app.log", "pattern": "^L"}]})
    r = LiveRunner(config, env={"WATCHRUN_FORCE_POLL": "1" if poll else "0"})
    records: list[dict[str, Any]] = []
    try:
        r.wait_running()
        append(log, "".join(f"L{n:04d} read\n" for n in range(1, 101)))
        wait_for(lambda: len(matched(tmp_path)) == 100, "lines 1-100 recorded")
        read_to = log.stat().st_size
        r.send(signal.SIGSTOP)
        append(log, "".join(f"L{n:04d} lost\n" for n in range(101, 151)))
        copytruncate(log)
        append(log, "".join(f"L{n:04d} copy 2\n" for n in range(151, 161)))
        copytruncate(log)  # (the copy holding lines 101-150 overwritten)
        append(log, "L0161 now\n")
        r.send(signal.SIGCONT)
        wait_for(lambda: "L0161 now" in matched(tmp_path), "the line written last recorded")
        assert r.stop() == 0, r.stderr()
        records = read_records(tmp_path / ".watchrun" / "watchers" / "f.jsonl")
    finally:
        r.close()
    got = [int(line[1:5]) for line in matched(tmp_path)]
    assert got == [*range(1, 101), *range(151, 162)]
    [gap] = [x for x in records if x["kind"] == "gap"]
    assert (gap["reason"], gap["path"], gap["offset"], gap["lineNo"], gap["unreadBytes"]) == (
        "missing", str(log), read_to, 101, 0)
    rotates = [(x["reason"], x.get("oldSize"), x.get("unreadBytes")) for x in records
               if x["kind"] == "rotate"]  # (the second copy, then the file from its start)
    assert rotates == [("truncate", None, None), ("truncate", read_to, 0)]
