"""The panes' log: its texts wrapped at its own width, each to a few lines, the oldest dropped."""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import RichLog

__all__ = ["MATCH_LINES", "WrappingLog"]

MATCH_LINES = 8
"""Wrapped lines a match takes at most in the pane; a longer one is cut there, and says so
(`watchrun matches` shows it whole): 1000 matches are 8000 lines at most, and a resize wraps
that much again, not 4000 characters a match."""
_ONE_COLUMN = re.compile("[ -~\u00a1-\u00ac\u00ae-\u02ff\u2010-\u2027\u2030-\u205e]*")
"""Text whose every character takes one column (ASCII, Latin, punctuation such as `…`)."""
_CUT = "… (cut here: `watchrun matches` shows the whole line)"


class WrappingLog(RichLog):
    """A log of up to `keep` texts that wraps them at its own width, and wraps them all again
    when that width changes: a text added before the first layout waits for it (a guessed width
    would stay), and a resized terminal re-wraps what is shown. (RichLog alone wraps at 78
    columns or more.) `clip`: the wrapped lines a text takes at most. The oldest text goes
    whole, with its lines (RichLog's own `max_lines` drops lines, starting mid-text)."""

    def __init__(self, keep: int, clip: int | None = None, **kwargs: Any) -> None:
        super().__init__(max_lines=None, wrap=True, markup=False, highlight=False,
                         auto_scroll=False, **kwargs)
        self.keep, self.clip = keep, clip
        self.texts: deque[Text] = deque()
        self._heights: deque[int] = deque()
        """The lines each text was wrapped into (none until the log has a width)."""
        self._wrapped_at = 0
        """The width the shown lines were wrapped at; 0 until the log has a width."""
        self.following = True
        """Following the newest line like `tail -f`: cleared only when the view is scrolled
        away from the end (the person's scrolling), set again when it is back there; a resize
        keeps it (a shorter view is no longer at the end, and was once taken for scrolled)."""

    def add(self, *texts: Text, scroll_end: bool) -> None:
        self.texts.extend(texts)
        if self._wrapped_at:
            for text in texts:
                self._put(text, self._wrapped_at)
            self._settle(scroll_end)
        dropped = 0
        while len(self.texts) > self.keep:
            self.texts.popleft()
            dropped += self._heights.popleft() if self._heights else 0
        if dropped:
            self._drop(dropped)

    def reset(self) -> None:
        self.texts.clear()
        self._heights.clear()
        self.clear()

    @property
    def at_end(self) -> bool:
        """Showing the newest line (where the view is, not whether it follows)."""
        return self.is_vertical_scroll_end or self.max_scroll_y == 0

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Every move of the view (a key, the wheel, the scrollbar; or this log's own move to
        its end) says whether it follows; a resize moves nothing, and clearing the log sets
        no position (Textual only ever lowers one to the new end: following again)."""
        super().watch_scroll_y(old_value, new_value)
        self.following = self.at_end

    def on_resize(self, event: events.Resize) -> None:
        self.call_later(self._rewrap)  # after RichLog's own handler has taken the new size

    def _rewrap(self) -> None:
        """Wrap again at a new width; at any resize, back to the end when following."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        if width != self._wrapped_at:
            self._wrapped_at = width
            self.clear()
            self._heights.clear()
            for text in self.texts:
                self._put(text, width)
        self._settle(self.following)

    def _settle(self, scroll_end: bool) -> None:
        """Once a batch of texts is in: the log's new size, then its end shown if asked."""
        self.virtual_size = Size(self._widest_line_width, len(self.lines))
        if scroll_end:
            self.call_after_refresh(self._to_end)  # (once the new size is laid out)

    def _to_end(self, again: bool = True) -> None:
        """The newest line, unless the person scrolled away meanwhile (a key pressed just
        after a resize or a refresh is not undone); once more after the next refresh, as a
        layout still settling (a loaded host) can move the end after this scroll."""
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            if again:
                self.call_after_refresh(self._to_end, False)

    def _put(self, text: Text, width: int) -> None:
        before, plain = len(self.lines), text.plain
        if text.spans or not _ONE_COLUMN.fullmatch(plain):
            self.write(self._clipped(text, width), width, scroll_end=False)
        else:  # a column a character: wrapped here (Rich took ~2 s for 8000 lines)
            rows, cut = self._rows(plain, width)
            style = self.app.console.get_style(text.style) if isinstance(text.style, str) \
                else text.style
            strips = [Strip([Segment(r, style or None)], len(r)) for r in rows]
            if cut:
                note = _CUT[:width]
                strips.append(Strip([Segment(note, self.app.console.get_style("dim"))],
                                    len(note)))
            self.lines.extend(strips)
            self._widest_line_width = max(self._widest_line_width,
                                          *(s.cell_length for s in strips))
        self._heights.append(len(self.lines) - before)

    def _rows(self, plain: str, width: int) -> tuple[list[str], bool]:
        """`plain` (one column a character) wrapped at `width`, at a space when one is in the
        line's second half; at most `clip` rows (the last for the note), and whether it was
        cut."""
        rows: list[str] = []
        start, most = 0, self.clip or len(plain) + 1
        while len(plain) - start > width:
            if len(rows) == most - 1:
                return rows, True
            space = plain.rfind(" ", start, start + width + 1)
            end = space if space > start + width // 2 else start + width
            rows.append(plain[start:end])
            start = end + (end == space)
        if start < len(plain) or not rows:
            rows.append(plain[start:])
        return rows, False

    def _clipped(self, text: Text, width: int) -> Text:
        """`text`, or its first `clip` lines at `width` with a note: only what they can hold
        is wrapped (a character takes a column or more, but for zero-width marks)."""
        if self.clip is None or len(text) <= width:
            return text
        head = text[:(self.clip + 1) * width]
        lines = head.wrap(self.app.console, width)
        if len(lines) <= self.clip and len(head) == len(text):
            return text
        shown = Text("\n").join(lines[:self.clip - 1])
        shown.append(f"\n{_CUT}", style="dim")
        return shown

    def _drop(self, count: int) -> None:
        """Take the oldest `count` lines away, keeping the view where it was."""
        following = self.following
        del self.lines[:count]
        self._start_line += count  # (RichLog's line cache is keyed by it, as when it trims)
        self.virtual_size = Size(self.virtual_size.width, len(self.lines))
        if not following:
            self.scroll_to(y=max(0, self.scroll_y - count), animate=False, immediate=True)
        self.refresh()
