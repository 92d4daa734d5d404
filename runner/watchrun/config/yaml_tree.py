"""YAML text into a position-tracking tree (CMap/CSeq) with YAML 1.2 scalars: `yes` stays a
string, `0o17` is an int, merge keys apply, duplicate keys and other tags are errors."""

from __future__ import annotations

import re
from typing import Any

from watchrun.config.diagnostics import Reporter
from watchrun.config.numbers import TooLong, read_int
from watchrun.config.tree import CMap, CSeq, KeyPath, Origin, locate

MAX_NODES = 200_000
"""More values than this (an alias bomb) is refused rather than expanded."""

_YAML = "tag:yaml.org,2002:"

_YAML11_BOOLS = frozenset({"yes", "no", "on", "off", "y", "n"})
"""Booleans to YAML 1.1 (and PyYAML), strings to YAML 1.2 and so to watchrun."""


PLAIN_BOOL_HINT = " (write true or false)"
"""`bool_hint` where no unquoted YAML scalar was read (a quoted one, JSON, a control request)."""


def bool_hint(report: Reporter, path: KeyPath, value: object) -> str:
    """What to add to an error where true or false would do and `value` is a string such as
    `yes`: the YAML 1.2 note only where an unquoted YAML scalar was read (`fromStart: yes`),
    plain advice for a quoted one, JSON, TOML or an interpolated value; else nothing."""
    if not isinstance(value, str) or value.lower() not in _YAML11_BOOLS:
        return ""
    if locate(report.root, path) in report.yaml_words:
        return " (unquoted yes/no/on/off are strings in YAML 1.2: write true or false)"
    return PLAIN_BOOL_HINT


_ODD_BREAK = re.compile("[\x85\u2028\u2029]")
"""Line breaks to YAML 1.1 (and PyYAML), ordinary characters to YAML 1.2: refused unescaped."""


def _unescaped(char: str, why: str) -> str:
    return (f"YAML syntax error: character U+{ord(char):04X} as itself ({why}); write it as "
            f"\\u{ord(char):04x} inside a double-quoted string")


class TooManyValues(Exception):
    """More than MAX_NODES values: the caller reports it."""


_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A `\\u` escape of a surrogate (U+D800-U+DFFF), which libyaml refuses."""

_BYTE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][cC][89a-fA-F][0-9a-fA-F]")
"""One of U+DC80-U+DCFF: a file name's undecodable byte, as `watchrun config` writes it."""


