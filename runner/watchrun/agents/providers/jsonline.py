"""A protocol line's JSON, refused when it nests deeper than a record can hold."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "TooDeep", "load_json"]

MAX_DEPTH = 128
"""Arrays and objects nested deeper than this are refused: a record line holds at most 254
levels (orjson's limit; past it the stdlib encoder recurses, which deep enough raises
RecursionError), and an observation may put a value a few levels deeper than the line did."""


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH (or than json.loads can recurse)."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels")


def load_json(text: str) -> Any:
    """`json.loads(text)`; ValueError when it is not JSON, `TooDeep` when it nests too deep."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper(value, MAX_DEPTH):
        raise TooDeep
    return value


def _deeper(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays and objects more than `limit` levels deep (no recursion)."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = (
        [(value, 1)] if isinstance(value, dict | list) else [])
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        items = item.values() if isinstance(item, dict) else item
        stack.extend((x, depth + 1) for x in items if isinstance(x, dict | list))
    return False
