"""SIGTERM, SIGINT and SIGHUP of `watchrun run` whenever its loop does not hold them: recorded,
handed to the runner, and acted on only where raising is safe."""

import atexit
import builtins
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import BuiltinFunctionType, FrameType

_IMPORT = "<frozen importlib._bootstrap"
"""The file name of the import machinery's frames (and of its `_external` half)."""
LOOK_AGAIN_S = 0.01
"""How often a stop that came where it cannot be raised looks again (`_unsafe`)."""
AFTER_RAISE_S = 0.5
"""When a stop raised looks again: the exception never reached the exit (swallowed)."""
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers


def stop_early(signum: int) -> BaseException:
    """SIGTERM/SIGINT before the loop owns signals: nothing runs yet, so leave cleanly."""
    return SystemExit(0)


def stop_early_once(signum: int) -> BaseException:
    """The same in a once run: it looked at nothing, so it is never a pass (exit 3). Said
    once (a stop raised where C code dropped it is raised again) and with os.write: a signal
    handler that wrote through sys.stderr while the main thread did would raise "reentrant
    call" instead."""
    if not isinstance(Stops.raised, SystemExit):
        with contextlib.suppress(OSError):
            os.write(2, f"watchrun: error: stopped by {signal.Signals(signum).name} before "
                        "it started: exit 3\n".encode())
    return SystemExit(3)


class Stops:
    """The signals of a run whenever its loop does not hold them: before it has them, and
    after it gave them back. Recorded first; then a SIGHUP is told to the runner (`reload`: one
    reload once started; its default would end the process, and logrotate's postrotate sends
    one whenever it runs), a stop to the runner while it can act on it (`stop`), else it is
    raised (`exit`: before the loop, SystemExit; while a once run reports its verdict,
    LateStop) or only kept (`late`: the exit goes on, with its status).

    A stop is never raised where its exception would not reach the exit as it is (`_unsafe`):
    inside C code the import machinery called (an extension's init that imports a module
    calls back into Python, and an exception there was swallowed, msgspec: the runner ran on
    and a once run passed, or crashed the process, orjson: SIGSEGV), in a `__del__` or a
    `__set_name__`. It is raised once out of there (a SIGALRM looks every LOOK_AGAIN_S), or
    where the run hands over or ends (`tell`, `settle`), whichever comes first."""

    caught = False
    """This process's signals are caught here (`catch_early_stops`)."""
    late: int | None = None
    """A stop signal no runner took (none yet, or its loop has ended)."""
    hup = False
    exit: Callable[[int], BaseException] | None = None
    stop: Callable[[signal.Signals], bool] | None = None
    """The runner's `request_stop`: whether it will act on the stop."""
    reload: Callable[[], None] | None = None
    looking: Handler | None = None
    """While a SIGALRM is set to look again (`_act`): the SIGALRM handler it replaced."""
    raised: BaseException | None = None
    """The stop raised last (an exception that wraps or replaced it is taken for it:
    `unwrapped`)."""
    ended = False
    """The exit status is known (`exiting`): a stop now only hurries the exit's last waits."""

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
        if cls.late is None:
            return
        if cls.ended:
            _hurry()
            return
        if cls.exit is None:
            return
        if _unsafe(frame):
            cls._look_in(LOOK_AGAIN_S)
            return
        cls._look_in(AFTER_RAISE_S)  # (should the exception be swallowed, it comes again)
        cls.raised = cls.exit(cls.late)
        raise cls.raised

    @classmethod
    def _look_in(cls, seconds: float) -> None:
        was = signal.signal(signal.SIGALRM, cls._look_again)
        if cls.looking is None:
            cls.looking = signal.SIG_DFL if was is None else was
        signal.setitimer(signal.ITIMER_REAL, seconds)

    @classmethod
    def _look_again(cls, signum: int, frame: FrameType | None) -> None:
        cls._act(frame)

    @classmethod
    def _stop_looking(cls) -> None:
        """No SIGALRM from now on, and SIGALRM's handler as it was (for what runs next)."""
        if cls.looking is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, cls.looking)
            cls.looking = None

    @classmethod
    def settle(cls) -> None:
        """Where raising is safe (no C code below): a stop not acted on yet is, now."""
        cls._stop_looking()
        if cls.late is not None and cls.exit is not None:
            cls.raised = cls.exit(cls.late)
            raise cls.raised

    @classmethod
    def tell(cls, stop: Callable[[signal.Signals], bool], reload: Callable[[], None]) -> None:
        """From now on a stop goes to `stop` and a SIGHUP to `reload` (the runner's, which acts
        once its loop runs; at once for a SIGHUP that came already). A stop that came already
        ends the process here, before it starts."""
        cls.settle()
        cls.stop, cls.reload = stop, reload  # (first: a stop from here on is the runner's)
        cls.exit = None
        if cls.late is not None and stop(signal.Signals(cls.late)):
            cls.late = None  # (it came between the two lines above)
        if cls.hup:
            reload()

    @classmethod
    def exiting(cls) -> None:
        """The exit status is known: a stop from now on only cuts short the wait for a reader
        of the log that is still taking it (what it has not taken is left out), a SIGHUP is
        nothing, and in the last moments all three are ignored (`_ignored`)."""
        cls._stop_looking()
        cls.ended, cls.exit = True, None
        if cls.late is not None:
            _hurry()

    @classmethod
    def unwrapped(cls, exc: BaseException) -> BaseException | None:
        """The stop raised, if `exc` wraps it (Python 3.11 wraps what a `__set_name__` raises
        in a RuntimeError, and a stop may land there unseen) or came after it: a SystemExit
        raised before the run is the exit's, whatever replaced it (C code that checks for
        signals while it makes an error sets its own, unchained: ssl's import did)."""
        if isinstance(cls.raised, SystemExit):
            return cls.raised
        seen: BaseException | None = exc
        while seen is not None:
            if seen is cls.raised:
                return seen
            seen = seen.__cause__ or seen.__context__
        return None