def read_yaml(text: str, display: str, report: Reporter) -> Any:
    """The tree of YAML `text`. A document whose only surrogate escapes are of a file name's
    undecodable bytes (`"\\uDCFF"`) is read with PyYAML's own loader, which takes them (as
    PyYAML's `safe_load` and JSON do); libyaml refuses every surrogate escape, and keeps
    refusing the others."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    escapes = _SURROGATE_ESCAPE.findall(text) if "\\" in text else []
    if escapes and all(_BYTE_ESCAPE.fullmatch(e) for e in escapes):
        loader = yaml.SafeLoader
    odd = _ODD_BREAK.search(text)
    if odd is not None:
        report.error((), _unescaped(text[odd.start()], "PyYAML would read it as a line break"),
                     Origin.at(display, text, odd.start()))
        return None
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "syntax error"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        lines = text.splitlines()
        line = lines[mark.line] if mark is not None and mark.line < len(lines) else ""
        if mark is not None and "\t" in line[: mark.column + 1]:
            problem += "; YAML does not allow tabs for indentation"
        where = Origin(display, mark.line + 1, mark.column + 1) if mark else Origin(display)
        report.error((), f"YAML syntax error: {problem}", where)
        return None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, unescaped
        report.error((), _unescaped(chr(exc.character), "YAML does not allow it")
                     if isinstance(exc.character, int) else f"YAML error: {exc.reason}",
                     Origin.at(display, text, exc.position))
        return None
    except yaml.YAMLError as exc:
        report.error((), f"YAML error: {exc}", Origin(display))
        return None
    if node is None:
        return None
    return _YamlBuilder(display, report).build(node, ())


class _YamlBuilder:
    """Builds CMap/CSeq from composed YAML nodes with YAML 1.2 scalars (`yes` is a string)."""

    def __init__(self, display: str, report: Reporter) -> None:
        self.display = display
        self.report = report
        self.count = 0

    def origin(self, node: Any) -> Origin:
        return Origin(self.display, node.start_mark.line + 1, node.start_mark.column + 1)

    def build(self, node: Any, path: tuple[str | int, ...]) -> Any:
        import yaml

        self.count += 1
        if self.count > MAX_NODES:
            raise TooManyValues
        if not isinstance(node, yaml.ScalarNode) and node.tag not in (_YAML + "map",
                                                                     _YAML + "seq"):
            self.report.error(path, f"unsupported YAML tag {node.tag!r}", self.origin(node))
        if isinstance(node, yaml.MappingNode):
            out = CMap(self.origin(node))
            self._fill_map(out, node, path, set())
            return out
        if isinstance(node, yaml.SequenceNode):
            seq = CSeq(self.origin(node))
            for i, item in enumerate(node.value):
                seq.put(self.build(item, (*path, i)), self.note(item, self.origin(item)))
            return seq
        return self.scalar(node, path)

    def _fill_map(self, out: CMap, node: Any, path: tuple[str | int, ...], own: set[str]) -> None:
        import yaml

        merges = [v for k, v in node.value if k.tag == _YAML + "merge"]
        for merged in merges:  # `<<: *base` keys come first; the mapping's own keys override
            for part in merged.value if isinstance(merged, yaml.SequenceNode) else [merged]:
                if isinstance(part, yaml.MappingNode):
                    self._fill_map(out, part, path, set())
        for knode, vnode in node.value:
            if knode.tag == _YAML + "merge":
                continue
            if not isinstance(knode, yaml.ScalarNode):
                self.report.error(path, "mapping keys must be plain strings",
                                  self.origin(knode))
                continue
            key = str(knode.value)
            if key in own:
                first = out.origins[key]
                self.report.error((*path, key), f"duplicate key `{key}` (first set at line "
                                  f"{first.line}); remove one of them", self.origin(knode))
            own.add(key)
            out.put(key, self.build(vnode, (*path, key)), self.note(vnode, self.origin(knode)))

    def note(self, node: Any, origin: Origin) -> Origin:
        """`origin`, where `node`'s value is put; noted when it is an unquoted YAML 1.1 boolean
        other than true/false."""
        if isinstance(node.value, str) and not node.style \
                and node.value.lower() in _YAML11_BOOLS:
            self.report.yaml_words.add(origin)
        return origin

    def scalar(self, node: Any, path: tuple[str | int, ...]) -> Any:
        tag, value = node.tag, node.value
        if not tag.startswith(_YAML):
            self.report.error(path, f"unsupported YAML tag {tag!r}", self.origin(node))
            return value
        kind = tag[len(_YAML) :]
        if kind == "null":
            return None
        if kind == "bool":
            return {"true": True, "false": False}.get(value.lower(), value)
        if len(path) > 1 and path[-2] == "env" and kind in ("int", "float", "str"):
            return value  # an environment value is a string: `1.10`, `0022` as written
        if kind == "int":
            return _yaml_int(value)
        if kind == "float":
            return _yaml_float(value)
        if kind == "str" and not node.style and re.fullmatch(r"0o[0-7]+", value):
            return read_int(value, 8)  # YAML 1.2's octal: PyYAML's 1.1 resolver calls it a string
        if kind == "str" and not node.style and re.fullmatch(_FLOAT12, value) \
                and re.search(r"[.eE]", value):
            return float(value)  # YAML 1.2: `1e3`, `1.0e3` (1.1 wants a dot, a signed exponent)
        if kind in ("str", "timestamp"):
            return value
        self.report.error(path, f"unsupported YAML type !!{kind}", self.origin(node))
        return value


def _yaml_int(text: str) -> int | str | TooLong:
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return read_int(text)
    if re.fullmatch(r"0x[0-9a-fA-F]+|0o[0-7]+", text):
        return read_int(text, 0)
    return text  # YAML 1.1's `1_000`, `0b11`, sexagesimal `1:30` and `-0x1F` stay strings


_FLOAT12 = r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
"""YAML 1.2's core schema float (without .inf and .nan)."""


def _yaml_float(text: str) -> float | str:
    special = {".inf": "inf", "+.inf": "inf", "-.inf": "-inf", ".nan": "nan"}
    if text.lower() in special:
        return float(special[text.lower()])
    if re.fullmatch(_FLOAT12, text):
        return float(text)
    return text  # YAML 1.1's `1_000.5` and `190:20:30.15` stay strings
