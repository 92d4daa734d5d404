"""Handlers of `list/status/matches/logs/stop/clear` and the `agent` action dispatch."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from watchrun.exitcodes import ExitStatus

DEFAULT_MATCH_LINES = 50


class Where:
    """The output dir to read, and the config it came from (if any)."""

    def __init__(self, root: Path, match_lines: int, config: Any = None) -> None:
        self.root = root
        self.match_lines = match_lines
        self.config = config


def resolve(args: argparse.Namespace) -> Where | int:
    """Find the output dir from --output-dir, -c, or ./watch.yaml; an exit status on error."""
    from watchrun.config import load_config

    paths: list[Path] | None = getattr(args, "config", None)
    if not paths and args.output_dir is None and Path("watch.yaml").is_file():
        paths = [Path("watch.yaml")]
    if not paths:
        if args.output_dir is not None:
            return Where(args.output_dir, DEFAULT_MATCH_LINES)
        print("watchrun: error: no config: pass -c FILE or --output-dir DIR", file=sys.stderr)
        return ExitStatus.USAGE
    result = load_config(paths, output_dir=args.output_dir)
    for d in result.diagnostics:
        if d.severity == "error":
            print(d.format(), file=sys.stderr)
    if result.config is None:
        return ExitStatus.USAGE
    cfg = result.config
    return Where(cfg.output.dir, cfg.limits.match_lines, cfg)


def _print_json(data: Any) -> None:
    from watchrun.match.sanitize import edge_json

    print(edge_json(data, indent=2))


def _say(text: str, *, err: bool = False) -> None:
    """One line for people, through the edge sanitizer."""
    from watchrun.match.sanitize import edge_text

    print(edge_text(text), file=sys.stderr if err else sys.stdout)


def cmd_ops(args: argparse.Namespace) -> int:
    from watchrun.views import watchers as views

    where = resolve(args)
    if isinstance(where, int):
        return where
    op, as_json = args.op, args.format == "json"
    if op in ("stop", "clear"):
        return _control(where.root, _op_request(args), as_json)
    from watchrun.cli.live import follow, live_statuses

    if getattr(args, "follow", False):
        return follow(args, where.root, where.match_lines, where.config)
    live = live_statuses(where.root)  # a live runner answers first; else the snapshots
    if op == "list":
        statuses = live if live is not None else views.load_statuses(where.root)
        if as_json:
            _print_json(statuses)
        elif statuses:
            print(views.list_table(statuses))
        else:
            _say(f"no watchers have run with output dir {where.root}")
        return ExitStatus.OK
    status = next((s for s in live or [] if s.get("id") == args.id), None) or \
        views.load_status(where.root, args.id)
    if status is None:
        known = ", ".join(s["id"] for s in views.load_statuses(where.root)) or "none"
        _say(f"watchrun: error: no watcher {args.id!r} in {where.root} (known: {known})",
             err=True)
        return ExitStatus.USAGE
    if op == "status":
        if as_json:
            _print_json(status)
        else:
            for line in views.status_lines(status):
                print(line)
        return ExitStatus.OK
    n = args.lines if args.lines is not None else where.match_lines
    n = max(1, min(n, 2000))
    if op == "matches":
        try:
            recs = views.matches(where.root, args.id, n)
        except OSError as exc:  # e.g. a symlink in place of a JSONL file: never followed
            _say(f"watchrun: error: cannot read the matches of {args.id}: {exc}", err=True)
            return ExitStatus.RUNTIME
        if as_json:
            _print_json(recs)
        else:
            for r in recs:
                print(views.match_line(r))
        return ExitStatus.OK
    lines = views.logs(where.root, args.id, n)
    if as_json:
        _print_json(lines)
    else:
        for line in lines:
            _say(line)
    return ExitStatus.OK


def _op_request(args: argparse.Namespace) -> dict[str, Any]:
    if args.op == "stop":
        return {"cmd": "stop", "id": args.id}
    return {"cmd": "clear", "all": bool(args.all)}


def _control(root: Path, payload: dict[str, Any], as_json: bool) -> int:
    from watchrun.runtime.control import request

    try:
        reply = request(root / "control.sock", payload)
    except ConnectionError as exc:
        _say(f"watchrun: error: {exc}; is `watchrun run` running with this output dir?",
             err=True)
        return ExitStatus.RUNTIME
    if as_json:
        _print_json(reply)
    elif reply.get("ok"):
        _say(str(reply.get("message", "ok")))
    else:
        err = reply.get("error", {})
        _say(f"watchrun: error: {err.get('message', 'failed')}", err=True)
    return ExitStatus.OK if reply.get("ok") else ExitStatus.USAGE


def cmd_agent(args: argparse.Namespace) -> int:
    action = args.agent_command
    if action == "run":
        from watchrun.cli.agent_run import cmd_agent_run

        return cmd_agent_run(args)
    if action in ("send", "stop"):
        where = resolve(args)
        if isinstance(where, int):
            return where
        payload: dict[str, Any] = {"cmd": f"agent-{action}", "name": args.name}
        if action == "send":
            payload["text"] = args.text
        return _control(where.root, payload, getattr(args, "format", "text") == "json")
    from watchrun.cli import agent_views as view_cmd

    handler = {"list": view_cmd.cmd_agent_list, "watch": view_cmd.cmd_agent_watch,
               "transcript": view_cmd.cmd_agent_transcript}[action]
    return int(handler(args))
