"""Shared semantic checks: typed reads, path resolution, regexes, cron schedules, env maps."""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

from watchrun.config.clamp import LIMIT_RULES
from watchrun.config.diagnostics import Reporter
from watchrun.config.homes import expand_home, unexpanded
from watchrun.config.text_values import TEXTS, lone_surrogate
from watchrun.config.tree import CMap, KeyPath, Origin, format_path, locate
from watchrun.config.yaml_tree import bool_hint
from watchrun.match.syntax import prepare

__all__ = ["CRON_ALIASES", "Ctx", "quoted", "unencodable"]

CRON_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def quoted(pattern: str, limit: int = 200) -> str:
    """`pattern` as JSON for a message, its first `limit` characters when it is longer."""
    if len(pattern) <= limit:
        return json.dumps(pattern)
    return f"{json.dumps(pattern[:limit])}… ({len(pattern)} characters)"


def unencodable(text: str, at: int, encoding: str) -> str:
    """Why `text[at]` cannot be in a command line, the environment, a path or a URL, whose
    strings are encoded in the file system's `encoding`: a lone surrogate (U+D800-U+DFFF, not a
    character) in any; another character in an encoding without it (a Latin-1 or ASCII locale,
    PYTHONUTF8=0), which UTF-8 would write."""
    code = ord(text[at])
    if 0xD800 <= code <= 0xDFFF:
        return (f"{json.dumps(text)} contains U+{code:04X}, a lone surrogate (not a character), "
                "which no command line, environment, path or URL can hold")
    return (f"{json.dumps(text)} contains U+{code:04X}, which cannot be written in this "
            f"system's file name encoding ({encoding}): run watchrun under a UTF-8 locale "
            "(LANG=C.UTF-8) or with PYTHONUTF8=1")


