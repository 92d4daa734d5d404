"""Whether a file watcher's checkpoint applies to the watcher as configured now: saved for its
path and, for a once run, by a once run under the same matching (pattern, exclude,
caseSensitive, gate, maxLineBytes); what it carries over (a gate's `require` seen); with none,
what a once run leaves beside the file; what it keeps of generations a start found gone with
the path; a checkpoint not loaded for want of descriptors (loaded again, not taken for lost),
and a file rewritten the same since it (a once run reads it whole)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from msgspec.structs import replace

from watchrun.config.model import GateSpec, WatcherSpec
from watchrun.events import SourceContext
from watchrun.sources.checkpoint_doc import FileState, LoadProblem
from watchrun.sources.opened import Plan
from watchrun.sources.rotated import NO_FDS, Entry, scan

log = logging.getLogger("watchrun.checkpoints")


def matching(spec: WatcherSpec, max_line_bytes: int) -> tuple[tuple[str, str], ...]:
    """What decides which lines a watcher matches and what its gate makes of them, as config
    keys and a digest of each value (the checkpoint keeps the digests, not the patterns):
    `limits.maxLineBytes` too, as a line cut there was matched in part (raised, as the verdict
    over a cut line advises, the line is read again whole)."""
    gate = spec.gate or GateSpec()
    values: dict[str, Any] = {
        "pattern": spec.pattern, "exclude": list(spec.exclude),
        "caseSensitive": spec.case_sensitive, "gate.maxMatches": gate.max_matches,
        "gate.require": gate.require, "limits.maxLineBytes": max_line_bytes,
    }
    return tuple((key, _digest(value)) for key, value in values.items())


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16]


def changed(saved: tuple[tuple[str, str], ...], now: tuple[tuple[str, str], ...]) -> list[str]:
    """The keys whose values differ (a key the checkpoint does not know is not compared: saved
    by an older runner, it says nothing of it)."""
    old = dict(saved)
    return [key for key, digest in now if key in old and old[key] != digest]


def same_path(saved: str, path: str) -> bool:
    """A checkpoint saved for `saved` applies to a watcher of `path` (both absolute, as the
    config resolves them): the same path, or both lead to the same file now (a symlink and its
    target, a folder reached through a link). Blocking (realpath): in a worker thread."""
    return saved == path or os.path.realpath(saved) == os.path.realpath(path)


def applied(state: FileState | None, spec: WatcherSpec, name: str,
            now: tuple[tuple[str, str], ...], *, once: bool) -> tuple[FileState | None, str | None]:
    """The checkpoint as it applies (None: set aside, read as by a new watcher) and the warning
    that says why it was set aside; `now`: the watcher's `matching(spec)`. A checkpoint of
    another path is set aside; in a once run, so is one a live runner saved (no gate judged
    the lines before it, and those before the live runner's start were never read), one
    saved under another matching, whose run judged the lines before it with another pattern or
    gate, and one saved with no matching (by a watchrun older than it, which did not say
    whether a live runner saved it or under what matching): a live runner keeps them (the
    lines that come are matched anew, as after a reload). Blocking (realpath): in a worker
    thread."""
    if state is None:
        return None, None
    start = "from its first line" if once or spec.from_start else "from its end"
    if state.path is not None and not same_path(state.path, name):
        return None, (
            f"watcher {spec.id}: its checkpoint is of {state.path}, not of its path {name}: "
            f"set aside; {name} is read as by a new watcher ({start})")
    if once and state.live:
        return None, (
            f"watcher {spec.id}: its checkpoint was saved by a live runner (`watchrun run`), "
            f"whose lines no gate judged: set aside; {name} is read as by a new watcher ({start})")
    if once and not state.matching:
        return None, (
            f"watcher {spec.id}: its checkpoint was saved by an older watchrun, which did not "
            "record whether a live runner saved it or what pattern and gate judged the lines "
            f"before it: set aside; {name} is read as by a new watcher ({start})")
    keys = changed(state.matching, now) if once else []
    if keys:
        return None, (
            f"watcher {spec.id}: its checkpoint was saved with another {', '.join(keys)}: set "
            f"aside, as the lines before it were judged by another watcher; {name} is read as "
            f"by a new watcher ({start})")
    return state, None


class _Seen(Protocol):
    require_seen: bool


@runtime_checkable
class Counted(Protocol):
    """A `SourceContext` that keeps whether a gate's `require` was seen (the pipeline does)."""

    @property
    def counters(self) -> _Seen: ...


class Required:
    """Whether a gate's `require` was seen in the lines up to the checkpoint: by this run, or
    by an earlier one (`FileState.require_seen`) when this one goes on in the same file from
    where that one ended. Not carried over when the file was rotated, rewritten or is read
    whole again: a log written anew must show it again."""

    def __init__(self) -> None:
        self.before = False
        self._counted: Counted | None = None

    def carry(self, ctx: SourceContext, state: FileState | None, plan: Plan,
              now: tuple[tuple[str, str], ...]) -> None:
        """At start, before any line is read: `plan` as it will be applied."""
        self._counted = ctx if isinstance(ctx, Counted) else None
        last = state.current if state is not None else None
        cur = plan.steps[-1] if plan.at_path and len(plan.steps) == 1 else None
        self.before = (state is not None and state.require_seen and state.matching == now
                       and cur is not None and cur.origin is last
                       and last is not None and cur.start == last.offset)
        if self.before and self._counted is not None:
            self._counted.counters.require_seen = True

    @property
    def seen(self) -> bool:
        return self.before or (self._counted is not None and self._counted.counters.require_seen)


def beside_now(path: Path) -> frozenset[tuple[int, int, int, int, int]]:
    """The files beside `path` named as its rotated generations (`rotated.scan`) as a once run
    begins, before its commands (blocking): device, inode, size, mtime and ctime of each, to
    tell later which of them changed or came meanwhile, with no clock but the file system's."""
    return frozenset(_changed(e.st) for e in scan(path, []) if e.named)


def _changed(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def beside(path: Path, began: frozenset[tuple[int, int, int, int, int]]
           ) -> tuple[list[Entry], list[Entry]]:
    """A once run with no checkpoint (blocking: in a worker thread): the files beside `path`
    named as its rotated generations (`rotated.scan`), not empty, in two lists: those changed
    or new since the run began (not among `began`, `beside_now`'s: renamed, copied or written
    meanwhile, rotated away while its commands ran), and the older ones."""
    found = sorted((e for e in scan(path, []) if e.named and e.st.st_size > 0),
                   key=lambda e: e.path)
    return ([e for e in found if _changed(e.st) not in began],
            [e for e in found if _changed(e.st) in began])


async def left_beside(ctx: SourceContext, spec: WatcherSpec, name: str,
                      during: list[Entry], before: list[Entry]) -> None:
    """What a first once run does not read beside the file: a generation rotated away while
    the run was under way held lines it was to judge (an `error`: the verdict is an ERROR);
    older ones are named in a warning (a first run judges the file at the path)."""
    for e in during:
        size = e.st.st_size
        await ctx.event("error", code="rotated", path=e.path, unread=True, unreadBytes=size,
                        message=f"{e.path} was rotated away from {name} while this run was "
                        f"under way, before it was read: its {size} bytes were not read (keep "
                        "the log from rotating while the run's commands run)")
    if before:
        log.warning("watcher %s: %s has rotated generations beside it from before this run, "
                    "not read (a first run with no checkpoint judges the file at its path): "
                    "%s", spec.id, name, ", ".join(os.path.basename(e.path) for e in before))


def judged_gone(state: FileState, plan: Plan) -> FileState:
    """The checkpoint once a start's plan found nothing to read (the path missing): the
    generations it did not keep to look for again are gone (a `gap` said so, or they were
    compressed whole), so none is judged again when a file comes to the path (read whole,
    and a file found with one's inode is another); the archives it judged are kept."""
    kept = {id(cp) for cp in plan.kept}
    gens = tuple(cp if id(cp) in kept or cp.finished
                 else replace(cp, finished=True, deleted=True) for cp in state.generations)
    archives = state.archives if plan.archives is None else tuple(plan.archives)
    return replace(state, generations=gens, archives=archives)


def unloaded_for_fds(problems: list[LoadProblem], path: str) -> tuple[int, str] | None:
    """The checkpoint at `path` the store could not read for want of descriptors (its problem
    names it and ends with the errno's text): not lost, so it is loaded again (a once run
    fails), never started without, which would skip what came since the last run and save
    over it."""
    for num in NO_FDS:
        for p in problems:
            if path in p.message and p.message.endswith(os.strerror(num)):
                return num, p.message
    return None


def rewritten(plan: Plan, state: FileState) -> bool:
    """The file checkpointed last (under its numbers or others: `plans.plan_start`), written
    since (mtime moved) but not grown: rewritten the same (or a copy of it put in its place).
    Not grown as reads tell, too: where attributes are cached apart from the data (sshfs,
    FUSE `attr_timeout`), the size `stat` reports may still be the checkpointed one while a
    read past it returns what was appended (`Generation.rewritten`)."""
    o, cp = plan.steps[-1], state.generations[-1]
    return (o.origin is cp and o.start == cp.offset == o.st.st_size
            and cp.mtime_ns not in (0, o.st.st_mtime_ns) and not os.pread(o.fd, 1, cp.offset))
