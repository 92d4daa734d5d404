"""The live screen's second layer: the matches (or transcript) pane and the y/N confirm."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, RichLog, Static

from watchrun.tui.model import Row, format_match
from watchrun.tui.text import inert, inert_block

if TYPE_CHECKING:
    from watchrun.tui.feed import Feed

__all__ = ["PANE_LINES", "ConfirmScreen", "PaneScreen", "WrappingLog"]

PANE_LINES = 1000
"""Matches the pane loads when it opens (the newest); new ones are appended while it is open."""


class WrappingLog(RichLog):
    """A log that wraps its texts at its own width, and wraps them all again when that width
    changes: a text added before the first layout waits for it (a guessed width would stay),
    and a resized terminal re-wraps what is shown. (RichLog alone wraps at 78 columns or more.)"""

    def __init__(self, max_lines: int, **kwargs: Any) -> None:
        super().__init__(max_lines=max_lines, wrap=True, markup=False, highlight=False,
                         auto_scroll=False, **kwargs)
        self.texts: deque[Text] = deque(maxlen=max_lines)
        self._wrapped_at = 0
        """The width the shown lines were wrapped at; 0 until the log has a width."""

    def add(self, text: Text, scroll_end: bool) -> None:
        self.texts.append(text)
        if self._wrapped_at:
            self.write(text, self._wrapped_at, scroll_end=scroll_end)

    def reset(self) -> None:
        self.texts.clear()
        self.clear()

    @property
    def at_end(self) -> bool:
        """Showing the newest line: followed like `tail -f` unless the person scrolled up."""
        return self.is_vertical_scroll_end or self.max_scroll_y == 0

    def on_resize(self, event: events.Resize) -> None:
        self.call_later(self._rewrap)  # after RichLog's own handler has taken the new size

    def _rewrap(self) -> None:
        width = self.scrollable_content_region.width
        if width <= 0 or width == self._wrapped_at:
            return
        at_end = self.at_end
        self._wrapped_at = width
        self.clear()
        for text in self.texts:
            self.write(text, width, scroll_end=False)
        if at_end:
            self.scroll_end(animate=False, immediate=False)


class PaneScreen(Screen[None]):
    """A watcher's matches, newest at the bottom and followed live; for an agent, its
    transcript (`watchrun agent transcript --format text`), re-read when its stream grows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "top", "top"),
        Binding("G", "bottom", "bottom"),
        Binding("pageup", "page_up", "page up"),
        Binding("pagedown", "page_down", "page down"),
        Binding("j,down", "line_down", "line down", show=False),
        Binding("k,up", "line_up", "line up", show=False),
        Binding("escape", "back", "back"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, feed: Feed, row: Row) -> None:
        super().__init__()
        self.feed, self.row = feed, row
        self.after: int | None = None
        """Watchers: the seq of the newest match shown. Agents: the stream's seq shown."""
        self._busy = False
        self._said: str | None = None
        """The last read error shown: said once, not again at every refresh."""

    def compose(self) -> ComposeResult:
        what = "transcript" if self.row.is_agent else f"matches (the last {PANE_LINES}, live)"
        yield Static(Text(f"{what} of {inert(self.row.id, 64)}", style="bold"), id="title")
        yield WrappingLog(10 * PANE_LINES, id="pane")
        yield Footer()

    @property
    def log_view(self) -> WrappingLog:
        return self.query_one("#pane", WrappingLog)

    def on_mount(self) -> None:
        self.log_view.focus()
        self.follow()

    def follow(self) -> None:
        """Fetch what is new (off the UI thread); one fetch at a time."""
        if not self._busy:
            self._busy = True
            self._fetch()

    @work(group="pane")  # (a worker calls it: no coroutine made for a worker never run)
    async def _fetch(self) -> None:
        try:
            if self.row.is_agent:
                await self._fetch_transcript()
            else:
                await self._fetch_matches()
            self._said = None
        except (OSError, ValueError) as exc:
            if inert(str(exc)) != self._said:
                self._said = inert(str(exc))  # (plain text: a bracket in a path is no markup)
                self.notify(self._said, severity="error", markup=False)
        finally:
            self._busy = False

    async def _fetch_transcript(self) -> None:
        seq, text = await asyncio.to_thread(self.feed.transcript, self.row.id)
        if seq != self.after or self.after is None:
            at_end, self.after = self.log_view.at_end, seq
            self.log_view.reset()
            self.log_view.add(Text(inert_block(text)), scroll_end=at_end)

    async def _fetch_matches(self) -> None:
        recs = await asyncio.to_thread(self.feed.matches, self.row.id, self.after, PANE_LINES)
        if recs:
            self.after = recs[-1]["seq"]
            at_end = self.log_view.at_end
            for rec in recs:
                self.log_view.add(Text(format_match(rec)), scroll_end=at_end)
        elif self.after is None and not self.log_view.texts:
            self.log_view.add(Text("(no matches yet)", style="dim"), scroll_end=False)

    def action_top(self) -> None:
        self.log_view.scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.log_view.scroll_end(animate=False)

    def action_page_up(self) -> None:
        self.log_view.scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self.log_view.scroll_page_down(animate=False)

    def action_line_down(self) -> None:
        self.log_view.scroll_down(animate=False)

    def action_line_up(self) -> None:
        self.log_view.scroll_up(animate=False)

    def action_back(self) -> None:
        self.dismiss()


class ConfirmScreen(ModalScreen[bool]):
    """`Stop server? [y/N]`: `y` answers yes; `n`, Esc, Enter and every other key answer no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape,enter", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.question} [y/N]"), id="question")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def on_key(self, event: events.Key) -> None:
        if event.key not in ("y", "n", "escape", "enter"):
            event.stop()
            self.dismiss(False)
