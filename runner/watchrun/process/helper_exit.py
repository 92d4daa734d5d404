"""How a helper process watchrun started from its own files ended, in one line: its exit status
and the last line it wrote.

The guardian, the regex worker and the compile probe's child are Python programs run from the
installed package. One that cannot start (a package replaced under a running runner by
`pip install -U`, a broken install, no memory) exits at once with a traceback; what is said of
it is `exit status 1: ImportError: …`, never its traceback taken for protocol data.
"""

from __future__ import annotations

import re
import signal

__all__ = ["KEEP_BYTES", "ended", "how_ended", "last_words", "returncode_ended"]

KEEP_BYTES = 64 * 1024
"""How much of the end of a helper's output is kept to find its last words in."""
SHOWN_CHARS = 200
"""Its last words are said at most this long."""
_ERROR_LINE = re.compile(rb"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::|$)")


def last_words(output: bytes) -> str:
    """The cause in what a helper that failed wrote: its last exception line (a traceback's last
    line; in a fatal error at interpreter start it comes before the thread dump's
    `<no Python frame>`), else its last line; "" when it wrote nothing."""
    said = [x.strip() for x in output.splitlines() if x.strip()]
    line = next((x for x in reversed(said) if _ERROR_LINE.match(x)), said[-1] if said else b"")
    return line.decode("utf-8", "replace")[:SHOWN_CHARS]


def how_ended(exit_code: int | None, sig: str | None) -> str:
    """`exit status N`, or `killed by SIGNAME`."""
    return f"killed by {sig}" if sig else f"exit status {exit_code}"


def returncode_ended(returncode: int) -> tuple[int | None, str | None]:
    """(exit code, signal name) of a `subprocess` return code (negative: the signal)."""
    if returncode >= 0:
        return returncode, None
    try:
        return None, signal.Signals(-returncode).name
    except ValueError:
        return None, f"SIG{-returncode}"


def ended(exit_code: int | None, sig: str | None, output: bytes) -> str:
    """`exit status 1: ImportError: …`: how it ended, then its last words when it said any."""
    how, why = how_ended(exit_code, sig), last_words(output)
    return f"{how}: {why}" if why else how
