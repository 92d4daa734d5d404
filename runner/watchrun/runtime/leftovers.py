"""What earlier runs left in state/ of watcher ids this runner does not hold: the checkpoint an
`add` reads on from (its reply says so), the status snapshot that says why `start` of such an
id is refused, and the files `clear` forgets of them."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Protocol

from watchrun.config.model import Config
from watchrun.match.redact import clean_text
from watchrun.offload import offload
from watchrun.output import safefs
from watchrun.output.notefile import read_note
from watchrun.output.records import is_id
from watchrun.runtime.forgetting import stays_configured
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.watchers import WatcherSet
from watchrun.runtime.wiring import WatcherRuntime
from watchrun.sources.checkpoints import SUFFIX
from watchrun.views.watchers import read_snapshot

SNAPSHOT = ".status.json"
NOTE = ("watchers-", ".unwritten")
"""A watcher's note in state/ is `watchers-ID.unwritten` (`output.notefile.note_path`)."""


class Holding(Protocol):
    config: Config
    set: WatcherSet
    board: StatusBoard


def _held(sup: Holding) -> set[str]:
    ws = sup.set
    return {*sup.board.entries, *ws.running, *ws.later, *ws.stopping, *ws.runtime}


async def left_over(sup: Holding) -> list[str]:
    """`clear`: the ids of watchers this runner does not hold that earlier runs left files of in
    state/: a status snapshot, or, of a watcher the config does not name, a checkpoint (a
    runtime watcher of a runner that ended, whose snapshot an earlier `clear` removed) or a
    `.unwritten` note that keeps nothing (the empty reserve of an `add` refused by an earlier
    version, or by a runner killed before it removed it).
    Empty when state/ is no longer this runner's directory (another runner's files are not its
    to forget)."""
    if not sup.board.ours():
        return []
    names: list[str] = []
    with contextlib.suppress(OSError):
        names = await offload(os.listdir, sup.board.dir)
    held, found, notes = _held(sup), set(), set()
    for name in names:
        snapshot = name.endswith(SNAPSHOT)
        note = name.startswith(NOTE[0]) and name.endswith(NOTE[1])
        wid = name[len(NOTE[0]):-len(NOTE[1])] if note else \
            name.removesuffix(SNAPSHOT if snapshot else SUFFIX)
        if not is_id(wid) or wid in held:
            continue
        if snapshot or (name.endswith(SUFFIX) and not stays_configured(sup.config, wid)):
            found.add(wid)
        elif note and not stays_configured(sup.config, wid):
            notes.add(wid)
    spent = await offload(_spent, sup.board.dir, sorted(notes - found))
    return sorted(found | spent)


def _spent(state: Path, wids: list[str]) -> set[str]:
    """In a worker thread: those of `wids` whose note in `state` keeps nothing (one that
    cannot be read is left alone)."""
    found = set()
    for wid in wids:
        try:
            fd = safefs.open_read(state / f"{NOTE[0]}{wid}{NOTE[1]}", owned=True)
        except OSError:
            continue
        try:
            if not read_note(fd).keeps:
                found.add(wid)
        except OSError:
            pass
        finally:
            os.close(fd)
    return found


def resumed(wid: str, rt: WatcherRuntime | None) -> tuple[dict[str, Any], str]:
    """`add`: where an added file watcher began to read when it had a checkpoint (one an earlier
    run of its id left): the reply's `resumedFrom`, and what its message adds to `started ID`.
    Nothing when it had none."""
    at = None if rt is None else getattr(rt.source, "read_on", None)
    if rt is None or at is None:
        return {}, ""
    path = clean_text(at[0], rt.pipeline.redactor)
    return {"resumedFrom": {"path": path, "line": at[1]}}, (
        f", resumed from its checkpoint: from line {at[1]} of {path}, where an earlier run of "
        f"{wid} left off (what was written since is read; `watchrun stop {wid}` then `watchrun "
        "clear` forget the checkpoint: added again, it starts at the end of its file)")


async def why_not_held(sup: Holding, wid: str) -> str:
    """`start`/`restart` of an id this runner does not hold: what an earlier runner's status
    snapshot of it says it was, for the refusal (none: "")."""
    if not is_id(wid) or wid in sup.board.entries or not sup.board.ours():
        return ""
    snap, kept = await offload(_earlier, sup.board.dir, wid)
    if snap is None:
        return ""
    pid = snap.get("runnerPid")
    runner = f"an earlier runner (pid {pid})" if isinstance(pid, int) else "an earlier runner"
    reads_on = kept and snap.get("kind") == "file"
    if snap.get("origin") == "runtime":
        what = "its command" if snap.get("kind") == "command" else "its path"
        again = ", reading on from its checkpoint (what its file got since is matched; " \
            "`watchrun clear` first forgets the checkpoint)" if reads_on else ""
        return (f": {wid} was added at runtime (`watchrun add`) to {runner} and is not in the "
                f"config, so no later runner starts it; `watchrun add {wid}` with {what} and "
                f"pattern (`watchrun status {wid}` shows them) adds it again{again}; a watcher "
                "you want to keep belongs in the config file")
    again = ", reading on from its checkpoint" if reads_on else ""
    return (f": {wid} was a watcher of the config of {runner}, and this runner's config does not "
            f"name it; put it back in the config (then SIGHUP) to run it again{again}")


def _earlier(state: Path, wid: str) -> tuple[dict[str, Any] | None, bool]:
    """In a worker thread: the status snapshot of `wid` in `state` (None: none, or not one that
    can be read), and whether its checkpoint is there."""
    return read_snapshot(state / f"{wid}{SNAPSHOT}", wid), os.path.lexists(state / f"{wid}{SUFFIX}")
