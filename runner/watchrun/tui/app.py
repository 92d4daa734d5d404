"""`watchrun top`: the Textual app, its list screen and its refresh loop."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import ClassVar

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from watchrun.clock import Clock, SystemClock
from watchrun.tui.feed import Feed, detached
from watchrun.tui.model import Row, Snapshot, Unreported, chips, row_cells
from watchrun.tui.screens import ConfirmScreen, PaneScreen
from watchrun.tui.text import inert

__all__ = ["COLUMNS", "ListScreen", "RowTable", "TopApp"]

COLUMNS = ("KIND", "ID", "STATUS", "LINES", "MATCHES", "LAST MATCH", "DETAIL")
_STYLE = {"running": "green", "starting": "green", "waiting": "cyan", "backoff": "yellow",
          "stopping": "yellow",
          "exited": "dim", "stopped": "dim", "fatal": "bold red", "paused": "red", "failed": "red",
          "interrupted": "red", "error": "red",
          "idle": ""}
"""Status cell styles: chosen here, never taken from the data."""


def _key(row: Row) -> str:
    return f"{'agent' if row.is_agent else 'watcher'}:{row.id}"


def _cells(row: Row, unreported: Unreported, now: float) -> list[Text]:
    """A row's cells as `Text` (a `str` cell would be parsed as markup)."""
    cells = [Text(c) for c in row_cells(row, 0 if row.is_agent else unreported.of(row.id), now)]
    cells[2].stylize(_STYLE.get(row.status, ""))
    return cells


class RowTable(DataTable[Text]):
    """The rows; the mouse wheel moves the selection (as `j`/`k` do) instead of scrolling."""

    def fit(self, rows: list[list[Text]]) -> bool:
        """Size each column to its widest cell now, before the cells change (Textual measures
        on idle, and a cell drawn before that stays cached cut to the old width); True when a
        width changed. Measured here, once a column: Textual's own measure of an updated cell
        narrower than its column measures the whole column again, for each such cell (3000
        rows took minutes a refresh)."""
        changed = False
        for i, column in enumerate(self.ordered_columns):
            width = max([column.label.cell_len, *(r[i].cell_len for r in rows)])
            changed = changed or width != column.content_width
            column.content_width = width
        return changed

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.prevent_default()
        event.stop()
        self.action_cursor_down()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.prevent_default()
        event.stop()
        self.action_cursor_up()


class ListScreen(Screen[None]):
    """Every watcher and agent, the two chips, and what the last action said."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "next row", show=False, priority=True),
        Binding("k,up", "move(-1)", "previous row", show=False, priority=True),
        Binding("enter,l", "open", "open matches", priority=True),
        Binding("x,K", "stop", "stop watcher"),
        Binding("d", "clear", "clear stopped"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, top: TopApp) -> None:
        super().__init__()
        self.top = top
        self.rows: list[Row] = []
        self._empty = False  # the notice says there are no rows

    def compose(self) -> ComposeResult:
        yield Static(id="chips")
        table = RowTable(id="rows", cursor_type="row", zebra_stripes=True)
        for label in COLUMNS:
            table.add_column(label, key=label)
        yield table
        yield Static(id="notice")
        yield Footer()

    def on_mount(self) -> None:
        """The first read, then one a tick, started once this screen's widgets exist (Textual
        composes a widget's children before its Mount): started by the app's own mount, a
        read's `show` once found no #chips in a loaded suite (not reproduced alone)."""
        self.top.refresh_rows()
        self.top.set_interval(self.top.interval, self.top.refresh_rows)

    @property
    def table(self) -> RowTable:
        return self.query_one("#rows", RowTable)

    def selected(self) -> Row | None:
        index = self.table.cursor_row
        return self.rows[index] if 0 <= index < len(self.rows) else None

    def say(self, message: str, style: str = "") -> None:
        self.query_one("#notice", Static).update(Text(message, style=style))

    def show(self, snap: Snapshot, unreported: Unreported, now: float) -> None:
        running, unread = chips(snap.rows, unreported)
        head = Text()
        head.append(f" {running} ", style="bold green" if running != "⊚ 0" else "bold")
        head.append(" ")
        head.append(f" {unread} ", style="bold yellow" if unread != "! 0" else "bold")
        head.append(f"   {snap.note} · {inert(self.top.feed.root, 200)}", style="dim")
        self.query_one("#chips", Static).update(head)
        self._fill(snap.rows, unreported, now)
        if snap.errors:
            self.say("; ".join(snap.errors), "red")
        elif not snap.rows:
            self.say(f"no watchers or agents have run with output dir "
                     f"{inert(self.top.feed.root, 200)}")
            self._empty = True
        elif self._empty:
            self.say("")
            self._empty = False

    def _fill(self, rows: list[Row], unreported: Unreported, now: float) -> None:
        """Update the table in place, keeping the selection on the same watcher or agent."""
        table, before = self.table, self.selected()
        cells = [_cells(r, unreported, now) for r in rows]
        resized = table.fit(cells)
        if not resized and [_key(r) for r in rows] == [_key(r) for r in self.rows]:
            for r, new in zip(rows, cells, strict=True):
                for label, cell in zip(COLUMNS, new, strict=True):
                    if table.get_cell(_key(r), label) != cell:
                        table.update_cell(_key(r), label, cell)  # (widths: `fit`)
            self.rows = rows
            return
        table.clear()
        for r, new in zip(rows, cells, strict=True):
            table.add_row(*new, key=_key(r))
        self.rows = rows
        keys = [_key(r) for r in rows]
        if before is not None and _key(before) in keys:
            table.move_cursor(row=keys.index(_key(before)), animate=False)

    # -- actions ----------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        if step > 0:
            self.table.action_cursor_down()
        else:
            self.table.action_cursor_up()

    def action_open(self) -> None:
        row = self.selected()
        if row is None:
            return
        if not row.is_agent:
            self.top.unreported.mark_seen(row.id)
        self.top.open_pane(row)

    def action_stop(self) -> None:
        row = self.selected()
        if row is None:
            return
        name = inert(row.id, 64)
        if row.is_agent:
            self.say(f"x stops watchers; abort {name}'s turn with `watchrun agent stop {name}`",
                     "yellow")
        elif not self.top.live:
            self.say(f"cannot stop {name}: {self.top.note}", "yellow")
        elif not row.running:
            self.say(f"{name} is not running ({inert(row.status, 20)})", "yellow")
        elif row.status == "stopping":
            self.say(f"{name} is already being stopped", "yellow")
        else:
            self.app.push_screen(ConfirmScreen(f"Stop watcher {name}?"),
                                 lambda yes: self._confirmed(yes, "stop", row.id))

    def action_clear(self) -> None:
        ended = [r for r in self.rows if not r.is_agent and not r.running]
        if not self.top.live:
            self.say(f"cannot clear: {self.top.note}", "yellow")
        elif not ended:
            self.say("no stopped watchers to clear", "yellow")
        else:
            self.app.push_screen(ConfirmScreen(f"Clear stopped watchers ({len(ended)})?"),
                                 lambda yes: self._confirmed(yes, "clear", ""))

    def _confirmed(self, yes: bool | None, what: str, wid: str) -> None:
        if not yes:
            self.say(f"{what} cancelled", "dim")
            return
        self.say(f"{'stopping ' + inert(wid, 64) if wid else 'clearing'}…")
        self._request(what, wid)

    @work(group="control")
    async def _request(self, what: str, wid: str) -> None:
        feed = self.top.feed
        self.top.pending = f"stop of {wid}" if what == "stop" else "clear"
        ok, message = await detached(lambda: feed.stop(wid) if what == "stop" else feed.clear())
        self.top.pending = None  # (left set when `q` cancels the wait: `top` says so at its end)
        self.say(message, "green" if ok else "red")
        self.top.refresh_rows()


