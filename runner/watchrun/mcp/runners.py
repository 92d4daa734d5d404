"""Who holds the watchers a `watch` call names: the live runner of the output dir (through its
control socket), or this MCP session's own supervisor, started on the first `add` when no runner
answers and stopped when the session ends. Both answer the control socket's requests."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec

from watchrun.clock import SystemClock
from watchrun.config.model import Config
from watchrun.match.sanitize import edge_name
from watchrun.output.outdir import OutputDirError, prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner
from watchrun.process.tree import become_subreaper
from watchrun.runtime.client import (
    READS,
    NotListening,
    Unreachable,
    held,
    is_live,
    request,
    wait_s,
)
from watchrun.runtime.supervisor import StartupError, Supervisor

__all__ = ["LiveRunner", "NoAnswer", "NoRunner", "Runner", "Runners", "SessionRunner",
           "StartFailed"]

READ_TIMEOUT_S = 10.0
"""A `list` or `status` waits for nothing but the runner's loop: a runner that does not answer
it in this long is stuck, and the call says so well within a client's own timeout (a Gemini
CLI's is 30 s)."""


class NoRunner(Exception):
    """No runner is live on the control socket (nothing listens, nothing holds its lock)."""


class NoAnswer(Exception):
    """A runner is live but gave no answer (timed out, reset: the request may still be carried
    out), or holds the output dir's `control.lock` and its socket does not reach it."""


class StartFailed(Exception):
    """The session's supervisor could not start; everything it did is undone."""


class Runner(Protocol):
    kind: str
    """`live` (a `watchrun run` of the output dir) or `session` (this MCP session's)."""

    async def request(self, payload: dict[str, Any]) -> dict[str, Any]: ...


class LiveRunner:
    """The output dir's live runner, over its control socket (a blocking client, in a thread).
    A change waits for its answer as `watchrun` does (`wait_s`), by `config`: the one this
    session loaded, or None (no config file: the defaults are not the live runner's)."""

    kind = "live"

    def __init__(self, socket: Path, config: Config | None) -> None:
        self.socket, self.config = socket, config

    async def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        cmd = payload.get("cmd")
        try:
            wait = READ_TIMEOUT_S if cmd in READS else wait_s(cmd, self.config)
            return await asyncio.to_thread(request, self.socket, payload, wait)
        except NotListening as exc:
            raise NoRunner(str(exc)) from exc
        except Unreachable as exc:
            raise NoAnswer(str(exc)) from exc
        except (OSError, ValueError) as exc:
            later = "" if cmd in READS else \
                "; it may still be carried out (`list` shows it once the runner answers)"
            raise NoAnswer(f"the runner on {self.socket} did not answer: {exc}{later}") \
                from exc

    def live(self) -> bool:
        """Whether a runner is live here: one listens on the socket, or holds `control.lock`
        as the kernel says (a runner whose socket was removed or replaced, or in another pid
        namespace: its requests say so)."""
        if is_live(self.socket):
            return True
        try:
            return held(self.socket)
        except OSError:
            return False


class _Supervisor(Supervisor):
    """A Supervisor that says when it is running (every source holds its start position)."""

    def __init__(self, *args: Any, on_running: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_running = on_running

    def started(self) -> None:
        super().started()
        self.on_running()


class SessionRunner:
    """This session's supervisor: the config's limits, agents and output dir, no watchers of its
    own (those are `watchrun run`'s). It serves the control socket like any runner, so `watchrun
    list` and `top` see it. Its task belongs to the session's TaskGroup."""

    kind = "session"

    def __init__(self, config: Config, log: RunLog, tg: asyncio.TaskGroup,
                 on_end: Callable[[], None]) -> None:
        self.config = msgspec.structs.replace(config, watchers=())
        self.log, self._tg, self._on_end = log, tg, on_end
        self.sup: _Supervisor | None = None
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._failure: str | None = None
        self._running = False
        self._stopping = False

    @property
    def running(self) -> bool:
        return self._running

    async def start(self) -> None:
        """Prepare the output dir, start the supervisor; return once it runs, or raise
        StartFailed (one line: why) with everything undone."""
        try:
            layout = await asyncio.to_thread(prepare_output_dir, self.config.output.dir)
        except OutputDirError as exc:
            raise StartFailed(str(exc)) from exc
        for note in layout.fixed:
            self.log.warning(note)
        become_subreaper()
        sup = _Supervisor(self.config, layout, self.log, SystemClock(), Spawner(),
                          force_poll=os.environ.get("WATCHRUN_FORCE_POLL") == "1",
                          guardian=True, on_running=self._now_running)
        self.sup = sup
        self._task = self._tg.create_task(self._run(sup), name="session-supervisor")
        await self._settled.wait()
        if self._failure is not None:
            raise StartFailed(self._failure)

    def _now_running(self) -> None:
        self._running = True
        self._settled.set()

    async def _run(self, sup: _Supervisor) -> None:
        try:
            await sup.run()
        except StartupError as exc:
            self._failure = f"could not start this session's runner: {exc}"
        except Exception as exc:  # a bug: one line in the log, never a crash of the server
            self._failure = f"internal error in this session's runner: {exc!r}"
            self.log.error(self._failure)
        finally:
            was_running, self._running = self._running, False
            self._settled.set()
            if was_running and not self._stopping:  # a signal stopped it: the session ends
                self._on_end()

    async def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The supervisor's answer. A call cancelled meanwhile (the client's timeout or
        `notifications/cancelled`, the session's end) does not cut the request short: a stop
        cut short wrote no `stop` record and left its JSONL open. The supervisor's TaskGroup
        owns it, so the runner ends only after it."""
        sup = self.sup
        if sup is None or not self._running:
            raise NoRunner("this session's runner has stopped")
        coro = _outcome(sup.control, payload)
        try:
            job: asyncio.Task[Outcome] = sup.spawn(coro, f"control:{payload.get('cmd')}")
        except RuntimeError as exc:  # its TaskGroup is ending
            coro.close()
            raise NoRunner("this session's runner is stopping") from exc
        reply, error = await asyncio.shield(job)
        if error is not None:
            raise error
        assert reply is not None
        return reply

    async def stop(self) -> None:
        """Stop every watcher it runs (TERM, stopTimeout, KILL per process group), as SIGTERM
        would, and wait for the supervisor to end."""
        self._stopping = True
        if self.sup is not None and self._task is not None:
            self.sup.request_stop()
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)


Outcome = tuple[dict[str, Any] | None, Exception | None]


async def _outcome(control: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
                   payload: dict[str, Any]) -> Outcome:
    """(the reply, None) or (None, the exception): a failed request is its caller's to raise,
    never the TaskGroup's (which would end the runner)."""
    try:
        return await control(payload), None
    except Exception as exc:
        return None, exc


class Runners:
    """Picks the runner for each call: this session's once it runs, else the live runner of
    the output dir if one answers, else none (`add` then starts this session's)."""

    def __init__(self, config: Config, log: RunLog, tg: asyncio.TaskGroup,
                 on_end: Callable[[], None]) -> None:
        self.config, self.log, self._tg, self._on_end = config, log, tg, on_end
        self.root = Path(config.output.dir)
        self.live = LiveRunner(self.root / "control.sock", config if config.sources else None)
        self.session: SessionRunner | None = None
        self.added: dict[str, Runner] = {}
        """The ids of the watchers this session added, and where: they end with the session
        (on a live runner, those still as the session added them: `mine`)."""
        self._lock = asyncio.Lock()

    async def current(self) -> Runner | None:
        if self.session is not None and self.session.running:
            return self.session
        if await asyncio.to_thread(self.live.live):
            return self.live
        return None

    async def for_add(self) -> Runner:
        """The runner to add to: the current one, or this session's, started now."""
        async with self._lock:
            found = await self.current()
            if found is not None:
                return found
            # Known before it starts: a session that ends meanwhile (this call cancelled)
            # still stops it.
            session = self.session = SessionRunner(self.config, self.log, self._tg,
                                                   self._on_end)
            try:
                await session.start()
            except StartFailed:
                self.session = None  # undone; the next `add` tries again
                if await asyncio.to_thread(self.live.live):
                    return self.live  # a runner started meanwhile and took the socket
                raise
            self.log.info(f"no runner was live on {edge_name(self.root)}: this session runs "
                          "its own until it ends", event="session-runner")
            return session

    async def close(self) -> None:
        """The session ended: stop the watchers it added to the live runner, those still as it
        added them (the runner checks: an id cleared and added again since, or taken over by
        the config in a reload, is not the session's), then its own runner (and every watcher
        and process of it)."""
        live = [wid for wid, runner in self.added.items() if runner is self.live]
        if live:
            self.log.info(f"the MCP session ended: stopping {', '.join(live)} on the live "
                          "runner, those still the session's", event="session-end")
            await asyncio.gather(*(self._stop_live(wid) for wid in live))
        if self.session is not None:
            self.log.info("the MCP session ended: stopping its runner", event="session-end")
            await self.session.stop()

    async def _stop_live(self, wid: str) -> None:
        with contextlib.suppress(NoRunner, NoAnswer):  # (gone, or stalled: endWithClient)
            await self.live.request({"cmd": "stop", "id": wid, "mine": True})
