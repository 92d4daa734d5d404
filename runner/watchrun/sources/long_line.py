"""A line that grows past limits.maxLineBytes with no end yet: said at once, and shown as it grows.

One `error{line-too-long}` record (logged as a warning) per such line, and `status`'s
`longLine` while it grows; once it ends it is recorded, counted (`linesCut`) and matched on its
kept head as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watchrun.events import SourceContext
from watchrun.match.framing import LineFramer
from watchrun.sources.generation import Generation

__all__ = ["CODE", "growing", "growing_in", "say", "say_in"]

CODE = "line-too-long"
"""The `error` record's code."""


def growing(framer: LineFramer, **where: Any) -> dict[str, Any] | None:
    """`status`'s `longLine`: the framer's pending line while it is longer than its `max` with
    no end yet — `where` it is read (a file's `path`, a command's `run`), where it began
    (`offset`, `lineNo`) and its `bytes` so far (kept and not); None while there is none."""
    at = framer.cutting
    if at is None:
        return None
    return {**where, "offset": at, "lineNo": framer.line_no, "bytes": framer.pending}


def growing_in(gens: Sequence[Generation], name: str) -> dict[str, Any] | None:
    """`growing` of the first of a file's open generations (oldest first) that has such a
    line; `name`: the watched path, which the generation at it is read as."""
    for gen in gens:
        line = growing(gen.framer, path=gen.read_as or name)
        if line is not None:
            return line
    return None


async def say(ctx: SourceContext, framer: LineFramer, **where: Any) -> None:
    """The `error{line-too-long}` record of the framer's pending line, the first time it is
    seen longer than `limits.maxLineBytes` with no end (its framer's `told`): not again as it
    grows, and again for the next such line. `where`: a file's `path` and `inode`, or a
    command's `run`. The caller calls it once it has read all there is (a file to its end, a
    command's output as far as it has printed it): a long line that ends within what the
    reader has at hand (a backlog, a burst) is recorded and counted (`linesCut`) at once, not
    said."""
    line = growing(framer, **where)
    if line is None or framer.told == line["offset"]:
        return
    framer.told = line["offset"]
    of = where["path"] if "path" in where else f"run {where.get('run')}'s output"
    await ctx.event("error", code=CODE, **line, message=(
        f"a line over limits.maxLineBytes ({framer.max}) with no end yet: {of} from offset "
        f"{line['offset']} (line {line['lineNo']}), {line['bytes']} bytes so far; only its "
        f"first {framer.max} bytes are kept, and matched once it ends (`watchrun status` shows "
        "it growing: longLine)"))


async def say_in(ctx: SourceContext, gens: Sequence[Generation], name: str) -> None:
    """`say` for each of a file's open generations, read to its end."""
    for gen in gens:
        await say(ctx, gen.framer, path=gen.read_as or name, inode=gen.inode)
