"""A watcher's entry on the status board and the snapshot it renders to (no I/O)."""

from __future__ import annotations

import os
from typing import Any

from msgspec import Struct

from watchrun.clock import iso_ts
from watchrun.config.model import WatcherSpec
from watchrun.match.redact import Redactor, clean_text
from watchrun.runtime.counters import Counters
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.runtime.recent_lines import RecentLines
from watchrun.runtime.snapshot_text import Said, said

__all__ = ["Entry", "snapshot"]

NOTHING = Counters(RecentLines(0))
"""The counts of a watcher that never started (read, never changed)."""


class Entry(Struct):
    """A watcher on the status board: what it is, its pipeline and source, its lifecycle."""

    spec: WatcherSpec
    pipeline: WatcherPipeline | None
    """None: it never started in this runner (a reload could not start it): `stopped`, its
    counts 0, its `lastError` why."""
    source: object
    engine: str | None
    """The regex engine its matcher uses (None: it never started)."""
    origin: str
    """`config` (from the config file) or `runtime` (added through the control socket)."""
    run: str
    """This start of the watcher, unique across runners: the `.tail` header's `run`."""
    started_at: float
    started_mono: float
    restarts: int = 0
    """Times it started again in this runner: its command's restarts (restart policy), and
    `watchrun start/restart`, and a reload that changed it."""
    stopping: bool = False
    """A stop is under way (a command waits out its stopTimeout): status `stopping`."""
    stopped: bool = False
    said: Said | None = None
    """Its label, source, cwd, pattern and excludes as snapshots show them
    (`snapshot_text.said`), once made."""
    failed: bool = False
    """Its source ended with an internal error (status `fatal`)."""
    last_error: str | None = None
    redactor: Redactor | None = None
    """With `output.redact`: what redacts its text here (its pipeline's)."""


def snapshot(entry: Entry, now: float, runner: tuple[str, float],
             lag: LoopLag | None) -> dict[str, Any]:
    """What `list`/`status` say of a watcher: its spec, status, process, counters; `runner`
    is the runner's run id (its run lock, `output/runlock.py`) and start."""
    spec, src, redactor = entry.spec, entry.source, entry.redactor
    c = entry.pipeline.counters if entry.pipeline is not None else NOTHING
    if entry.said is None:  # (made once for each spec it is listed with)
        entry.said = said(spec, redactor)
    label, source, cwd, pattern, exclude = entry.said
    state = getattr(src, "state", None)
    status = "stopped" if entry.stopped else "fatal" if entry.failed else \
        "stopping" if entry.stopping else str(state) if state is not None else "running"
    if status in ("running", "error") and entry.pipeline is not None and \
            entry.pipeline.writer.failing:
        status = "paused"  # (its records cannot be written: reading waits for them; a file
        # source says `error` once its checkpoint cannot be saved on that full disk either)
    snap: dict[str, Any] = {
        "schema": 1,
        "id": spec.id,
        "label": label,
        "kind": spec.kind,
        "source": source,
        "pattern": pattern,
        "exclude": exclude,
        "caseSensitive": spec.case_sensitive,
        "fromStart": spec.from_start,
        "wake": list(spec.wake),
        "cwd": cwd,
        "engine": entry.engine,
        "status": status,
        "origin": entry.origin,
        "pid": getattr(src, "pid", None),
        "runnerPid": os.getpid(),
        "runnerId": runner[0],
        "runnerStartedAt": iso_ts(runner[1]),
        "startedAt": iso_ts(entry.started_at) if entry.pipeline is not None else None,
        "updatedAt": iso_ts(now),
        "restarts": entry.restarts,
        "lastError": entry.last_error and clean_text(entry.last_error, redactor),
        "linesRead": c.lines,
        "bytesRead": c.bytes_read,
        "matchCount": c.matches,
        "truncated": c.truncated,
        "linesCut": c.cut_lines,
        "bytesCut": c.cut_bytes,
        "longLine": _long_line(src, redactor),
        "skippedDuplicates": c.skipped_duplicates,
        "skippedNulBytes": c.skipped_nul,
        "errors": c.errors,
        "redacted": dict(c.redacted),
        "lastMatchAt": iso_ts(c.last_match_at) if c.last_match_at else None,
    }
    if lag is not None:
        snap["loopLagMaxS"] = round(lag.max_s, 3)  # the runner's, not the watcher's
    run_no = getattr(src, "run_no", None)
    if run_no is not None:
        snap["run"] = run_no
    last_exit = getattr(src, "last_exit", None)
    if last_exit is not None:
        snap["exitCode"] = getattr(last_exit, "exit_code", None)
        snap["signal"] = getattr(last_exit, "signal", None)
    return snap


def _long_line(src: object, redactor: Redactor | None) -> dict[str, Any] | None:
    """The source's line growing past limits.maxLineBytes with no end yet (`sources/long_line.py`:
    `path` or `run`, `offset`, `lineNo`, `bytes` so far), its path as `source` shows it."""
    line = getattr(src, "long_line", None)
    if not isinstance(line, dict):
        return None
    return {k: clean_text(v, redactor) if isinstance(v, str) else v for k, v in line.items()}
