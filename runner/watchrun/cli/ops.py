"""Handlers of `list/status/matches/logs/stop/clear`, and what the live-runner commands share:
the output dir to read, a request to the runner and how its answer is said."""

from __future__ import annotations

import argparse
import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchrun.cli.asking import Unanswered, ask
from watchrun.cli.emit import Out, config_failed
from watchrun.exitcodes import ExitStatus
from watchrun.views.humanize import DISABLED, named

DEFAULT_MATCH_LINES = 50
STOPPED = ("stopped", "exited", "fatal")
"""Snapshot statuses of a watcher that is not running."""


class Where:
    """The output dir to read, and the config it came from (if any)."""

    def __init__(self, root: Path, match_lines: int, config: Any = None) -> None:
        self.root = root
        self.match_lines = match_lines
        self.config = config


def resolve(args: argparse.Namespace, out: Out) -> Where | int:
    """The output dir from -c (or the discovered config; `main` filled `args.config`) or
    --output-dir alone; an exit status when the config is invalid or the output dir is there
    but not a directory (`output_dir`, exit 3)."""
    from watchrun.config import load_config
    from watchrun.output.outdir import OutputDirError, check_readable

    paths: list[Path] = list(getattr(args, "config", None) or [])
    where = Where(args.output_dir, DEFAULT_MATCH_LINES)
    if paths:
        result = load_config(paths, output_dir=args.output_dir, cache=True)
        if (cfg := result.config) is None:
            return config_failed(out, result.diagnostics)
        where = Where(cfg.output.dir, cfg.limits.match_lines, cfg)
    try:
        check_readable(where.root)  # a file named as one is no runner "that did not answer"
    except OutputDirError as exc:
        return out.fail("output_dir", str(exc), outputDir=str(where.root))
    return where


def _paint(out: Out) -> Any:
    from watchrun.views.humanize import no_paint, paint

    return paint if out.colour else no_paint


