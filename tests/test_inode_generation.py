"""A new file that gets the checkpointed inode number while the runner is down and begins with
exactly the bytes the old file held up to the checkpoint: the inode's generation number (ext4,
xfs, btrfs draw a new one each time a number is given out) tells it apart, where the
fingerprints cannot. The real runner on real files. (`identifies` and the start plan with the
number known, unknown and different: tests/test_checkpoints.py, tests/test_plans.py. Nothing
of the package is imported here: this test runs against a build from before the fix too.)"""

from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, read_records, wait_for, write_config
from recordcheck import validate_records

FS_IOC_GETVERSION = 0x80087601
BANNER = "L1 banner of app v1\nL2 listening on :8080\n"
"""What the old file held when the runner stopped; the new file begins with it too."""


def generation_of(path: Path) -> int | None:
    """The inode generation number of `path` (None where its file system keeps none). The
    test's own ioctl: it does not rely on the code under test to say whether to run."""
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = array.array("l", [0])
        fcntl.ioctl(fd, FS_IOC_GETVERSION, buf, True)
        return int(buf[0])
    except OSError:
        return None
    finally:
        os.close(fd)


def needs_generations(folder: Path) -> None:
    probe = folder / "probe"
    probe.write_text("x")
    try:
        if generation_of(probe) is None:
            pytest.skip(f"the file system of {folder} has no inode generation numbers "
                        "(FS_IOC_GETVERSION fails, as on tmpfs): the runner falls back to "
                        "the fingerprints there, which cannot tell these files apart")
    finally:
        probe.unlink()


def recreate_with_inode(log: Path, inode: int, text: str, tries: int = 200) -> bool:
    """Delete `log` and create it with `text` until the new file gets inode number `inode`.
    ext4 hands the lowest free number of the group to the next new file: a file that got a
    lower one (freed by the runner's own saves) is kept aside, so the next try gets the next
    number. False when it never comes (another process took it)."""
    log.unlink()
    deadline = time.monotonic() + 20
    for i in range(tries):
        log.write_text(text)
        if log.stat().st_ino == inode:
            return True
        log.rename(log.with_name(f"not-it-{i}"))  # (not a sibling of app.log by its name)
        if time.monotonic() > deadline:
            break
    return False


def replace_with_inode(log: Path, inode: int, text: str) -> None:
    """`recreate_with_inode`, or skip the test when the number never came back."""
    if not recreate_with_inode(log, inode, text):
        pytest.skip(f"no new file in {log.parent} got the freed inode number {inode} back "
                    "(another process took it)")


def run_until(config: Path, done: Callable[[], bool], what: str) -> None:
    """Run the runner until `done()`, then stop it (SIGTERM, exit 0)."""
    r = LiveRunner(config)
    try:
        wait_for(done, what)
        assert r.stop() == 0, r.stderr()
    finally:
        r.close()


