"""A spawned child (the leader of its own session and group): its output, its exit, and stopping
its whole tree (TERM, grace, KILL, /proc sweeps in a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import weakref
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from watchrun.process.groups import GroupRegistry
from watchrun.process.scans import fresh_table
from watchrun.process.tree import LINUX, SPAWNED, family, reap

__all__ = ["LIVE", "ChildProtocol", "ExitInfo", "Proc", "end_now", "left_behind", "until_done"]

LIVE: weakref.WeakSet[Proc] = weakref.WeakSet()
"""Every live child, for `Spawner.kill_all` (a second stop signal cuts grace periods short)."""
_SIGNAMES = {s.value: s.name for s in signal.Signals}


class ExitInfo(Struct, frozen=True):
    exit_code: int | None
    signal: str | None
    status: str
    """One of: exited, killed (by a signal we sent), signaled (by anyone else)."""
    stragglers: int = 0
    """Processes of the tree still alive after the SIGTERM grace, killed with SIGKILL."""
    signals_sent: tuple[str, ...] = ()


class ChildProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol plus an exit future that does not wait for the pipes to close
    (Process.wait() does, so a grandchild holding stdout open would hang it)."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class Proc:
    """A spawned child: the leader of its own session and process group."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: ChildProtocol,
                 out: asyncio.StreamReader, spawn_id: str,
                 registry: GroupRegistry | None = None) -> None:
        self.pid = self.pgid = transport.get_pid()
        self._transport, self._protocol, self._out = transport, protocol, out
        self._id = spawn_id
        self._registry = registry
        self._stopping = False
        self._hurry = False  # set by Spawner.kill_all: no more waiting for a grace period
        self._killed = False  # Spawner.kill_all SIGKILLed the group (the leader was alive)
        LIVE.add(self)
        self._info: ExitInfo | None = None
        self._members: set[tuple[int, int]] = set()  # (pid, start time) of its tree, ever
        self._group = True  # does a live process still have our pgid?
        self.signalled = 0
        """Processes of the tree the last `terminate` sent SIGTERM, SIGKILL or both."""
        self.extra: list[asyncio.BaseTransport | asyncio.Future[None]] = []  # pty, stdin feeder

    async def read(self, n: int) -> bytes:
        """Up to n bytes of output; b"" at EOF (for a pty: once the child's side is closed)."""
        return await self._out.read(n)

    async def read_exactly(self, n: int) -> bytes:
        """Exactly n bytes of output; asyncio.IncompleteReadError at EOF."""
        return await self._out.readexactly(n)

    @property
    def stdin(self) -> asyncio.StreamWriter:
        """The child's stdin (only with `spawn(..., stdin_pipe=True)`)."""
        if self._protocol.stdin is None:
            raise RuntimeError("stdin needs spawn(..., stdin_pipe=True)")
        return self._protocol.stdin

    async def read_stderr(self, n: int) -> bytes:
        if self._protocol.stderr is None:
            raise RuntimeError("read_stderr() needs spawn(..., separate_stderr=True)")
        return await self._protocol.stderr.read(n)

    def output_waiting(self) -> bool:
        """Output the child printed waits in its stdout or stderr pipe (or its pty), not read by
        the loop yet. After the runner did not run (SIGSTOP, a frozen container or VM) the
        loop's first turn runs the timers that came due and reads nothing (the interrupted
        epoll_wait returns no events): a timer that judges the child by its output asks here."""
        pipes = [self._transport.get_pipe_transport(fd) for fd in (1, 2)]
        pipes += [t for t in self.extra if isinstance(t, asyncio.ReadTransport)]
        poll = select.poll()
        for pipe in pipes:
            if pipe is not None and not pipe.is_closing():
                with contextlib.suppress(AttributeError, ValueError, OSError):  # (closed)
                    poll.register(pipe.get_extra_info("pipe").fileno(), select.POLLIN)
        return any(events & select.POLLIN for _, events in poll.poll(0))

    async def wait(self) -> ExitInfo:
        """The main process's exit, as soon as it is reaped (open pipes do not delay it)."""
        if self._info is None:
            await asyncio.shield(self._protocol.exited)
            rc = self._transport.get_returncode()
            assert rc is not None
            SPAWNED.discard(self.pid)
            name = _SIGNAMES.get(-rc, f"SIG{-rc}")
            status = "killed" if self._stopping else "signaled"
            self._info = ExitInfo(rc, None, "exited") if rc >= 0 else ExitInfo(None, name, status)
        return self._info

    def close(self) -> None:
        """Release the transports (after the process exited and its output was read); the group
        is no longer this runner's to end."""
        if self._registry is not None:
            self._registry.remove(self.pgid)
        self._transport.close()
        for extra in self.extra:
            if isinstance(extra, asyncio.BaseTransport):
                extra.close()
            else:
                extra.cancel()

    async def _live(self, strays: bool = True) -> tuple[set[int], bool]:
        """Live members of the tree, and whether zombies in it are still to be handed to us
        (their parent is a dying member; the /proc scan is not atomic). Reaps adopted ones.
        The scan (every process's stat, environs of new ones) runs in a thread, shared with
        every other child being stopped meanwhile (`fresh_table`); the tree is picked out of
        it and reaped, which must not race a spawn, on the loop."""
        if not LINUX:
            return set() if self._protocol.exited.done() else {self.pid}, False
        table = await fresh_table()
        fam = family(table, self.pid, self.pgid, self._id, self._protocol.exited.done(),
                     self._members, strays)
        stats = table.stats
        reap(fam, stats)
        live = {p for p in fam if stats[p].state != "Z"}
        self._group = any(stats[p].pgid == self.pgid for p in live)
        return live, any(stats[p].state == "Z" and stats[p].ppid in fam for p in fam)

    @property
    def killed(self) -> bool:
        """`Spawner.kill_all` SIGKILLed its group (a second stop signal): the runner ended it,
        and whatever of its tree was still there."""
        return self._killed

    def _send(self, pids: set[int], sig: signal.Signals) -> None:
        group = [(os.killpg, self.pgid)] if self._group else []
        for kill, target in [*group, *((os.kill, p) for p in pids)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(target, sig)

    async def terminate(self, grace_s: float, *, strays: bool = True) -> ExitInfo:
        """SIGTERM the tree, wait `grace_s`, SIGKILL what is left (escapees included), reap.
        `strays`: also unattributed orphans re-parented to us (see `tree.family`)."""
        self._stopping = True
        loop = asyncio.get_running_loop()
        sent: list[str] = []
        live, settling = await self._live(strays)
        signalled = set(live)
        killed: set[int] = set()
        if live:
            self._send(live, signal.SIGTERM)
            sent.append("SIGTERM")
            deadline = loop.time() + grace_s
            while live and loop.time() < deadline and not self._hurry:
                await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
                was, (live, settling) = live, await self._live(strays)
                if self._hurry:  # Spawner.kill_all SIGKILLed the group meanwhile (a second
                    killed |= was  # stop signal): what was alive a moment ago got it
        deadline = loop.time() + 10.0
        while (live or settling) and loop.time() < deadline:  # a forking tree may add members
            self._send(live, signal.SIGKILL)
            killed |= live
            await asyncio.sleep(0.01)
            live, settling = await self._live(strays)
        if self._killed and not killed:  # kill_all's SIGKILL came before this stop looked
            killed.add(self.pid)
        sent += ["SIGKILL"] if killed else []
        info = await self.wait()
        self.signalled = len(signalled | killed)
        return replace(info, stragglers=len(killed), signals_sent=tuple(sent))


def left_behind(who: str, kept: str, count: int, stragglers: int) -> str:
    """What an `error` record says of the `count` processes a run's program left behind that
    `kept` going once it exited, all stopped (`stragglers` of them by SIGKILL)."""
    many = count != 1
    return (f"{who} exited but {count} process{'es' if many else ''} it started {kept}; "
            f"stopped {'them' if many else 'it'} ({stragglers} needed SIGKILL)")


async def end_now(proc: Proc) -> None:
    """Kill a child's tree at once (no grace), reap it and release it. Not cancellable: it
    finishes first, then a cancellation that arrived meanwhile goes on."""
    ending = asyncio.ensure_future(proc.terminate(0))
    cancelled = await until_done(ending)
    proc.close()
    if cancelled:
        raise asyncio.CancelledError


async def until_done(fut: asyncio.Future[Any]) -> bool:
    """Wait for `fut` however often we are cancelled meanwhile; True if we were."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled
