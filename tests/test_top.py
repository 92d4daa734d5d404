"""`watchrun top` driven headless through Textual's pilot: against a live runner (a real
`watchrun run` subprocess) and against an output dir with no runner."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from liverunner import DEADLINE_S, LiveRunner, cli, hold_runner_lock, write_config
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from watchrun.clock import iso_ts
from watchrun.tui.app import TopApp
from watchrun.tui.feed import Feed
from watchrun.tui.model import Row, Snapshot
from watchrun.tui.screens import ConfirmScreen, PaneScreen, WrappingLog

HOSTILE = ("ERROR \x1b[31mred\x1b[0m \x1b]0;pwned-title\x07[bold red]PWNED[/] "
           "[@click=app.quit]click me[/] \u202eevil \u061calm")
"""A match that tries an SGR colour, an OSC title, Rich markup, a Textual action link, a
bidi override and the Arabic letter mark (a bidi control too)."""


def strips(widget: Widget) -> list[Strip]:
    width, height = widget.outer_size
    return widget.render_lines(Region(0, 0, width, height))


def shown(widget: Widget) -> str:
    """What the widget puts on the screen, as text."""
    return "\n".join(s.text for s in strips(widget))


async def assert_inert(pilot: Pilot[None], widget: Widget, needle: str) -> None:
    """`needle` is shown as typed, with the widget's own styles only: no link, no colour.
    Checked once the widget draws it whole (a first layout may still be narrow and wrap it)."""
    await until(pilot, lambda: any(needle in seg.text for s in strips(widget) for seg in s),
                f"{needle!r} drawn whole")
    found = [seg for s in strips(widget) for seg in s if needle in seg.text]
    assert found, f"{needle!r} not shown in {shown(widget)!r}"
    for seg in found:
        assert seg.style is None or ("@click" not in seg.style.meta and not seg.style.link)
    text = shown(widget)
    assert "\x1b" not in text and "pwned-title" not in text
    assert "\u202e" not in text and "\\u202eevil" in text
    assert "\u061c" not in text


async def until(pilot: Pilot[None], cond: Callable[[], Any], what: str,
                timeout: float = DEADLINE_S) -> None:
    """Let the app run until `cond()` holds; fail naming `what` after `timeout`."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.05)


def drive(app: TopApp, body: Callable[[Pilot[None]], Awaitable[None]],
          size: tuple[int, int] = (120, 30), notifications: bool = False) -> None:
    async def main() -> None:
        async with app.run_test(size=size, notifications=notifications) as pilot:
            await body(pilot)
    asyncio.run(main())


def chips(app: TopApp) -> str:
    return shown(app.list_screen.query_one("#chips", Static))


def notice(app: TopApp) -> str:
    return shown(app.list_screen.query_one("#notice", Static)).strip()


def question(app: TopApp) -> str | None:
    """The confirm's question as shown, if one is up."""
    if not isinstance(app.screen, ConfirmScreen):
        return None
    return next((line.strip(" █▀▄▌▐") for line in shown(app.screen.query_one("#question"))
                 .splitlines() if "?" in line), None)


def ids(app: TopApp) -> list[str]:
    return [r.id for r in app.list_screen.rows]


def status(app: TopApp, wid: str) -> str:
    return next(r.status for r in app.list_screen.rows if r.id == wid)


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def live(tmp_path: Path, config: dict[str, Any]) -> LiveRunner:
    for w in config["watchers"]:
        (tmp_path / w["path"]).write_text("")
    runner = LiveRunner(write_config(tmp_path, config))
    for w in config["watchers"]:
        runner.wait_log(f"[{w['id']}] following")
    return runner


def test_live_rows_chips_moves_panes_and_hostile_text(tmp_path: Path) -> None:
    runner = live(tmp_path, {
        "watchers": [
            {"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "triage"},
            {"id": "other", "path": "other.log", "pattern": "ERROR",
             "label": "[@click=app.quit]other[/] \u202eevil"},
        ],
        "agents": [{"name": "triage", "provider": "mock", "prompt": "Look at {label}: {matches}"}],
    })
    app = TopApp(Feed(runner.out, {"triage": "mock"}), interval=0.2)

    async def body(pilot: Pilot[None]) -> None:
        screen = app.list_screen
        await until(pilot, lambda: ids(app) == ["app", "other", "triage"], "the three rows")
        await until(pilot, lambda: all(r.kind != "?" for r in screen.rows), "their snapshots")
        await until(pilot, lambda: "⊚ 2" in chips(app) and "! 0" in chips(app), "the chips")
        assert "runner running" in chips(app)
        await assert_inert(pilot, screen.table, "[@click=app.quit]other[/]")  # a hostile label

        append(tmp_path / "app.log", HOSTILE + "\n" + "".join(f"ERROR {i}\n" for i in range(60)))
        await until(pilot, lambda: "! 61" in chips(app), "61 unreported matches")
        assert "61 (+61)" in shown(screen.table)

        table = screen.table
        assert table.cursor_row == 0
        for key, row in (("j", 1), ("down", 2), ("k", 1), ("up", 0)):
            await pilot.press(key)
            assert table.cursor_row == row, key
        table.post_message(events.MouseScrollDown(table, 1, 1, 0, 1, 0, False, False, False))
        await until(pilot, lambda: table.cursor_row == 1, "the wheel to move down")
        table.post_message(events.MouseScrollUp(table, 1, 1, 0, -1, 0, False, False, False))
        await until(pilot, lambda: table.cursor_row == 0, "the wheel to move up")

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PaneScreen), "the matches pane")
        pane = app.screen
        assert isinstance(pane, PaneScreen)
        await until(pilot, lambda: "ERROR 59" in shown(pane.log_view), "the matches")
        await until(pilot, lambda: "! 0" in chips(app), "the chip to count them as reported")

        log = pane.log_view
        assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y  # the newest, as tail
        await pilot.press("g")
        assert log.scroll_y == 0
        await assert_inert(pilot, log, "[bold red]PWNED[/]")
        await assert_inert(pilot, log, "[@click=app.quit]click me[/]")
        await pilot.press("pagedown")
        assert log.scroll_y > 0
        await pilot.press("G")
        assert log.scroll_y == log.max_scroll_y
        await pilot.press("pageup")
        assert 0 < log.scroll_y < log.max_scroll_y
        append(tmp_path / "app.log", "ERROR while reading\n")
        await until(pilot, lambda: "ERROR while reading" in "".join(s.text for s in log.lines),
                    "a new match in the open pane")
        await pilot.press("escape")
        assert app.screen is screen

        def agent_done() -> bool:
            row = next(r for r in screen.rows if r.id == "triage")
            return row.matches == 62 and row.status == "idle" and "turn(s) · Mock" in row.detail
        await until(pilot, agent_done, "the agent's turns for the delivered matches")
        await pilot.press("j", "j", "l")
        await until(pilot, lambda: isinstance(app.screen, PaneScreen)
                    and "Mock triage: read" in shown(app.screen.log_view), "the transcript")
        pane = app.screen
        assert isinstance(pane, PaneScreen) and pane.row.id == "triage"
        assert "outcome: ok" in "\n".join(s.text for s in pane.log_view.lines)
        await pilot.press("escape", "x")
        assert notice(app) == "x stops watchers; abort triage's turn with `watchrun agent stop " \
            "triage`"
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    try:
        drive(app, body)
    finally:
        assert runner.stop() == 0


def test_a_cell_that_grows_is_drawn_whole_at_once(tmp_path: Path) -> None:
    """A label replacing the short placeholder is shown whole in the very next frame, also when
    the screen draws before Textual's idle-time measuring (which a busy machine delays)."""
    app = TopApp(Feed(tmp_path), interval=3600)
    label = "a label much longer than the placeholder was"

    def snap(detail: str) -> Snapshot:
        return Snapshot([Row("file", "w", "running", 0, 0, None, detail)], False, "test")

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: app.snapshot is not None, "the first read")
        screen = app.list_screen
        screen.show(snap("(no status snapshot yet)"), app.unreported, 0.0)
        await until(pilot, lambda: "(no status snapshot yet)" in shown(screen.table),
                    "the placeholder")
        screen.show(snap(label), app.unreported, 0.0)
        assert label in shown(screen.table)  # drawn now, before any idle
        await pilot.pause()
        assert label in shown(screen.table)

    drive(app, body)


