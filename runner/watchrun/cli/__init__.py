"""The command line: argument parsing and one handler module per group of commands."""

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType

_OTHER_COMMANDS = frozenset({
    "add", "agent", "clear", "completion", "config", "init", "list", "logs", "matches", "mcp",
    "restart", "schema", "start", "status", "stop", "top", "transcript", "validate"})
"""The commands but `run` (tests/test_signals_early.py holds it to the parser's list)."""
_ONLY_PRINTS = frozenset({"-h", "--help", "--version"})
"""Options that print and exit: no run starts (a Ctrl-C then is 130, as in other commands)."""
_IMPORT = "<frozen importlib._bootstrap"
"""The file name of the import machinery's frames (and of its `_external` half)."""
LOOK_AGAIN_S = 0.01
"""How often a stop that came inside an import looks whether that import has ended."""


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


def stop_early(signum: int) -> BaseException:
    """SIGTERM/SIGINT before the loop owns signals: nothing runs yet, so leave cleanly."""
    return SystemExit(0)


def stop_early_once(signum: int) -> BaseException:
    """The same in a once run: it looked at nothing, so it is never a pass (exit 3)."""
    sys.stderr.write(f"watchrun: error: stopped by {signal.Signals(signum).name} before it "
                     "started: exit 3\n")
    return SystemExit(3)


class Stops:
    """SIGTERM, SIGINT and SIGHUP of a run whenever its loop does not hold them: before it has
    them, and after it gave them back. Recorded first; then a SIGHUP is told to the runner
    (`reload`: one reload once started; its default would end the process, and logrotate's
    postrotate sends one whenever it runs), a stop to the runner while it can act on it
    (`stop`), else it is raised (`exit`: before the loop, SystemExit; while a once run reports
    its verdict, LateStop) or only kept (`late`: the exit goes on, with its status).

    A stop is never raised inside an import: a C extension's init that imports a module calls
    back into Python, and an exception there was swallowed (msgspec: the runner ran on, and a
    once run passed) or crashed the process (orjson: SIGSEGV). It is raised as soon as that
    import has ended (a SIGALRM looks every LOOK_AGAIN_S)."""

    late: int | None = None
    """A stop signal no runner took (none yet, or its loop has ended)."""
    hup = False
    exit: Callable[[int], BaseException] | None = None
    stop: Callable[[signal.Signals], bool] | None = None
    """The runner's `request_stop`: whether it will act on the stop."""
    reload: Callable[[], None] | None = None
    looking: Callable[[int, FrameType | None], object] | int | signal.Handlers | None = None
    """While a SIGALRM is set to look again (`_act`): the SIGALRM handler it replaced."""

    @classmethod
    def handler(cls, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            cls.hup = True
            if cls.reload is not None:
                cls.reload()
        elif cls.stop is None or not cls.stop(signal.Signals(signum)):
            cls.late = cls.late or signum
            cls._act(frame)

    @classmethod
    def _act(cls, frame: FrameType | None) -> None:
        if cls.late is None or cls.exit is None:
            return
        if _importing(frame):
            was = signal.signal(signal.SIGALRM, cls._look_again)
            if cls.looking is None:
                cls.looking = signal.SIG_DFL if was is None else was
            signal.setitimer(signal.ITIMER_REAL, LOOK_AGAIN_S)
            return
        raise cls.exit(cls.late)

    @classmethod
    def _look_again(cls, signum: int, frame: FrameType | None) -> None:
        cls._act(frame)

    @classmethod
    def tell(cls, stop: Callable[[signal.Signals], bool], reload: Callable[[], None]) -> None:
        """From now on a stop goes to `stop` and a SIGHUP to `reload` (the runner's, which acts
        once its loop runs; at once for a SIGHUP that came already). A stop that came already
        (one inside an import, not acted on yet) ends the process here, before it starts."""
        if cls.looking is not None:  # (what runs from now on gets SIGALRM as it was)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, cls.looking)
            cls.looking = None
        if cls.late is not None and cls.exit is not None:
            raise cls.exit(cls.late)
        cls.exit, cls.stop, cls.reload = None, stop, reload
        if cls.hup:
            reload()


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith(_IMPORT):
            return True
        frame = frame.f_back
    return False


def catch_early_stops(once: bool = False) -> None:
    """Until the loop takes the signals over, SIGTERM and SIGINT end the process with 0 (3 in
    a once run), and a SIGHUP is recorded (`Stops`)."""
    Stops.exit = stop_early_once if once else stop_early
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, Stops.handler)


class LateStop(BaseException):
    """SIGTERM or SIGINT while a once run reports its verdict (`late_stops`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.name = signal.Signals(signum).name


@contextlib.contextmanager
def late_stops() -> Iterator[None]:
    """While a once run reports its verdict, after its loop gave the signals back: SIGTERM and
    SIGINT raise LateStop (one that came since the loop ended, at once), so what the report
    waits on (a stdout reader that keeps reading) is given up and the run says it was
    interrupted (exit 3): a once run a stop signal reached before its verdict was out is
    never a pass."""
    Stops.exit = LateStop
    try:
        if Stops.late is not None:
            raise LateStop(Stops.late)
        yield
    finally:
        Stops.exit = None


if os.getpid() == 1:  # the kernel drops a signal sent to a PID 1 with no handler for it
    catch_early_stops()
