"""A log on tmpfs (a /tmp that is tmpfs, /run, /dev/shm): tmpfs keeps no inode generation
numbers, so a log truncated and written again in place between two looks (`make > build.log`)
could not be told from a new file given its inode number, and a once run's gate failed closed
over a log that lost nothing (`gap{missing}`, exit 3), where on ext4 it passes (found running
the suite with its temporary files on tmpfs, 2026-12-08). The birth time of the inode now says
it is the same file; a log deleted and made again still says what may be lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liverunner import read_records
from test_once import once

from watchrun.sources.identity import birth_ns, inode_generation

FIRST = "".join(f"ok {n} {'.' * 16}\n" for n in range(1, 101))


def config(log: Path) -> dict[str, Any]:
    return {"watchers": [{"id": "f", "path": str(log), "pattern": "ERROR",
                          "gate": {"maxMatches": 0}}]}


def gaps(folder: Path) -> list[dict[str, Any]]:
    return [r for r in read_records(folder / ".watchrun" / "watchers" / "f.jsonl")
            if r["kind"] == "gap"]


def first_run(tmp_path: Path, tiny_fs: Path) -> Path:
    log = tiny_fs / "build.log"
    log.write_text(FIRST)
    with log.open() as f:  # (the premise: what ext4 has, tmpfs has not)
        assert inode_generation(f.fileno()) is None and birth_ns(f.fileno()) is not None
    assert once(tmp_path, config(log)).rc == 0
    return log


def test_a_log_on_tmpfs_written_again_in_place_passes_the_gate(tmp_path: Path,
                                                               tiny_fs: Path) -> None:
    log = first_run(tmp_path, tiny_fs)
    inode = log.stat().st_ino
    log.write_text("ok rebuilt\nERROR in the new build\n")  # (the same inode, truncated)
    assert log.stat().st_ino == inode
    second = once(tmp_path, config(log))
    assert second.rc == 1, second.out + second.err  # the new build's ERROR, read and gated
    assert gaps(tmp_path) == []
    matches = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "f.jsonl")
               if r["kind"] == "match"]
    assert [(m["line"], m["lineNo"]) for m in matches] == [("ERROR in the new build", 2)]


def test_a_log_on_tmpfs_deleted_and_made_again_still_says_what_may_be_lost(
        tmp_path: Path, tiny_fs: Path) -> None:
    log = first_run(tmp_path, tiny_fs)
    log.unlink()
    log.write_text("ok new file\n")
    second = once(tmp_path, config(log))
    assert second.rc == 3, second.out + second.err  # (the old file's end was never seen)
    [gap] = gaps(tmp_path)
    assert (gap["reason"], gap["offset"], gap["lineNo"]) == ("missing", len(FIRST), 101)
