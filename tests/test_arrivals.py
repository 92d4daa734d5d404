"""`Arrivals`: which events of a directory count as a file coming to the watched name, and
where they are counted (the runner's use of it: tests/test_unseen_generations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchrun.arrivals import Arrivals, leaf_watch
from watchrun.inotify_watches import IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO, watched

C, D, F, T = IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO

CASES = [
    ("created", [(C, 0, "app.log")], 1),
    ("created, deleted, created again", [(C, 0, "app.log"), (D, 0, "app.log"),
                                         (C, 0, "app.log")], 2),
    ("another name", [(C, 0, "other.log"), (T, 9, "x.log")], 0),
    ("deleted only", [(D, 0, "app.log")], 0),
    ("renamed over it", [(F, 1, "app.log.tmp"), (T, 1, "app.log")], 1),
    ("renamed in from another directory", [(T, 2, "app.log")], 1),
    ("renamed away and back", [(F, 3, "app.log"), (T, 3, "aside"), (F, 4, "aside"),
                               (T, 4, "app.log")], 0),
    ("renamed away, on, and back", [(F, 3, "app.log"), (T, 3, "a"), (F, 4, "a"), (T, 4, "b"),
                                    (F, 5, "b"), (T, 5, "app.log")], 0),
    ("rotated (renamed away), then a new file", [(F, 3, "app.log"), (T, 3, "app.log.1"),
                                                 (C, 0, "app.log")], 1),
    ("the name it was renamed to replaced first", [(F, 3, "app.log"), (T, 3, "aside"),
                                                   (D, 0, "aside"), (C, 0, "aside"),
                                                   (F, 4, "aside"), (T, 4, "app.log")], 1),
    ("renamed out of the directory, another one renamed in", [(F, 6, "app.log"),
                                                              (T, 7, "app.log")], 1),
]


@pytest.mark.parametrize(("events", "count"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_counts_as_a_file_coming_to_the_name(events: list[tuple[int, int, str]],
                                                  count: int) -> None:
    came = Arrivals("app.log")
    came.watching(1)
    for mask, cookie, name in events:
        came.event(mask, cookie, name)
    assert came.count == count


def test_a_new_series_after_lost_events_or_another_directory() -> None:
    came = Arrivals("app.log")
    came.watching(1)
    epoch = came.epoch
    came.watching(1)
    assert came.epoch == epoch  # the same directory's watch: the same series
    came.event(IN_MOVED_FROM, 3, "app.log")
    came.lost()  # a queue overflow: what was in flight is forgotten
    came.event(IN_MOVED_TO, 3, "app.log")
    assert came.epoch == epoch + 1 and came.count == 1
    came.watching(2)
    assert came.epoch == epoch + 2


def test_arrivals_are_counted_only_where_no_symlink_is_on_the_way(tmp_path: Path) -> None:
    """`leaf_watch`, on what `watched` resolves: the file's own directory, or None where a
    swapped symlink (not a new file at the name) would change what the path holds."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "app.log").touch()
    (tmp_path / "current").symlink_to("logs")
    plain, linked = tmp_path / "logs" / "app.log", tmp_path / "current" / "app.log"
    wds = [(7, "app.log"), (8, None), (9, "")]
    assert leaf_watch(plain, watched(plain), wds) == 7
    assert leaf_watch(linked, watched(linked), wds) is None
    missing_dir = tmp_path / "gone" / "app.log"
    assert leaf_watch(missing_dir, watched(missing_dir), wds) is None
