"""Checkpoints in state/ that no watcher of the config claims (a watcher renamed without
`previousId`): found and reported, so what their files got since is not silently skipped."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from watchrun.config.diagnostics import Diagnostic
from watchrun.config.model import Config
from watchrun.sources.checkpoints import ID, SUFFIX


def orphaned(state_dir: Path, claimed: set[str]) -> list[str]:
    """Watcher ids that have a checkpoint in `state_dir` but are not in `claimed` (the config's
    ids and previousIds), sorted. Empty when the folder does not exist."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    ids = (n.removesuffix(SUFFIX) for n in names if n.endswith(SUFFIX))
    return sorted(i for i in ids if ID.fullmatch(i) and i not in claimed)


def orphan_diagnostics(config: Config, added: Callable[[Path], Mapping[str, bool]]
                       ) -> list[Diagnostic]:
    """A warning for each checkpoint in the output dir's state/ whose watcher is not in the
    config (and not a watcher's previousId): what its file got since would not be read.
    `added(output dir)`: the watchers added at runtime (`watchrun add`) that its status
    snapshots name, and whether their runner still runs (asked only when there is such a
    checkpoint). A live runner's is that runner's, not an orphan: deleting its checkpoint, as
    the warning said, would have harmed it."""
    claimed = {w.id for w in config.watchers} | {
        w.previous_id for w in config.watchers if w.previous_id is not None}
    state = config.output.dir / "state"
    found = orphaned(state, claimed)
    runtime = added(config.output.dir) if found else {}
    out = []
    for wid in found:
        if runtime.get(wid):
            continue  # a live runner's runtime watcher
        why = (f"`{wid}`, which was added at runtime (`watchrun add`) to a runner that has "
               f"ended: `watchrun add` with the same id and path continues from it; otherwise "
               "`watchrun clear` (with a runner live) forgets it, or delete the file"
               ) if wid in runtime else (
               f"`{wid}`, which is not in the config: if a watcher was renamed from `{wid}`, set "
               f"`previousId: {wid}` on it to continue from there (before a `watchrun clear`, "
               "which forgets it); otherwise delete the file")
        out.append(Diagnostic("watchers", f"{state / (wid + SUFFIX)} is the checkpoint of "
                              f"watcher {why}", "warning"))
    return out
