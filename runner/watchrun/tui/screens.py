"""The live screen's second layer: the matches (or transcript) pane and the y/N confirm."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static

from watchrun.tui.model import Row
from watchrun.tui.tails import TRANSCRIPT_CHARS
from watchrun.tui.text import inert
from watchrun.tui.wraplog import MATCH_LINES, WrappingLog

if TYPE_CHECKING:
    from watchrun.tui.feed import Feed
    from watchrun.tui.tails import Matches

__all__ = ["MATCH_LINES", "PANE_LINES", "ConfirmScreen", "PaneScreen", "WrappingLog"]

PANE_LINES = 1000
"""Matches the pane loads when it opens (the newest); new ones are appended while it is open,
and the oldest go."""


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
        self.last: dict[str, Any] | None = None
        """Watchers: the newest match shown (the next refresh reads what came after it)."""
        self.after: int | None = None
        """Agents: the stream's seq shown."""
        self._shown = ""
        """Agents: the transcript shown."""
        self._busy = False
        self._skipped = 0
        """Watchers: records a flood made the pane skip since it opened."""

    def compose(self) -> ComposeResult:
        what = "transcript" if self.row.is_agent else f"matches (the last {PANE_LINES}, live)"
        yield Static(Text(f"{what} of {inert(self.row.id, 64)}", style="bold"), id="title")
        if self.row.is_agent:  # (a text a line: the newest turns, bounded by `tails`)
            yield WrappingLog(TRANSCRIPT_CHARS, id="pane")
        else:  # (a note of a skip or a new stream is a text too)
            yield WrappingLog(PANE_LINES + 20, clip=MATCH_LINES, id="pane")
        skip = Static(id="pane-skip")  # (under the newest lines: where a follower looks)
        skip.display = False
        yield skip
        yield Static(id="pane-error")  # (a Text, never a toast: a toast's string is markup)
        yield Footer()

    @property
    def log_view(self) -> WrappingLog:
        return self.query_one("#pane", WrappingLog)

    def _open_log(self) -> WrappingLog | None:
        """The pane's log, or None once the pane closed (or the app ended) while a read ran."""
        return next(iter(self.query("#pane").results(WrappingLog)), None)

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
            self._say("")
        except (OSError, ValueError) as exc:
            self._say(inert(str(exc), 1000))
        finally:
            self._busy = False

    def _say(self, error: str) -> None:
        """The pane's read error under it (shown while it lasts), or none."""
        for line in self.query("#pane-error").results(Static):  # (none once the pane closed)
            line.display = bool(error)
            line.update(Text(error))

    async def _fetch_transcript(self) -> None:
        got = await asyncio.to_thread(self.feed.transcript, self.row.id, self.after)
        if got is not None and got[0] != self.after and (log := self._open_log()) is not None:
            at_end, self.after = log.following, got[0]
            if got[1] != self._shown:  # (records the transcript does not show change nothing)
                self._shown = got[1]
                log.reset()
                log.add(*map(Text, got[1].split("\n")), scroll_end=at_end)

    async def _fetch_matches(self) -> None:
        def read() -> tuple[Matches, list[Text]]:  # (a Text strips 4000 characters a while)
            got = self.feed.matches(self.row.id, self.last, PANE_LINES)
            return got, [Text(line) for line in got.lines]

        got, texts = await asyncio.to_thread(read)
        if (log := self._open_log()) is None:
            return
        name = inert(self.row.id, 64)
        at_end = log.following
        notes = []
        if got.restarted:
            notes.append(f"— {name}'s JSONL started over (removed, then begun again at seq 1): "
                         "its newest matches follow —")
        if got.skipped:
            first, end = got.skipped
            count, said = end - first + 1, ("more came than the pane reads in a refresh; "
                                            f"`watchrun matches {name}` has them")
            self._skipped += count
            notes.append(f"… {count:,} records skipped (seq {first} to {end}): {said}")
            skip = self.query_one("#pane-skip", Static)  # (kept: the log's note scrolls away)
            skip.display = True
            skip.update(Text(f"… {count:,} records skipped (seq {first} to {end}; "
                             f"{self._skipped:,} since the pane opened): {said}", style="yellow"))
        if notes or got.records:
            log.add(*(Text(n, style="dim") for n in notes),
                    *texts, scroll_end=at_end)
            self.last = got.records[-1] if got.records else self.last
        elif self.last is None and not log.texts:
            log.add(Text("(no matches yet)", style="dim"), scroll_end=False)

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
