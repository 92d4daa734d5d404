"""`${VAR}`, `${VAR:-default}` and `$$` in config string values, taken from the environment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from watchrun.config.diagnostics import Reporter
from watchrun.config.tree import CMap, CSeq, KeyPath

__all__ = ["escape", "interpolate", "interpolate_tree"]

_REF = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|(\{[^}]*\}?))")


def interpolate(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """`text` with references replaced, and a message for each reference that failed.

    `${VAR:-default}` uses the default when VAR is unset or empty (as the shell does); the
    default is literal text up to the first `}`. A `$` not followed by `$` or `{` stays as is.
    """
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
            return default
        if value is None:
            problems.append(
                f"environment variable {name} is not set (used as `${{{name}}}`); "
                f"set it or give a default: `${{{name}:-default}}`"
            )
            return m.group(0)
        return value

    return _REF.sub(sub, text), problems


def escape(text: str) -> str:
    """The inverse of `interpolate` for literal text: `$` before `$` or `{` becomes `$$`."""
    return re.sub(r"\$(?=[${])", "$$", text)


def interpolate_tree(node: Any, env: Mapping[str, str], report: Reporter,
                     path: KeyPath = ()) -> Any:
    """Interpolate every string value (not keys) of a config tree in place; returns the node."""
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
        return text
    return node
