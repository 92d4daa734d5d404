"""A file watcher's first look at its path, which file system it is on (a statfs), is made off
the loop on threads of its own: one that never returns (a share that does not answer when the
runner starts) holds that watcher only, and is said after STALL_S as a remote watcher's stalled
reads are (`runtime.remote`), its end too."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchrun import offload
from watchrun.inotify import remote_fs
from watchrun.runtime import lag
from watchrun.runtime.workers import Workers

__all__ = ["resumed_said", "stalled_said", "stopped_reads", "which_fs"]

Said = Callable[[str, bool], None]
"""`said(text, stalled)`: a watcher's reads that have not returned for STALL_S (True), and
their return after such a stall (False)."""

_LOOKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, offload.Offload] = \
    weakref.WeakKeyDictionary()


def stalled_said(path: Path, held_s: float, where: str) -> str:
    """What the log (an error) and `status` say of a watcher's reads held `held_s` in `where`."""
    return (f"its reads of {path} have not returned for {held_s:.0f} s: held in {where}; this "
            "watcher reads nothing until they return (the others go on)")


def resumed_said(path: Path, held_s: float) -> str:
    """What the log (a warning) says when they return."""
    return f"its reads of {path} returned after a stall of {held_s:.1f} s"


async def which_fs(path: Path, said: Said) -> str | None:
    """The remote file system `path` is on (`inotify.remote_fs`), or None, asked on a thread
    of the first looks (`_looks`); not answered in STALL_S, said (and its answer then).
    Cancelled while the call is out, it is waited for as a remote watcher's reads are, at most
    STOP_CALL_S and not past the stop's deadline: then `StuckCall`, the thread left to it."""
    thread: list[int] = []

    def look() -> str | None:
        thread.append(threading.get_ident())
        return remote_fs(path)

    call = asyncio.ensure_future(_looks().run(look))
    began = time.monotonic()
    try:
        await asyncio.wait({call}, timeout=lag.STALL_S)
        if not call.done():
            frame = sys._current_frames().get(thread[0]) if thread else None
            said(stalled_said(path, time.monotonic() - began, "statfs (which file system it is "
                              f"on), in {lag.held_in(frame)}"), True)
            await asyncio.wait({call})
            said(resumed_said(path, time.monotonic() - began), False)
    except asyncio.CancelledError:
        try:
            await stopped_reads(call, path)
        except offload.StuckCall:
            call.cancel()
            raise
        raise
    return call.result()


async def stopped_reads(out: asyncio.Future[Any], path: Path) -> None:
    """A stop cancelled the wait for a watcher's reads (`out`): they are waited for
    STOP_CALL_S at most, not past the stop's deadline (a second cancel ends the wait);
    `StuckCall` when they did not end, their thread left to them."""
    stopped = time.monotonic()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait({out}, timeout=offload.stop_left(offload.STOP_CALL_S))
    if not out.done():
        raise offload.StuckCall(
            f"its reads of {path} did not end {time.monotonic() - stopped:.1f} s after the stop "
            "(a file system that does not answer?); left to their thread") from None


def _looks() -> offload.Offload:
    """The running loop's first looks: made in turn on one daemon thread, as `offload` makes
    its calls, and another taking the rest while each one running has been inside one call for
    STUCK_S, with no bound but the watchers' number (the loop's worker threads are few: four
    watchers on a dead share held them all, and every other watcher's start waited behind).
    Threads of a pool of their own, kept for the next watcher's start."""
    loop = asyncio.get_running_loop()
    looks = _LOOKS.get(loop)
    if looks is None:
        looks = _LOOKS[loop] = offload.Offload(loop, sys.maxsize,
                                               spawn=Workers(sys.maxsize).submit)
    return looks
