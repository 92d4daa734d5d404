"""The watchers of a live runner: built (sink open), running (a supervisor task), stopped (a
`stop` record, sink closed off the loop), what each saw (once-mode verdicts), and the specs of
those added at runtime."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watchrun.config.model import WatcherSpec
from watchrun.inotify import TurnedRemote
from watchrun.notify import Notifier
from watchrun.offload import StuckCall, offload
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.process.tree import os_error_said
from watchrun.runtime.census import DOING, doing, ended
from watchrun.runtime.ending import STOP_RECORD_S, Owner, end
from watchrun.runtime.first_looks import Said, which_fs
from watchrun.runtime.gate import Evidence
from watchrun.runtime.hscache import disk_store
from watchrun.runtime.wiring import (
    Seams,
    WatcherRuntime,
    build_watcher,
    counters_of,
    watcher_sink,
)
from watchrun.sources.checkpoints import CheckpointStore

if TYPE_CHECKING:
    from watchrun.sources.command import Echo

__all__ = ["WatcherSet", "counters_of"]


class WatcherSet:
    """Every watcher of the runner, by state: `later` (built), `running` (a task), stopped (gone
    from both; in a once run its evidence kept for the verdict)."""

    def __init__(self, sup: Owner, store: CheckpointStore,
                 sinks: Callable[..., JsonlSink], echo: Echo | None) -> None:
        self.sup, self.store, self.sinks, self.echo = sup, store, sinks, echo
        self.running: dict[str, WatcherRuntime] = {}
        self.later: dict[str, WatcherRuntime] = {}
        """Once mode: file watchers built at start (their sinks open), run after the commands."""
        self.evidence: dict[str, Evidence] = {}
        self.notifier: Notifier | None = None
        self.runtime: dict[str, WatcherSpec] = {}
        """Watchers added through the control socket (`add`), running or stopped, until
        cleared: they are in no config file, so a reload keeps them and a new runner has none."""
        self.stopping: dict[str, asyncio.Future[list[str]]] = {}
        """Stops under way (a `stop` request's, a reload's): the runner's own stop awaits them
        too, so that its second SIGTERM kills what they wait for."""
        self.stopped_by_request: set[str] = set()
        """Watchers stopped by `stop` (or `clear --all`) and not started since: a reload leaves
        a config watcher among them stopped, as supervisord's `update` does."""
        self.databases = disk_store(os.environ)
        self.elsewhere: set[str] = set()
        """File watchers whose remote file is followed on a thread of its own, polled there."""

    def origin(self, wid: str) -> str:
        return "runtime" if wid in self.runtime else "config"

    def spec_of(self, wid: str) -> WatcherSpec | None:
        """The spec a stopped watcher would start again with: added at runtime, or configured."""
        return self.runtime.get(wid) or self.sup.config.watcher(wid)

    @property
    def held(self) -> int:
        """Watchers that are not stopped (what limits.maxWatchers bounds)."""
        return len(self.running) + len(self.later)

    def census(self) -> dict[str, int]:
        """Every watcher the runner has (the config's, those added at runtime) by what it does
        now, the nonzero counts in `DOING`'s order: `running` (also starting, in backoff before a
        restart, waiting for its file or its schedule, as `top` counts them), `error` (its file
        cannot be read), `exited`, `fatal`, `stopped` (by `stop`, or by a reload that could not
        start it again); once mode: `queued` (a file, read once the commands are done)."""
        counts = dict.fromkeys(DOING, 0)
        for rt in self.running.values():
            counts[doing(rt)] += 1
        counts["queued"] += len(self.later)
        counts["stopped"] += len(self.named() - self.running.keys() - self.later.keys())
        return {what: n for what, n in counts.items() if n}

    def named(self) -> set[str]:
        """Every watcher the runner is to run: the config's (unless `limits.enabled` is
        false) and those added at runtime, running or not."""
        config = self.sup.config
        return {*self.runtime, *(w.id for w in config.watchers if config.limits.enabled)}

    @property
    def notify_mode(self) -> tuple[str, int]:
        """The notifier's mode, and how many file watchers poll while it is "inotify" (for
        want of watches, or where inotify cannot watch their path; those on a remote file
        system poll on their own thread)."""
        n = self.notifier
        if n is None or n.mode != "inotify":
            return "none" if n is None else n.mode, 0
        return n.mode, sum(w.polling for w in n.watches) + len(self.elsewhere)

    def build(self, spec: WatcherSpec, sink: JsonlSink | None = None) -> WatcherRuntime:
        """Open its sink (unless opened already) and wire it; raises (SinkWriteError,
        ValueError, OSError) leaving nothing open."""
        sup = self.sup
        return build_watcher(spec, sup.config, sup.layout, sup.log, self._seams(), once=sup.once,
                             echo=self.echo, on_matches=sup.matched, on_event=self._event,
                             sink=sink)

    async def build_off_loop(self, spec: WatcherSpec) -> WatcherRuntime:
        """`build` for a runner that is running: the sink's files are opened in a worker
        thread (a slow or hung file system holds up this watcher, not the loop)."""
        sup = self.sup
        opening = asyncio.ensure_future(
            offload(watcher_sink, spec, sup.config, sup.layout, self._seams()))
        try:
            sink = await asyncio.shield(opening)
        except asyncio.CancelledError:  # (a shutdown): the sink, once open, is closed
            opening.add_done_callback(_close_opened)
            raise
        return self.build(spec, sink)

    def _seams(self) -> Seams:
        assert self.notifier is not None
        sup = self.sup
        return Seams(sup.clock, sup.spawner, self.store, self.notifier, self.sinks, self.databases)

    def launch(self, rt: WatcherRuntime) -> None:
        again = self.sup.board.add(rt.spec, rt.pipeline, rt.source, rt.engine,
                                   self.origin(rt.spec.id))
        self._report_writes(rt)
        self.sup.tally.attach(rt.spec.id, rt.pipeline.counters, again=again)
        rt.task = self.sup.spawn(self._run(rt), rt.spec.id)
        self.running[rt.spec.id] = rt
        self.sup.attach_actions(rt.spec, rt.pipeline)
        self.stopped_by_request.discard(rt.spec.id)

    def _report_writes(self, rt: WatcherRuntime) -> None:
        """A write that fails (a full disk) is a problem of the runner's (the log, `status`,
        the watcher's `lastError` and status `paused`), and said again when it writes."""
        wid, sup = rt.spec.id, self.sup

        def failing(msg: str) -> None:
            sup.problem(f"cannot write records: {msg}", wid)

        def recovered() -> None:
            sup.log.info("writing records again", wid)
            sup.board.touch(wid, now=True)

        rt.pipeline.writer.on_error, rt.pipeline.writer.on_recovered = failing, recovered

    def start_later(self) -> None:
        later, self.later = self.later, {}
        for rt in later.values():
            self.launch(rt)

    async def ready(self, rts: list[WatcherRuntime]) -> str | None:
        """Wait until every source holds its start position, or is held by its file system (a
        call that has not returned for STALL_S, said: `held_up`); the failure of one, if any."""
        for rt in rts:
            assert rt.task is not None
            waiters = {asyncio.ensure_future(rt.source.ready.wait()),
                       asyncio.ensure_future(rt.stalled.wait())}
            try:
                await asyncio.wait({*waiters, rt.task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
            if rt.failure is not None:
                return f"watcher {rt.spec.id}: {rt.failure}"
        return None

    def held_up(self) -> list[str]:
        """The running watchers whose start is held by their file system: not ready, a call of
        theirs stalled (the start did not wait for them; each is ready once its call returns)."""
        return sorted(wid for wid, rt in self.running.items() if rt.stalled.is_set()
                      and not rt.source.ready.is_set() and ended(rt) is None)

    async def wait_running(self) -> None:
        tasks = {rt.task for rt in self.running.values() if rt.task is not None}
        if tasks:
            await asyncio.wait(tasks)

    async def _run(self, rt: WatcherRuntime) -> None:
        wid = rt.spec.id
        try:
            if rt.spec.path is not None and \
                    (fs := await which_fs(rt.spec.path, self._said(rt))):
                await self._remote(rt, fs)
            else:
                try:
                    await rt.source.run(rt.pipeline)
                except TurnedRemote as turned:  # (a file system mounted over it since)
                    await self._remote(rt, turned.fs, moved=True)
        except asyncio.CancelledError:
            raise
        except StuckCall as exc:  # (its thread is left to the call that does not return)
            rt.failure = str(exc)
            self.sup.runtime_errors.append(f"{wid}: {exc}")
            self.sup.problem(str(exc), wid)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(rt.pipeline.event(  # (said once: by the problem)
                    "error", echo=False, code="reads-stuck", message=str(exc)), STOP_RECORD_S)
        except Exception as exc:  # a bug, or a worker that cannot run: not the other watchers
            from watchrun.runtime.isolation import WorkerError

            code = "internal"
            if isinstance(exc, SinkWriteError):  # (a once run's write deadline passed)
                rt.failure = f"its records could not be written: {exc}"
            elif isinstance(exc, OSError):  # (out of descriptors: the limit, not a repr)
                rt.failure = os_error_said(exc)
                code = errno.errorcode.get(exc.errno or 0, code)
            elif isinstance(exc, WorkerError):  # (not a bug: its own code, its own words)
                rt.failure, code = str(exc), "regex-worker"
            else:
                rt.failure = repr(exc)
            self.sup.runtime_errors.append(f"{wid}: {rt.failure}")
            self.sup.log.error(f"watcher failed: {rt.failure}", wid)
            self.sup.board.failed(wid, rt.failure)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(rt.pipeline.event(
                    "error", code=code, message=rt.failure.removeprefix(f"{code}: ")),
                    STOP_RECORD_S)
        finally:
            self.sup.board.touch(wid)

    async def _remote(self, rt: WatcherRuntime, fs: str, *, moved: bool = False) -> None:
        """A file on a remote file system: followed on a loop of its own (`runtime.remote`),
        polled there (counted in `notify_mode`); `moved`: its path turned remote while its
        source ran on the runner's loop, and a new one goes on from where that one ended."""
        from watchrun.runtime.remote import follow_remote

        self.elsewhere.add(rt.spec.id)
        try:
            await follow_remote(self.sup, rt, fs, moved=moved, said=self._said(rt))
        finally:
            self.elsewhere.discard(rt.spec.id)

    def _said(self, rt: WatcherRuntime) -> Said:
        """How a stall of the watcher's calls and its end are said: the log and `status` (as a
        problem); a stall also lets a start go on without it (`rt.stalled`)."""
        wid = rt.spec.id

        def said(text: str, stalled: bool) -> None:
            if stalled:
                rt.stalled.set()
                self.sup.problem(text, wid)
            else:
                self.sup.log.warning(text, wid, event="source-resumed")
        return said

    def _event(self, spec: WatcherSpec, kind: str, fields: dict[str, Any]) -> None:
        self.sup.board.event(spec.id, kind, fields)

    async def stop(self, wid: str, reason: str) -> list[str]:
        """End its task, write its `stop` record, close its sink (in a thread: fsync). Never
        raises: a failure is reported (and returned) and the stop goes on, to its end even when
        the caller is cancelled (the runner's stop awaits it: `stop_all`)."""
        rt = self.running.pop(wid, None) or self.later.pop(wid, None)
        if rt is None:
            return []
        stop = asyncio.ensure_future(self._stop(wid, rt, reason))
        self.stopping[wid] = stop
        stop.add_done_callback(lambda done: self.stopping.pop(wid, None)
                               if self.stopping.get(wid) is done else None)
        return await asyncio.shield(stop)

    async def _stop(self, wid: str, rt: WatcherRuntime, reason: str) -> list[str]:
        self.sup.board.stopping(wid)
        if reason == "requested":
            self.stopped_by_request.add(wid)
        evidence, problems = await end(self.sup, wid, rt, reason)
        if self.sup.once:  # (what the verdict judges: a live runner keeps no stopped one's)
            self.evidence[wid] = evidence
        for text in problems:
            self.sup.problem(text, wid)
        self.sup.board.stopped(wid)
        return problems

    async def stop_all(self, reason: str) -> None:
        """Stop every watcher, and wait for the stops already under way."""
        wids = [*self.running, *self.later]
        under_way = list(self.stopping.values())
        results = await asyncio.gather(*(self.stop(w, reason) for w in wids), *under_way,
                                       return_exceptions=True)
        for wid, result in zip(wids, results[:len(wids)], strict=True):
            if isinstance(result, Exception):
                self.sup.problem(f"stopping failed: {result!r}", wid)


def _close_opened(opening: asyncio.Future[JsonlSink]) -> None:
    """Close a sink opened for a build that was cancelled while it opened."""
    if not opening.cancelled() and opening.exception() is None:
        with contextlib.suppress(SinkWriteError):
            opening.result().close()
