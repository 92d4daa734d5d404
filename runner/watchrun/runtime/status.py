"""Status snapshots under state/: what `watchrun list/status/logs` read when no runner is live."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchrun.clock import Clock, iso_ts
from watchrun.config.model import WatcherSpec
from watchrun.match.sanitize import raw_text, sanitize
from watchrun.output import safefs
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.pipeline import WatcherPipeline

FLUSH_DELAY_S = 1.0
"""Snapshots are written at most this often, and only after something changed."""
TAIL_LINE_CHARS = 4096


def atomic_write(path: Path, data: bytes, mode: int = 0o640) -> None:
    """tmp + rename, so a reader never sees half a file; no symlink is followed. No fsync: a
    snapshot is rewritten within a second of any change, and one lost to a power cut (empty
    or old) is skipped or superseded, while an fsync per snapshot held the state directory's
    journal against the checkpoints (per watcher, two of the five fsyncs of a run)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = safefs.create_exclusive(tmp, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    safefs.replace(tmp, path)


@dataclass
class _Entry:
    spec: WatcherSpec
    pipeline: WatcherPipeline
    source: object
    engine: str
    stopped: bool = False
    last_error: str | None = None


class StatusBoard:
    """Keeps `state/<id>.status.json` and `state/<id>.tail` current, debounced.

    The snapshots are rendered on the loop (a few hundred microseconds per watcher) and written
    (tmp + rename) by a worker thread, so a slow disk never delays a match record. Each
    write carries a generation: an older snapshot never replaces a newer one, nor revives one
    that `forget_stopped` removed.
    """

    def __init__(self, state_dir: Path, clock: Clock, lag: LoopLag | None = None) -> None:
        self.dir = state_dir
        self.clock = clock
        self.lag = lag
        self.entries: dict[str, _Entry] = {}
        self._dirty: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.started_at = clock.now()
        self._gen = 0
        self._stored: dict[Path, int] = {}  # path -> generation written (or removed) last
        self._lock = threading.Lock()  # generations; held briefly, never across I/O
        self._io_lock = threading.Lock()  # one writer of snapshot files at a time
        self._writing: asyncio.Future[None] | None = None

    def add(
        self, spec: WatcherSpec, pipeline: WatcherPipeline, source: object, engine: str
    ) -> None:
        self.entries[spec.id] = _Entry(spec, pipeline, source, engine)
        pipeline.on_touch = lambda wid=spec.id: self.touch(wid)
        self.touch(spec.id)

    def touch(self, wid: str, now: bool = False) -> None:
        self._dirty.add(wid)
        if self._timer is None or now:
            with contextlib.suppress(RuntimeError):  # no loop: flushed at close()
                loop = asyncio.get_running_loop()
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = loop.call_later(0 if now else FLUSH_DELAY_S, self.flush)

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

    def forget_stopped(self) -> int:
        """`watchrun clear`: drop stopped watchers' snapshots (their JSONL stays)."""
        gone = [wid for wid, e in self.entries.items() if e.stopped]
        with self._io_lock, self._lock:
            self._gen += 1
            on_disk = [p.name.removesuffix(".status.json") for p in self.dir.glob("*.status.json")]
            for wid in {*gone, *(w for w in on_disk if w not in self.entries)}:
                for p in (self.dir / f"{wid}.status.json", self.dir / f"{wid}.tail"):
                    self._stored[p] = self._gen  # a queued older write must not revive it
                    with contextlib.suppress(OSError):
                        safefs.unlink(p)
        for wid in gone:
            del self.entries[wid]
            self._dirty.discard(wid)
        return len(gone)

    def flush(self) -> None:
        """Write the snapshots of the watchers that changed: in a worker thread when the loop
        runs (one write at a time; a slow disk just makes snapshots less frequent)."""
        self._timer = None
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and self._writing is not None and not self._writing.done():
            self._timer = loop.call_later(FLUSH_DELAY_S, self.flush)  # the disk is behind
            return
        dirty, self._dirty = self._dirty, set()
        files = self._render(sorted(dirty))
        if not files:
            return
        if loop is None:
            self._store(files)
        else:
            self._writing = loop.run_in_executor(None, self._store, files)

    def close(self) -> None:
        """Cancel the timer and write what changed, now (an older queued write is skipped)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        dirty, self._dirty = self._dirty, set()
        self._store(self._render(sorted(dirty)))

    async def aclose(self) -> None:
        """`close()` for the running loop: the last snapshots are rendered here and written in
        a worker thread after any write still in flight."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writing is not None:
            await asyncio.wait({self._writing})
        dirty, self._dirty = self._dirty, set()
        await asyncio.to_thread(self._store, self._render(sorted(dirty)))

    def snapshot(self, entry: _Entry) -> dict[str, Any]:
        spec, c, src = entry.spec, entry.pipeline.counters, entry.source
        state = getattr(src, "state", None)
        status = "stopped" if entry.stopped else str(state) if state is not None else "running"
        snap: dict[str, Any] = {
            "schema": 1,
            "id": spec.id,
            "label": spec.label,
            "kind": spec.kind,
            "source": str(spec.path) if spec.path is not None else spec.command,
            "pattern": spec.pattern,
            "exclude": list(spec.exclude),
            "engine": entry.engine,
            "status": status,
            "runnerPid": os.getpid(),
            "startedAt": iso_ts(self.started_at),
            "updatedAt": iso_ts(self.clock.now()),
            "linesRead": c.lines,
            "bytesRead": c.bytes_read,
            "matchCount": c.matches,
            "truncated": c.truncated,
            "skippedDuplicates": c.skipped_duplicates,
            "errors": c.errors,
            "redacted": dict(c.redacted),
            "lastMatchAt": iso_ts(c.last_match_at) if c.last_match_at else None,
        }
        if entry.last_error is not None:
            snap["lastError"] = entry.last_error
        if self.lag is not None:
            snap["loopLagMaxS"] = round(self.lag.max_s, 3)  # the runner's, not the watcher's
        for attr, key in (("pid", "pid"), ("run_no", "run")):
            value = getattr(src, attr, None)
            if value is not None:
                snap[key] = value
        last_exit = getattr(src, "last_exit", None)
        if last_exit is not None:
            snap["exitCode"] = getattr(last_exit, "exit_code", None)
            snap["signal"] = getattr(last_exit, "signal", None)
        return snap

    def _render(self, wids: list[str]) -> tuple[int, list[tuple[Path, bytes]]]:
        """The snapshot files of these watchers, and their generation (on the loop)."""
        files: list[tuple[Path, bytes]] = []
        for wid in wids:
            entry = self.entries.get(wid)
            if entry is None:
                continue
            snap = json.dumps(self.snapshot(entry), ensure_ascii=False, indent=1)
            files.append((self.dir / f"{wid}.status.json", snap.encode() + b"\n"))
            tail = entry.pipeline.counters.tail.last()  # materialised here, not per chunk
            lines = [sanitize(raw_text(b), None)[0] for b in tail]
            if entry.pipeline.redactor is not None:  # `output.redact`: the tail too
                lines = [entry.pipeline.redactor.redact(x)[0] for x in lines]
            lines = [x[:TAIL_LINE_CHARS] for x in lines]
            files.append((self.dir / f"{wid}.tail", "".join(x + "\n" for x in lines).encode()))
        with self._lock:
            self._gen += 1
            return self._gen, files

    def _store(self, batch: tuple[int, list[tuple[Path, bytes]]]) -> None:
        """Write rendered files unless a newer generation of them is already on disk."""
        gen, files = batch
        with self._io_lock:
            for path, data in files:
                with self._lock:
                    if self._stored.get(path, 0) >= gen:
                        continue
                try:
                    atomic_write(path, data)
                except OSError:
                    continue  # status is best effort; records and checkpoints must not be lost
                with self._lock:
                    self._stored[path] = gen
