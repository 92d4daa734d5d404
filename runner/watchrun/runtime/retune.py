"""A reload's change of the settings every watcher shares (`limits`, `output`, `redact`): what
a running watcher reads as it goes is set in place, so it keeps running and its position; a
limit it reads only at its start restarts the watchers of the kinds that read it (docs/config.md
"Reload"; `config/shared.py`). A layer that had settings and is empty now refuses the reload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec.structs import replace

from watchrun.config.model import Config
from watchrun.config.shared import AT_START, LIMIT_KEYS

if TYPE_CHECKING:
    from watchrun.runtime.status import StatusBoard
    from watchrun.runtime.watchers import WatcherSet

__all__ = ["emptied", "retune"]


def retune(watchers: WatcherSet, board: StatusBoard, old: Config, new: Config,
           shared: list[str]) -> str:
    """Set `new`'s shared settings (`shared`: their keys, as `shared_changes` gives them) in
    place in the running watchers (each, also one a reload restarts next: its last records are
    redacted as the new rules say, its command stopped with the new stopTimeout; the limits it
    read at its start it keeps until then), and in what `list`, `status` and `logs` show of
    every watcher the board lists; what the log says of it."""
    redaction = old.redact != new.redact or old.output.redact != new.output.redact
    redactor = new.records_redactor()
    if watchers.notifier is not None:  # (a file's own, when it is followed elsewhere)
        watchers.notifier.poll_s = new.limits.poll_ms / 1000
    for wid, rt in watchers.running.items():
        if redaction:
            rt.pipeline.redact_with(redactor)
        read = {f: getattr(rt.source.limits, f) for f, kinds in AT_START.items()
                if rt.spec.kind in kinds}
        rt.pipeline.limits = rt.source.limits = replace(new.limits, **read)
        rt.pipeline.counters.recent.keep = max(0, new.limits.max_matches)
        rt.pipeline.counters.tail.keep = max(0, new.limits.max_log_lines)
        rt.sink.max_bytes, rt.sink.keep = max(1, new.output.max_bytes), max(0, new.output.keep)
        if (notifier := getattr(rt.source, "notifier", None)) is not None:
            notifier.poll_s = new.limits.poll_ms / 1000
        board.touch(wid)
    if redaction:
        for wid, entry in board.entries.items():
            own = watchers.running.get(wid)
            entry.redactor = own.pipeline.redactor if own is not None else redactor
            entry.said = None  # (made again, with it)
            board.touch(wid)
    at_start = {f"limits.{LIMIT_KEYS[f]}" for f in AT_START}
    kept = [k for k in shared if k not in at_start]
    parts = [f"{', '.join(kept)} applied in place (the running watchers go on)"] if kept else []
    if restart := [k for k in shared if k in at_start]:
        parts.append(f"{', '.join(restart)} read at a watcher's start: the watchers that read "
                     "it restart")
    return "settings changed: " + "; ".join(parts)


def emptied(old: Config, new: Config) -> str | None:
    """Why `new` cannot apply when a config file that had settings in `old` has none now (an
    editor or `cat >` truncates it, then writes): it would remove every watcher it defines."""
    gone = [p for p in new.empty if p not in old.empty]
    if not gone:
        return None
    return (f"{', '.join(map(str, gone))}: empty now, but it had settings (a file being "
            "written, or emptied by mistake?): its watchers and agents would be removed; to "
            "remove them, leave a setting in it (`limits: {}`), or restart the runner")