def _ignored() -> None:
    """The last of the exit's own calls (registered first): Python's finalization then gives
    every signal it handles its default back, and a SIGTERM in the process's last
    milliseconds ended it with 143 (129 for a SIGHUP) after its verdict was out."""
    Stops._stop_looking()
    for sig in STOPS:
        signal.signal(sig, signal.SIG_IGN)


def _hurry() -> None:
    """The log's last lines are waited for no longer (`LogStream.hurried`)."""
    stream = sys.modules.get("watchrun.output.logstream")  # (none written: none to wait for)
    if stream is not None:
        stream.LogStream.hurried = True


_SWALLOWED = frozenset({"__del__", "__set_name__"})
"""Methods whose exception CPython prints and drops, or wraps in another (3.11)."""


def _unsafe(frame: FrameType | None) -> bool:
    """Whether a stop raised in `frame` would not reach `entry` as it is: it runs below C code
    the import machinery called (an extension module's init, `_imp.create_dynamic`,
    `exec_dynamic`: not a Python module's body, `exec`, an import `from … import` makes
    through `__import__`, or the `compile` of a source), or in a `__del__`, a `__set_name__`
    or the import machinery's weakref callback of a module lock (`cb`)."""
    while frame is not None:
        code = frame.f_code
        if code.co_name in _SWALLOWED:
            return True
        if code.co_filename.startswith(_IMPORT):
            if code.co_name == "cb":
                return True
            if code.co_name == "_call_with_frames_removed":
                called = frame.f_locals.get("f")
                if isinstance(called, BuiltinFunctionType) and \
                        called not in (builtins.exec, builtins.__import__, builtins.compile):
                    return True
        frame = frame.f_back
    return False


def catch_early_stops(once: bool = False) -> None:
    """Until the loop takes the signals over, SIGTERM and SIGINT end the process with 0 (3 in
    a once run), and a SIGHUP is recorded (`Stops`)."""
    if not Stops.caught:
        atexit.register(_ignored)  # (first: it runs last)
    Stops.caught = True
    Stops.exit = stop_early_once if once else stop_early
    for sig in STOPS:
        signal.signal(sig, Stops.handler)


class LateStop(BaseException):
    """SIGTERM or SIGINT while a once run reports its verdict (`late_stops`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.name = signal.Signals(signum).name


@contextlib.contextmanager
def late_stops() -> Iterator[None]:
    """While a once run reports its verdict, after its loop gave the signals back: SIGTERM and
    SIGINT raise LateStop (one that came since the loop ended, at once; one that came while C
    code ran, when the report is done), so what the report waits on (a stdout reader that
    keeps reading) is given up and the run says it was interrupted (exit 3): a once run a stop
    signal reached before its verdict was out is never a pass."""
    Stops.exit = LateStop
    try:
        Stops.settle()
        yield
        Stops.settle()
    finally:
        Stops._stop_looking()
        Stops.exit = None
