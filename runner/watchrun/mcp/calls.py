"""A `watch` call's arguments checked and normalized before anything happens (pure): the action,
which parameters it takes, their types, the `since` cursor; `add`'s watcher in config shape,
whose own checks are the config's (`config/adding.py`), their diagnostics worded for the
tool (`refuse_invalid` raises `Failed`)."""

from __future__ import annotations

import difflib
import os
import re
from typing import Any

from msgspec import Struct, field

from watchrun.config.homes import expand_home, unexpanded
from watchrun.mcp.schema import ACTIONS, INPUT_SCHEMA, MAX_LINES
from watchrun.output.records import ID_RULE, is_id, parse_cursor

__all__ = ["APPLIES", "Call", "CallError", "Failed", "diagnostic", "normalize", "refuse_invalid"]

ADD_KEYS = ("path", "command", "cwd", "pattern", "exclude", "caseSensitive", "label", "wake",
            "fromStart")
APPLIES: dict[str, frozenset[str]] = {
    "add": frozenset({*ADD_KEYS, "id"}),
    "list": frozenset(),
    "status": frozenset({"id"}),
    "matches": frozenset({"id", "lines", "since"}),
    "logs": frozenset({"id", "lines"}),
    "stop": frozenset({"id"}),
    "clear": frozenset({"all"}),
}
"""The parameters each action takes (besides `action`); any other one is an error."""
_KNOWN = tuple(INPUT_SCHEMA["properties"])


class CallError(ValueError):
    """The call cannot be carried out as given; the message says why and what is allowed."""


class Call(Struct, frozen=True):
    action: str
    id: str | None = None
    lines: int | None = None
    since: int | None = None
    """The seq of the `since` cursor: matches strictly after it."""
    all: bool = False
    watcher: dict[str, Any] = field(default_factory=dict)
    """add: the watcher as a config writes it (camelCase), paths made absolute."""


def normalize(arguments: Any, cwd: str) -> Call:
    """The call `arguments` describe, or CallError. A parameter given as null counts as absent
    (models often send every parameter). Relative paths are taken from `cwd`, the server's."""
    if not isinstance(arguments, dict):
        raise CallError("the arguments must be an object with at least `action`")
    args = {str(k): v for k, v in arguments.items() if v is not None}
    action = args.pop("action", None)
    if not isinstance(action, str) or action not in ACTIONS:
        got = "no action" if action is None else f"action {action!r}"
        raise CallError(f"{got}: `action` must be one of {', '.join(ACTIONS)}")
    unknown = sorted(k for k in args if k not in _KNOWN)
    if unknown:
        raise CallError("; ".join(_unknown(k) for k in unknown))
    extra = sorted(k for k in args if k not in APPLIES[action])
    if extra:
        takes = ", ".join(f"`{k}`" for k in sorted(APPLIES[action])) or "no parameters"
        raise CallError(f"{', '.join(f'`{k}`' for k in extra)} do"
                        f"{'es' if len(extra) == 1 else ''} not apply to {action} "
                        f"({action} takes {takes})")
    if action == "add":
        return Call("add", watcher=_watcher(args, cwd))
    wid = args.get("id")
    if action in ("status", "matches", "logs", "stop"):
        wid = _id(wid, action)
    lines = _lines(args["lines"]) if "lines" in args else None
    since = _since(args["since"], wid) if "since" in args else None
    every = args.get("all", False)
    if not isinstance(every, bool):
        raise CallError(f"all: expected true or false, got {_show(every)}")
    return Call(action, id=wid, lines=lines, since=since, all=every)


def _watcher(args: dict[str, Any], cwd: str) -> dict[str, Any]:
    """`add`'s watcher, config-shaped; the config's checks judge its values. Paths resolve
    against `cwd`, and a command without `cwd` runs there (as the seed: the effective cwd)."""
    w = dict(args)
    for key in ("path", "cwd"):
        value = w.get(key)
        if isinstance(value, str) and value:
            expanded = expand_home(value)
            if expanded is None:  # (not a folder named `~` in `cwd`)
                raise CallError(f"{key}: {unexpanded(value)}")
            w[key] = os.path.normpath(os.path.join(cwd, expanded))
    if "command" in w and "cwd" not in w and "path" not in w:
        w["cwd"] = cwd
    return w


def _id(value: Any, action: str) -> str:
    if value is None:
        raise CallError(f"{action} needs `id`: the watcher's id, as `list` shows it (w1, …)")
    if not is_id(value):
        raise CallError(f"id: {_show(value)} is not a watcher id ({ID_RULE})")
    return value


def _lines(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CallError(f"lines: expected a whole number from 1 to {MAX_LINES}, got "
                        f"{_show(value)}")
    if not 1 <= value <= MAX_LINES:
        raise CallError(f"lines: must be from 1 to {MAX_LINES}, not {value}")
    return value


def _since(value: Any, wid: str | None) -> int:
    if not isinstance(value, str):
        raise CallError(f"since: expected a cursor string, got {_show(value)}")
    try:
        stream, seq = parse_cursor(value)
    except ValueError as exc:
        raise CallError(f"since: {str(exc).removeprefix('invalid_cursor: ')}") from None
    if stream != wid:
        raise CallError(f"since: cursor {value!r} is of watcher `{stream}`, not `{wid}`")
    return seq


def _unknown(key: str) -> str:
    near = difflib.get_close_matches(key, _KNOWN, n=1)
    hint = f"; did you mean `{near[0]}`?" if near else ""
    return f"unknown parameter `{key}`{hint}"


def _show(value: Any) -> str:
    kind = {bool: "boolean", int: "number", float: "number", str: "string", list: "list",
            dict: "object"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} {text if len(text) <= 40 else text[:39] + '…'}"


class Failed(Exception):
    """The call was not carried out: the message is the result's `error`."""


def refuse_invalid(diagnostics: list[Any]) -> None:
    """Raise Failed listing the errors among `diagnostics` (as `validate` words them, located
    by the tool's parameter), if there is one."""
    errors = [diagnostic(d) for d in diagnostics
              if isinstance(d, dict) and d.get("severity", "error") == "error"]
    if errors:
        n = len(errors)
        raise Failed(f"the watcher has {n} error{'' if n == 1 else 's'}; nothing was started\n"
                     + "\n".join(f"- {e}" for e in errors))


def diagnostic(d: dict[str, Any]) -> str:
    """`watchers[0].pattern: invalid regex …` → `pattern: invalid regex …` (the call's
    parameter; the message is the config's own, but for advice the tool cannot follow)."""
    where = re.sub(r"^watchers\[0\]\.?", "", str(d.get("path") or ""))
    message = _BACKTRACKING.sub(_config_only, str(d.get("message") or ""))
    return f"{where}: {message}" if where else message


_BACKTRACKING = re.compile(r"Set `backtracking: true` on watcher `[^`]*` to run it (?P<how>in "
                           r"an isolated .+?), or rewrite the pattern without it")
"""The config's advice for a pattern only Python `re` can run: a parameter the tool does not
take, on a watcher named by the id it was checked under (not the one being added)."""


def _config_only(found: re.Match[str]) -> str:
    return ("Rewrite the pattern without it (RE2 syntax); to run it as it is (" +
            found["how"] + "), add the watcher in a config file with `backtracking: true`, "
            "which the `watch` tool does not take")
