"""One watcher added to a live runner (`watchrun add`, the control socket's `add`): checked by the
config's own schema and semantic checks, against the running config's agents and limits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from watchrun.config.checks import Ctx
from watchrun.config.diagnostics import Diagnostic, Reporter
from watchrun.config.model import Config, WatcherSpec
from watchrun.config.tree import CMap, CSeq, Origin
from watchrun.config.watchers import build_watchers

__all__ = ["ADDED", "check_added"]

ADDED = "(added)"
"""The stand-in file name of an added watcher: it comes from a request, not a config file."""


def check_added(raw: Any, config: Config) -> tuple[WatcherSpec | None, list[Diagnostic]]:
    """The spec of `raw` (a config-shaped watcher, camelCase keys), or None, and every
    diagnostic (errors and warnings). It is checked as the only item of a config's `watchers`,
    so a problem reads exactly as `watchrun validate` would put it (`watchers[0].pattern: …`).

    Paths must be absolute: a relative one would be resolved against the folder of a config
    file the request did not come from (the client resolves against its current directory).
    A command without `cwd` runs in the folder of the runner's first config file."""
    report = Reporter()
    origin = Origin(ADDED)
    root, items = CMap(origin), CSeq(origin)
    items.put(_tree(raw, origin), origin)
    root.put("watchers", items, origin)
    report.root = root
    from watchrun.config.schema import check_schema  # its imports: only when an add comes

    check_schema(root, report)
    for key, value in _paths(raw):
        if isinstance(value, str) and value and not os.path.isabs(value):
            report.error(("watchers", 0, *key), f"{value!r} is not an absolute path: a "
                         "watcher added to a live runner names files by absolute path "
                         "(`watchrun add` resolves a relative one against its current "
                         "directory)")
    folder = config.sources[0].parent if config.sources else Path(config.output.dir).parent
    ctx = Ctx(root, {ADDED: folder}, report)
    specs = build_watchers(ctx, items, [a.name for a in config.agents], config.limits,
                           config.output.dir)
    found = [msgspec.structs.replace(d, file=None, line=None, column=None)
             for d in report.finish([ADDED], strict=False)]
    if any(d.severity == "error" for d in found) or not specs:
        return None, found
    return specs[0], found


def _paths(raw: Any) -> list[tuple[tuple[str | int, ...], Any]]:
    """(key path, value) of every path of an added watcher: its `path` and `cwd`, and the
    `cwd` of each of its actions (an exec action's folder)."""
    if not isinstance(raw, dict):
        return []
    found: list[tuple[tuple[str | int, ...], Any]] = [(("path",), raw.get("path")),
                                                      (("cwd",), raw.get("cwd"))]
    actions = raw.get("actions")
    for i, action in enumerate(actions if isinstance(actions, list) else []):
        if isinstance(action, dict):
            found.append((("actions", i, "cwd"), action.get("cwd")))
    return found


def _tree(value: Any, origin: Origin) -> Any:
    """A JSON value as the position-tracking tree the checks read (every node at `origin`)."""
    if isinstance(value, dict):
        node = CMap(origin)
        for key, item in value.items():
            node.put(str(key), _tree(item, origin), origin)
        return node
    if isinstance(value, list):
        seq = CSeq(origin)
        for item in value:
            seq.put(_tree(item, origin), origin)
        return seq
    return value
