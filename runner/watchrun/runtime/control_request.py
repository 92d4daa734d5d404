"""A control request's text read as one JSON object: at most MAX_DEPTH objects and arrays deep,
no key given twice; what is refused says why (`Refused`, its code the reply's)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "Refused", "parse"]

MAX_DEPTH = 32


class Refused(Exception):
    """A request refused before it is carried out: `code` and the message say why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse(data: bytes) -> dict[str, Any]:
    """The request: a JSON object, at most MAX_DEPTH objects and arrays deep, no key twice (the
    last one would win without a word: `"id": "a", "id": "b"` stopped `b`)."""
    try:
        request = json.loads(data, object_pairs_hook=_once_each)
    except RecursionError:
        raise Refused("bad_request", f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except _Twice as exc:
        raise Refused("bad_request", str(exc)) from None
    except ValueError as exc:
        raise Refused("bad_request", f"not JSON: {exc}") from None
    if _depth(request) > MAX_DEPTH:
        raise Refused("bad_request", f"JSON nested deeper than {MAX_DEPTH} levels")
    if not isinstance(request, dict):
        raise Refused("bad_request", "a request is a JSON object")
    return request


class _Twice(ValueError):
    """A key given twice in one JSON object."""


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(f"the key {key!r} is given twice")
        out[key] = value
    return out


def _depth(value: Any) -> int:
    """How many objects and arrays deep `value` is (a scalar: 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest
