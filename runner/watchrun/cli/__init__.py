"""The command line: argument parsing and one handler module per group of commands."""

import os
import sys

from watchrun.cli.stops import Stops, catch_early_stops

_OTHER_COMMANDS = frozenset({
    "add", "agent", "clear", "completion", "config", "init", "list", "logs", "matches", "mcp",
    "restart", "schema", "start", "status", "stop", "top", "transcript", "validate"})
"""The commands but `run` (tests/test_signals_early.py holds it to the parser's list)."""
_ONLY_PRINTS = frozenset({"-h", "--help", "--version"})
"""Options that print and exit: no run starts (a Ctrl-C then is 130, as in other commands)."""


def entry() -> int:
    """The `watchrun` console script: `main`. A command line that names no other command is a
    `run` (the default): its signals are caught before anything else loads (`catch_early_stops`:
    a SIGHUP from logrotate's postrotate or `systemctl reload` is recorded, not fatal); in the
    other commands a Ctrl-C while the modules load ends as one later does (130, no traceback)."""
    if _OTHER_COMMANDS.isdisjoint(sys.argv[1:]) and _ONLY_PRINTS.isdisjoint(sys.argv[1:]):
        catch_early_stops(once="--once" in sys.argv[1:])  # (as PID 1 too: a once run's 3)
    try:
        try:
            from watchrun.cli.main import main

            status = main()
        except KeyboardInterrupt:
            status = 130
        if Stops.caught:  # (a stop not acted on yet ends it here)
            Stops.settle()
    except Exception as exc:
        stop = Stops.unwrapped(exc) if Stops.caught else None
        if stop is None:
            raise
        raise stop from None
    finally:
        if Stops.caught:  # (later ones change nothing but the log's last wait)
            Stops.exiting()
    return status


if os.getpid() == 1:  # the kernel drops a signal sent to a PID 1 with no handler for it
    catch_early_stops(once="--once" in sys.argv[1:])  # (as `entry` does: never a pass)
