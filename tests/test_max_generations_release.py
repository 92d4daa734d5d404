"""More rotated files open than `limits.maxGenerations`: the oldest is released while its writer
may still add to it, and a `gap{max-generations}` record says so (it was released silently)."""

from __future__ import annotations

import collections
import os
from pathlib import Path

from liverunner import LiveRunner, read_records, wait_for, write_config


def test_a_generation_released_early_is_said(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    config = write_config(tmp_path, {"limits": {"maxGenerations": 2}, "watchers": [
        {"id": "w", "path": str(log), "fromStart": True, "pattern": "^L"}]})
    r = LiveRunner(config)
    lines_of: dict[int, list[str]] = collections.defaultdict(list)  # inode -> its lines
    try:
        r.wait_running()
        files = []
        n = 0
        for g in range(5):  # five generations, four rename rotations in quick succession
            fh = log.open("ab")
            files.append(fh)
            for _ in range(10):
                n += 1
                fh.write(b"L%d gen%d\n" % (n, g))
                lines_of[os.fstat(fh.fileno()).st_ino].append(f"L{n}")
            fh.flush()
            wait_for(lambda n=n: f"L{n}" in seen(r), f"L{n} read")  # type: ignore[misc]
            if g < 4:
                os.rename(log, f"{log}.{g + 1}")
        for g, fh in enumerate(files):  # every writer adds late, within rotateWait
            for _ in range(3):
                n += 1
                fh.write(b"L%d gen%d late\n" % (n, g))
                lines_of[os.fstat(fh.fileno()).st_ino].append(f"L{n}")
            fh.close()
        wait_for(lambda: len(seen(r)) + len(lost(r, lines_of)) >= n, "every line read or said")
    finally:
        assert r.stop() == 0
    assert lost(r, lines_of)  # (the scenario did release generations early)
    assert sorted(seen(r) | lost(r, lines_of), key=lambda x: int(x[1:])) == [
        f"L{i}" for i in range(1, n + 1)]


def seen(r: LiveRunner) -> set[str]:
    return {x["line"].split()[0] for x in r.records("w") if x["kind"] == "match"}


def lost(r: LiveRunner, lines_of: dict[int, list[str]]) -> set[str]:
    """The lines of generations a `gap{max-generations}` record named, that were not read."""
    named = {x["inode"] for x in read_records(r.out / "watchers" / "w.jsonl")
             if x["kind"] == "gap" and x["reason"] == "max-generations" and "inode" in x}
    return {ln for inode in named for ln in lines_of[inode]} - seen(r)
