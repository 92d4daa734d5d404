"""Check and build watcher specs: one source, valid regexes, known agents, kind-specific keys."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from watchrun.config.actions import build_actions
from watchrun.config.checks import Ctx, quoted
from watchrun.config.clamp import RANGES, clamp
from watchrun.config.lineregex import line_checks
from watchrun.config.model import GateSpec, Limits, RestartPolicy, WatcherSpec
from watchrun.config.shellwords import command_line
from watchrun.config.tree import CMap, KeyPath
from watchrun.match.matcher import BACKTRACKING_BUDGET_S, needs_backtracking

__all__ = ["COMMAND_ONLY", "FILE_ONLY", "build_watchers"]

COMMAND_ONLY = ("cwd", "env", "restart", "restartDelay", "schedule")
"""Watcher keys that only a command watcher may set (and `gate.exitCode`)."""
FILE_ONLY = ("fromStart", "previousId")
"""Watcher keys that only a file watcher may set."""

DEFAULT_RESTART_DELAY_MS = 1000


def build_watchers(ctx: Ctx, raw: Any, agents: list[str], limits: Limits,
                   output_dir: Path | None = None) -> list[WatcherSpec]:
    """Check every watcher (all errors reported) and build the specs of the valid ones; a file
    watcher may not follow the runner's own files in `output_dir` (its records, state and
    socket: a watcher of its own records would feed on them)."""
    if not isinstance(raw, list):
        return []
    ctx.cap("watchers", raw, limits.max_watchers, "maxWatchers")
    seen: dict[str, tuple[KeyPath, str]] = {}
    out: list[WatcherSpec] = []
    owned = _owned_by_runner(output_dir) if output_dir else ()
    for i, item in enumerate(raw):
        if isinstance(item, CMap):
            ctx.unique(("watchers", i, "id"), item.get("id"), seen, "id")
            spec = _watcher(ctx, ("watchers", i), item, agents, limits)
            if spec is not None and spec.path and _is_owned(spec.path, owned):
                ctx.report.error(("watchers", i, "path"), f"{spec.path} is one of the runner's "
                                 f"own files in the output dir {output_dir}: a watcher of its "
                                 "records would record each match again, without end "
                                 "(`watchrun matches --follow ID` follows a watcher's records)")
            elif spec is not None:
                out.append(spec)
    _previous_ids(ctx, raw)
    return out


def _owned_by_runner(root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The output dir `root` (as written and with its symlinks resolved) and the runner's files
    in it: `watchers/`, `agents/`, `state/`, the socket and the lock. (A log of one's own in the
    dir, as the example's demo writes, is no record.)"""
    roots = tuple(dict.fromkeys((os.path.abspath(root), os.path.realpath(root))))
    return roots, tuple(os.path.join(r, n) for r in roots for n in (
        "watchers", "agents", "state", "control.sock", "control.lock"))


def _is_owned(path: Path, owned: tuple[tuple[str, ...], tuple[str, ...]] | tuple[()]) -> bool:
    """`path`, as written, is the output dir or one of the runner's files in it. (Resolving
    each watcher's symlinks would cost a start ~0.2 ms a watcher.)"""
    if not owned:
        return False
    roots, files = owned
    p = os.path.abspath(path)
    return p in roots or any(p == f or p.startswith(f + os.sep) for f in files)


def _previous_ids(ctx: Ctx, raw: list[Any]) -> None:
    """`previousId` names a checkpoint to adopt: never a current watcher's (that one is in
    use), and never one that two watchers would both adopt."""
    ids = {str(w.get("id")).lower(): i for i, w in enumerate(raw) if isinstance(w, CMap)}
    claimed: dict[str, int] = {}
    for i, w in enumerate(raw):
        prev = w.get("previousId") if isinstance(w, CMap) else None
        if not isinstance(prev, str):
            continue
        p = ("watchers", i, "previousId")
        if prev.lower() in ids:
            j = ids[prev.lower()]
            which = "its own id" if j == i else f"the id of watchers[{j}]"
            ctx.report.error(p, f"{prev!r} is {which}; previousId names the id this watcher "
                             "had before it was renamed (a checkpoint no watcher uses)")
        elif prev.lower() in claimed:
            ctx.report.error(p, f"{prev!r} is also the previousId of "
                             f"watchers[{claimed[prev.lower()]}]; only one watcher can adopt "
                             "a checkpoint")
        else:
            claimed[prev.lower()] = i


