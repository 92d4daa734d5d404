"""The process's standard streams made safe to use: descriptors 0-2 open, text that stdout's or
stderr's encoding cannot show written as `\\u` escapes, every byte written to stdout (whatever
its buffering), and a stdout that cannot be written said as such, never an error."""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import os
import select
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer

ESCAPE = "watchrun.escape"
"""The codec error handler that writes what an encoding cannot show as JSON's `\\uXXXX`."""


def std_fds() -> None:
    """Put the null device on each of descriptors 0-2 that is closed (`2>&-`, a daemonizer that
    closed them). Otherwise the first file opened takes that number (a JSONL file as stderr,
    where a stray write lands), and Python's `sys.stderr` is None, which nothing expects."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:  # opened at the lowest free number: `fd` (those below are open by now)
            os.open(os.devnull, os.O_RDWR)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 (for the process)


def std_text() -> None:
    """On stdout and stderr, write a character the encoding lacks as `\\uXXXX` (a surrogate
    pair above U+FFFF): readable, valid inside a JSON string, and never a UnicodeEncodeError.
    That is what a Latin-1 locale or PYTHONIOENCODING=ascii lacks, and on UTF-8 a lone
    surrogate (a byte of a file name or an environment value that is not UTF-8)."""
    codecs.register_error(ESCAPE, json_escape)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):  # (not a StringIO in-process)
            stream.reconfigure(errors=ESCAPE)


class StdoutFailed(Exception):
    """stdout refused a write for another reason than a reader that went away (that is
    BrokenPipeError): a full disk (`> /dev/full`), an I/O error. Not an OSError, so that no
    handler takes it for a failure of the file it was reading."""


class _Stdout(io.FileIO):
    """Descriptor 1, whose writes write every byte, and whose failed writes raise StdoutFailed.
    A raw write may take part of its bytes (a reader that is behind when a signal comes, or
    goes away: the next write is EPIPE) or none (stdout left non-blocking by whoever shares
    it, full): the rest is written, once there is room. (A TextIOWrapper straight on a raw
    file, as PYTHONUNBUFFERED makes it, drops what a short write left; a BufferedWriter raised
    BlockingIOError.)"""

    def write(self, data: Buffer, /) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            try:
                n = super().write(view[done:])
            except BrokenPipeError:
                raise
            except OSError as exc:
                raise StdoutFailed(exc.strerror or str(exc)) from exc
            if n is None:  # (non-blocking, and full)
                select.select([], [self.fileno()], [])
            elif n == 0:
                raise StdoutFailed("it took no byte of a write")
            else:
                done += n
        return done


def std_out() -> None:
    """Put sys.stdout on `_Stdout` (same encoding and buffering), so that `main` can tell a
    write to stdout that failed from any other OSError. Only the process's own stdout: a test's
    captured one is left as it is."""
    out = sys.stdout
    buffer = getattr(out, "buffer", None)  # a FileIO itself when unbuffered (PYTHONUNBUFFERED)
    raw = buffer if isinstance(buffer, io.FileIO) else getattr(buffer, "raw", None)
    if type(raw) is not io.FileIO or raw.fileno() != 1 or not isinstance(out, io.TextIOWrapper):
        return
    with contextlib.suppress(OSError):
        out.flush()
    mine: io.RawIOBase | io.BufferedWriter = _Stdout(1, "w", closefd=False)
    if buffer is not raw:
        mine = io.BufferedWriter(mine)
    sys.stdout = io.TextIOWrapper(mine, encoding=out.encoding, errors=out.errors,
                                  line_buffering=out.line_buffering,
                                  write_through=out.write_through)


def json_escape(err: UnicodeError) -> tuple[str, int]:
    """A codec error handler: the characters `err` could not encode, as `\\uXXXX` escapes."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    # (what an encoding lacks is never ASCII, so JSON's ASCII-only string is just the escapes)
    return json.dumps(err.object[err.start:err.end])[1:-1], err.end
