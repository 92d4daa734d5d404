"""The archives watched after their `gap{compressed}` (said lost while cut short) are bounded:
past WATCHED_KEPT the oldest are dropped from watching, and the runner's log says so."""

from __future__ import annotations

import gzip
from pathlib import Path

from test_copytruncate_archive import lines

from watchrun.sources.identity import Checkpoint
from watchrun.sources.siblings import identity
from watchrun.sources.unsettled import WATCHED_KEPT, Waiting, settle


def test_at_most_so_many_archives_are_watched_after_their_gap(tmp_path: Path) -> None:
    """Past WATCHED_KEPT, the oldest are dropped from watching, and the log says how many."""
    owner = Checkpoint(1, 2, "f", 10, 1, str(tmp_path / "app.log"), 0)
    items = []
    for i in range(WATCHED_KEPT + 2):
        archive = tmp_path / f"app.log.{i + 1}.gz"
        archive.write_bytes(gzip.compress(lines(1, 100))[:100])
        said = identity(archive.stat())
        items.append(Waiting(str(archive), said, 0.0, owner, said))
    still, gaps_said, judged_now, notes = settle(items, [owner], 10.0, 1.0)
    assert (gaps_said, judged_now) == ([], [])
    assert [w.path for w in still] == [w.path for w in items[2:]]
    assert notes == [f"2 archive(s) said lost while cut short, the oldest of {WATCHED_KEPT + 2}, "
                     f"{tmp_path}/app.log.1.gz first, are no longer watched (at most "
                     f"{WATCHED_KEPT} are): one completed later is judged as any archive, and a "
                     "second gap{compressed} for it is possible"]
