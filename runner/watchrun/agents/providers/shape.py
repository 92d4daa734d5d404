"""Reading a protocol line's fields: lenient readers; `Shape` notes any of the wrong JSON type."""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable
from datetime import UTC, datetime
from typing import Any

__all__ = ["Shape", "as_count", "as_dict", "as_list", "as_str", "epoch_to_iso", "json_type"]


def json_type(value: Any) -> str:
    """The JSON name of `value`'s type (`object`, `array`, `string`, `number`, …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class Shape:
    """The problems of the line being handled. A field read through it that is present but of
    the wrong type reads as absent and is noted; `JsonAdapter.parse` then keeps the line as a
    `raw` record (`malformed-event`, the notes as its `error`) besides whatever the rest of
    the line gave, so a line is never lost because one of its fields changed shape. A
    missing (or null) field is not a problem unless it is `required`."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def _wrong(self, value: Any, what: str, want: str, required: bool) -> None:
        if value is not None or required:
            self.problems.append(f"{what}: expected {want}, got {json_type(value)}")

    def obj(self, value: Any, what: str, *, required: bool = False) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        self._wrong(value, what, "an object", required)
        return {}

    def items(self, value: Any, what: str, *, required: bool = False) -> list[Any]:
        if isinstance(value, list):
            return value
        self._wrong(value, what, "an array", required)
        return []

    def known(self, value: Any, known: Collection[Any], what: str) -> bool:
        """Whether `value` is one of the `known` (a content block's type, say); noted if not,
        so a line whose text sits under a new kind is kept `raw`, never lost (an array or an
        object is none: it has no hash to look up)."""
        if isinstance(value, Hashable) and value in known:
            return True
        self.problems.append(f"{what}: expected a known one, got {value!r}")
        return False

    def text(self, value: Any, what: str, *, required: bool = False) -> str | None:
        """A non-empty string; "" reads as absent and is no problem."""
        if isinstance(value, str):
            return value or None
        self._wrong(value, what, "a string", required)
        return None


def as_dict(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else {} (protocol fields are never trusted)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else []."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    """`value` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def as_count(value: Any) -> int | None:
    """A non-negative integer protocol field (floats rounded), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 \
            and math.isfinite(value):  # json.loads reads Infinity: round() would raise
        return round(value)
    return None


def epoch_to_iso(value: Any) -> str | None:
    """Epoch seconds (or milliseconds) or an ISO string as an ISO-8601 UTC timestamp."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 \
            and value < 10**15:  # Infinity, or past any date: no timestamp
        seconds = value / 1000 if value > 10**11 else value
        stamp = datetime.fromtimestamp(seconds, UTC)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None
