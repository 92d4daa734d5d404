"""The `.tail` snapshot of a watcher (`state/<id>.tail`): its last raw lines, sanitized, under a
header saying which run of the watcher they come from and the line count they end at, so that
`logs --follow` can print each line once."""

from __future__ import annotations

import json

from msgspec import Struct, field

__all__ = ["MARK", "Tail", "parse", "render"]

MARK = "\x1ewatchrun-tail "
"""Starts the header line. A sanitized line never holds a control character such as U+001E, so
no watched line can pass for the header."""


class Tail(Struct, frozen=True):
    """What a `.tail` file says."""

    lines: list[str] = field(default_factory=list)
    run: str | None = None
    """Which run of the watcher wrote it (None: an old file without the header)."""
    end: int | None = None
    """How many lines that run had read when the snapshot was taken: the last line's number."""


def render(run: str, end: int, lines: list[str]) -> bytes:
    """The file's bytes: the header line, then one line each (they hold no newline)."""
    header = MARK + json.dumps({"run": run, "end": end}, separators=(",", ":"))
    return "".join(f"{x}\n" for x in [header, *lines]).encode()


def parse(data: bytes) -> Tail:
    """Lines are split on `\\n` only: a U+2028 or a lone `\\r` inside one stays inside it."""
    found = data.decode("utf-8", errors="replace").split("\n")
    if found and found[-1] == "":
        found.pop()
    if not found or not found[0].startswith(MARK):
        return Tail(found)
    try:
        head = json.loads(found[0][len(MARK):])
    except ValueError:
        head = None
    if not isinstance(head, dict):
        return Tail(found[1:])
    run, end = head.get("run"), head.get("end")
    return Tail(found[1:], run if isinstance(run, str) else None,
                end if isinstance(end, int) and not isinstance(end, bool) else None)
