"""`watchrun list/status/matches/logs`: read the output dir, live runner or not."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from watchrun.output.records import last_records


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_statuses(root: Path) -> list[dict[str, Any]]:
    """Every watcher's last snapshot; `live` says whether its runner still runs."""
    out = []
    state = root / "state"
    for path in sorted(state.glob("*.status.json")):
        try:
            snap = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(snap, dict):
            continue
        live = _pid_alive(snap.get("runnerPid"))
        snap["live"] = live
        if not live and snap.get("status") not in ("stopped", "exited", "fatal"):
            snap["status"] = "stopped"
        out.append(snap)
    return out


def load_status(root: Path, wid: str) -> dict[str, Any] | None:
    return next((s for s in load_statuses(root) if s.get("id") == wid), None)


def matches(root: Path, wid: str, lines: int) -> list[dict[str, Any]]:
    return last_records(root / "watchers" / f"{wid}.jsonl", lines, {"match"})


def logs(root: Path, wid: str, lines: int) -> list[str]:
    try:
        text = (root / "state" / f"{wid}.tail").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:] if lines else []


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain aligned table for people."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header).rstrip()]
    out += [fmt.format(*map(str, r)).rstrip() for r in rows]
    return "\n".join(out)


def list_table(statuses: list[dict[str, Any]]) -> str:
    rows = []
    for s in statuses:
        source = s.get("source")
        if isinstance(source, list):
            source = " ".join(source)
        rows.append(
            [
                s.get("id", "?"),
                s.get("status", "?"),
                s.get("kind", "?"),
                s.get("matchCount", 0),
                s.get("linesRead", 0),
                (s.get("lastMatchAt") or "-"),
                _clip(str(source), 48),
            ]
        )
    return table(rows, ["ID", "STATUS", "KIND", "MATCHES", "LINES", "LAST MATCH", "SOURCE"])


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
