"""The command line: argument parsing and one handler module per group of commands."""

import os
import signal


def stop_early(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT before the loop owns signals: nothing runs yet, so leave cleanly."""
    raise SystemExit(0)


def catch_early_stops() -> None:
    """Until the loop takes the signals over, SIGTERM and SIGINT end the process with 0."""
    signal.signal(signal.SIGTERM, stop_early)
    signal.signal(signal.SIGINT, stop_early)


if os.getpid() == 1:  # the kernel drops a signal sent to a PID 1 with no handler for it
    catch_early_stops()
