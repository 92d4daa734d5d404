"""Load the JSON Schemas shipped in `watchrun.schemas` and turn schema errors into diagnostics."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

from watchrun.config.diagnostics import Reporter
from watchrun.config.numbers import short_number
from watchrun.config.units import DURATION_HELP, SIZE_HELP
from watchrun.config.yaml_tree import bool_hint

__all__ = [
    "SCHEMA_FILES",
    "check_schema",
    "describe_value",
    "did_you_mean",
    "ecma_regex",
    "schema_text",
]

SCHEMA_FILES: dict[str, str] = {
    "config": "watch.schema.json",
    "record": "record.schema.json",
    "agent-watch": "agent-watch.schema.json",
    "transcript": "transcript.schema.json",
}
"""Schema names (as in `watchrun schema NAME`) and their files in the `watchrun.schemas` package."""

_TITLED = {
    "duration": f"is not a duration: use {DURATION_HELP}",
    "size": f"is not a size: use {SIZE_HELP}",
    "name": "is not a valid name: use 1 to 64 letters, digits, `_`, `.` or `-`, starting "
    "with a letter or digit (it becomes a file name)",
    "command": "is not a command: use a non-empty string or a non-empty list of strings",
    "wake": "is not a valid wake: use an agent name, a list of agent names, true or false",
    "when": "is not a valid `when`: use `match` (every match) or {threshold: \"N in WINDOW\"}, "
    "e.g. {threshold: \"5 in 1m\"}",
    "threshold": "is not a threshold: use \"N in WINDOW\", e.g. \"5 in 1m\" (5 matches within a "
    "minute)",
}
_TYPES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}


def schema_text(name: str) -> str:
    """The text of schema `name` (a key of SCHEMA_FILES); raises FileNotFoundError if it is
    absent, or the whole `watchrun.schemas` package is."""
    try:
        return resources.files("watchrun.schemas").joinpath(SCHEMA_FILES[name]).read_text(
            encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError) as exc:
        raise FileNotFoundError(SCHEMA_FILES[name]) from exc


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator, validators  # type: ignore[import-untyped]

    ecma = validators.extend(Draft202012Validator, {"pattern": _pattern})
    return ecma(json.loads(schema_text("config")))


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """The `pattern` keyword as JSON Schema means it (ECMA 262 regexes): `$` is the end of the
    string, never before a final newline as in Python, and `.` matches no line terminator."""
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """`pattern` (a JSON Schema regex) compiled for Python with the ECMA 262 meaning of `$`
    (`\\Z`) and of `.` (anything but \\n, \\r, U+2028 and U+2029) outside classes."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
        elif c == "$":
            out.append(r"\Z")
        elif c == ".":
            out.append("[^\n\r\u2028\u2029]")
        else:
            out.append(c)
        i += 1
    return re.compile("".join(out))


def describe_value(value: Any) -> str:
    """A short, quoted description of a config value for messages: `string "yes"`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"string {json.dumps(value)[:80]}"
    if isinstance(value, int | float):
        return f"number {short_number(str(value))}"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


# What other tools call a key (spelling is no guide: `match` is nearer `path` than `pattern`).
_SAID_ELSEWHERE = {
    "name": ("id",), "id": ("name",), "file": ("path",), "filename": ("path",),
    "logfile": ("path",), "log": ("path",), "match": ("pattern",), "regex": ("pattern",),
    "regexp": ("pattern",), "grep": ("pattern",), "filter": ("pattern",), "cmd": ("command",),
    "run": ("command",), "exec": ("command",), "shell": ("command",), "ignore": ("exclude",),
    "excludes": ("exclude",), "workdir": ("cwd",), "dir": ("cwd",), "directory": ("cwd",),
    "environment": ("env",), "type": ("provider",), "tool": ("provider",),
}


def did_you_mean(word: str, choices: list[str], label: str = "allowed") -> str:
    """`; did you mean `pattern`?` for a close match, else `; allowed: a, b, c`."""
    close = [c for c in _SAID_ELSEWHERE.get(word.lower(), ()) if c in choices]
    close = close or difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        close = [c for c in choices if c.lower() == word.lower()]
    if close:
        return f"; did you mean `{close[0]}`?"
    return f"; {label}: {', '.join(sorted(choices))}" if choices else ""


def check_schema(tree: Any, report: Reporter) -> None:
    """Report every JSON Schema error of `tree` with its location, value and what is allowed.
    A value that was one whole `${VAR}` where true/false or an integer is wanted becomes one
    when it spells one (`_typed`); else its error says where it came from."""
    errors = list(_validator().iter_errors(tree))
    if report.interpolated and _coerce(errors, tree, report):
        errors = list(_validator().iter_errors(tree))
    for err in errors:
        path = tuple(err.absolute_path)
        for sub_path, message in _translate(err, report):
            ref = report.interpolated.get(path) if not sub_path else None
            read = _READ.get(str(err.validator_value)) if err.validator == "type" else None
            if ref is not None and read is not None:
                message += f"; it is the value of `{ref}`, {read}"
            elif ref is not None:
                message += f" (the value of `{ref}`)"
            report.error(path + sub_path, message)


_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False,
          "FALSE": False}
"""YAML 1.2's booleans (the core schema's spellings)."""


_READ = {"boolean": "which is read as a boolean when it is true or false (True, TRUE, False, "
         "FALSE)", "integer": "which is read as an integer when it is decimal digits (an "
         "optional sign, then 0-9)"}
"""What a whole `${VAR}` value is read as, by the type its key wants."""


def _typed(text: str, types: list[str]) -> bool | int | None:
    """`text` as the boolean or decimal integer it spells, when `types` wants one."""
    if "boolean" in types and text in _BOOLS:
        return _BOOLS[text]
    if "integer" in types and re.fullmatch(r"[-+]?[0-9]+", text):
        try:
            return int(text)
        except ValueError:  # (more digits than Python converts: the string's error stands)
            return None
    return None


def _coerce(errors: list[Any], tree: Any, report: Reporter) -> bool:
    """Set each whole-`${VAR}` string of a type error that `_typed` reads to its value in
    `tree`; whether any was."""
    done = False
    for err in errors:
        path = tuple(err.absolute_path)
        if err.validator != "type" or not isinstance(err.instance, str) or not path \
                or path not in report.interpolated:
            continue
        wanted = err.validator_value
        value = _typed(err.instance, wanted if isinstance(wanted, list) else [wanted])
        if value is None:
            continue
        parent = tree
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = value
        done = True
    return done


def _fitting_branch(err: Any) -> list[Any]:
    """The errors of the one branch of an anyOf/oneOf whose `type` the value has (a mapping
    with an unknown key, for a string-or-mapping): what to say rather than "is not valid under
    any of the given schemas"; [] when no single branch fits."""
    fits = [i for i, branch in enumerate(err.validator_value)
            if isinstance(branch, dict) and "type" in branch
            and _validator().is_type(err.instance, branch["type"])]
    if len(fits) != 1:
        return []
    return [e for e in err.context if e.relative_schema_path and
            e.relative_schema_path[0] == fits[0]]


