"""How an MCP session on pipes ends: every request read before the client's messages end is
answered (its result, once its call is done), unless the client stops reading: answers are
dropped only after ANSWER_GRACE_S in which they waited and the pipe took none of their bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from watchrun.mcp.stdin import StdinLines
from watchrun.mcp.stdout import StdoutLines
from watchrun.output.runlog import RunLog

__all__ = ["ANSWER_GRACE_S", "until_ended"]

ANSWER_GRACE_S = 2.0
"""Once the client's messages have ended (stdin closed, a signal), how long answers may wait
with the pipe taking no byte of them: a client that reads no more holds them no longer."""
TICK_S = 0.1
"""How often the pipe's progress is looked at once the client's messages have ended."""
HANGUP_CHECK_S = 0.5
"""How often, before then, a hang-up that stdin's paused reading cannot see is looked for."""


async def until_ended(run: Coroutine[Any, Any, None], lines: StdinLines | None, out: object,
                      log: RunLog) -> None:
    """`run`, the session on the SDK's transport, which ends once every answer owed is written.
    Once the client's messages have ended, answers that wait ANSWER_GRACE_S with the pipe
    taking none of their bytes (the client reads no more) end it: the SDK gets EOF (unless it
    has: a second signal gives it at once), so it answers what it still handles `Connection
    closed` (written if the pipe takes it), and stdout is cut once the pipe has taken nothing
    for ANSWER_GRACE_S more."""
    task = asyncio.ensure_future(run)
    if lines is None or not isinstance(out, StdoutLines):
        await task
        return
    try:
        if await _ended(task, lines):
            await _drained(task, lines, out, log)
        await asyncio.wait({task})
    finally:
        if not task.done():  # (this one cancelled: the SDK's run with it)
            task.cancel()
            await asyncio.wait({task})
    if not task.cancelled() and (exc := task.exception()) is not None:
        raise exc


async def _ended(task: asyncio.Future[None], lines: StdinLines) -> bool:
    """Until the client's messages have ended (True) or `task` has (False)."""
    ended: asyncio.Future[Any] = asyncio.ensure_future(lines.ended.wait())
    try:
        while not lines.hung_up():
            await asyncio.wait({task, ended}, timeout=HANGUP_CHECK_S,
                               return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return False
    finally:
        ended.cancel()
    return True


async def _drained(task: asyncio.Future[None], lines: StdinLines, out: StdoutLines,
                   log: RunLog) -> None:
    """Until `task` ends, or the client is taken to read no more: then it is made to end."""
    stall, said = _Stall(out), False
    while not (await asyncio.wait({task}, timeout=TICK_S))[0]:
        if not stall.over():
            continue
        if not said:
            said = True
            log.warning(f"the MCP client has taken no byte of its answers for {ANSWER_GRACE_S:g}"
                        " s since its messages ended (it reads no more): the answers still owed "
                        "are dropped, and the session ends", event="answers-dropped")
        if not lines.closed:  # EOF for the SDK first: what it still handles is answered
            lines.close()  # `Connection closed`, which the pipe may yet take
            stall.restart()
            continue
        out.abort()  # (a write waiting for the pipe fails: the transport ends)
        if not (await asyncio.wait({task}, timeout=ANSWER_GRACE_S))[0]:
            task.cancel()
        return


class _Stall:
    """How long answers have waited with the pipe taking none of their bytes."""

    def __init__(self, out: StdoutLines) -> None:
        self._out = out
        self.restart()

    def restart(self) -> None:
        self._taken, self._since = self._out.taken, asyncio.get_running_loop().time()

    def over(self) -> bool:
        """Whether they have for ANSWER_GRACE_S (progress, or nothing waiting, restarts it)."""
        if self._out.taken != self._taken or not self._out.waiting:
            self.restart()
            return False
        return asyncio.get_running_loop().time() - self._since >= ANSWER_GRACE_S
