"""The process's standard streams made safe to use: descriptors 0-2 open, and text that stdout's
or stderr's encoding cannot show written as `\\u` escapes, never an error."""

from __future__ import annotations

import codecs
import json
import os
import sys

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


def json_escape(err: UnicodeError) -> tuple[str, int]:
    """A codec error handler: the characters `err` could not encode, as `\\uXXXX` escapes."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    # (what an encoding lacks is never ASCII, so JSON's ASCII-only string is just the escapes)
    return json.dumps(err.object[err.start:err.end])[1:-1], err.end
