"""Config values that are text, never bytes for the system: no lone surrogate in them."""

from __future__ import annotations

import json
from typing import Any

from watchrun.config.diagnostics import Reporter
from watchrun.config.tree import KeyPath

__all__ = ["TEXTS", "lone_surrogate"]

TEXTS = {"url": "a webhook's URL, sent in an HTTP request,",
         "headers": "a webhook's header, sent in an HTTP request,",
         "prompt": "a prompt, given to the model and written in the records,",
         "until": "a completion marker, compared with the agent's output,"}
"""The keys of a watcher, an agent or an action that are text, and what each becomes.

A path, a command, `cwd` and an `env` value reach the system as bytes (`os.fsencode`), so
they may hold a file name's undecodable bytes (U+DC80-U+DCFF), and so may a `label` (a path's
or a command's by default), which every surface shows with U+FFFD for them; these cannot
(patterns and `redact:` are refused where they compile, names and enums by the schema)."""


def lone_surrogate(report: Reporter, path: KeyPath, node: Any, what: str) -> bool:
    """Report a string under `node` (`what` it becomes: `TEXTS`) that holds a lone surrogate:
    a file name's undecodable byte (U+DC80-U+DCFF, which a YAML `"\\uDCFF"`, JSON or a
    `${VAR}` of the environment can give) or another (JSON's `"\\ud800"`). Sent, shown or
    written as JSON, it would fail at every use. True when one was reported."""
    if isinstance(node, str):
        at = next((i for i, c in enumerate(node) if "\ud800" <= c <= "\udfff"), None)
        if at is None:
            return False
        code = ord(node[at])
        byte = f" (the stand-in for an undecodable byte, 0x{code - 0xDC00:02X})" \
            if 0xDC80 <= code <= 0xDCFF else ""
        report.error(path, f"{json.dumps(node)[:200]} holds U+{code:04X} at character {at}, "
                     f"a lone surrogate{byte}: {what} is text, which cannot hold one (only a "
                     "path, a command, `cwd` or an `env` value, given to the system as bytes, "
                     "may); write it in UTF-8")
        return True
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    return any([lone_surrogate(report, (*path, key), value, what) for key, value in items])
