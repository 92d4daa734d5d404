"""`watchrun top`: find the output dir, check for a terminal and Textual, run the live screen."""

from __future__ import annotations

import argparse
import os
import sys

from watchrun.cli.emit import Out
from watchrun.cli.ops import resolve
from watchrun.exitcodes import ExitStatus


def cmd_top(args: argparse.Namespace) -> int:
    out = Out(False)
    where = resolve(args, out)
    if isinstance(where, int):
        return where
    try:
        from watchrun.tui.app import TopApp
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("textual", "rich"):
            raise
        return out.fail("missing_dependency",
                        "`watchrun top` needs Textual: pip install 'watchrun[tui]'")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return out.fail("usage", "`watchrun top` needs a terminal; `watchrun list` prints the "
                        "same rows")
    if os.environ.get("TERM") == "dumb":  # (Textual would draw its full colour screen there)
        return out.fail("usage", "`watchrun top` needs a terminal that draws a full screen, "
                        "not TERM=dumb; `watchrun list` prints the same rows")
    from watchrun.tui.feed import Feed

    agents = {a.name: a.provider for a in where.config.agents} if where.config else {}
    app = TopApp(Feed(where.root, agents, config=where.config))
    app.run()
    if app.pending is not None:  # (its thread is not waited for)
        out.note(f"quit while the {app.pending} waited for the runner's answer; the runner may "
                 "still carry it out (`watchrun list` shows)")
    return ExitStatus.OK if app.return_code in (0, None) else ExitStatus.RUNTIME
