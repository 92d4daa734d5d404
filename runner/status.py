"""Status snapshots under state/: what `watchrun list/status/logs` read when no runner is live."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchrun.clock import Clock, iso_ts
from watchrun.config.model import WatcherSpec
from watchrun.pipeline import WatcherPipeline
from watchrun.sanitize import raw_text, sanitize

FLUSH_DELAY_S = 1.0
"""Snapshots are written at most this often, and only after something changed."""
TAIL_LINE_CHARS = 4096


def atomic_write(path: Path, data: bytes, mode: int = 0o640) -> None:
    """tmp + fsync + rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@dataclass
class _Entry:
    spec: WatcherSpec
    pipeline: WatcherPipeline
    source: object
    engine: str
    stopped: bool = False


class StatusBoard:
    """Keeps `state/<id>.status.json` and `state/<id>.tail` current, debounced."""

    def __init__(self, state_dir: Path, clock: Clock) -> None:
        self.dir = state_dir
        self.clock = clock
        self.entries: dict[str, _Entry] = {}
        self._dirty: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.started_at = clock.now()

    def add(
        self, spec: WatcherSpec, pipeline: WatcherPipeline, source: object, engine: str
    ) -> None:
        self.entries[spec.id] = _Entry(spec, pipeline, source, engine)
        pipeline.on_touch = lambda wid=spec.id: self.touch(wid)
        self.touch(spec.id)

    def touch(self, wid: str) -> None:
        self._dirty.add(wid)
        if self._timer is None:
            with contextlib.suppress(RuntimeError):  # no loop: flushed at close()
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(FLUSH_DELAY_S, self.flush)

    def stopped(self, wid: str) -> None:
        entry = self.entries.get(wid)
        if entry is not None:
            entry.stopped = True
            self._write(wid, entry)

    def forget_stopped(self) -> int:
        """`watchrun clear`: drop stopped watchers' snapshots (their JSONL stays)."""
        gone = [wid for wid, e in self.entries.items() if e.stopped]
        for path in self.dir.glob("*.status.json"):
            wid = path.name.removesuffix(".status.json")
            if wid not in self.entries or wid in gone:
                for p in (path, self.dir / f"{wid}.tail"):
                    with contextlib.suppress(OSError):
                        p.unlink()
        for wid in gone:
            del self.entries[wid]
            self._dirty.discard(wid)
        return len(gone)

    def flush(self) -> None:
        self._timer = None
        dirty, self._dirty = self._dirty, set()
        for wid in dirty:
            entry = self.entries.get(wid)
            if entry is not None:
                self._write(wid, entry)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.flush()

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
            "errors": c.errors,
            "lastMatchAt": iso_ts(c.last_match_at) if c.last_match_at else None,
        }
        for attr, key in (("pid", "pid"), ("run_no", "run")):
            value = getattr(src, attr, None)
            if value is not None:
                snap[key] = value
        last_exit = getattr(src, "last_exit", None)
        if last_exit is not None:
            snap["exitCode"] = getattr(last_exit, "exit_code", None)
            snap["signal"] = getattr(last_exit, "signal", None)
        return snap

    def _write(self, wid: str, entry: _Entry) -> None:
        try:
            snap = json.dumps(self.snapshot(entry), ensure_ascii=False, indent=1)
            atomic_write(self.dir / f"{wid}.status.json", snap.encode() + b"\n")
            tail = entry.pipeline.counters.tail.last()  # materialised here, not per chunk
            lines = [sanitize(raw_text(b), None)[0][:TAIL_LINE_CHARS] for b in tail]
            atomic_write(self.dir / f"{wid}.tail", "".join(x + "\n" for x in lines).encode())
        except OSError:
            pass  # status is best effort; records and checkpoints are what must not be lost