def _watcher(
    ctx: Ctx, p: KeyPath, w: CMap, agents: list[str], limits: Limits
) -> WatcherSpec | None:
    report = ctx.report
    ctx.executed(p, w)
    is_file = "path" in w and "command" not in w
    is_command = "command" in w and "path" not in w
    if "path" in w and "command" in w:
        report.error(p, "has both `path` and `command`; a watcher needs exactly one of them")
    elif not (is_file or is_command):
        report.error(p, "needs a source: `path` (a file to follow) or `command` (to run)")
    if is_file:
        for key in COMMAND_ONLY:
            if key in w:
                report.error((*p, key), f"`{key}` applies only to command watchers; "
                             "this watcher has `path`")
        if isinstance(w.get("gate"), dict) and "exitCode" in w["gate"]:
            report.error((*p, "gate", "exitCode"), "`exitCode` applies only to command "
                         "watchers; this watcher has `path`")
    if is_command:
        for key in FILE_ONLY:
            if key in w:
                report.error((*p, key), f"`{key}` applies only to file watchers; "
                             "this watcher has `command`")
    case_sensitive = w.get("caseSensitive") is True
    flags = 0 if case_sensitive else re.IGNORECASE
    regexes: list[tuple[KeyPath, Any]] = [((*p, "pattern"), w.get("pattern"))]
    raw_exclude = w.get("exclude")
    exclude: list[Any] = raw_exclude if isinstance(raw_exclude, list) else []
    regexes += [((*p, "exclude", j), item) for j, item in enumerate(exclude)]
    raw_gate = w.get("gate")
    if isinstance(raw_gate, dict) and "require" in raw_gate:
        regexes.append(((*p, "gate", "require"), raw_gate["require"]))
    for where, rx in regexes:
        if ctx.regex(where, rx, flags):
            _engine_check(ctx, where, rx, case_sensitive, w)
            line_checks(ctx, where, rx, case_sensitive)
    gate = _gate(ctx, (*p, "gate"), raw_gate)
    wake = ctx.wake((*p, "wake"), w.get("wake"), agents, limits.wake_on_match)
    delay: int | None = DEFAULT_RESTART_DELAY_MS
    if "restartDelay" in w:
        delay = clamp(w["restartDelay"], RANGES["watcher.restartDelay"], (*p, "restartDelay"),
                      report)
    if "schedule" in w:
        ctx.cron((*p, "schedule"), w["schedule"])
        if w.get("restart", "never") != "never":
            report.warning((*p, "restart"), f"`restart: {w['restart']}` has no effect with "
                           "`schedule`: a scheduled command runs at each tick and is not "
                           "restarted between them")
    actions = build_actions(ctx, (*p, "actions"), w.get("actions"))
    if report.has_errors or delay is None:
        return None  # no model is built; the checks above still ran and reported
    path = ctx.resolve((*p, "path"), w["path"]) if is_file else None
    command = w.get("command")
    command = tuple(command) if isinstance(command, list) else command
    cwd = None
    if is_command:
        cwd = ctx.resolve((*p, "cwd"), w["cwd"]) if "cwd" in w else ctx.folder((*p, "command"))
    default_label = w.get("path") if is_file else command_line(command or ())
    return WatcherSpec(
        id=w["id"],
        label=w.get("label") or str(default_label),
        pattern=w["pattern"],
        exclude=tuple(exclude),
        case_sensitive=case_sensitive,
        path=path,
        command=command,
        cwd=cwd,
        env=ctx.env((*p, "env"), w.get("env")),
        from_start=w.get("fromStart") is True,
        wake=wake,
        restart=RestartPolicy(w.get("restart", "never")),
        restart_delay_ms=delay,
        schedule=w["schedule"].strip() if "schedule" in w else None,
        gate=gate,
        actions=actions,
        backtracking=w.get("backtracking") is True,
        previous_id=w.get("previousId") if is_file else None,
    )


def _engine_check(ctx: Ctx, where: KeyPath, pattern: str, case_sensitive: bool, w: CMap) -> None:
    """A pattern the matcher cannot take, or one that only Python `re` can run without the
    watcher's `backtracking: true` (SPEC §10: no hostile line may stall the loop)."""
    try:
        what = needs_backtracking(pattern, case_sensitive)
    except ValueError as exc:
        ctx.report.error(where, str(exc))
        return
    if what is None or w.get("backtracking") is True:
        return
    ctx.report.error(where, (
        f"{quoted(pattern)} uses {what}, which only Python re, a backtracking engine, can "
        "run: one hostile line could stall it for minutes. Set `backtracking: true` on watcher "
        f"`{w.get('id')}` to run it in an isolated worker process with a "
        f"{BACKTRACKING_BUDGET_S * 1000:g} ms budget per line, or rewrite the pattern without "
        "it"))


_GATE_KEYS = {"maxMatches", "exitCode", "require"}


def _gate(ctx: Ctx, p: KeyPath, raw: Any) -> GateSpec | None:
    if not isinstance(raw, dict):
        return None
    max_matches = raw.get("maxMatches")
    if isinstance(max_matches, float) and max_matches.is_integer():  # (0.0, 1e3: the schema's
        max_matches = int(max_matches)  # `integer` takes a whole float; never drop the gate)
    require = raw.get("require")
    exit_code = raw.get("exitCode") is True
    mistyped = (max_matches is not None and not isinstance(max_matches, int)) or (
        require is not None and not isinstance(require, str)) or (
        not raw.keys() <= _GATE_KEYS)  # (the schema says that one: `max:` for maxMatches)
    if not isinstance(max_matches, int) and not exit_code and not isinstance(require, str) \
            and not mistyped:
        ctx.report.error(p, "has no condition: a gate that can never be crossed would pass "
                         "every run; set maxMatches (0: any match crosses it), exitCode: true "
                         "or require, or remove the gate")
    return GateSpec(
        max_matches=max_matches if isinstance(max_matches, int) else None,
        exit_code=exit_code,
        require=require if isinstance(require, str) else None,
    )