def test_stop_and_clear_ask_first(tmp_path: Path) -> None:
    runner = live(tmp_path, {"watchers": [
        {"id": "a", "path": "a.log", "pattern": "ERROR"},
        {"id": "b", "path": "b.log", "pattern": "ERROR"},
    ]})
    app = TopApp(Feed(runner.out), interval=0.2)

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: ids(app) == ["a", "b"] and app.live, "the rows of a live runner")
        await until(pilot, lambda: [status(app, w) for w in "ab"] == ["running"] * 2, "snapshots")
        await pilot.press("d")
        assert notice(app) == "no stopped watchers to clear"
        await pilot.press("x")
        await until(pilot, lambda: question(app) == "Stop watcher a? [y/N]", "the confirm")
        await pilot.press("n")
        assert app.screen is app.list_screen and notice(app) == "stop cancelled"
        await pilot.press("x")
        await until(pilot, lambda: question(app) == "Stop watcher a? [y/N]", "the confirm")
        await pilot.press("q")  # any other key answers no; it does not quit here
        assert app.screen is app.list_screen and notice(app) == "stop cancelled"
        assert app.return_code is None

        await pilot.press("j", "K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        await pilot.press("y")
        await until(pilot, lambda: any(r["kind"] == "stop" for r in runner.records("b")),
                    "b's stop record")
        await until(pilot, lambda: status(app, "b") == "stopped" and "⊚ 1" in chips(app),
                    "b shown stopped")
        assert notice(app) == "stopped b"
        assert status(app, "a") == "running"
        assert not any(r["kind"] == "stop" for r in runner.records("a"))  # `n` sent nothing

        await pilot.press("x")
        assert notice(app) == "b is not running (stopped)"
        await pilot.press("d")
        await until(pilot, lambda: question(app) == "Clear stopped watchers (1)? [y/N]",
                    "the confirm")
        await pilot.press("escape")
        assert notice(app) == "clear cancelled" and ids(app) == ["a", "b"]
        await pilot.press("d", "y")
        await until(pilot, lambda: ids(app) == ["a"], "b cleared")
        assert notice(app) == "cleared 1 watcher"
        assert runner.records("b")[-1]["kind"] == "stop"  # its JSONL stays
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    try:
        drive(app, body)
    finally:
        assert runner.stop() == 0


def test_without_a_runner_the_screen_reads_the_output_dir(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("INFO ok\n" + HOSTILE + "\nERROR second\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})
    done = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    app = TopApp(Feed(tmp_path / ".watchrun"), interval=0.2)

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: ids(app) == ["app"], "the row")
        assert status(app, "app") == "stopped"
        assert "⊚ 0" in chips(app) and "read-only: no live runner on" in chips(app)
        assert "2 " in shown(app.list_screen.table)  # its matches
        await pilot.press("x")
        assert notice(app).startswith("cannot stop app: read-only: no live runner on")
        await pilot.press("d")
        assert notice(app).startswith("cannot clear: read-only: no live runner on")
        await pilot.press("l")
        await until(pilot, lambda: isinstance(app.screen, PaneScreen)
                    and "ERROR second" in shown(app.screen.log_view), "the matches")
        assert isinstance(app.screen, PaneScreen)
        await assert_inert(pilot, app.screen.log_view, "[bold red]PWNED[/]")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    drive(app, body)


def test_the_pane_wraps_long_matches_at_its_width(tmp_path: Path) -> None:
    """A match longer than the pane is wrapped at the pane's width: nothing is wider than the
    pane (no sideways scrolling), nothing is wrapped narrower, and its end is shown."""
    long = "ERROR " + " ".join(f"w{i:03d}" for i in range(30)) + " END"  # ~155 columns
    (tmp_path / "app.log").write_text(long + "\n" + "".join(f"ERROR {i}\n" for i in range(80)))
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})
    done = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    feed = Feed(tmp_path / ".watchrun")
    app = TopApp(feed, interval=3600)

    async def body(pilot: Pilot[None]) -> None:
        pane = PaneScreen(feed, Row("file", "app", "stopped", 81, 81, None))
        await app.push_screen(pane)
        log = pane.log_view
        await until(pilot, lambda: "ERROR 79" in shown(log), "the matches")
        await pilot.press("g")
        rows = [s.text.rstrip() for s in strips(log)]
        width = log.scrollable_content_region.width
        assert width > 40 and log.max_scroll_x == 0, "no line is wider than the pane"
        assert max(len(r) for r in rows if r) > width - 12, f"wrapped narrower: {rows[:4]}"
        assert any("END" in r for r in rows), rows[:6]  # the long line's end, not cut off
        for columns in (60, 140):  # a resized terminal re-wraps what is shown
            await pilot.resize_terminal(columns, 20)
            await until(pilot, lambda c=columns: log.scrollable_content_region.width == c - 2,
                        f"the pane at {columns} columns")
            await pilot.press("g")
            await until(pilot, lambda: wrapped_at_width(log), f"re-wrapped at {columns} columns")

    drive(app, body, size=(100, 20))


def wrapped_at_width(log: WrappingLog) -> bool:
    """The log's first text (a long one) is wrapped at the log's width, neither wider nor
    narrower, and its end is shown."""
    rows = [s.text.rstrip() for s in strips(log)]
    width = log.scrollable_content_region.width
    return (log.max_scroll_x == 0 and max(len(r) for r in rows if r) > width - 12
            and any("END" in r for r in rows))


def test_a_text_added_before_the_first_layout_is_wrapped_at_the_log_width() -> None:
    """What the pane is given before it has a size (its first fetch can finish first on a busy
    machine) waits for the size instead of being wrapped at a guess that then stays."""
    long = "ERROR " + " ".join(f"w{i:03d}" for i in range(30)) + " END"

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield WrappingLog(100)

        def on_mount(self) -> None:
            log = self.query_one(WrappingLog)
            assert log.scrollable_content_region.width == 0  # not laid out yet
            log.add(Text(long), scroll_end=False)

    async def main() -> None:
        app = One()
        async with app.run_test(size=(90, 10)) as pilot:
            log = app.query_one(WrappingLog)
            await until(pilot, lambda: wrapped_at_width(log), "the text wrapped at 88 columns")
    asyncio.run(main())


def snapshot(root: Path, wid: str) -> None:
    (root / "state").mkdir(parents=True, exist_ok=True)
    snap = {"schema": 1, "id": wid, "label": wid, "kind": "file", "source": f"/l/{wid}.log",
            "status": "running", "runnerPid": os.getpid(), "startedAt": "t0", "linesRead": 1,
            "matchCount": 0, "lastMatchAt": None}
    (root / "state" / f"{wid}.status.json").write_text(json.dumps(snap))
    hold_runner_lock(root)  # its runner (this process) is live


def test_a_refresh_of_1500_rows_takes_moments(tmp_path: Path) -> None:
    """Every row's LAST MATCH changes at each refresh ("5m ago" → "6m ago"). Textual measured
    each updated cell narrower than its column against the whole column again: 1500 rows took
    ~15 s a refresh, 3000 froze the screen for minutes. The screen measures each column once."""
    start = time.time()
    for i in range(1500):
        snapshot(tmp_path, f"w{i:04d}")
        path = tmp_path / "state" / f"w{i:04d}.status.json"
        snap = json.loads(path.read_text())
        snap["lastMatchAt"] = iso_ts(start - 3 * i)  # from just now to 75m ago: widths vary
        path.write_text(json.dumps(snap))

    class Clock:
        shift = 0.0

        def now(self) -> float:
            return start + self.shift

        def monotonic(self) -> float:
            return time.monotonic()

    clock = Clock()
    app = TopApp(Feed(tmp_path), interval=3600, clock=clock)

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: len(ids(app)) == 1500, "the 1500 rows")
        snap = app.snapshot
        assert snap is not None
        for minutes in (1, 2, 3):
            clock.shift = minutes * 61.0
            began = time.monotonic()
            app.list_screen.show(snap, app.unreported, clock.now())
            await pilot.press("j")  # (answered once the refresh and its idle work are done)
            took = time.monotonic() - began
            assert took < 5.0, f"a refresh of 1500 rows took {took:.1f} s"
        cell = app.list_screen.table.get_cell("watcher:w1499", "LAST MATCH")
        assert str(cell) == "1h 18m ago", cell  # (74m 57s + 3m 3s)

    drive(app, body)


def test_a_slow_read_never_stacks_refreshes(tmp_path: Path) -> None:
    snapshot(tmp_path, "a")
    gate, entered = threading.Event(), []

    class SlowFeed(Feed):
        def poll(self) -> Snapshot:
            entered.append(1)
            gate.wait(DEADLINE_S)
            return super().poll()

    ticks = []

    class CountingApp(TopApp):
        def refresh_rows(self) -> None:
            ticks.append(1)
            super().refresh_rows()

    app = CountingApp(SlowFeed(tmp_path), interval=0.05)

    async def body(pilot: Pilot[None]) -> None:
        try:
            await until(pilot, lambda: len(ticks) >= 6, "the refresh timer to fire while a read "
                        "hangs")
            assert len(entered) == 1 and app.snapshot is None
            await pilot.press("j", "q")  # the screen answers meanwhile
        finally:
            gate.set()
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    drive(app, body)


def test_a_slow_stop_leaves_the_screen_live(tmp_path: Path) -> None:
    for wid in "ab":
        snapshot(tmp_path, wid)
    stopping, release = threading.Event(), threading.Event()

    def control(path: Path, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        if payload["cmd"] == "stop":
            stopping.set()
            release.wait(DEADLINE_S)
            return {"ok": True, "message": f"stopped {payload['id']}"}
        return {"ok": True, "state": "running", "watchers": ["a", "b"]}

    app = TopApp(Feed(tmp_path, control=control), interval=0.1)

    async def body(pilot: Pilot[None]) -> None:
        try:
            await until(pilot, lambda: ids(app) == ["a", "b"] and app.live, "the rows")
            await pilot.press("x", "y")
            await until(pilot, stopping.is_set, "the stop request")
            assert notice(app) == "stopping a…"
            await pilot.press("j")
            assert app.list_screen.table.cursor_row == 1
        finally:
            release.set()
        await until(pilot, lambda: notice(app) == "stopped a", "the stop's answer")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    drive(app, body)


def test_a_read_error_in_the_pane_is_plain_text_under_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-91's F5: the pane's error toast went through Textual's markup: an output dir
    named `[@click=app.quit]out` made the path a live link that quits (a `[link=…]` in a
    message ended the screen with a MarkupError), and the toast came again at every refresh.
    (F17: `notify(markup=False)` is no fix on Textual 1.0, whose `notify` has no such
    argument.) The error is a plain-text line under the pane while it lasts."""
    monkeypatch.chdir(tmp_path)  # (a short path: the line shows three rows at most)
    root = Path("[@click=app.quit]out")
    snapshot(root, "api")
    (root / "watchers").mkdir()
    (tmp_path / "real.jsonl").write_text("")
    (root / "watchers" / "api.jsonl").symlink_to("../../real.jsonl")
    app = TopApp(Feed(root), interval=0.1)

    def error() -> Widget:
        return app.screen.query_one("#pane-error")

    def said() -> str:  # (its text, the wrapping taken out)
        return "".join(shown(error()).split()) if error().display else ""

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: ids(app) == ["api"], "the row")
        await pilot.press("enter")
        await until(pilot, lambda: "[@click=app.quit]out/watchers/api.jsonl" in said(),
                    "the error, its path as typed")
        for seg in (seg for s in strips(error()) for seg in s):
            assert seg.style is None or ("@click" not in seg.style.meta and not seg.style.link)
        assert "isasymlink" in said()
        assert not list(app.screen.query("Toast"))
        (root / "watchers" / "api.jsonl").unlink()
        (root / "watchers" / "api.jsonl").write_text("")
        await until(pilot, lambda: not error().display, "the error gone once the read works")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    drive(app, body, size=(200, 30), notifications=True)


def test_a_watcher_being_stopped_shows_stopping(tmp_path: Path) -> None:
    """helper-91's F6: while a stop waited out a stubborn command's stopTimeout, the row said
    `stopped` (the runner's `status` lists it under `stopping`), the chip dropped it, and `d`
    offered to clear it while its command still ran and matched."""
    config = write_config(tmp_path, {"limits": {"stopTimeout": "1m"}, "watchers": [
        {"id": "stubborn", "command": "trap '' TERM; while true; do echo ERR tick; sleep 0.2; "
         "done", "pattern": "ERR"}]})
    runner = LiveRunner(config)
    app = TopApp(Feed(runner.out), interval=0.1)

    def pid() -> int | None:
        listed = runner.control({"cmd": "list"})["watchers"]
        return next((w["pid"] for w in listed if w["status"] in ("running", "stopping")), None)

    async def body(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: ids(app) == ["stubborn"] and status(app, "stubborn")
                    == "running", "the running row")
        await pilot.press("x", "y")
        await until(pilot, lambda: status(app, "stubborn") == "stopping", "stopping")
        assert "⊚ 1" in chips(app)
        await pilot.press("d")
        assert notice(app) == "no stopped watchers to clear"
        await pilot.press("x")
        assert notice(app) == "stubborn is already being stopped"
        os.kill(pid() or 0, 9)  # (it ignores SIGTERM: end the wait)
        await until(pilot, lambda: status(app, "stubborn") == "stopped"
                    and notice(app) == "stopped stubborn", "the stop's answer")
        assert "⊚ 0" in chips(app)
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "q to quit")

    try:
        runner.wait_running()
        drive(app, body)
    finally:
        assert runner.stop() == 0
