"""The state files of watchers forgotten for good (`watchrun clear`; a reload that removes a
file watcher whose file is gone; an `add` refused `start_failed`; the oldest of those whose
client ended), removed without following a link, and what the runner holds of them in memory:
their metric series."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from watchrun.config.model import Config
from watchrun.match.sanitize import edge_name
from watchrun.offload import offload
from watchrun.output.notefile import drop_spent, note_path
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.tally import Tally

if TYPE_CHECKING:
    from watchrun.actions.hub import ActionHub
    from watchrun.runtime.watchers import WatcherSet


class Forgetting(Protocol):
    config: Config
    layout: OutputLayout
    log: RunLog
    board: StatusBoard
    tally: Tally

    @property
    def actions(self) -> ActionHub | None: ...


def stays_configured(config: Config, wid: str) -> bool:
    """The config still names it (or names it as a watcher's `previousId`): its checkpoint
    is where `watchrun start`, a reload or the next runner resume it."""
    return any(w.id == wid or w.previous_id == wid for w in config.watchers)


async def forget_refused(sup: Forgetting, wid: str) -> None:
    """An `add` refused once its watcher was built (`start_failed`): what the attempt left goes
    (its metric series, its empty `.unwritten` reserve), so nothing of it stays but its JSONL.
    A note that keeps seqs stays with the JSONL; a checkpoint an earlier run left stays."""
    sup.tally.forget(wid)
    if sup.actions is not None:
        sup.actions.forget(wid)
    note = note_path(sup.layout.jsonl("watcher", wid))
    try:
        if note is not None:
            await offload(drop_spent, note)
    except FileNotFoundError:
        pass
    except OSError as exc:
        sup.log.warning(f"cannot delete the empty note of the refused watcher: {exc}", wid)


async def forget_files(sup: Forgetting, ws: WatcherSet, ids: Iterable[str]) -> bool:
    """Remove what stays on disk of watchers whose rows were forgotten: the checkpoint of one
    the config no longer names (forgotten for good: its metric series go too), and a
    `.unwritten` note that keeps nothing (one that keeps seqs the JSONL does not explain yet
    stays with the JSONL, which is never removed). Never of a watcher that runs or is
    stopping. A failure is logged; the rest goes on. False when one failed."""
    done = True
    for wid in ids:
        if wid in ws.running or wid in ws.later or wid in ws.stopping:
            continue
        try:
            if not stays_configured(sup.config, wid) and wid not in ws.runtime:
                sup.tally.forget(wid)
                if sup.actions is not None:
                    sup.actions.forget(wid)
                await offload(ws.store.forget, wid)
            note = note_path(sup.layout.jsonl("watcher", wid))
            if note is not None:
                with contextlib.suppress(FileNotFoundError):
                    await offload(drop_spent, note)
        except OSError as exc:
            sup.log.warning(f"cannot delete the state files of the forgotten watcher: {exc}", wid)
            done = False
    return done


async def forget_stopped(sup: Forgetting, ws: WatcherSet, ids: list[str]) -> None:
    """Forget stopped runtime watchers as `clear IDS` does: their rows and snapshots, their
    specs (one added again under such an id is new), checkpoints and metric series; their JSONL
    stays."""
    sup.board.forget_stopped(set(ids))
    for wid in ids:
        ws.runtime.pop(wid, None)
        ws.stopped_by_request.discard(wid)
    await forget_files(sup, ws, ids)


async def forget_gone(sup: Forgetting, ws: WatcherSet, old: Config) -> None:
    """After a reload: a file watcher the new config no longer names, stopped, whose file is
    gone (a log shipper's "deleted file"), is forgotten at once: its row and state files."""
    for spec in old.watchers:
        wid = spec.id
        if spec.path is None or stays_configured(sup.config, wid) or wid in ws.runtime:
            continue
        if await offload(os.path.lexists, spec.path):  # (no link followed; off the loop)
            continue
        entry = sup.board.entries.get(wid)
        if entry is None or not entry.stopped:
            continue
        sup.board.forget(wid)
        ws.stopped_by_request.discard(wid)
        left = "" if await forget_files(sup, ws, [wid]) else ", some left (above)"
        sup.log.info(f"its file {edge_name(spec.path)} is gone: forgotten (its row and state "
                     f"files{left}; its JSONL stays)", wid, event="forgotten")
