"""A once run's stdout: the command's echoed lines, the verdicts, the CI fence and annotations,
written in order without holding the event loop."""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import TYPE_CHECKING

from watchrun.cli.gate_report import StopCommands

if TYPE_CHECKING:
    from watchrun.match.redact import Redactor
    from watchrun.output.logstream import LogStream

__all__ = ["StdoutEcho", "close_fence", "open_fence", "say", "stdout_failed", "stdout_stream"]


def open_fence(fence: StopCommands | None) -> None:
    if fence is not None and not fence.open:
        say(fence.begin())
        fence.open = True


def close_fence(fence: StopCommands | None) -> None:
    if fence is not None and fence.open:
        say(fence.end())
        fence.open = False


def stdout_stream() -> LogStream | None:
    """stdout as a once run writes it (the echoed output, the verdicts, the fence and the
    annotations): in order, never holding the event loop, and given up on quietly when its
    reader is gone (`| head`) or takes nothing for EXIT_WAIT_S at exit. None when stdout has
    no descriptor (a StringIO, in-process): it is written at once."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # (io.UnsupportedOperation is both)
        return None
    return _stream_on(fd)


@functools.cache
def _stream_on(fd: int) -> LogStream:
    from watchrun.output.logstream import LogStream

    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # anything printed before goes first
    return LogStream(fd)


def stdout_failed() -> tuple[str | None, int]:
    """Once what was said is written (as long as the reader takes some, as at exit): why stdout
    refused it, or None (it took it all, or its reader went away: `| head` chose to stop); and
    the lines given up on when its reader took nothing for EXIT_WAIT_S (a paused pager)."""
    out = stdout_stream()
    if out is None:
        return None, 0
    from watchrun.output.logstream import EXIT_WAIT_S

    left = 0 if out.drain(EXIT_WAIT_S) else out.abandon()
    return out.failed, left


def say(line: str) -> None:
    out = stdout_stream()
    if out is None:
        sys.stdout.write(line + "\n")
    else:
        out.put(line.encode("utf-8", "backslashreplace") + b"\n")


class StdoutEcho:
    """Echo a command's output (whole lines) to stdout while it runs, sanitized (SPEC §6):
    escape sequences and control characters never reach the terminal or the CI log. While
    more than the stream's backlog waits for a reader, the command waits here (its pipe fills)
    and the loop goes on (signals, other watchers); once the run is stopping, lines the reader
    has no room for are counted instead (`unshown`). With `output.redact` (`redactor`), redacted
    as the records are: the CI log is text that leaves the machine."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.unshown = 0
        self.redactor = redactor

    async def __call__(self, data: bytes, wait: bool) -> None:
        from watchrun.match.sanitize import clean_line, edge_text

        text, out = clean_line(data)[0], stdout_stream()
        if self.redactor is not None:
            text = self.redactor.redact(text)[0]
        if not text.isascii():  # (bidi controls and U+2028/U+2029: shown escaped, as everywhere)
            text = edge_text(text, multiline=True)
        if out is None:
            sys.stdout.write(text)
            return
        if wait:
            await out.room()
        elif out.full:
            self.unshown += data.count(b"\n")
            return
        out.put(text.encode("utf-8"))
