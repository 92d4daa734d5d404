"""A transactional start: each step pushes its undo before the next begins, and a failure at
any step (bind, a sink, a source) becomes one line naming the cause, with everything undone."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from watchrun.agents.streamlock import lock_path
from watchrun.config.model import Config
from watchrun.match.sanitize import edge_name
from watchrun.notify import Notifier
from watchrun.offload import StuckCall
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.output.safefs import UnsafePathError
from watchrun.output.sink import SinkWriteError
from watchrun.process.groups import PROCESSES, GroupRegistry, agent_processes, end_leftovers
from watchrun.process.guard_lazy import LazyGuardian
from watchrun.process.spawn import Spawner
from watchrun.process.tree import limit_hint, os_error_said
from watchrun.runtime.control import ControlServer
from watchrun.runtime.ending import finish
from watchrun.runtime.problems import Problems
from watchrun.runtime.signals import SignalInbox
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.watchers import WatcherSet

__all__ = ["StartupError", "start_or_stop"]

"""Under state/: the process groups of the live runner (see `process.groups`)."""


class StartupError(Exception):
    """A start-up step failed and everything done before it was undone."""


class Starting(Protocol):
    """What start-up needs of the supervisor."""

    config: Config
    layout: OutputLayout
    log: RunLog
    spawner: Spawner
    once: bool
    guardian: bool
    force_poll: bool
    metrics: tuple[str, int] | None
    board: StatusBoard
    set: WatcherSet
    reload_pending: bool
    problems: Problems

    @property
    def state(self) -> object: ...

    async def control(self, req: dict[str, Any]) -> dict[str, Any]: ...
    def metrics_snapshot(self) -> dict[str, Any]: ...
    async def start_hub(self) -> None: ...
    def start_actions(self) -> None: ...
    def started(self) -> None: ...
    def problem(self, message: str, wid: str | None = None) -> None: ...


async def start_or_stop(sup: Starting, undo: contextlib.AsyncExitStack,
                        inbox: SignalInbox) -> str | None:
    """Start; None once every source holds its start position (or is held by a file system
    that does not answer: `WatcherSet.ready`). A SIGTERM/SIGINT meanwhile
    abandons the start and returns the signal's name (the caller stops what did start); a
    SIGHUP is kept for after it. Raises StartupError."""
    starting = asyncio.ensure_future(_start(sup, undo))
    try:
        while True:
            sig_wait = asyncio.ensure_future(inbox.next())
            try:
                await asyncio.wait({starting, sig_wait}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sig_wait.cancel()
            # Both may be done: a signal taken off the queue must be acted on, not dropped.
            sig = sig_wait.result() if sig_wait.done() and not sig_wait.cancelled() else None
            if sig == signal.SIGHUP:
                sup.reload_pending = True
            elif sig is not None:
                if starting.done():
                    starting.result()  # a StartupError says more than the signal
                sup.log.info(f"{sig.name} while starting: stopping what did start")
                return sig.name
            if starting.done():
                starting.result()  # StartupError
                return None
    finally:
        if not starting.done():
            await finish(starting)


async def _start(sup: Starting, undo: contextlib.AsyncExitStack) -> None:
    try:
        await _steps(sup, undo)
    except (StartupError, asyncio.CancelledError):
        raise
    except OSError as exc:  # a step that names none (leftovers' scan of state/): its errno
        raise StartupError(os_error_said(exc)) from exc
    except Exception as exc:  # a bug: still one line, and everything undone
        raise StartupError(f"internal error while starting: {exc!r}") from exc


async def _steps(sup: Starting, undo: contextlib.AsyncExitStack) -> None:
    layout, config, log = sup.layout, sup.config, sup.log
    await _control(sup, undo)
    if not sup.once:  # the requests' code is loaded now: out of descriptors later, a first
        importlib.import_module("watchrun.runtime.commands")  # request could not open it
    if sup.metrics is not None:
        from watchrun.runtime.metrics import MetricsServer  # prometheus_client: only if asked

        host, port = sup.metrics
        metrics = MetricsServer(host, port, sup.metrics_snapshot, warn=log.warning,
                                up=lambda: str(sup.state) == "running")
        await _step(metrics.start, f"--metrics {host}:{port}")
        undo.push_async_callback(metrics.close)
    await _end_leftovers(sup)
    guardian = None
    if sup.guardian:  # started with the first child: a runner of files only needs none
        guardian = LazyGuardian(log.warning, inform=log.info)
        sup.problems.standing.append(guardian.problem)
        undo.push_async_callback(asyncio.to_thread, guardian.close)
        undo.callback(guardian.unwatch)  # (first: a guardian told to end is not replaced)
    registry = sup.spawner.registry = GroupRegistry(
        layout.state / PROCESSES, guardian.tell if guardian else None, log.warning,
        guardian.start if guardian else None)
    if guardian is not None:
        guardian.known = registry.groups.values
    # once: the file sources read to their end and never wait, so nothing is watched (adding
    # an inotify watch to a directory makes the kernel walk its cached entries: 11 ms on a /tmp
    # that had held many files)
    notifier = Notifier(config.limits.poll_ms, force_poll=sup.force_poll, enabled=not sup.once,
                        counted=True, leave_remote=not sup.once)  # (`runtime.remote`)
    undo.callback(notifier.close)
    sup.set.notifier = notifier
    sup.problems.standing.append(notifier.starving)
    for problem in notifier.problems:
        log.warning(problem)
    undo.push_async_callback(_close_board, sup)
    if config.agents:
        await _step(sup.start_hub, "agents")
    await _step(_sync(sup.start_actions), "actions")  # when a watcher has actions
    if config.limits.enabled:
        for spec in config.watchers:  # every sink opens before any source starts
            sup.set.later[spec.id] = await _step(_sync(functools.partial(sup.set.build, spec)),
                                                 f"watcher {spec.id}")
        started = [rt for rt in sup.set.later.values()
                   if not (sup.once and rt.spec.kind == "file")]  # once: files after commands
        for rt in started:
            del sup.set.later[rt.spec.id]
            sup.set.launch(rt)
        failed = await sup.set.ready(started)
        if failed is not None:
            raise StartupError(failed)
    sup.started()


async def _control(sup: Starting, undo: contextlib.AsyncExitStack) -> None:
    """The control socket, and the output dir's lock (refused when another runner is live). A
    file system that cannot hold a socket (sshfs, SMB/CIFS, FUSE: `NO_SOCKET`) is a failed
    start that says so, but in a once run, which is not controlled: it goes on with the lock
    alone (no command reaches it), and says that once."""
    path = sup.layout.control_socket
    control = ControlServer(path, sup.control, sup.log)
    refused = await _step(functools.partial(control.start, lock_alone=True),
                          f"control socket {path}")
    undo.push_async_callback(control.close)
    if refused is None:
        return
    said = f"control socket {path}: {refused.strerror}: the output dir's file system does not " \
        "take a Unix socket (sshfs, SMB/CIFS and other FUSE file systems cannot hold one)"
    if not sup.once:
        raise StartupError(f"{said}, which `watchrun status`, `list`, `stop` and the other "
                           "commands reach the runner through; give it an output dir on a "
                           "local disk (`--output-dir`, or `output.dir` in the config)")
    sup.log.warning(f"{said}; this run goes on without one, so `watchrun status` and the other "
                    "commands cannot reach it (an output dir on a local disk can: "
                    "`--output-dir`, `output.dir`)", event="no-control-socket")


async def _close_board(sup: Starting) -> None:
    """The last status snapshots: a write that hangs is a problem of the run (its worker
    thread is named at the end), not a crash of the stop."""
    try:
        await sup.board.aclose()
    except StuckCall as exc:
        sup.problem(f"the last status snapshots were not written: {exc}")


async def _end_leftovers(sup: Starting) -> None:
    """Process groups a previous runner of this output dir left (it was SIGKILLed, and so was
    its guardian) are ended before their watchers start again, and so are those a killed
    `agent run` left: only while nothing holds that agent's lock, whatever its pid says (an
    `agent run` in another pid namespace recorded its pid there). A groups file that is not
    the runner's own (a planted symlink, FIFO or another user's file) is not believed: said,
    and nothing is signalled."""
    state = sup.layout.state
    grace = sup.config.limits.stop_timeout_ms / 1000
    # (the runner's own file: its writer held control.lock, which this runner holds now)
    found: list[tuple[Path, Path | None]] = [(state / PROCESSES, None)]
    for path in sorted(state.glob(agent_processes("*"))):
        name = path.name.removeprefix("agent-").removesuffix(f".{PROCESSES}")
        found.append((path, lock_path(sup.layout.agents / f"{name}.jsonl")))
    for path, lock in found:
        try:
            pid, ended = await asyncio.to_thread(end_leftovers, path, grace, lock)
        except UnsafePathError as exc:
            sup.log.warning(f"{edge_name(exc.filename)}: {exc.strerror}; not trusted, so no "
                            "process it names is ended")
            continue
        if ended:
            who = "runner" if lock is None else "`agent run`"
            sup.log.warning(f"ended {ended} processes left running by a previous {who} "
                            f"(pid {pid}) of this output dir")


def _sync(fn: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    async def call() -> Any:
        return fn()
    return call


async def _step(fn: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Run one step; an OS or sink error becomes a StartupError naming `what`."""
    try:
        return await fn()
    except (OSError, SinkWriteError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        named = getattr(exc, "filename", None)
        if named is not None and str(named) not in what + why:  # (another file: its lock)
            why = f"{named}: {why}"
        raise StartupError(f"{what}: {why}{limit_hint(exc)}") from exc