class Ctx:
    """The merged tree, the folder of each config file, and the reporter of one load."""

    def __init__(self, root: CMap, folders: dict[str, Path], report: Reporter) -> None:
        self.root = root
        self.folders = folders
        self.report = report

    def folder(self, path: KeyPath) -> Path:
        """The folder of the config file that set `path` (the first file when unknown)."""
        origin = locate(self.root, path)
        if origin is not None and origin.file in self.folders:
            return self.folders[origin.file]
        return next(iter(self.folders.values()))

    def resolve(self, path: KeyPath, value: str) -> Path:
        """`value` as an absolute path, relative to the folder of the file that set `path`.

        `~` is expanded (`~name` of a user there is not: an error, not a folder named so);
        symlinks are kept (a followed log may be a symlink that moves).
        """
        expanded = expand_home(value)
        user = value[1:].split("/", 1)[0] if value.startswith("~") else ""
        if expanded is None:
            self.report.error(path, unexpanded(value))
            expanded = value
        elif user:
            self.report.homes[user] = os.path.expanduser(f"~{user}")
        return Path(os.path.abspath(self.folder(path) / expanded))

    def regex(self, path: KeyPath, pattern: Any, flags: int) -> bool:
        """Report a pattern that Python `re` cannot compile (POSIX classes spelled out, depth
        bounded: `match.syntax`); True when it compiles."""
        if not isinstance(pattern, str):
            return False
        control = _CONTROL.search(pattern)
        if control is not None:
            code = ord(control.group())
            self.report.error(path, f"{json.dumps(pattern)[:200]} holds U+{code:04X}, a control "
                              "character, as itself: list, status and the MCP tool would show "
                              f"the pattern without it; write the regex escape `\\x{code:02x}`")
            return False
        hidden = next((c for c in pattern if not c.isascii() and unicodedata.category(c) == "Cf"),
                      None)
        if hidden is not None:  # (ZWSP, a BOM pasted with the value, a bidi override, …)
            code = ord(hidden)
            self.report.warning(path, f"{json.dumps(pattern)[:200]} holds U+{code:04X} ("
                                f"{unicodedata.name(hidden, 'a format character')}), an "
                                "invisible character, as itself: the pattern does not match "
                                "what it looks like; delete it, or write the escape "
                                f"`\\u{code:04x}` (in YAML single quotes) if it is meant")
        try:
            re.compile(prepare(pattern), flags)
        except re.error as exc:
            at = f" at position {exc.pos}" if exc.pos is not None else ""
            self.report.error(path, f"invalid regex {quoted(pattern)}: {exc.msg}{at}")
            return False
        except (RecursionError, OverflowError, ValueError) as exc:
            self.report.error(path, f"invalid regex {quoted(pattern)}: {exc}")
            return False
        return True

    def cron(self, path: KeyPath, expr: Any) -> bool:
        """Report a schedule that is not 5 cron fields (or an alias like @hourly)."""
        if not isinstance(expr, str):
            return False
        text = expr.strip()
        fields = text.split()
        if text in CRON_ALIASES:
            return True
        if len(fields) != 5:
            self.report.error(path, f"{json.dumps(expr)} is not a cron expression: use 5 fields "
                              "(minute hour day-of-month month day-of-week), e.g. "
                              "\"*/5 * * * *\", or one of " + " ".join(CRON_ALIASES))
            return False
        from croniter import croniter  # type: ignore[import-untyped]

        try:
            croniter(text).get_next(float)  # (a date no year has, `0 0 30 2 *`, fails here)
        except Exception as exc:  # croniter raises several unrelated types for bad input
            self.report.error(path, f"{json.dumps(expr)} is not a valid cron expression: {exc}")
            return False
        return True

    def executed(self, path: KeyPath, item: Any) -> None:
        """`os_strings` on what of a watcher, an agent or an action reaches an exec, a path or
        a request, and `lone_surrogate` on what is text (its actions' too)."""
        if not isinstance(item, dict):
            return
        for key in ("command", "cwd", "env", "path", "url", "headers"):
            if key in item:
                self.os_strings((*path, key), item[key], shown=key == "command",
                                text=TEXTS.get(key))
        for key in ("prompt", "until"):
            if key in item:
                lone_surrogate(self.report, (*path, key), item[key], TEXTS[key])
        self.program((*path, "command"), item.get("command"))
        actions = item.get("actions")
        for j, action in enumerate(actions if isinstance(actions, list) else []):
            self.executed((*path, "actions", j), action)

    def program(self, path: KeyPath, command: Any) -> None:
        """Report a command no start can run, as `process.spawn.Spawner` refuses it: an argv
        whose program (its first item) is blank, or a blank string (a watcher's shell command
        line; an agent's string, split into words, says so where it is split)."""
        if isinstance(command, list) and command and isinstance(command[0], str) \
                and not command[0].strip():
            self.report.error((*path, 0), "must not be blank: the first item is the program to "
                              "run, the others its arguments")
        elif isinstance(command, str) and command and not command.strip() \
                and path[:1] == ("watchers",) and len(path) == 3:
            self.report.error(path, "must not be blank: a command line run by /bin/sh -c, e.g. "
                              "\"make test\"")

    def os_strings(self, path: KeyPath, node: Any, shown: bool = False,
                   text: str | None = None) -> None:
        """Report every string under `node` that holds a NUL byte, a lone surrogate (JSON's
        `"\\ud800"`) that is not one of a file name's undecodable bytes (U+DC80-U+DCFF), or a
        character the file system's encoding has not (`unencodable`): no command line,
        environment, path or URL can hold any of them (the start would fail on it). `text`
        (what a URL or header becomes): a string that is text, whose every lone surrogate is
        reported by `lone_surrogate` instead.
        `shown` (a command, which list, status and records show): nor a terminal control, which
        the shell gets as itself while every such surface shows its escape (`\\u001b`): almost
        always a `\\e` in YAML double quotes meant for the shell. (A path may: a file name is
        data, shown with its controls escaped as a rotated sibling's is.)"""
        if text is not None and lone_surrogate(self.report, path, node, text):
            return
        if isinstance(node, str):
            control = _CONTROL.search(node) if shown else None
            if control is not None and "\0" not in node:
                self.report.error(path, f"{json.dumps(node)[:200]} contains U+"
                                  f"{ord(control.group()):04X}, a terminal control character: "
                                  "the shell would get the character itself, while `list`, "
                                  "`status` and the records show it as an escape (`\\u001b`); "
                                  "write what makes one, as `printf '\\033'` (in YAML "
                                  "single quotes or a plain scalar: `\\e` in double quotes is "
                                  "the character itself)")
            if "\0" in node:
                self.report.error(path, f"{json.dumps(node)} contains a NUL byte (\\0), which "
                                  "no command line, environment, path or URL can hold")
            try:
                os.fsencode(node)
            except UnicodeEncodeError as exc:
                self.report.error(path, unencodable(node, exc.start,
                                                    sys.getfilesystemencoding()))
        elif isinstance(node, dict):
            for key, value in node.items():
                self.os_strings((*path, key), value, text=text)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                self.os_strings((*path, i), value, text=text)

    def cap(self, key: str, raw: list[Any], limit: int, setting: str) -> None:
        """Report more items in the list `key` (`watchers`, `agents`) than `limits.<setting>`
        (`limit`) allows: where the layer that added the first one past it wrote that one (a
        later layer that changes an item keeps its place), and where the limit was set."""
        rule = LIMIT_RULES[setting][1]
        if len(raw) <= limit or rule is None:
            return
        first = raw[limit]
        named = first.get("id" if key == "watchers" else "name") if isinstance(first, CMap) \
            else None
        limits = self.root.get("limits")
        written = locate(self.root, ("limits", setting)) \
            if isinstance(limits, CMap) and setting in limits else None
        self.report.error((key,), f"{len(raw)} {key} configured but limits.{setting} is {limit} "
                          f"({f'set at {_place(written)}' if written else 'the default'}; it can "
                          f"be raised up to {rule.hi}): the first past it is {key}[{limit}]"
                          f"{f' `{named}`' if isinstance(named, str) else ''}",
                          first.origin if isinstance(first, CMap) else locate(self.root,
                                                                               (key, limit)))

    def env(self, path: KeyPath, raw: Any) -> dict[str, str]:
        """An env mapping with values as strings (numbers are written as they read)."""
        if not isinstance(raw, dict):
            return {}
        out: dict[str, str] = {}
        for key, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                continue  # the schema reported it
            out[str(key)] = value if isinstance(value, str) else str(value)
            if isinstance(value, float):  # (`1.10` is 1.1: the number, not what was written)
                self.report.warning((*path, str(key)), f"read as the number {value}, passed "
                                    f"as \"{value}\": a number's spelling is not kept (`1.10` "
                                    "is 1.1); quote the value to pass it as written")
        return out

    def unique(self, path: KeyPath, value: Any, seen: dict[str, tuple[KeyPath, str]],
               what: str, why: str | None = None) -> None:
        """Report `value` when an earlier one equals it ignoring case (`why`: by default,
        they are file names)."""
        if not isinstance(value, str):
            return
        prior, other = seen.setdefault(value.lower(), (path, value))
        if prior == path:
            return
        if other == value:
            self.report.error(path, f"duplicate {what} `{value}` (also at {format_path(prior)});"
                              f" each {what} must be unique")
        else:
            self.report.error(path, f"{what} `{value}` differs from `{other}` at "
                              f"{format_path(prior)} only in case; "
                              f"{why or f'{what}s become file names'}, so they must be unique "
                              "ignoring case")

    def wake(self, path: KeyPath, raw: Any, agents: list[str], default: bool) -> tuple[str, ...]:
        """The agent names a watcher wakes; every name must be an agent."""
        if raw is None:
            return tuple(agents) if default else ()
        if isinstance(raw, bool):
            if raw and not agents:
                self.report.warning(path, "wake is true but the config has no agents")
            return tuple(agents) if raw else ()
        names: list[tuple[KeyPath, str]]
        if isinstance(raw, str):
            names = [(path, raw)]
        elif isinstance(raw, list):
            names = [((*path, i), n) for i, n in enumerate(raw) if isinstance(n, str)]
        else:
            return ()  # the schema reported it
        for where, name in names:
            if name not in agents:
                known = did_you_mean_agents(name, agents)
                if where == path:  # (`wake: yes` alone: true or false would do)
                    known += bool_hint(self.report, path, name)
                self.report.error(where, f"no agent named `{name}`{known}")
        return tuple(n for _, n in names)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Controls but tab and newline (a multi-line command keeps its line breaks), NUL too: shown,
each would be gone (in a command, a NUL has its own error)."""


def _place(origin: Origin) -> str:
    """`origin` as a diagnostic writes it: `file:line:column`, as much of it as is known."""
    return ":".join(str(n) for n in (origin.file, origin.line, origin.column) if n is not None)


def did_you_mean_agents(name: str, agents: list[str]) -> str:
    from watchrun.config.schema import did_you_mean

    return did_you_mean(name, agents, "agents") if agents else "; the config has no agents"
