"""`watchrun list/status/matches/logs`: read the output dir, live runner or not.

What is read is untrusted (anyone who could write the output dir could have written it): files
are opened without following symlinks (`output.safefs`), read up to a bound, and every value
that reaches the terminal goes through `edge_text` (a name: `edge_name`); JSON goes out through
`edge_json`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

from watchrun.config.shellwords import command_line
from watchrun.events import cut_note
from watchrun.match.sanitize import edge_name, edge_text
from watchrun.output import flocks, runlock, safefs, tailfile
from watchrun.output.backward import last_records
from watchrun.output.records import ReadStats
from watchrun.views.cells import cells, fit, pad
from watchrun.views.humanize import Paint, no_paint, value, when

STATUS_BYTES = 1 << 20
"""A status snapshot larger than this is not one (skipped)."""

NAMES = frozenset({"label", "source", "cwd", "longLine"})
"""The status keys whose values hold a name (a file's path, a directory): shown by `edge_name`,
a tab in it as `\\t`."""


class _Runner:
    """Whether the runner that wrote a snapshot still runs: it holds the run lock its snapshot
    names (`runnerId`, `output/runlock.py`), a flock the kernel lets go of when it dies. Pids
    alone took a new runner with the same pid (a container's PID 1 at every start) for the
    writer of every snapshot an earlier one left. A snapshot with no run id (an older
    watchrun's), or one whose run lock cannot be opened, is its `runnerPid` holding the output
    dir's `control.lock`; a bare `kill(pid, 0)` (which said yes for a zombie and for whatever
    process reused the pid) remains only where /proc/locks cannot be read either."""

    def __init__(self, root: Path) -> None:
        self._state = root / "state"
        self._runs: dict[str | None, bool | None] = {}  # run id -> its run lock held (once each)
        try:
            self._held: list[int] | None = flocks.holders(root / "control.lock")
        except OSError:
            self._held = None

    def alive(self, snap: dict[str, Any]) -> bool:
        rid = snap.get("runnerId")
        rid = rid if isinstance(rid, str) else None
        if rid not in self._runs:
            self._runs[rid] = runlock.alive(self._state, rid)
        found = self._runs[rid]
        if found is not None:
            return found
        pid = snap.get("runnerPid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return False
        if self._held is not None:
            return any(flocks.is_process(h, pid) for h in self._held)
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, OverflowError):
            return False
        except PermissionError:
            return True
        return True


def load_statuses(root: Path, unreadable: bool = False) -> list[dict[str, Any]]:
    """Every watcher's last snapshot; `live` says whether its runner still runs (when not, it is
    `stopped` and its command has no `pid`: the runner's end ended it). Files that are not a
    snapshot (unreadable, a symlink, not a JSON object whose `id` is the file's name) are
    skipped, or with `unreadable`, listed as status `unreadable` under their file's name
    (`list`: a damaged snapshot hid its watcher, and `list` said that no watcher had run)."""
    out, runner = [], _Runner(root)
    state = root / "state"
    try:
        names = sorted(state.glob("*.status.json"))
    except OSError:
        return []
    for path in names:
        wid = path.name.removesuffix(".status.json")
        snap = read_snapshot(path, wid)
        if snap is not None:
            out.append(_judged(snap, runner))
        elif unreadable:
            out.append(_unreadable(path, wid))
    return out


def _judged(snap: dict[str, Any], runner: _Runner) -> dict[str, Any]:
    """`snap` with `live` set, and what its runner's end made of it when that runner is gone."""
    live = runner.alive(snap)
    snap["live"] = live
    if not live and snap.get("status") not in ("stopped", "exited", "fatal", "refused"):
        snap["status"] = "stopped"
    if not live and "pid" in snap:  # its runner's end ended it (the pid may be another's)
        snap["pid"] = None
    return snap


def read_snapshot(path: Path, wid: str) -> dict[str, Any] | None:
    """The status snapshot of watcher `wid` at `path`, or None: unreadable, a symlink, not a
    JSON object whose `id` is `wid` (a runner writes each watcher's as `<id>.status.json`:
    another id is a copy)."""
    try:
        snap = json.loads(safefs.read_bytes(path, STATUS_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None
    return snap if isinstance(snap, dict) and snap.get("id") == wid else None


def unlistable(root: Path) -> str | None:
    """Why the snapshots or the JSONL of `root` cannot be listed (another user's 0700 output
    dir), or None: a folder that is not there is listed as empty."""
    for folder in (root / "state", root / "watchers"):
        try:
            os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            return f"cannot list {folder}: {exc.strerror}"
    return None


def _unreadable(path: Path, wid: str) -> dict[str, Any]:
    return {"id": wid, "status": "unreadable", "live": False,
            "lastError": unreadable_note(path, str(path))}


def unreadable_note(path: Path, shown: str) -> str:
    """What is said of a status snapshot that is there but cannot be read, named `shown`."""
    return (f"its status snapshot {shown} cannot be read ({unreadable_why(path)}); a runner "
            "writes it anew while the watcher runs")


def unreadable_why(path: Path) -> str:
    """Why a status snapshot that is there was not read."""
    with contextlib.suppress(OSError):
        st = os.stat(path, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_size > STATUS_BYTES:
            return f"it is larger than {STATUS_BYTES >> 20} MiB, which no snapshot is"
    return "damaged, not a regular file, or a copy of another watcher's"


def added_at_runtime(root: Path) -> dict[str, bool]:
    """The watchers of `root`'s status snapshots that were added at runtime (`watchrun add`),
    and whether their runner still runs."""
    return {s["id"]: bool(s["live"]) for s in load_statuses(root) if s.get("origin") == "runtime"}


def load_status(root: Path, wid: str) -> dict[str, Any] | None:
    """Watcher `wid`'s last snapshot, judged as `load_statuses` judges each (`wid` a valid id,
    `output.records.is_id`: a file name in the state folder), or None."""
    snap = read_snapshot(root / "state" / f"{wid}.status.json", wid)
    return None if snap is None else _judged(snap, _Runner(root))


def matches(root: Path, wid: str, lines: int, stats: ReadStats | None = None
            ) -> list[dict[str, Any]]:
    """The last `lines` match records (`stats` counts the lines read past that are not one)."""
    return last_records(root / "watchers" / f"{wid}.jsonl", lines, {"match"}, stats=stats)


def skipped(wid: str, path: Path, invalid: int) -> str:
    """What `matches` says of the lines of a JSONL that are not records (garbage, no integer
    seq): skipped, never silently."""
    if invalid == 1:
        return f"{wid}: 1 line of {path} is not a record (skipped)"
    return f"{wid}: {invalid} lines of {path} are not records (skipped)"


def logs(root: Path, wid: str, lines: int) -> list[str]:
    """The last `lines` lines of the watcher's `.tail` snapshot (none before it wrote one; a
    snapshot that cannot be read is an OSError, never taken for "it printed nothing"). Lines
    are split on `\\n` only: a U+2028 or a lone `\\r` inside a line stays inside it (shown
    escaped at the edge)."""
    tail = tailfile.load(root / "state" / f"{wid}.tail")
    found = tail.lines if tail is not None else []
    return found[-lines:] if lines else []


def table(rows: list[list[str]], header: list[str], paint: Paint = no_paint,
          status_col: int | None = None, encoding: str | None = None) -> str:
    """A plain aligned table for people; every cell goes through `edge_text`, and only then is
    the status column painted (so colour is never measured nor sanitized away). Columns are
    padded by terminal cells (`views.cells`: a CJK character takes two, a combining mark
    none) on a stream of `encoding`."""
    shown = [[edge_text(c) for c in r] for r in [header, *rows]]
    widths = [max(cells(r[i], encoding) for r in shown) for i in range(len(header))]
    out = []
    for n, r in enumerate(shown):
        padded = [pad(c, w, encoding) for c, w in zip(r, widths, strict=True)]
        if n and status_col is not None:
            padded[status_col] = paint(padded[status_col], r[status_col])
        out.append("  ".join(padded).rstrip())
    return "\n".join(out)


def list_table(statuses: list[dict[str, Any]], now: datetime, paint: Paint = no_paint,
               encoding: str | None = None) -> str:
    """The `list` table: one row per watcher, last match as a relative time; laid out for a
    stream of `encoding` (`table`)."""
    rows = []
    for s in statuses:
        source = s.get("source")
        if isinstance(source, list):  # an argv: quoted as `validate` shows it
            source = command_line(source)
        unknown = "?" if s.get("status") == "unreadable" else None  # (no snapshot to say)
        rows.append([
            value(s.get("id", "?")),
            value(s.get("status", "?")),
            value(unknown or s.get("origin") or "config"),
            value(s.get("kind", "?")),
            value(s.get("pid") or "-"),
            uptime(s.get("uptimeS")),
            value(unknown or s.get("restarts", 0)),
            value(unknown or s.get("matchCount", 0)),
            value(unknown or s.get("linesRead", 0)),
            when(s.get("lastMatchAt"), now, short=True),
            fit(edge_name(value(source)), 48, encoding),
            fit(edge_text(value(s.get("lastError") or "-")), 60, encoding),
        ])
    return table(rows, ["ID", "STATUS", "ORIGIN", "KIND", "PID", "UPTIME", "RESTARTS",
                        "MATCHES", "LINES", "LAST MATCH", "SOURCE", "LAST ERROR"],
                 paint, status_col=1, encoding=encoding)


def uptime(seconds: Any) -> str:
    """`1:02:03` (as supervisorctl shows it), `-` when not running."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        return "-"
    m, sec = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{sec:02d}"


def status_lines(status: dict[str, Any], now: datetime, paint: Paint = no_paint) -> list[str]:
    """`key  value` lines of one status snapshot, for people: lists joined, yes/no, `-` for
    nothing, timestamps with how long ago, the status painted."""
    keys = {k: edge_text(k) for k in status}
    width = max((len(k) for k in keys.values()), default=0)
    out = []
    for k, v in status.items():
        shown = edge_name if k in NAMES else edge_text
        text = shown(when(v, now) if k.endswith("At") else value(v))
        if k == "status":
            text = paint(text, text)
        out.append(f"{keys[k]:<{width}}  {text}".rstrip())
    return out


def match_line(rec: dict[str, Any]) -> str:
    """One `matches` line for people: `ts  where:lineNo  line`, and a mark where the line was
    cut at `maxLineBytes` or only its text clipped there (the record's `truncated` and
    `omittedBytes`: `cut_note`)."""
    place = edge_name(value(rec["path"])) if rec.get("path") else f"run {value(rec.get('run'))}"
    omitted = rec.get("omittedBytes")
    cut = None if rec.get("truncated") is not True else (
        omitted if isinstance(omitted, int) and omitted > 0 else 0)
    return edge_text(f"{value(rec.get('ts'))}  {place}:{value(rec.get('lineNo'))}  "
                     f"{value(rec.get('line'))}{cut_note(cut)}")