def cmd_ops(args: argparse.Namespace) -> int:
    from watchrun.output.records import ID_RULE, ReadStats, is_id
    from watchrun.views import watchers as views

    out = Out.for_args(args)
    where = resolve(args, out)
    if isinstance(where, int):
        return where
    op, wid = args.op, getattr(args, "id", None)
    if wid is not None and not is_id(wid):  # a path would read files outside the output dir
        return out.fail("invalid_argument", f"{wid!r} is not a watcher id ({ID_RULE})", id=wid)
    try:
        if op == "stop":
            return _stop(where, args.id, out)
        if op == "clear":
            return _control(where, {"cmd": "clear", "all": bool(args.all)}, out)
        if op == "status" and args.id is None:
            return _runner_status(where, out)
    except Unanswered as exc:
        return exc.fail(out)
    from watchrun.cli.live import NoAnswer, follow, live_statuses, none_listed

    if getattr(args, "follow", False):
        known = _known_watchers(where)  # a typo is said, not waited for until Ctrl-C
        if args.id not in known:
            return out.fail("not_found", f"no watcher {args.id!r} in {where.root} (known: "
                            f"{named(known)})", id=args.id, known=known)
        return follow(args, where.root, where.match_lines, where.config)
    unanswered: str | None = None
    try:
        live = live_statuses(where.root)  # a live runner answers first; else the snapshots
    except NoAnswer as exc:
        live = None
        unanswered = str(exc)
        out.note(f"warning: {unanswered}; showing the status snapshots it last wrote, which "
                 "may be stale")
    now = datetime.now(UTC)
    if op == "list":
        if live is None and (why := views.unlistable(where.root)) is not None:
            return out.fail("read_failed", why)  # (not "no watchers have run")
        statuses = live.watchers if live is not None else \
            views.load_statuses(where.root, unreadable=True)
        if out.as_json:
            out.doc({"outputDir": str(where.root), "watchers": statuses,
                     **({"enabled": live.enabled} if live is not None else {})})
        elif statuses:
            out.block(views.list_table(statuses, now, _paint(out), out.stdout.encoding))
            if live is not None and not live.enabled:
                out.note(f"note: {DISABLED}")
        else:
            out.line(none_listed(where.root, live, _configured(where), _recorded(where)))
        return ExitStatus.OK
    status = next((s for s in (live.watchers if live is not None else [])
                   if s.get("id") == args.id), None) or \
        views.load_status(where.root, args.id)
    recorded = os.path.lexists(where.root / "watchers" / f"{args.id}.jsonl")  # (a link there
    # is no "not found": reading it fails, `read_failed`)
    if status is None and (op == "status" or not (recorded or args.id in _configured(where))):
        known = _known_watchers(where)
        snapshot = where.root / "state" / f"{args.id}.status.json"
        if unanswered is not None:  # the runner may run it: not knowing is no "not found"
            return out.fail("no_answer", f"{unanswered} and no status snapshot of {args.id!r} "
                            f"is in {where.root}", id=args.id)
        if os.path.lexists(snapshot):  # there, but not a snapshot this can read
            return out.fail("read_failed", f"the status of {args.id!r} ({snapshot}) cannot be "
                            f"read: not its status snapshot ({views.unreadable_why(snapshot)});"
                            " a runner writes it anew while the watcher runs", id=args.id)
        if args.id in known:  # configured (or recorded) but no snapshot: not run here yet
            return out.fail("not_found", f"no status of {args.id!r} in {where.root}: it has "
                            "not run with this output dir (or `clear` forgot it)", id=args.id,
                            known=known)
        return out.fail("not_found", f"no watcher {args.id!r} in {where.root} (known: "
                        f"{named(known)})", id=args.id, known=known)
    if status is not None and op == "status":
        if out.as_json:
            out.doc(status)
        else:
            out.block("\n".join(views.status_lines(status, now, _paint(out))))
        return ExitStatus.OK
    n = args.lines if args.lines is not None else min(where.match_lines, 2000)
    if op == "matches":
        stats = ReadStats()
        try:
            recs = views.matches(where.root, args.id, n, stats)
        except OSError as exc:  # e.g. a symlink in place of a JSONL file: never followed
            return out.fail("read_failed", f"cannot read the matches of {args.id}: {exc}")
        if stats.invalid:
            out.note(views.skipped(args.id, where.root / "watchers" / f"{args.id}.jsonl",
                                   stats.invalid))
        if out.as_json:
            out.doc({"id": args.id, "matches": recs})
        else:
            out.lines(views.match_line(r) for r in recs)
        return ExitStatus.OK
    try:
        lines = views.logs(where.root, args.id, n)
    except OSError as exc:  # a symlink, a FIFO, a directory: not "it printed nothing"
        return out.fail("read_failed", f"cannot read the logs of {args.id}: {exc}")
    if out.as_json:
        out.doc({"id": args.id, "lines": lines})
    else:
        out.lines(lines)
    return ExitStatus.OK


def _configured(where: Where) -> list[str]:
    return [w.id for w in where.config.watchers] if where.config is not None else []


def _known_watchers(where: Where) -> list[str]:
    """Ids the config, the status snapshots or the JSONL files of the output dir know."""
    from watchrun.views import watchers as views

    ids = {s["id"] for s in views.load_statuses(where.root)}
    return sorted(ids.union(_configured(where), _recorded(where)))


def _recorded(where: Where) -> list[str]:
    """Ids with a JSONL in the output dir's `watchers/`."""
    with contextlib.suppress(OSError):
        return sorted(p.stem for p in (where.root / "watchers").glob("*.jsonl"))
    return []


def _stop(where: Where, wid: str, out: Out) -> int:
    """`stop ID`: like `systemctl stop`, a watcher that is not running is a success that says
    so; only a watcher nobody knows is an error (exit 2)."""
    known = _known_watchers(where)
    reply = ask(where.root, {"cmd": "stop", "id": wid}, where.config)
    if isinstance(reply, dict) and reply.get("ok"):
        return _done(out, {"id": wid, "stopped": True,
                           "wasRunning": reply.get("wasRunning") is not False,
                           "message": str(reply.get("message", f"stopped {wid}"))})
    if wid not in known:
        return out.fail("not_found", f"no watcher {wid!r} (known: {named(known)})", id=wid,
                        known=known)
    if reply is not None and _code(reply) != "not_found":
        return _refused(out, reply)
    from watchrun.cli.runner_said import not_yours

    why = "no runner is live on this output dir" if reply is None else "it was not running"
    other = None if reply is None else not_yours(where.root, where.config, _error(reply).get(
        "runner"), wid)  # (two configs on one output dir: the other one's runner)
    return _done(out, {"id": wid, "stopped": True, "wasRunning": False, "message":
                       f"{wid} is already stopped ({why})" if other is None else
                       f"{wid} is not running there: {other}"})


