"""`watchrun top` over a damaged status snapshot: its watcher is listed `unreadable` with the
reason, as `watchrun list` lists it, live runner or not (the explorer's A: the screen said "no
watchers or agents have run", or `starting (no status snapshot yet)` with a runner live)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_top import chips, drive, ids, notice, shown, status, until
from test_top_model import fixed, row, snapshot
from textual.pilot import Pilot

from watchrun.tui.app import TopApp
from watchrun.tui.feed import Feed
from watchrun.tui.model import Unreported, row_cells
from watchrun.tui.model import chips as chip_texts

REASON = ("its status snapshot state/app.status.json cannot be read (damaged, not a regular "
          "file, or a copy of another watcher's); a runner writes it anew while the watcher runs")


def damage(root: Path) -> None:
    """`app`'s snapshot cut after 120 bytes (a disk-full write), `calm`'s whole."""
    snapshot(root, "app")
    snapshot(root, "calm")
    path = root / "state" / "app.status.json"
    path.write_bytes(path.read_bytes()[:120])


def test_a_damaged_snapshot_is_an_unreadable_row_read_only_and_live(tmp_path: Path) -> None:
    damage(tmp_path)
    read_only = Feed(tmp_path).poll()
    live_reply: dict[str, Any] = {"ok": True, "state": "running", "watchers": ["app", "calm"]}
    live = Feed(tmp_path, control=fixed(live_reply)).poll()
    for snap in (read_only, live):
        assert [(r.id, r.status) for r in snap.rows] == [("app", "unreadable"),
                                                         ("calm", "running")]
        row = snap.rows[0]
        assert row.detail == REASON
        assert row_cells(row, 0, 0)[2:5] == ["unreadable", "?", "?"]  # no counts to show
        assert chip_texts(snap.rows, Unreported())[0] == "⊚ 1"  # not known to be at work


def test_an_unreadable_snapshot_keeps_its_unreported_count() -> None:
    """A snapshot damaged for a refresh or two is no new watcher: its count comes back."""
    seen = Unreported()
    seen.observe([row("app", 5)])
    seen.observe([row("app", 8)])
    assert seen.of("app") == 3
    seen.observe([row("app", 0, run="", status="unreadable")])
    seen.observe([row("app", 9)])
    assert seen.of("app") == 4


def test_the_screen_shows_the_unreadable_watcher(tmp_path: Path) -> None:
    damage(tmp_path)
    app = TopApp(Feed(tmp_path), interval=0.2)

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: ids(app) == ["app", "calm"], "both rows")
        assert status(app, "app") == "unreadable"
        assert "no watchers" not in notice(app) and "read-only" in chips(app)
        assert "its status snapshot state/app.status.json cannot be read (damaged" in \
            shown(app.list_screen.table)

    drive(app, body, size=(200, 20))
