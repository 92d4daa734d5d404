"""`watchrun add`, `start` and `restart`: requests to the live runner's control socket."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from watchrun.cli.ops import resolve
from watchrun.exitcodes import ExitStatus
from watchrun.match.sanitize import edge_json, edge_text

__all__ = ["cmd_add", "cmd_start", "watcher_of"]

EXIT: dict[str, int] = {"invalid": ExitStatus.USAGE, "exists": ExitStatus.USAGE,
                        "not_found": ExitStatus.USAGE, "bad_request": ExitStatus.USAGE}
"""Exit status per error code of the runner's reply: 2 when the request was wrong; anything
else (`limit`, `refused`, `busy`, `start_failed`, `no_runner`) is 3, the runner could not."""


def cmd_add(args: argparse.Namespace) -> int:
    where = resolve(args)
    if isinstance(where, int):
        return where
    return _send(where.root, {"cmd": "add", "watcher": watcher_of(args)}, args.format == "json",
                 args.id)


def cmd_start(args: argparse.Namespace) -> int:
    """`start ID` and `restart ID` (`args.op`)."""
    where = resolve(args)
    if isinstance(where, int):
        return where
    return _send(where.root, {"cmd": args.op, "id": args.id}, args.format == "json", args.id)


def watcher_of(args: argparse.Namespace) -> dict[str, Any]:
    """The config-shaped watcher `add` sends: paths made absolute against the current
    directory (the runner resolves nothing against its own), a command's cwd made explicit."""
    w: dict[str, Any] = {"id": args.id, "pattern": args.pattern}
    if args.path is not None:
        w["path"] = _absolute(args.path)
    else:
        w["command"] = args.source_command
    if args.cwd is not None:
        w["cwd"] = _absolute(args.cwd)  # (with --path: refused by the runner's own check)
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


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _send(root: Path, payload: dict[str, Any], as_json: bool, wid: str) -> int:
    from watchrun.runtime.control import request

    try:
        reply = request(root / "control.sock", payload)
    except ConnectionError as exc:
        return _fail(as_json, "no_runner", f"{exc}; is `watchrun run` running with this "
                     "output dir?", {"id": wid})
    except (OSError, ValueError) as exc:
        return _fail(as_json, "no_runner", f"the runner did not answer: {exc}", {"id": wid})
    if not reply.get("ok"):
        err = reply.get("error")
        err = err if isinstance(err, dict) else {}
        code, message = str(err.get("code", "failed")), str(err.get("message", "failed"))
        details = {k: v for k, v in err.items() if k not in ("code", "message")}
        if not as_json and code == "invalid":
            for d in details.get("diagnostics") or []:
                _err(f"{d.get('severity', 'error')}: {d.get('path')}: {d.get('message')}")
        return _fail(as_json, code, message, {"id": wid, **details})
    doc = {"id": wid, **{k: v for k, v in reply.items() if k != "ok"}}
    if payload["cmd"] == "add":
        doc["added"] = True
    elif payload["cmd"] == "restart":
        doc["restarted"] = True
    else:
        doc.setdefault("started", True)
    if as_json:
        print(edge_json(doc, indent=2))
        return ExitStatus.OK
    for d in doc.get("warnings") or []:
        _err(f"warning: {d.get('path')}: {d.get('message')}")
    print(edge_text(str(doc.get("message", "ok"))))
    return ExitStatus.OK


def _fail(as_json: bool, code: str, message: str, extra: dict[str, Any]) -> int:
    if as_json:
        print(edge_json({"error": {"code": code, "message": message, **extra}}, indent=2))
    else:
        _err(f"watchrun: error: {message}")
    return EXIT.get(code, ExitStatus.RUNTIME)


def _err(text: str) -> None:
    print(edge_text(text), file=sys.stderr)