def _translate(err: Any, report: Reporter) -> list[tuple[tuple[str | int, ...], str]]:
    """(extra path, message) pairs for one jsonschema error (`report`: where it was written)."""
    kind, value, schema = err.validator, err.instance, err.schema
    if kind == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        extras = [k for k in value if k not in allowed]
        return [((k,), f"unknown key `{k}`{did_you_mean(k, allowed)}") for k in extras]
    if kind == "required":
        missing = [k for k in err.validator_value if k not in value]
        return [((k,), "required key is missing") for k in missing]
    if "propertyNames" in err.relative_schema_path and "headers" in err.absolute_path:
        return [((value,), f"{describe_value(value)} is not a valid HTTP header name: use "
                 "letters, digits and !#$%&'*+-.^_`|~ (no spaces, colons or line breaks)")]
    if "propertyNames" in err.relative_schema_path:
        return [((value,), f"`{value}` is not a valid environment variable name: use letters, "
                 "digits and `_`, not starting with a digit")]
    title = schema.get("title")
    if title == "when" and isinstance(value, dict) and isinstance(value.get("threshold"), str):
        return [(("threshold",), f"{describe_value(value['threshold'])} {_TITLED['threshold']}")]
    if kind in ("anyOf", "oneOf", "pattern") and title in _TITLED:
        return [((), f"{describe_value(value)} {_TITLED[title]}")]
    if kind in ("anyOf", "oneOf") and (fitting := _fitting_branch(err)):
        return [(tuple(e.relative_path) + sub, message)
                for e in fitting for sub, message in _translate(e, report)]
    branches = err.validator_value if kind in ("anyOf", "oneOf") else []
    types = [str(b["type"]) for b in branches if isinstance(b, dict)
             and isinstance(b.get("type"), str)]
    if types and len(types) == len(branches) and title not in _TITLED and not any(
            _validator().is_type(value, t) for t in types):
        want = " or ".join(dict.fromkeys(_TYPES.get(t, t) for t in types))
        return [((), f"expected {want}, got {describe_value(value)}")]
    where = list(err.absolute_path)
    if kind == "type" and isinstance(value, str) and where[-1:] == ["command"] \
            and "actions" in where:
        return [((), f"expected a list, got {describe_value(value)}: an exec action runs a "
                 "program with its arguments, never a shell string (write [\"sh\", \"-c\", "
                 "\"…\"] to use a shell on purpose; matched lines come on stdin, never in argv)")]
    if kind == "type":
        types = [str(t) for t in (err.validator_value if isinstance(err.validator_value, list)
                                  else [err.validator_value])]
        want = " or ".join(_TYPES.get(t, t) for t in types)
        hint = bool_hint(report, tuple(err.absolute_path), value) if "boolean" in types else ""
        return [((), f"expected {want}, got {describe_value(value)}{hint}")]
    if kind == "enum":
        choices = [str(c) for c in err.validator_value]
        near = did_you_mean(str(value), choices) if isinstance(value, str) else ""
        near = near if near.startswith("; did you mean") else ""  # (the choices are said)
        return [((), f"{describe_value(value)} is not allowed; expected one of: "
                 f"{', '.join(choices)}{near}")]
    if kind == "minLength":
        return [((), "must not be empty")]
    if kind == "maxLength":
        return [((), f"{describe_value(value)}… is {len(value)} characters long; at most "
                 f"{err.validator_value} are allowed")]
    if kind == "minItems":
        return [((), "must not be an empty list")]
    if kind == "minimum":
        return [((), f"{describe_value(value)} is below the minimum {err.validator_value}")]
    if kind == "uniqueItems":
        return [((), "has duplicate items")]
    if kind == "pattern" and "until" in err.absolute_path:
        return [((), f"{describe_value(value)} is not a completion marker: use output:TEXT, "
                 "event:KIND or status:STATUS")]
    return [((), err.message)]