class TopApp(App[None]):
    """The live screen: rows refreshed every `interval` seconds, off the UI thread."""

    TITLE = "watchrun top"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #chips { height: 1; background: $boost; }
    #title { height: 1; background: $boost; }
    #rows { height: 1fr; overflow-x: hidden; }
    #notice { height: 1; color: $text-muted; }
    #pane-error { height: auto; max-height: 3; color: $error; }
    #pane-skip { height: auto; max-height: 2; }
    ConfirmScreen { align: center middle; }
    #question { width: auto; padding: 1 3; border: thick $warning; background: $surface; }
    """

    def __init__(self, feed: Feed, *, interval: float = 1.0, clock: Clock | None = None) -> None:
        if os.environ.get("NO_COLOR") == "":  # unset, as no-color.org says (and the CLI's
            del os.environ["NO_COLOR"]  # colour): Textual would take it for set
        super().__init__()
        self.feed = feed
        self.interval = interval
        self.clock = clock or SystemClock()
        self.unreported = Unreported()
        self.snapshot: Snapshot | None = None
        self._polling = False
        self.pending: str | None = None
        """The request sent to the runner whose answer is awaited (`stop of app`, `clear`)."""
        self.list_screen = ListScreen(self)

    @property
    def live(self) -> bool:
        return self.snapshot is not None and self.snapshot.live

    @property
    def note(self) -> str:
        return self.snapshot.note if self.snapshot is not None else "not read yet"

    def on_mount(self) -> None:
        """SIGTERM (`kill`, `timeout`) and SIGHUP end the screen as `q` does, so Textual gives
        the terminal back (the alternate screen left, mouse reporting off, the cursor shown)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.exit)  # (called in the loop, not the handler)

    def get_default_screen(self) -> Screen[None]:
        return self.list_screen

    def refresh_rows(self) -> None:
        """Read the runner and the output dir again (one read at a time)."""
        if not self._polling:
            self._polling = True
            self._poll()

    @work(group="poll")  # (a worker calls it: no coroutine made for a worker never run)
    async def _poll(self) -> None:
        try:
            snap = await asyncio.to_thread(self.feed.poll)
        except (OSError, ValueError) as exc:
            self.list_screen.say(inert(f"cannot read {self.feed.root}: {exc}"), "red")
            return
        finally:
            self._polling = False
        self.snapshot = snap
        self.unreported.observe(snap.rows)
        if isinstance(self.screen, PaneScreen):
            self.screen.follow()
            if not self.screen.row.is_agent:
                self.unreported.mark_seen(self.screen.row.id)
        self.list_screen.show(snap, self.unreported, self.clock.now())

    def open_pane(self, row: Row) -> None:
        self.push_screen(PaneScreen(self.feed, row))
