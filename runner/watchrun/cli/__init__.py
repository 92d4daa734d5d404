"""The command line: argument parsing and one handler module per group of commands."""

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator

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
    if os.getpid() != 1 and _OTHER_COMMANDS.isdisjoint(sys.argv[1:]) and \
            _ONLY_PRINTS.isdisjoint(sys.argv[1:]):
        catch_early_stops(once="--once" in sys.argv[1:])
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


class EarlyHup:
    """SIGHUP before the loop owns signals: only recorded (its default would end the process:
    logrotate's postrotate sends one whenever it runs). The runner reloads once it has started,
    since its config may have been read before the signal came."""

    came = False
    to: Callable[[], None] | None = None
    """Told of it (the supervisor's `request_reload`), once there is one."""

    @classmethod
    def handler(cls, signum: int, frame: object) -> None:
        cls.came = True
        if cls.to is not None:
            cls.to()

    @classmethod
    def tell(cls, to: Callable[[], None]) -> None:
        """From now on tell `to`; at once if one came already."""
        cls.to = to
        if cls.came:
            to()


def catch_early_stops(once: bool = False) -> None:
    """Until the loop takes the signals over, SIGTERM and SIGINT end the process with 0 (3 in
    a once run), and a SIGHUP is recorded (`EarlyHup`)."""
    handler = stop_early_once if once else stop_early
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGHUP, EarlyHup.handler)


class LateStop(BaseException):
    """SIGTERM or SIGINT while a once run reports its verdict (`late_stops`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.name = signal.Signals(signum).name


@contextlib.contextmanager
def late_stops() -> Iterator[None]:
    """While a once run reports its verdict, after its loop gave the signals back: SIGTERM and
    SIGINT raise LateStop, so what the report waits on (a stdout reader that keeps reading)
    is given up at once and the run can say it was interrupted (exit 3), where the default
    disposition ended it with 143 and no word."""
    def stop(signum: int, frame: object) -> None:
        raise LateStop(signum)

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


if os.getpid() == 1:  # the kernel drops a signal sent to a PID 1 with no handler for it
    catch_early_stops()
