"""Status snapshots under state/ (what `watchrun list/status/logs` read when no runner is live)
and the live `list` reply: per watcher its origin, status, pid, start, restarts, last error."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from watchrun import offload
from watchrun.clock import Clock, iso_ts
from watchrun.config.model import WatcherSpec
from watchrun.match.redact import Redactor
from watchrun.output import runlock, safefs
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.runtime.snapshot_text import snapshot_json
from watchrun.runtime.status_entry import Entry, snapshot
from watchrun.runtime.status_files import Batch, SnapshotFiles
from watchrun.runtime.tail_files import TailWrite

log = logging.getLogger("watchrun.status")  # (the runner log's `status` events)
FLUSH_DELAY_S = 1.0
"""Snapshots are written at most this often, and only after something changed."""


class StatusBoard:
    """Keeps `state/<id>.status.json` and `state/<id>.tail` current, debounced.

    The snapshots are rendered on the loop (a few hundred microseconds per watcher; a `.tail`:
    the lines new since its last write, `runtime/tail_files.py`) and written (tmp + rename; a
    `.tail` appended to) by a worker thread, so a slow disk never delays a match record. Each
    write carries a generation: an older snapshot never replaces a newer one, nor revives one
    that `forget_stopped` removed. Before the first, the runner's run lock is made
    (`output/runlock.py`): each snapshot names it (`runnerId`), and it is held until `close`.
    """

    def __init__(self, state_dir: Path, clock: Clock, lag: LoopLag | None = None) -> None:
        self.dir = state_dir
        self._identity = safefs.dir_identity(state_dir)  # (never another runner's state/)
        self.clock = clock
        self.lag = lag
        self.entries: dict[str, Entry] = {}
        self._dirty: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.started_at = clock.now()
        self.runner_id = runlock.new_id()
        self._files = SnapshotFiles(runlock.RunLock(state_dir, self.runner_id), self.ours)
        self._writing: asyncio.Future[None] | None = None
        self._starts = 0

    def add(self, spec: WatcherSpec, pipeline: WatcherPipeline, source: object, engine: str,
            origin: str = "config") -> bool:
        """A watcher (re)starts; an earlier entry of the same id gives its restarts (plus this
        one, unless it never started) and its last error. Whether it starts again (counted in
        its restarts)."""
        prev = self.entries.get(spec.id)
        self._starts += 1
        run = f"{os.getpid()}@{iso_ts(self.started_at)}#{self._starts}"
        entry = Entry(spec, pipeline, source, engine, origin, run, self.clock.now(),
                       self.clock.monotonic(), redactor=pipeline.redactor)
        again = prev is not None and prev.pipeline is not None
        if prev is not None:
            entry.restarts, entry.last_error = prev.restarts + again, prev.last_error
        self.entries[spec.id] = entry
        pipeline.on_touch = lambda wid=spec.id: self.touch(wid)
        self.touch(spec.id)
        return again

    def not_started(self, spec: WatcherSpec, origin: str, redactor: Redactor | None) -> None:
        """A watcher to run that could not be started (a reload's: its JSONL could not be
        opened) is listed `stopped`, with the spec `watchrun start` starts: one that never
        started gets an entry with no pipeline (its counts 0; `note` gives it its why)."""
        entry = self.entries.get(spec.id)
        if entry is None:
            entry = Entry(spec, None, None, None, origin, "", self.clock.now(),
                          self.clock.monotonic(), stopped=True, redactor=redactor)
            self.entries[spec.id] = entry
        elif entry.spec != spec:
            entry.spec, entry.said, entry.redactor = spec, None, redactor
        self.touch(spec.id)

    def event(self, wid: str, kind: str, fields: dict[str, Any]) -> None:
        """A record the watcher wrote: restarts and errors are counted and kept."""
        entry = self.entries.get(wid)
        if entry is not None:
            if kind == "start" and fields.get("attempt"):  # (not at `restart`: the backoff
                entry.restarts += 1                        # may end in a stop, not a run)
            elif kind == "error" or (kind == "stop" and fields.get("message")):
                entry.last_error = str(fields.get("message") or fields.get("code"))
            elif kind == "exit" and not fields.get("signals") and (
                    fields.get("status") != "exited" or fields.get("exitCode")):
                # (`signals`: the runner stopped it, as asked; not an error of the command)
                how = f"killed by {fields.get('signal')}" if fields.get("signal") else \
                    f"exited with code {fields.get('exitCode')}"
                entry.last_error = f"run {fields.get('run')} {how}"
        self.touch(wid)

    def failed(self, wid: str, message: str) -> None:
        """Its source ended with an internal error: status `fatal`, written at once."""
        entry = self.entries.get(wid)
        if entry is not None:
            entry.failed, entry.last_error = True, message
            self.touch(wid, now=True)

    def touch(self, wid: str, now: bool = False) -> None:
        self._dirty.add(wid)
        if self._timer is None or now:
            with contextlib.suppress(RuntimeError):  # no loop: flushed at close()
                loop = asyncio.get_running_loop()
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = loop.call_later(0 if now else FLUSH_DELAY_S, self.flush)

    def stopping(self, wid: str) -> None:
        """A stop of the watcher began; its snapshot says so at once (`stopping`)."""
        entry = self.entries.get(wid)
        if entry is not None:
            entry.stopping = True
            self.touch(wid, now=True)

    def being_stopped(self) -> list[str]:
        """The watchers whose stop is under way."""
        return sorted(w for w, e in self.entries.items() if e.stopping and not e.stopped)

    def stopped(self, wid: str) -> None:
        """Mark a watcher stopped; its snapshot is written at once (in the worker thread)."""
        entry = self.entries.get(wid)
        if entry is not None:
            entry.stopped = True
            self.touch(wid, now=True)

    def note(self, wid: str, message: str) -> None:
        """A problem the runner had with this watcher (`lastError` in its snapshot)."""
        entry = self.entries.get(wid)
        if entry is not None:
            entry.last_error = message
            self.touch(wid, now=True)

    def forget_stopped(self, only: set[str] | None = None) -> list[str]:
        """`watchrun clear`: drop stopped watchers' snapshots (their JSONL stays), and those
        on disk of watchers this runner does not hold; with `only`, of those watchers only.
        Returns the ids of the entries forgotten."""
        gone = [w for w, e in self.entries.items() if e.stopped and (only is None or w in only)]
        self._drop(gone, strays=only is None)
        return gone

    def forget(self, wid: str) -> None:
        """Drop one stopped watcher's entry and snapshot files (their JSONL stays): an `add`
        whose start failed keeps nothing (runtime/manage.py)."""
        entry = self.entries.get(wid)
        if entry is not None and entry.stopped:
            self._drop([wid], strays=False)

    def _drop(self, gone: list[str], strays: bool) -> None:
        """Remove the snapshots of `gone` (`strays`: and of every watcher on disk this board
        does not hold) and forget their entries."""
        def paths() -> Iterator[Path]:
            on_disk = [p.name.removesuffix(".status.json") for p in
                       self.dir.glob("*.status.json")] if strays else []
            for wid in {*gone, *(w for w in on_disk if w not in self.entries)}:
                yield from (self.dir / f"{wid}.status.json", self.dir / f"{wid}.tail")
        self._files.remove(paths)
        for wid in gone:
            del self.entries[wid]
            self._dirty.discard(wid)

    def ours(self) -> bool:
        """`state/` is still the directory this board started with: the output dir removed and
        made again by a second runner holds that runner's snapshots, not this one's."""
        try:
            safefs.same_dir(self.dir, self._identity)
        except OSError:
            return False
        return True

    def flush(self) -> None:
        """Write the snapshots of the watchers that changed: in a worker thread when the loop
        runs (one write at a time; a slow disk just makes snapshots less frequent)."""
        self._timer = None
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and self._behind():
            self._timer = loop.call_later(FLUSH_DELAY_S, self.flush)  # the disk is behind
            return
        dirty, self._dirty = self._dirty, set()
        batch = self._render(sorted(dirty))
        if loop is None:
            self._files.store(batch)
        elif batch[1] or batch[2]:
            self._writing = loop.run_in_executor(None, self._files.store, batch)
            self._writing.add_done_callback(self._redo)

    def _redo(self, _: object) -> None:
        """The `.tail`s an append could not be made to are written whole, soon."""
        for wid in self._files.tails.redo():
            self.touch(wid)

    def close(self) -> None:
        """Cancel the timer and write what changed, now (an older queued write is skipped)."""
        self._files.store(self._last(), last=True)

    async def aclose(self) -> None:
        """`close()` for the running loop: the last snapshots are rendered here and written in
        a worker thread after any write still in flight."""
        if self._writing is not None:
            await asyncio.wait({self._writing}, timeout=offload.stop_left(offload.STOP_CALL_S))
        await offload.at_stop(self._files.store, self._last(), True)

    def _last(self) -> Batch:
        """The timer cancelled, what changed rendered (each `.tail` whole while a write is still
        under way: what that write leaves in the file is not known yet)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        dirty, self._dirty = self._dirty, set()
        return self._render(sorted(dirty), self._behind())

    def _behind(self) -> bool:
        return self._writing is not None and not self._writing.done()

    def live(self) -> list[dict[str, Any]]:
        """The live `list`: every watcher's snapshot now, with `uptimeS` and `live: true`."""
        return [self.live_record(wid) for wid in sorted(self.entries)]

    def live_record(self, wid: str) -> dict[str, Any]:
        """One watcher's snapshot now; `uptimeS`: seconds since it (re)started, while it runs."""
        entry = self.entries[wid]
        snap = snapshot(entry, self.clock.now(), (self.runner_id, self.started_at), self.lag)
        since = self.clock.monotonic() - entry.started_mono
        up = snap["status"] == "running"
        return {**snap, "uptimeS": round(since, 3) if up else None, "live": True}

    def _render(self, wids: list[str], whole: bool = False
                ) -> Batch:
        """The snapshot files of these watchers and their `.tail` writes (`whole`: each one
        written whole), and their generation (on the loop)."""
        files: list[tuple[Path, bytes]] = []
        tails: list[TailWrite] = []
        for wid in wids:
            entry = self.entries.get(wid)
            if entry is None:
                continue
            snap = snapshot(entry, self.clock.now(), (self.runner_id, self.started_at), self.lag)
            files.append((self.dir / f"{wid}.status.json", snapshot_json(snap)))
            if entry.pipeline is None:  # (it read nothing: no tail)
                continue
            pipe = entry.pipeline  # (its lines here, not per chunk; `output.redact`: them too)
            tail = self._files.tails.render(wid, self.dir / f"{wid}.tail", entry.run,
                                      snap["linesRead"], pipe.counters.tail, entry.redactor,
                                      pipe.limits.max_line_bytes, whole)
            tails += [tail] if tail is not None else []
        return self._files.batch(files, tails)
