"""Builds one watcher (sink, writer, matcher, pipeline, source) and reads its results back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from watchrun.clock import Clock
from watchrun.config.model import Config, WatcherSpec
from watchrun.match.engines import Store
from watchrun.match.matcher import Matcher, compile_for
from watchrun.match.redact import clean_text
from watchrun.notify import Notifier
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.output.writer import AsyncWriter
from watchrun.process.spawn import Spawner
from watchrun.runtime.gate import FIRST_LINES, Evidence, Trouble, cut_note
from watchrun.runtime.pipeline import OnMatches, WatcherPipeline
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.file import FileSource

if TYPE_CHECKING:
    from watchrun.sources.command import CommandSource, Echo


def open_sink(path: Path, stream_id: str, *, max_bytes: int, keep: int, clock: Clock
              ) -> JsonlSink:
    """The real sink factory (the open/write/fsync seam: tests inject failing sinks)."""
    return JsonlSink(path, stream_id, max_bytes=max_bytes, keep=keep, clock=clock)


class Seams(Struct, frozen=True):
    """The OS-facing parts a watcher is built with (injected, as honcho does)."""

    clock: Clock
    spawner: Spawner
    store: CheckpointStore
    notifier: Notifier
    open_sink: Callable[..., JsonlSink] = open_sink
    databases: Store | None = None
    """Compiled hyperscan databases kept between runs (`runtime/hscache.py`)."""


class WatcherRuntime(Struct):
    """Everything one running watcher owns."""

    spec: WatcherSpec
    sink: JsonlSink
    pipeline: WatcherPipeline
    source: FileSource | CommandSource
    engine: str
    task: asyncio.Task[None] | None = None
    """The running source; None while built but not started (once mode: files after commands)."""
    failure: str | None = None
    """Why the source ended with an internal error, if it did."""
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a call of its source has not returned for STALL_S (a file system that does not
    answer), as said: a start does not wait for it (`WatcherSet.ready`)."""


def precompile(specs: Sequence[WatcherSpec], databases: Store | None, loop_thread: int) -> None:
    """Compile here, in a worker thread, the matchers `_build` makes for these watchers on the
    loop's thread (`loop_thread`): their pattern with its excludes, a gate's `require`. Their
    start then finds them compiled (`compile_for`) and compiles nothing on the loop, where a
    16 KiB alternation cost ~0.13 s of hyperscan compile (whose binding lets the loop run
    meanwhile) or RE2's (which holds the GIL here too: an added watcher's RE2 compiles are
    bounded first by `compile_probe`). A pattern refused here is refused again at the start."""
    for spec in specs:
        pairs = [(spec.pattern, spec.exclude)]
        if spec.gate is not None and spec.gate.require is not None:
            pairs.append((spec.gate.require, ()))
        for pattern, exclude in pairs:
            with contextlib.suppress(ValueError):
                compile_for(loop_thread, pattern, exclude, spec.case_sensitive, store=databases)


def watcher_sink(spec: WatcherSpec, config: Config, layout: OutputLayout, seams: Seams
                 ) -> JsonlSink:
    """Open a watcher's sink: its JSONL and `.unwritten` reserve created or read from the end
    (blocking file-system calls: a runner that is running calls it in a worker thread)."""
    return seams.open_sink(layout.jsonl("watcher", spec.id), spec.id,
                           max_bytes=config.output.max_bytes, keep=config.output.keep,
                           clock=seams.clock)


def build_watcher(
    spec: WatcherSpec,
    config: Config,
    layout: OutputLayout,
    log: RunLog,
    seams: Seams,
    *,
    once: bool,
    echo: Echo | None,
    on_matches: OnMatches,
    on_event: Callable[[WatcherSpec, str, dict[str, Any]], None],
    sink: JsonlSink | None = None,
) -> WatcherRuntime:
    """source → pipeline (matcher) → sink, for one watcher; nothing runs yet. `sink`: its sink
    opened already (`watcher_sink`, off the loop), else it is opened here. Raises
    SinkWriteError (the JSONL cannot be opened) or ValueError (a pattern the matcher refuses);
    nothing stays open then."""
    if sink is None:
        sink = watcher_sink(spec, config, layout, seams)
    try:
        return _build(spec, config, log, seams, sink, once, echo, on_matches, on_event)
    except BaseException:
        with contextlib.suppress(SinkWriteError):
            sink.close()
        raise


