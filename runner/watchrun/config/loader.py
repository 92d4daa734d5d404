"""Read YAML, JSON and TOML config files into position-tracking trees; no validation here."""

from __future__ import annotations

import datetime
import errno
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from watchrun.config.diagnostics import Reporter
from watchrun.config.numbers import (
    TooLong,
    huge,
    read_int,
    short_number,
    too_long,
    too_long_message,
)
from watchrun.config.tree import CMap, CSeq, KeyPath, Origin
from watchrun.config.yaml_tree import MAX_NODES, TooManyValues, read_yaml

__all__ = [
    "FORMATS",
    "NotAFile",
    "config_format",
    "file_kind",
    "read_config_file",
    "read_regular",
]

FORMATS: dict[str, str] = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}
"""Config formats by file extension."""

MAX_BYTES = 16 * 1024**2
"""A config file larger than this is refused (it is surely not a config)."""

_MAX_DEPTH = 64
"""Values nested deeper than this are refused (a config needs about 6 levels); deeper trees
would exhaust the recursion of the parsers and of schema validation."""

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a named pipe (FIFO)",
          stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device"}


def file_kind(mode: int) -> str:
    """What a file of `mode` that is not a regular file is: `a directory`, `a named pipe
    (FIFO)`, `a socket`, ..."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


class NotAFile(OSError):
    """A config path names something other than a regular file; `strerror` says what."""

    def __init__(self, mode: int) -> None:
        super().__init__(f"is {file_kind(mode)}, not a config file")


_CHUNK = 64 * 1024
"""A config is read this much at a time: `read(limit)` allocated the whole limit (16 MiB) for a
100-byte file, and under a tight memory limit that was a MemoryError."""


def read_regular(path: Path, limit: int = -1) -> bytes:
    """The regular file at `path` (a symlink is followed), up to `limit` bytes when one is
    given (read in chunks: memory for what is there, not for the limit); NotAFile for anything
    else. It is opened without blocking, so a FIFO cannot hang the caller."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # (a socket, say: no file to open)
            raise
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise exc from None
        raise (NotAFile(mode) if not stat.S_ISREG(mode) else exc) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotAFile(mode)
        chunks: list[bytes] = []
        left = limit
        while left and (chunk := os.read(fd, _CHUNK if left < 0 else min(left, _CHUNK))):
            chunks.append(chunk)
            left = left - len(chunk) if left > 0 else left
        return b"".join(chunks)
    finally:
        os.close(fd)


def config_format(path: Path) -> str | None:
    """`yaml`, `json` or `toml` from the last known extension (`watch.yaml.example` is YAML)."""
    for suffix in reversed(path.suffixes):
        if suffix.lower() in FORMATS:
            return FORMATS[suffix.lower()]
    return None


def read_config_file(path: Path, display: str, report: Reporter,
                     data: bytes | None = None) -> CMap | None:
    """The tree of one config file (of `data`, its contents read already, when given); None
    (with an error reported) if it cannot be used.

    An empty file gives an empty CMap: the caller decides whether that is an error.
    """
    top = Origin(display)
    try:
        data = read_regular(path, MAX_BYTES + 1) if data is None else data
    except FileNotFoundError:
        report.error((), "config file not found", top)
        return None
    except NotAFile as exc:
        report.error((), str(exc), top)
        return None
    except OSError as exc:
        report.error((), f"cannot read config file: {exc.strerror or exc}", top)
        return None
    if len(data) > MAX_BYTES:
        report.error((), f"config file is larger than {MAX_BYTES // 1024**2} MiB", top)
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
    if _report_too_long(tree, report):
        return None
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


def _report_too_long(tree: Any, report: Reporter) -> bool:
    """Report every integer with more digits than Python reads or prints; True if any."""
    found = False
    stack: list[tuple[Any, KeyPath, Origin | None]] = [(tree, (), None)]
    while stack:
        node, path, origin = stack.pop()
        if isinstance(node, int) and not isinstance(node, bool) and too_long(node):
            node = huge(node)
        if isinstance(node, TooLong):
            report.error(path, too_long_message(node), origin)
            found = True
        elif isinstance(node, CMap):
            stack.extend((v, (*path, k), node.origins.get(k)) for k, v in node.items())
        elif isinstance(node, CSeq):
            stack.extend((v, (*path, i), node.origins[i]) for i, v in enumerate(node))
    return found


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
        data = json.loads(text, object_pairs_hook=pairs, parse_int=read_int)
    except json.JSONDecodeError as exc:
        msg = exc.msg
        if msg.startswith("Invalid control character") and exc.pos < len(text):
            msg = (f"control character U+{ord(text[exc.pos]):04X} inside a string; JSON allows "
                   f"it only escaped, as \\u{ord(text[exc.pos]):04x}")
        report.error((), f"JSON syntax error: {msg}", Origin(display, exc.lineno, exc.colno))
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
    except ValueError:  # an integer with more digits than Python converts
        limit = sys.get_int_max_str_digits()
        long = next((m for m in _DIGITS.finditer(text) if len(m[0].replace("_", "")) > limit),
                    None)
        if long is None:
            report.error((), f"an integer has more than the {limit} digits allowed",
                         Origin(display))
        else:  # (TOML values carry no positions: the number's own is given instead)
            report.error((), too_long_message(TooLong(short_number(long[0]))),
                         Origin.at(display, text, long.start()))
        return None
    if not data:
        return None
    return _attach(data, Origin(display), None, display)


_DIGITS = re.compile(r"(?<![\w.])[0-9](?:_?[0-9])*")
"""A decimal integer of TOML (not the digits of a hex number or of a fraction)."""
