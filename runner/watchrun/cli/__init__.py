"""The command line: argument parsing and one handler module per group of commands."""

import os
import signal
import sys


def entry() -> int:
    """The `watchrun` console script: `main`, with a Ctrl-C while its modules load ending as
    one later does (130, no traceback)."""
    try:
        from watchrun.cli.main import main

        return main()
    except KeyboardInterrupt:
        return 130


def stop_early(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT before the loop owns signals: nothing runs yet, so leave cleanly."""
    raise SystemExit(0)


def stop_early_once(signum: int, frame: object) -> None:
    """The same in a once run: it looked at nothing, so it is never a pass (exit 3)."""
    sys.stderr.write(f"watchrun: error: stopped by {signal.Signals(signum).name} before it "
                     "started: exit 3\n")
    raise SystemExit(3)


def catch_early_stops(once: bool = False) -> None:
    """Until the loop takes the signals over, SIGTERM and SIGINT end the process with 0 (3 in
    a once run)."""
    handler = stop_early_once if once else stop_early
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


if os.getpid() == 1:  # the kernel drops a signal sent to a PID 1 with no handler for it
    catch_early_stops()
