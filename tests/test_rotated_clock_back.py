"""Generations rotated past while the runner was stopped or frozen are found among the log's
siblings by what the runner knew of them, not by their modification time alone. Written after
the clock was set back (NTP stepping a VM that ran ahead), a generation's mtime is older than
the one read last: it was passed over, silently after a restart, and said `gap{unseen}` ("gone
again") while it was on disk. A version-1 checkpoint (no mtime) took every sibling for newer,
and older generations were read again as new matches (explorers, 2026-12-07). The clock is not
touched: the mtimes of the generations written "after the step" are set an hour back."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest
from liverunner import LiveRunner, wait_for
from test_generations_faults import config_for, counted, read_up_to, records, write

HOUR_NS = 3600 * 10**9


def set_back(path: Path) -> None:
    """`path` last written an hour before now, as after a clock set back an hour."""
    then = os.stat(path).st_mtime_ns - HOUR_NS
    os.utime(path, ns=(then, then))


def rotate_twice_after_a_step_back(log: Path) -> None:
    """Two rename rotations (logrotate's default: `.1` → `.2`, the log → `.1`, a new log), each
    new generation written after the clock went back an hour: L4-L6, then L7-L9 (at the path)."""
    log.rename(f"{log}.1")
    write(log, 4, 6)
    set_back(log)
    Path(f"{log}.1").rename(f"{log}.2")
    log.rename(f"{log}.1")
    write(log, 7, 9)
    set_back(log)


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T"


def assert_every_line_once(tmp_path: Path) -> None:
    assert counted(tmp_path) == dict.fromkeys(range(1, 10), 1), counted(tmp_path)
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []


@pytest.mark.parametrize("away", ["stopped", "frozen"])
def test_generations_written_after_a_clock_set_back_are_read(tmp_path: Path,
                                                             away: str) -> None:
    """Read L1-L3; stopped (then started again) or frozen (SIGSTOP) across two rotations whose
    generations were written after a step back: L4-L6 were never read (after a restart
    nothing said so; frozen, a `gap{unseen}` said the file was gone). Now all nine, once."""
    log = tmp_path / "app.log"
    write(log, 1, 3)
    config = config_for(tmp_path, log)
    r = LiveRunner(config)
    try:
        read_up_to(tmp_path, 3)
        if away == "stopped":
            assert r.stop() == 0, r.stderr()
        else:
            r.send(signal.SIGSTOP)
            wait_for(lambda: stopped(r.pid), "the runner stopped by SIGSTOP")
        rotate_twice_after_a_step_back(log)
        if away == "stopped":
            r = LiveRunner(config)
        else:
            r.send(signal.SIGCONT)
        read_up_to(tmp_path, 9)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert_every_line_once(tmp_path)


def v1_checkpoint(out: Path, gen: Path, log: Path) -> None:
    """What a runner before 2026-12-01 saved for the generation `gen` read to its end (one
    generation, no mtime, no seq)."""
    state = out / "state"
    state.mkdir(parents=True, mode=0o750)
    out.chmod(0o750)
    st, data = gen.stat(), gen.read_bytes()
    (state / "app.checkpoint.json").write_text(json.dumps({
        "version": 1, "dev": st.st_dev, "inode": st.st_ino,
        "fingerprint": hashlib.sha256(data[:1024]).hexdigest(), "fingerprintLen": len(data),
        "offset": len(data), "lineNo": data.count(b"\n") + 1, "path": str(log)}))


def test_a_version_1_checkpoint_does_not_read_older_generations_again(tmp_path: Path) -> None:
    """A version-1 checkpoint of `app.log.1` (read to its end, rotated since); `app.log.2`,
    older, was read before it. Its mtime unknown (0), every sibling was newer: `app.log.2` was
    read again from its first line, a new match. Now only the file at the path is new."""
    log = tmp_path / "app.log"
    two, one = Path(f"{log}.2"), Path(f"{log}.1")
    write(two, 1, 2)
    write(one, 3, 4)
    write(log, 5, 6)
    for path, ago in ((two, 120), (one, 60)):
        then = os.stat(path).st_mtime_ns - ago * 10**9
        os.utime(path, ns=(then, then))
    v1_checkpoint(tmp_path / ".watchrun", one, log)
    r = LiveRunner(config_for(tmp_path, log))
    try:
        read_up_to(tmp_path, 6)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert counted(tmp_path) == {5: 1, 6: 1}
    assert [x for x in records(tmp_path) if x["kind"] == "gap"] == []


def test_an_empty_generation_still_open_is_not_read_again(tmp_path: Path) -> None:
    """The siblings a look has not seen are read whatever their mtime; not a generation the
    runner still has open, rotated on while it was empty (nothing to know it by but its
    inode): opened a second time, what the application wrote to it late was recorded twice.
    (A guard of the rule above: the runner before it passed over that file by its mtime.)"""
    log = tmp_path / "app.log"
    log.touch()
    then = os.stat(log).st_mtime_ns - 10**10
    os.utime(log, ns=(then, then))
    r = LiveRunner(config_for(tmp_path, log, rotate_wait="30s"))  # (still open at the end)
    try:
        r.wait_running()
        log.rename(f"{log}.1")
        write(log, 1, 1)
        read_up_to(tmp_path, 1)
        Path(f"{log}.1").rename(f"{log}.2")
        log.rename(f"{log}.1")
        write(log, 2, 2)
        read_up_to(tmp_path, 2)
        write(Path(f"{log}.2"), 3, 3)  # (the application's last write to its first file)
        read_up_to(tmp_path, 3)
        write(log, 4, 4)  # (read after the look that read line 3: every reader drained)
        read_up_to(tmp_path, 4)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()
    assert counted(tmp_path) == dict.fromkeys(range(1, 5), 1)
