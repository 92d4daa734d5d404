"""`watchrun add`, `start` and `restart`: requests to the live runner's control socket."""

from __future__ import annotations

import argparse
import os
from typing import Any

from watchrun.cli.asking import Unanswered, ask
from watchrun.cli.emit import Out
from watchrun.cli.ops import Where, _no_runner, resolve
from watchrun.config.homes import expand_home, unexpanded
from watchrun.config.yaml_tree import PLAIN_BOOL_HINT
from watchrun.exitcodes import ExitStatus

__all__ = ["cmd_add", "cmd_start", "watcher_of"]


def cmd_add(args: argparse.Namespace) -> int:
    out = Out.for_args(args)
    try:
        watcher = watcher_of(args)
    except ValueError as exc:  # (a `~` that names no home)
        return out.fail("invalid_argument", str(exc))
    where = resolve(args, out)
    if isinstance(where, int):
        return where
    return _send(where, {"cmd": "add", "watcher": watcher}, out, args.id)


WAKE_FLAG_HINT = (" (--wake takes an agent's name, once per agent; leave it out and the "
                  "runner's limits.wakeOnMatch decides)")
"""What a `--wake yes` is told instead of the config's "write true or false": the flag takes
names only, no boolean."""


def _as_flags(diagnostics: Any) -> None:
    """The runner checks an added watcher as a config item: where it advises `wake: true` or
    `false`, which `--wake` cannot say, advise what the flag takes."""
    for d in diagnostics if isinstance(diagnostics, list) else ():
        message = d.get("message") if isinstance(d, dict) else None
        if isinstance(message, str) and message.endswith(PLAIN_BOOL_HINT) \
                and d.get("path") == "watchers[0].wake":
            d["message"] = message.removesuffix(PLAIN_BOOL_HINT) + WAKE_FLAG_HINT


def cmd_start(args: argparse.Namespace) -> int:
    """`start ID` and `restart ID` (`args.op`). Exit status per the runner's error code
    (docs/cli.md): 2 when the request was wrong (`invalid`, `exists`, `not_found`); 3 when the
    runner could not (`limit`, `refused`, `busy`, `start_failed`, `no_runner`, `no_answer`)."""
    out = Out.for_args(args)
    where = resolve(args, out)
    if isinstance(where, int):
        return where
    return _send(where, {"cmd": args.op, "id": args.id}, out, args.id)


def watcher_of(args: argparse.Namespace) -> dict[str, Any]:
    """The config-shaped watcher `add` sends: paths made absolute against the current
    directory (the runner resolves nothing against its own), a command's cwd made explicit.
    ValueError: a path's `~` names no home (`config/homes.py`)."""
    w: dict[str, Any] = {"id": args.id, "pattern": args.pattern}
    if args.path is not None:
        w["path"] = _absolute("--path", args.path)
    else:
        w["command"] = args.source_command
    if args.cwd is not None:
        w["cwd"] = _absolute("--cwd", args.cwd)  # (with --path: refused by the runner's check)
    elif args.source_command is not None:
        w["cwd"] = os.getcwd()
    if args.exclude:
        w["exclude"] = list(args.exclude)
    for flag, key in ((args.case_sensitive, "caseSensitive"), (args.from_start, "fromStart")):
        if flag:
            w[key] = True
    if args.label is not None:
        w["label"] = args.label
    if args.wake:
        w["wake"] = args.wake[0] if len(args.wake) == 1 else list(args.wake)
    return w


def _absolute(flag: str, path: str) -> str:
    """`path` made absolute; an empty one is sent as it is, for the runner to refuse
    (`watchers[0].path: must not be empty`, as `validate` does): made absolute, `--path ''`
    was the current directory, and `--cwd ''` ran the command there."""
    if not path:
        return path
    expanded = expand_home(path)
    if expanded is None:  # (not a folder named `~` in the current directory)
        raise ValueError(f"{flag} {unexpanded(path)}")
    return os.path.abspath(expanded)


def _send(where: Where, payload: dict[str, Any], out: Out, wid: str) -> int:
    try:
        reply = ask(where.root, payload, where.config)
    except Unanswered as exc:
        return exc.fail(out, id=wid)
    if reply is None:
        return _no_runner(out, where.root, id=wid)
    if not reply.get("ok"):
        err = reply.get("error")
        err = err if isinstance(err, dict) else {}
        code, message = str(err.get("code", "failed")), str(err.get("message", "failed"))
        details = {k: v for k, v in err.items() if k not in ("code", "message", "id")}
        if payload["cmd"] == "add":
            _as_flags(details.get("diagnostics"))
        elif code == "not_found":  # (two configs on one output dir: the other one's runner)
            from watchrun.cli.runner_said import not_yours

            other = not_yours(where.root, where.config, details.get("runner"), wid)
            message = message if other is None else f"{message}; {other}"
        if not out.as_json and code == "invalid":
            for d in details.get("diagnostics") or []:
                out.note(f"{d.get('severity', 'error')}: {d.get('path')}: {d.get('message')}")
        return out.fail(code, message, id=wid, **details)
    doc = {"id": wid, **{k: v for k, v in reply.items() if k != "ok"}}
    if payload["cmd"] == "add":
        doc["added"] = True
    elif payload["cmd"] == "restart":
        doc["restarted"] = True
    else:
        doc.setdefault("started", True)
    if out.as_json:
        out.doc(doc)
        return ExitStatus.OK
    for d in doc.get("warnings") or []:
        out.note(f"warning: {d.get('path')}: {d.get('message')}")
    out.line(str(doc.get("message", "ok")))
    return ExitStatus.OK
