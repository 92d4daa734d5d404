"""`watchrun top`'s panes keep following the newest line through resizes (the explorer's B: a
shorter terminal left the matches pane, and the transcript pane, where it was, and new matches
were no longer followed until `G`). Only the person's scrolling stops the following. And what
a follower sees of a flood: the skip is said under the pane, not only far above (E)."""

from __future__ import annotations

import json
from pathlib import Path

from test_top import drive, shown, snapshot, strips, until
from test_top_panes import agent_stream, matches, pane_of, refreshed, text
from textual.pilot import Pilot
from textual.widgets import Static

from watchrun.tui.app import TopApp
from watchrun.tui.feed import Feed
from watchrun.tui.screens import WrappingLog


def bottom(log: WrappingLog) -> str:
    """The last line the pane shows."""
    return next((s.text.rstrip() for s in reversed(strips(log)) if s.text.strip()), "")


def test_the_matches_pane_follows_through_resizes_until_scrolled_up(tmp_path: Path) -> None:
    snapshot(tmp_path, "app")
    matches(tmp_path, [f"ERROR tick {i}" for i in range(150)])
    app = TopApp(Feed(tmp_path), interval=3600)

    async def body(pilot: Pilot[None]) -> None:
        pane = pane_of(app, "app")
        await app.push_screen(pane)
        log = pane.log_view
        await until(pilot, lambda: bottom(log).endswith("ERROR tick 149"), "the newest match")
        seq = 151
        for size in ((140, 30), (100, 30), (40, 12), (60, 9), (140, 40)):  # shorter, narrower
            await pilot.resize_terminal(*size)
            try:
                await until(pilot, lambda s=size, n=seq: log.scrollable_content_region.width ==
                            s[0] - 2 and bottom(log).endswith(f"ERROR tick {n - 2}"),
                            f"the newest match still shown at {size}")
            except AssertionError as exc:  # (what the log was doing: failed once, loaded)
                raise AssertionError(
                    f"{exc}: width {log.scrollable_content_region.width}, scroll_y "
                    f"{log.scroll_y} of {log.max_scroll_y}, following {log.following}, "
                    f"bottom {bottom(log)!r}") from None
            matches(tmp_path, [f"ERROR tick {seq - 1}"], first=seq)
            await until(pilot, refreshed(pane, lambda s=seq: bottom(log).endswith(
                f"ERROR tick {s - 1}")), f"a new match followed at {size}")
            seq += 1
        await pilot.press("k")  # the person scrolls up: the pane stays where it is
        kept = bottom(log)
        assert not kept.endswith(f"ERROR tick {seq - 2}")
        await pilot.resize_terminal(140, 30)
        matches(tmp_path, [f"ERROR tick {seq - 1}"], first=seq)
        await until(pilot, refreshed(pane, lambda: f"ERROR tick {seq - 1}" in text(log)),
                    "the new match read")
        assert f"ERROR tick {seq - 1}" not in bottom(log) and not pane.log_view.following
        await pilot.press("G")
        await until(pilot, lambda: bottom(log).endswith(f"ERROR tick {seq - 1}"), "G")
        assert log.following

    drive(app, body, size=(140, 40))


def test_the_transcript_pane_follows_through_a_shorter_terminal(tmp_path: Path) -> None:
    path = agent_stream(tmp_path, 30)
    app = TopApp(Feed(tmp_path), interval=3600)

    async def body(pilot: Pilot[None]) -> None:
        pane = pane_of(app, "big", kind="agent")
        await app.push_screen(pane)
        log = pane.log_view
        await until(pilot, lambda: "outcome" in bottom(log) or "Mock reply 29" in bottom(log),
                    "the end of the transcript")
        await pilot.resize_terminal(40, 12)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"seq": 121, "kind": "dispatch-start", "turnId": "turn-new",
                                 "trigger": "wake", "provider": "mock"}) + "\n")
            fh.write(json.dumps({"seq": 122, "kind": "prompt", "turnId": "turn-new",
                                 "text": "Lines: ERROR at work"}) + "\n")
        await until(pilot, refreshed(pane, lambda: "ERROR at work" in text(log)), "the new turn")
        await until(pilot, lambda: "ERROR at work" in "\n".join(s.text for s in strips(log)),
                    "the new turn shown at the bottom")

    drive(app, body, size=(120, 30))


def test_a_flood_skip_is_said_under_the_newest_lines_and_counted_in_all(tmp_path: Path) -> None:
    """The explorer's E: the note on a flood's skip was a line ~1000 lines above the newest,
    gone at the next refresh, so a person following never saw it. A line under the pane keeps
    the last skip and the count since the pane opened."""
    snapshot(tmp_path, "app")
    matches(tmp_path, [f"ERROR early-{i}" for i in range(10)])
    app = TopApp(Feed(tmp_path), interval=3600)

    async def body(pilot: Pilot[None]) -> None:
        pane = pane_of(app, "app")
        await app.push_screen(pane)
        log = pane.log_view
        await until(pilot, lambda: bottom(log).endswith("ERROR early-9"), "the matches")
        line = pane.query_one("#pane-skip", Static)
        assert not line.display
        matches(tmp_path, [f"ERROR flood {i}" for i in range(20_000)], first=11)
        await until(pilot, refreshed(pane, lambda: bottom(log).endswith("ERROR flood 19999")),
                    "the newest of the first flood")
        await until(pilot, lambda: "records skipped" in shown(line), "the skip said")
        assert shown(line).startswith("… 19,000 records skipped (seq 11 to 19010; 19,000 since "
                                      "the pane opened): more came than the pane reads")
        assert line.region.y > log.region.y and line.region.height >= 1  # under the pane
        matches(tmp_path, [f"ERROR more {i}" for i in range(9_000)], first=20_011)
        await until(pilot, refreshed(pane, lambda: bottom(log).endswith("ERROR more 8999")),
                    "the newest of the second flood")
        await until(pilot, lambda: "27,000 since" in shown(line), "the skips added up")
        assert shown(line).startswith("… 8,000 records skipped (seq 20011 to 28010; 27,000 "
                                      "since the pane opened)")
        matches(tmp_path, ["ERROR calm"], first=29_011)
        await until(pilot, refreshed(pane, lambda: bottom(log).endswith("ERROR calm")), "calm")
        assert "27,000 since the pane opened" in shown(line)  # kept: still true

    drive(app, body, size=(200, 30))
