"""`${VAR}`, `${VAR:-default}` and `$$` in config string values, taken from the environment."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from watchrun.config.diagnostics import Reporter
from watchrun.config.handover import code_indexes
from watchrun.config.programcode import program_code
from watchrun.config.shellcode import describe_character, unsafe_character
from watchrun.config.shellwords import contexts, quote
from watchrun.config.tree import CMap, CSeq, KeyPath, Origin, locate

__all__ = ["escape", "interpolate", "interpolate_tree", "references"]

_UNQUOTABLE = (
    "`${{{name}}}` cannot be quoted as one shell word here: it is {where}; write \"$${name}\" "
    "so that the shell expands it from the environment at run time, or use a list command"
)
_UNSAFE = (
    "`${{{name}}}` is in shell code and its value holds {char}: a shell reading the value again "
    "(one named in the command, `eval`) or bash arithmetic (`(( ))`, `[[ … -gt … ]]`, `let`) "
    "could run it as code; pass it as its own element of a list command, which no shell parses "
    "(e.g. [\"git\", \"log\", \"${{{name}}}\"]; after a shell's script, [\"sh\", \"-c\", "
    "\"git log \\\"$1\\\"\", \"sh\", \"${{{name}}}\"]), or write \"$${name}\" so that the shell "
    "reads it from the environment itself (quoting it is then the script's job)"
)
_IN_CODE = (
    "`${{{name}}}` is in {what}: its value would run as code there, and no quoting makes a "
    "value one literal in every language; pass it as an argument of its own after the code and "
    "read it there (sys.argv, @ARGV, ARGV, process.argv; awk: `-v name=${{{name}}}`), or read "
    "it from the environment in the code (os.environ, $ENV{{…}}, ENV[…], process.env, "
    "ENVIRON[…])"
)
_WHOLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")
"""A value that is one reference and nothing else."""
_REF = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|(\{[^}]*\}?))")


def _parse(text: str, env: Mapping[str, str]
           ) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """(template, mark, [(name, value)], problems): `text` with `$$` made `$` and each resolved
    reference replaced by `mark` (a character `text` does not contain)."""
    mark = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text)
    values: list[tuple[str, str]] = []
    problems: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return "$"
        name, default, bad = m.group(2), m.group(3), m.group(4)
        if bad is not None:
            problems.append(
                f"invalid reference `${bad}`: use ${{NAME}} or ${{NAME:-default}} "
                "(NAME is letters, digits and _), or $$ for a literal $"
            )
            return m.group(0)
        value = env.get(name)
        if default is not None and not value:
            value = default
        if value is None:
            problems.append(
                f"environment variable {name} is not set (used as `${{{name}}}`); "
                f"set it or give a default: `${{{name}:-default}}`"
            )
            return m.group(0)
        values.append((name, value))
        return mark

    return _REF.sub(sub, text), mark, values, problems


def references(text: str, env: Mapping[str, str]) -> tuple[str, str, list[tuple[str, str]]]:
    """`text` with each resolved reference replaced by a mark (a character `text` does not
    contain), the mark, and each reference's (name, value) in order (`config/secrets.py`)."""
    template, mark, values, _ = _parse(text, env)
    return template, mark, values


def interpolate(
    text: str, env: Mapping[str, str], *, shell: Literal["sh", "shlex"] | None = None
) -> tuple[str, list[str]]:
    """`text` with references replaced, and a message for each reference that failed.

    `${VAR:-default}` uses the default when VAR is unset or empty (as the shell does); the
    default is literal text up to the first `}`. A `$` not followed by `$` or `{` stays as is.
    With `shell`, `text` is a command read by `/bin/sh -c` (`sh`) or split with shell rules
    (`shlex`), and each substituted value is quoted as one word where it stands
    (`config/shellwords.py`); where it cannot be, the reference is an error. In shell code
    (`sh`) a value holding a character that could run code on a second reading is an error
    too (`config/shellcode.py`).
    """
    template, mark, values, problems = _parse(text, env)
    parts = template.split(mark)
    if shell is None:
        quoted = [value for _, value in values]
    else:
        quoted = []
        for (name, value), where in zip(values, contexts(template, mark, shell), strict=True):
            bad = unsafe_character(value) if shell == "sh" else None
            if where not in ("plain", "double", "single", "comment"):
                problems.append(_UNQUOTABLE.format(name=name, where=where))
                quoted.append(value)
            elif bad is not None:
                problems.append(_UNSAFE.format(name=name, char=describe_character(bad)))
                quoted.append(value)
            else:
                quoted.append(quote(value, where))  # type: ignore[arg-type]
    return parts[0] + "".join(q + part for q, part in zip(quoted, parts[1:], strict=True)), \
        problems


