"""Read YAML, JSON and TOML config files into position-tracking trees; no validation here."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

from watchrun.config.diagnostics import Reporter
from watchrun.config.tree import CMap, CSeq, Origin
from watchrun.config.yaml_tree import MAX_NODES, TooManyValues, read_yaml

__all__ = ["FORMATS", "config_format", "read_config_file"]

FORMATS: dict[str, str] = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}
"""Config formats by file extension."""

_MAX_BYTES = 16 * 1024**2
"""A config file larger than this is refused (it is surely not a config)."""

_MAX_DEPTH = 64
"""Values nested deeper than this are refused (a config needs about 6 levels); deeper trees
would exhaust the recursion of the parsers and of schema validation."""

def config_format(path: Path) -> str | None:
    """`yaml`, `json` or `toml` from the last known extension (`watch.yaml.example` is YAML)."""
    for suffix in reversed(path.suffixes):
        if suffix.lower() in FORMATS:
            return FORMATS[suffix.lower()]
    return None


def read_config_file(path: Path, display: str, report: Reporter) -> CMap | None:
    """The tree of one config file; None (with an error reported) if it cannot be used.

    An empty file gives an empty CMap: the caller decides whether that is an error.
    """
    top = Origin(display)
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        report.error((), "config file not found", top)
        return None
    except IsADirectoryError:
        report.error((), "is a directory, not a config file", top)
        return None
    except OSError as exc:
        report.error((), f"cannot read config file: {exc.strerror or exc}", top)
        return None
    if len(data) > _MAX_BYTES:
        report.error((), f"config file is larger than {_MAX_BYTES // 1024**2} MiB", top)
        return None
    fmt = config_format(path)
    if fmt is None:
        report.error((), f"unknown config format {path.suffix or '(no extension)'!r}: name the "
                     "file .yaml, .yml, .json or .toml (or e.g. .yaml.example)", top)
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        report.error((), f"not UTF-8 text: invalid byte 0x{data[exc.start]:02x}",
                     Origin(display, line))
        return None
    errors = len(report.errors)
    try:
        tree = {"yaml": read_yaml, "json": _read_json, "toml": _read_toml}[fmt](
            text, display, report
        )
    except TooManyValues:
        report.error((), f"too many values (more than {MAX_NODES}); is it an alias bomb?", top)
        return None
    except RecursionError:
        tree = _DEEP
    if tree is _DEEP or _too_deep(tree):
        report.error((), f"values are nested more than {_MAX_DEPTH} levels deep", top)
        return None
    if tree is None:
        return None if len(report.errors) > errors else CMap(top)
    if not isinstance(tree, CMap):
        kind = "a list" if isinstance(tree, list) else f"the value {tree!r}"
        report.error((), f"the top level must be a mapping of keys (limits, output, watchers, "
                     f"agents), not {kind}", top)
        return None
    return tree


_DEEP = object()


def _too_deep(tree: Any) -> bool:
    """Whether any value is nested more than _MAX_DEPTH levels (checked without recursion)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


def _read_json(text: str, display: str, report: Reporter) -> Any:
    if not text.strip():
        return None
    dupes: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                dupes.append(key)
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        report.error((), f"JSON syntax error: {exc.msg}", Origin(display, exc.lineno, exc.colno))
        return None
    for key in dupes:
        report.error((), f"duplicate key `{key}` in a JSON object; remove one of them",
                     Origin(display))
    return _attach(data, Origin(display), _json_positions(text), display)


def _json_positions(text: str) -> Any:
    """The composed YAML node tree of JSON text (JSON is YAML), for line numbers; or None."""
    import yaml

    try:
        return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None


def _attach(data: Any, origin: Origin, node: Any, display: str) -> Any:
    """Convert parsed JSON/TOML into CMap/CSeq, taking positions from `node` when it has them."""

    def at(n: Any) -> Origin:
        mark = getattr(n, "start_mark", None)
        return Origin(display, mark.line + 1, mark.column + 1) if mark else Origin(display)

    if isinstance(data, datetime.date | datetime.time):
        return data.isoformat()  # TOML dates become strings, as YAML timestamps do
    if isinstance(data, dict):
        out = CMap(origin)
        keyed = {}
        if node is not None and node.tag.endswith(":map"):
            keyed = {str(k.value): (k, v) for k, v in node.value}
        for key, value in data.items():
            knode, vnode = keyed.get(key, (None, None))
            out.put(key, _attach(value, at(knode), vnode, display), at(knode))
        return out
    if isinstance(data, list):
        seq = CSeq(origin)
        items = node.value if node is not None and node.tag.endswith(":seq") else []
        for i, value in enumerate(data):
            inode = items[i] if i < len(items) else None
            seq.put(_attach(value, at(inode), inode, display), at(inode))
        return seq
    return data


def _read_toml(text: str, display: str, report: Reporter) -> Any:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = Origin(display, int(m.group(1)), int(m.group(2))) if m else Origin(display)
        problem = re.sub(r" \(at line.*", "", msg)
        report.error((), f"TOML syntax error: {problem}", where)
        return None
    if not data:
        return None
    return _attach(data, Origin(display), None, display)