def this_run(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records since the last `start` record (the last run's)."""
    starts = [i for i, r in enumerate(recs) if r["kind"] == "start"]
    return recs[starts[-1]:] if starts else []


def watched(tmp_path: Path, text: str) -> tuple[Path, Path, Path]:
    """`app.log` holding `text`, a config that records its lines from the start, and the JSONL
    they go to (skips where the file system keeps no inode generation numbers)."""
    needs_generations(tmp_path)
    log = tmp_path / "app.log"
    log.write_text(text)
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": str(log), "pattern": "^L", "fromStart": True}]})
    return log, config, tmp_path / ".watchrun" / "watchers" / "app.jsonl"


def matched(jsonl: Path) -> list[str]:
    """The lines of the last run's match records."""
    return [x["line"] for x in this_run(read_records(jsonl)) if x["kind"] == "match"]


def test_a_new_file_given_the_inode_and_the_head_of_the_old_is_read_from_its_start(
        tmp_path: Path) -> None:
    """The runner records the banner and stops (SIGTERM, checkpoint at the banner's end). The
    file is deleted; a new one that gets the same inode number begins with the same banner,
    then new lines. On restart every line of the new file is recorded, after the records any
    replaced file gets: `rotate{recreate}` into the inode, and a `gap{missing}` naming where
    the old one was read to. (Its banner was skipped, with no record: it was taken for the old
    file, its fingerprints being the same.)"""
    log, config, jsonl = watched(tmp_path, BANNER)

    def lines() -> list[str]:
        return matched(jsonl)

    run_until(config, lambda: len(lines()) == 2, "the banner recorded")
    state = tmp_path / ".watchrun" / "state" / "app.checkpoint.json"
    saved = json.loads(state.read_text())["generations"][-1]
    assert saved["offset"] == len(BANNER)
    inode, old_gen = log.stat().st_ino, generation_of(log)
    new = ["L3 request 1", "L4 request 2", "L5 shutting down"]
    replace_with_inode(log, inode, BANNER + "".join(f"{x}\n" for x in new))
    if generation_of(log) == old_gen:
        pytest.skip("the file system gave the new file the old generation number too")
    run_until(config, lambda: new[-1] in lines(), f"{new[-1]!r} recorded")
    run = this_run(validate_records(jsonl))  # (every record as the schema says)
    assert lines() == [*BANNER.splitlines(), *new], "the new file was not read from its start"
    (rot,) = [x for x in run if x["kind"] == "rotate"]
    assert (rot["reason"], rot["path"], rot["inode"], rot["oldInode"]) == (
        "recreate", str(log), inode, inode)
    (gap,) = [x for x in run if x["kind"] == "gap"]
    assert (gap["reason"], gap["inode"], gap["offset"], gap["lineNo"], gap["unreadBytes"]) == (
        "missing", inode, len(BANNER), 3, 0)
    kinds = [x["kind"] for x in run]
    assert kinds.index("rotate") < kinds.index("match") and kinds.index("gap") < kinds.index(
        "match"), kinds
    saved = json.loads(state.read_text())["generations"][-1]
    assert (saved["inode"], saved["inodeGen"]) == (inode, generation_of(log))


def test_after_a_sigkill_a_new_file_with_a_reused_inode_is_not_taken_for_the_recorded_one(
        tmp_path: Path) -> None:
    """The runner follows a file recreated while it runs (`rotate{recreate}` into inode N), records
    its banner and is killed inside the checkpoint's one-second lag: the banner's records are past
    the checkpoint. While it is down the file is deleted and a new one gets inode N back, with the
    same banner. On restart the records past the checkpoint must not stand for the new file's
    lines: its rotate record named another generation of N (`inodeGen`). (They did: the banner was
    taken for recorded and skipped, with no record.)"""
    log, config, jsonl = watched(tmp_path, "L0 first file\n")

    def lines() -> list[str]:
        return matched(jsonl)

    r = LiveRunner(config)
    try:
        wait_for(lambda: lines() == ["L0 first file"], "the first file recorded")
        log.unlink()
        log.write_text(BANNER)
        wait_for(lambda: len(lines()) == 3, "the recreated file's banner recorded")
        r.send(signal.SIGKILL)  # inside the checkpoint's one-second lag
        r.proc.wait(timeout=10)
    finally:
        r.close()
    (rot,) = [x for x in read_records(jsonl) if x["kind"] == "rotate"]
    inode = rot["inode"]
    state = tmp_path / ".watchrun" / "state" / "app.checkpoint.json"
    saved = [g for g in json.loads(state.read_text())["generations"] if g["inode"] == inode]
    if saved and saved[-1]["offset"] == len(BANNER):
        pytest.skip("the checkpoint was saved after the banner before the kill: no record past "
                    "it to mistake (the host took over a second)")
    new = ["L3 request 1", "L4 request 2"]
    replace_with_inode(log, inode, BANNER + "".join(f"{x}\n" for x in new))
    run_until(config, lambda: new[-1] in lines(), f"{new[-1]!r} recorded")
    validate_records(jsonl, contiguous=False)
    assert lines() == [*BANNER.splitlines(), *new], "the new file's banner was skipped"