def _argv(items: list[str], env: Mapping[str, str]) -> tuple[list[str], list[list[str]]]:
    """An argv template: each value stays inside its argument; the script of `sh -c SCRIPT`,
    and what `ssh`, `su -c`… hand to a shell, is a command line itself, so there each value is
    quoted as one shell word (in every argument that may be such code, told after
    substitution: a value may name the program); an interpreter's code (`python -c`, awk's
    program: `config/programcode.py`) takes no value."""
    plain = [interpolate(x, env)[0] for x in items]
    scripts = code_indexes(plain)
    done = [interpolate(x, env, shell="sh" if i in scripts else None)
            for i, x in enumerate(items)]
    problems = [p for _, p in done]
    for i, what in program_code(plain).items():  # (an interpreter's code: never a value)
        if i not in scripts:
            problems[i] += [_IN_CODE.format(name=name, what=what)
                            for name, _ in _parse(items[i], env)[2]]
    return [t for t, _ in done], problems


def _split(text: str, env: Mapping[str, str]) -> tuple[list[str], list[str]] | None:
    """An agent's command string split with shell rules *before* substitution, so a value is
    never split (None when the string cannot be split: validation reports that)."""
    template, mark, values, problems = _parse(text, env)
    try:
        args = shlex.split(template)
    except ValueError:
        return None
    pending = iter(values)
    items = ["".join(next(pending)[1] if ch == mark else ch for ch in arg) for arg in args]

    def first_name(i: int) -> str:
        """The name of the first value substituted into argument `i`."""
        return values[sum(arg.count(mark) for arg in args[:i])][0]

    code = next(((i, what) for i, what in program_code(items).items() if mark in args[i]), None)
    if code is not None:
        problems.append(_IN_CODE.format(name=first_name(code[0]), what=code[1]))
    script = next((i for i in code_indexes(items) if mark in args[i]), None)
    if script is not None:
        problems.append(_UNQUOTABLE.format(
            name=first_name(script), where="in shell code inside a command string (a shell's "
            "`-c` script, or what `ssh`, `su -c`, `watch`… hand to a shell; use a list command)"))
    return items, problems


def escape(text: str) -> str:
    """The inverse of `interpolate` for literal text: `$` before `$` or `{` becomes `$$`."""
    return re.sub(r"\$(?=[${])", "$$", text)


def interpolate_tree(node: Any, env: Mapping[str, str], report: Reporter,
                     path: KeyPath = ()) -> Any:
    """Interpolate every string value (not keys) of a config tree in place; returns the node.
    `watchers[].command`, `agents[].command` and an exec action's `command` are commands: see
    `interpolate(shell=…)`."""
    command = (len(path) == 3 and path[0] in ("watchers", "agents") and path[2] == "command") \
        or (len(path) == 5 and path[0] == "watchers" and path[2] == "actions"
            and path[4] == "command")
    if command and (isinstance(node, str) or (isinstance(node, CSeq)
                    and all(isinstance(x, str) for x in node))):
        return _command(node, env, report, path)
    if isinstance(node, CMap):
        for key, value in node.items():
            node[key] = interpolate_tree(value, env, report, (*path, key))
    elif isinstance(node, CSeq):
        for i, value in enumerate(node):
            node[i] = interpolate_tree(value, env, report, (*path, i))
    elif isinstance(node, str) and "$" in node:
        text, problems = interpolate(node, env)
        for problem in problems:
            report.error(path, problem)
        if not problems and _WHOLE.fullmatch(node):
            report.interpolated[path] = node
        return text
    return node


def _command(node: str | CSeq, env: Mapping[str, str], report: Reporter, path: KeyPath) -> Any:
    if isinstance(node, CSeq):
        args, problems = _argv(list(node), env)
        for i, (arg, found) in enumerate(zip(args, problems, strict=True)):
            node[i] = arg
            for problem in found:
                report.error((*path, i), problem)
        return node
    if "$" not in node:
        return node
    if path[0] == "agents":
        split = _split(node, env)
        if split is not None:
            items, found = split
            for problem in found:
                report.error(path, problem)
            seq = CSeq(locate(report.root, path) or Origin(""))
            for item in items:
                seq.put(item, seq.origin)
            return seq
    text, found = interpolate(node, env, shell="sh" if path[0] == "watchers" else "shlex")
    for problem in found:
        report.error(path, problem)
    return text
