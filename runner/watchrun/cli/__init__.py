"""The command line: argument parsing and one handler module per group of commands."""

import contextlib
import errno
import os
import sys
from typing import NoReturn

from watchrun.cli.stops import Stops, catch_early_stops

_OTHER_COMMANDS = frozenset({
    "add", "agent", "clear", "completion", "config", "init", "list", "logs", "matches", "mcp",
    "restart", "schema", "start", "status", "stop", "top", "transcript", "validate"})
"""The commands but `run` (tests/test_signals_early.py holds it to the parser's list)."""
_ONLY_PRINTS = frozenset({"-h", "--help", "--version"})
"""Options that print and exit: no run starts (a Ctrl-C then is 130, as in other commands)."""


_NO_MEMORY = "out of memory (MemoryError)"
NO_MEMORY_LINE = f"watchrun: error: could not start: {_NO_MEMORY}; nothing was started\n".encode()
"""A run's last line when memory ran out before it began: made before it is needed (short
of memory, making it failed too, and Python's traceback and 1 followed)."""


def not_begun(exc: BaseException) -> str:
    """What failed before a run began (out of memory reading the config, or loading a module),
    in one line; nothing imported to say it: memory may be short."""
    if isinstance(exc, MemoryError):
        why = _NO_MEMORY
    elif isinstance(exc, OSError) and exc.strerror:
        why = f"{errno.errorcode.get(exc.errno or 0, type(exc).__name__)}: " + (
            exc.strerror if exc.filename is None else f"{exc.filename}: {exc.strerror}")
    elif _unloadable(exc):
        why = str(exc)
    else:
        why = f"{type(exc).__name__}: {exc}"
    return f"could not start: {why}; nothing was started"


def _unloadable(exc: BaseException) -> bool:
    """An installed engine that cannot be loaded (google-re2 under a memory limit, a broken
    install): said in one line by every command, not only by a run. Nothing is imported to
    tell (memory may be short): raised, its module is loaded."""
    optional = sys.modules.get("watchrun.match.optional")
    return optional is not None and isinstance(exc, optional.Unloadable)


def entry() -> int:
    """The `watchrun` console script: `main`. A command line that names no other command is a
    `run` (the default): its signals are caught before anything else loads (`catch_early_stops`:
    a SIGHUP from logrotate's postrotate or `systemctl reload` is recorded, not fatal); in the
    other commands a Ctrl-C while the modules load ends as one later does (130, no traceback)."""
    running = _OTHER_COMMANDS.isdisjoint(sys.argv[1:]) and _ONLY_PRINTS.isdisjoint(sys.argv[1:])
    if running:
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
        if stop is not None:
            raise stop from None
        if not (running or _unloadable(exc)):  # (another command's failure: its traceback)
            raise
        if isinstance(exc, MemoryError):  # its line is the last: any Python run after it,
            end_now(3, NO_MEMORY_LINE)  # short of memory too, printed `MemoryError:` lines
        print(f"watchrun: error: {not_begun(exc)}", file=sys.stderr)  # (not 1: a crossed gate)
        status = 3
    finally:
        if Stops.caught:  # (later ones change nothing but the log's last wait)
            Stops.exiting()
    return status


def end_now(status: int, line: str | bytes | None) -> NoReturn:
    """Print `line` (if any; bytes: as they are, its newline included) to stderr and exit with
    `status` now, stdout flushed, with no more Python run: not the interpreter's finalization
    either, which, short of memory, printed `MemoryError:` lines after the one line a run says."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):  # (MemoryError too: the exit comes all the same)
        if line is not None:
            os.write(2, line if isinstance(line, bytes) else
                     line.encode(errors="replace") + b"\n")
    os._exit(status)


if os.getpid() == 1:  # the kernel drops a signal sent to a PID 1 with no handler for it
    catch_early_stops(once="--once" in sys.argv[1:])  # (as `entry` does: never a pass)