def _build(spec: WatcherSpec, config: Config, log: RunLog, seams: Seams, sink: JsonlSink,
           once: bool, echo: Echo | None,
           on_matches: OnMatches,
           on_event: Callable[[WatcherSpec, str, dict[str, Any]], None]) -> WatcherRuntime:
    wid = spec.id
    writer = AsyncWriter(  # (a once run must end, and cannot pass without its records; the
        # failures are reported by the watcher set, which launches it: `WatcherSet.launch`)
        sink, give_up_after=config.limits.once_write_ms / 1000 if once else None)
    matcher = Matcher(spec.pattern, spec.exclude, spec.case_sensitive, store=seams.databases)
    gate = spec.gate
    require = None
    if gate is not None and gate.require is not None:
        require = Matcher(gate.require, (), spec.case_sensitive, store=seams.databases)
    linear = matcher.linear and (require is None or require.linear)
    isolated = None
    if not linear:  # a pattern only Python re runs: in a worker process
        from watchrun.runtime.isolation import IsolatedMatcher

        isolated = IsolatedMatcher(spec, seams.spawner)
    pipeline = WatcherPipeline(spec, config.limits, sink, writer, matcher, log,
                               on_matches=on_matches, on_event=on_event, require=require,
                               isolated=isolated,
                               redactor=config.records_redactor(), judges=once)
    source: FileSource | CommandSource
    if spec.path is not None:
        source = FileSource(spec, config.limits, seams.store, seams.notifier, seams.clock,
                            once=once)
    else:
        from watchrun.sources.command import CommandSource

        source = CommandSource(spec, config.limits, seams.clock, seams.spawner, once=once,
                               echo=echo)
    # (their records wait for a file watcher's checkpoint: a stream that ends before the seq it
    # counts, a torn record among the lost, numbers on past it first: `Resuming.lost`)
    if sink.repaired_bytes:
        msg = f"repaired a torn last record ({sink.repaired_bytes} bytes) after a crash"
        log.warning(msg, wid)
        pipeline.opening.append(("error", {"code": "sink-repaired", "message": msg,
                                           "bytes": sink.repaired_bytes}))
    if sink.unwritten.damage is not None:  # (set aside, numbered past: `Unwritten.prepare`)
        log.warning(sink.unwritten.damage, wid)
        pipeline.opening.append(("error", {"code": "note-corrupt",
                                           "message": sink.unwritten.damage,
                                           "path": str(sink.unwritten.note)}))
    return WatcherRuntime(spec, sink, pipeline, source, matcher.engine)


def evidence_of(rt: WatcherRuntime) -> Evidence:
    """What a watcher saw, for the once-mode verdict."""
    c = rt.pipeline.counters
    last_exit = getattr(rt.source, "last_exit", None)
    cannot_read = getattr(rt.source, "cannot_read", None)  # (a file source's)
    resumed = getattr(rt.source, "resumed", None)  # (a file source's: read on from where)
    return Evidence(
        matches=c.matches + len(c.unjudged),
        first=[*c.unjudged[:FIRST_LINES], *((m.where, m.line) for m in c.first)],
        exit_code=getattr(last_exit, "exit_code", None),
        signal=getattr(last_exit, "signal", None),
        signal_sent=getattr(last_exit, "status", None) == "killed",
        ran=not getattr(rt.source, "could_not_start", False),  # (a command's)
        require_seen=c.require_seen,
        read_since=None if resumed is None else (
            f"the {c.lines} line{'' if c.lines == 1 else 's'} read since the last run, from line "
            f"{resumed[1]} of {clean_text(resumed[0], rt.pipeline.redactor)}"),
        path=None if rt.spec.path is None else clean_text(str(rt.spec.path),
                                                          rt.pipeline.redactor),  # (as `where`)
        error=c.unread or cannot_read,
        trouble=Trouble.NOT_RUN if not c.unread and cannot_read and not c.lines else
        Trouble.UNREAD,  # (a file it never read a line of: it could not run)
        cut=cut_note(c.cut_lines, rt.pipeline.limits.max_line_bytes),
    )


UP_STATES = {"starting", "running", "waiting"}
"""Command states in which a command watcher is up (`waiting`: for its next cron tick)."""
FILE_DOWN_STATES = {"waiting", "error", "stopped"}
"""File source states (when it reports one) in which it cannot look: missing, unreadable."""


def counters_of(rt: WatcherRuntime) -> dict[str, Any]:
    """A live watcher for the metrics endpoint: `up` while its task runs, its records can be
    written and its source can look (a command starting, running or waiting for its schedule;
    a file being followed)."""
    if rt.pipeline.writer.failing:  # (reading is paused until they can: a full disk)
        return {"up": False}
    state = getattr(rt.source, "state", None)
    if rt.spec.kind == "command":
        looks = str(state) in UP_STATES
    else:
        looks = state is None or str(state) not in FILE_DOWN_STATES
    return {"up": rt.task is not None and not rt.task.done() and looks}
