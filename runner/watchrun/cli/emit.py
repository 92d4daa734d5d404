"""What the CLI prints: one JSON object per command (`--json`, docs/cli.md) or lines for people,
and errors either way — every text through the edge sanitizer."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from watchrun.exitcodes import ExitStatus
from watchrun.match.sanitize import edge_json, edge_text

if TYPE_CHECKING:
    from watchrun.config.diagnostics import Diagnostic
    from watchrun.output.runlog import RunLog

__all__ = ["EXIT_STATUS", "Out", "exit_status", "log_diagnostic", "wants_colour"]

EXIT_STATUS: dict[str, int] = {
    # 2: the command line, the config or a name is wrong (nothing was done)
    "usage": 2, "config_not_found": 2, "config_invalid": 2, "not_found": 2,
    "unknown_agent": 2, "invalid_argument": 2, "invalid_cursor": 2, "not_supported": 2,
    "exists": 2, "bad_request": 2, "invalid": 2,
    # 1: an answer that is "no" (as a crossed gate): the cursor or the wait ran out
    "cursor_expired": 1, "gap_detected": 1, "watch_timeout": 1,
}
"""Exit status per error code (SPEC §7); any other code (`no_runner`, `read_failed`,
`write_failed`, `queue_full`, …) is 3, a runtime failure."""


def exit_status(code: str) -> int:
    return EXIT_STATUS.get(code, ExitStatus.RUNTIME)


def wants_colour(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour only on a terminal, never with NO_COLOR set to anything (no-color.org) nor on
    TERM=dumb."""
    if environ.get("NO_COLOR") or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Out:
    """One command's printing: JSON documents and errors, or sanitized lines for people."""

    def __init__(self, as_json: bool, *, stdout: TextIO | None = None,
                 stderr: TextIO | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.as_json = as_json
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.environ = os.environ if environ is None else environ

    @classmethod
    def for_args(cls, args: argparse.Namespace) -> Out:
        return cls(getattr(args, "format", None) == "json")

    @property
    def colour(self) -> bool:
        return not self.as_json and wants_colour(self.stdout, self.environ)

    def doc(self, obj: dict[str, Any]) -> None:
        """The command's one JSON object (never a bare array: see docs/cli.md)."""
        if not isinstance(obj, dict):
            raise TypeError(f"a --json document is an object, not {type(obj).__name__}")
        print(edge_json(obj, indent=2), file=self.stdout)

    def line(self, text: object = "") -> None:
        """One line for people, sanitized (a newline inside shows as `\\n`)."""
        print(edge_text(text), file=self.stdout)

    def block(self, text: str) -> None:
        """Already laid-out text (a table, a rendering): sanitized, its newlines kept. Cells
        were sanitized when laid out; only colour added after that survives."""
        self.stdout.write(text if text.endswith("\n") else text + "\n")

    def lines(self, texts: Iterable[object]) -> None:
        for text in texts:
            self.line(text)

    def note(self, text: str) -> None:
        """A remark on stderr (never mixed into a JSON document)."""
        print(f"watchrun: {edge_text(text)}", file=self.stderr)

    def fail(self, code: str, message: str, **extra: Any) -> int:
        """Say why the command could not do its job; returns its exit status. JSON mode:
        `{"error": {"code", "message", ...}}` on stdout; else `watchrun: error: …` on stderr."""
        if self.as_json:
            self.doc({"error": {"code": code, "message": message, **extra}})
        else:
            print(f"watchrun: error: {edge_text(message)}", file=self.stderr)
        return exit_status(code)


def config_failed(out: Out, diagnostics: Iterable[Any]) -> int:
    """An invalid config (a `LoadResult` without a config): its errors, then exit 2. JSON:
    `{"error": {"code": "config_invalid", "message", "diagnostics": [...]}}`."""
    errors = [d for d in diagnostics if d.severity == "error"]
    if out.as_json:
        n = len(errors)
        return out.fail("config_invalid", f"the config has {n} error{'' if n == 1 else 's'}; "
                        "nothing was read (see `watchrun validate`)",
                        diagnostics=[d.to_dict() for d in errors])
    for d in errors:
        print(edge_text(d.format()), file=out.stderr)
    return ExitStatus.USAGE


def log_diagnostic(log: RunLog, d: Diagnostic, prefix: str = "") -> None:
    """A config diagnostic on a runner's log (its severity is the log level)."""
    text = d.format().removeprefix(f"{d.severity}: ")
    log.log(d.severity, "config", prefix + text, **d.to_dict())