def _done(out: Out, doc: dict[str, Any]) -> int:
    if out.as_json:
        out.doc(doc)
    else:
        out.line(doc["message"])
    return ExitStatus.OK


def _code(reply: dict[str, Any]) -> str | None:
    err = _error(reply)
    return str(err.get("code")) if err else None


def _error(reply: dict[str, Any]) -> dict[str, Any]:
    err = reply.get("error")
    return err if isinstance(err, dict) else {}


def _refused(out: Out, reply: dict[str, Any]) -> int:
    found = reply.get("error")
    err: dict[str, Any] = found if isinstance(found, dict) else {}
    code = str(err.get("code") or "failed")
    return out.fail(code, str(err.get("message") or "the runner refused the request"))


def _runner_status(where: Where, out: Out) -> int:
    """`status` without an id: the live runner's state, which runner it is (its pid as seen
    here, its config), its watchers and its problems (a failed reload's among them until one
    applies); no runner is `no_runner` (exit 3)."""
    from watchrun.cli.runner_said import described, pid_here, yours_differs
    from watchrun.match.sanitize import edge_text

    root = where.root
    reply = ask(root, {"cmd": "status"})
    if reply is None:
        return _no_runner(out, root)
    if not reply.get("ok"):
        return _refused(out, reply)
    doc = {k: v for k, v in reply.items() if k != "ok"}
    doc["pidHere"] = pid_here(root, doc)
    if out.as_json:
        out.doc(doc)
        return ExitStatus.OK
    problems = [str(p) for p in doc.get("problems") or []]
    dropped = doc.get("problemsDropped") or 0
    watchers, stopping = doc.get("watchers") or [], len(doc.get("stopping") or [])
    also = f" ({stopping} more being stopped)" if stopping else ""
    lines = [f"runner {edge_text(str(doc.get('state')))}: {len(watchers)} watcher"
             f"{'' if len(watchers) == 1 else 's'}{also}, output dir {edge_text(str(root))}",
             f"runner: {described(root, doc)}", f"problems: {len(problems) + dropped or 'none'}"]
    if doc.get("session") is True:
        lines.insert(2, "it is a `watchrun mcp` session's own runner: every watcher it runs ends "
                     "with that session")
    if yours_differs(where.config, doc):
        lines.insert(2, edge_text(f"your config ({', '.join(map(str, where.config.sources))}) is "
                                  "not this runner's: both use this output dir"))
    blind = [w for w in doc.get("notReading") or [] if isinstance(w, dict)]
    if blind:  # (not the runner's problems: its watchers', which `list` explains)
        lines.insert(1, "not reading: " + ", ".join(
            f"{edge_text(str(w.get('id')))} ({edge_text(str(w.get('status')))})" for w in blind)
            + " (`watchrun list` says why)")
    lines += [f"  - {edge_text(p)}" for p in problems]
    if dropped:
        lines.append(f"  (and {dropped} older, no longer listed: see the runner's log)")
    out.block("\n".join(lines))
    return ExitStatus.OK


def _no_runner(out: Out, root: Path, **details: Any) -> int:
    return out.fail("no_runner", f"no live runner on {root / 'control.sock'}; is `watchrun "
                    "run` running with this output dir?", outputDir=str(root), **details)


def _control(where: Where, payload: dict[str, Any], out: Out) -> int:
    reply = ask(where.root, payload, where.config)
    if reply is None:
        return _no_runner(out, where.root)
    if not reply.get("ok"):
        return _refused(out, reply)
    doc = {k: v for k, v in reply.items() if k != "ok"}
    doc.setdefault("message", "ok")
    return _done(out, doc)
