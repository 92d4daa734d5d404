"""The raw config tree: dicts and lists that remember which file, line and column set each key."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec import Struct

__all__ = ["CMap", "CSeq", "KeyPath", "Origin", "format_path", "locate"]

KeyPath = tuple[str | int, ...]
"""A location in the tree: keys and list indexes, e.g. ("watchers", 2, "pattern")."""


class Origin(Struct, frozen=True):
    """Where a value was written: the config file as given, and 1-based line and column."""

    file: str
    line: int | None = None
    column: int | None = None

    @classmethod
    def at(cls, file: str, text: str, pos: int) -> Origin:
        """Where character `pos` of `text` (the file's whole text) is, counting only `\\n` as
        a line break."""
        return cls(file, text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos))


class CMap(dict[str, Any]):
    """A mapping from a config file; `origins[key]` is where that key was written."""

    __slots__ = ("origin", "origins")

    def __init__(self, origin: Origin) -> None:
        super().__init__()
        self.origin = origin
        self.origins: dict[str, Origin] = {}

    def put(self, key: str, value: Any, origin: Origin) -> None:
        self[key] = value
        self.origins[key] = origin


class CSeq(list[Any]):
    """A list from a config file; `origins[i]` is where item i was written."""

    __slots__ = ("origin", "origins")

    def __init__(self, origin: Origin) -> None:
        super().__init__()
        self.origin = origin
        self.origins: list[Origin] = []

    def put(self, value: Any, origin: Origin) -> None:
        self.append(value)
        self.origins.append(origin)


def format_path(path: Iterable[str | int]) -> str:
    """`("watchers", 2, "pattern")` → `watchers[2].pattern`; the empty path is ``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def locate(root: Any, path: KeyPath) -> Origin | None:
    """The origin of the deepest part of `path` that exists in `root`."""
    node = root
    found: Origin | None = getattr(root, "origin", None)
    for part in path:
        if isinstance(node, CMap) and isinstance(part, str) and part in node:
            found = node.origins.get(part, found)
            node = node[part]
        elif isinstance(node, CSeq) and isinstance(part, int) and 0 <= part < len(node):
            found = node.origins[part]
            node = node[part]
        else:
            break
    return found
