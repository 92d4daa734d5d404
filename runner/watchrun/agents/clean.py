"""An agent's record fields made safe to write and show (SPEC §6): text parsed out of a
protocol line cleaned and clipped, envelope names a provider cannot forge; pure."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from watchrun.match.sanitize import clip, sanitize

__all__ = ["FIELD_BYTES", "clean_record", "clean_text", "unreserved"]

FIELD_BYTES = 64 * 1024
"""Default clip of one string field (the runner passes limits.maxLineBytes)."""
_C1 = dict.fromkeys(range(0x80, 0xA0))
_HAS_C1 = re.compile("[\x80-\x9f]")
_RESERVED = frozenset({"schema", "seq", "cursor", "ts", "kind", "turnId"})


def unreserved(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Adapter fields with the names the record envelope (and `turnId`) owns renamed
    `provider_<name>`, so a provider field can never forge them."""
    return {(f"provider_{k}" if k in _RESERVED else k): v for k, v in fields.items()}


def clean_text(text: str, max_bytes: int | None) -> tuple[str, bool]:
    """Text parsed out of a protocol line (or read from a pipe) made safe (SPEC §6).

    C1 controls are removed one by one *before* the escape rules run: a decoded U+009D is common
    mojibake (`â€\u009d` is a mis-decoded right quote) and must not start an OSC string that
    eats the rest of the text. Every other rule is `sanitize`'s: 7-bit ESC sequences, C0
    controls, DEL, `\r` rewrites, clipping on a UTF-8 boundary.
    """
    if _HAS_C1.search(text) is not None:
        text = text.translate(_C1)
    return sanitize(text, max_bytes)


def clean_value(value: Any) -> Any:
    """`value` (JSON: strings, mappings, lists) with every string and key cleaned, unclipped:
    what a text made of it (a tool call's JSON summary) shows, before its escapes hide a
    control character from the cleaning."""
    return _clean(value, None)[0]


def _clean(value: Any, max_bytes: int | None) -> tuple[Any, int]:
    """`value` cleaned and clipped, and the bytes the clips left out."""
    if isinstance(value, str):
        text, clipped = clean_text(value, max_bytes)
        whole = len(clean_text(value, None)[0].encode()) if clipped else 0
        return text, whole - len(text.encode()) if clipped else 0
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        cut = 0
        for key, item in value.items():
            name = clean_text(str(key), max_bytes)[0]
            out[name], one = _clean(item, max_bytes)
            cut += one
        return out, cut
    if isinstance(value, list | tuple):
        items = [_clean(item, max_bytes) for item in value]
        return [v for v, _ in items], sum(c for _, c in items)
    if isinstance(value, float) and not math.isfinite(value):  # json.loads accepts NaN
        return str(value), 0
    return value, 0


def clean_record(kind: str, fields: Mapping[str, Any], max_bytes: int | None
                 ) -> dict[str, Any]:
    """A record's fields as they may be written: every string (keys too, at any depth) cleaned
    by `clean_text` and clipped to `max_bytes` (then `truncated: true`, and `omittedBytes`:
    the bytes of cleaned text the clips left out, added to any the fields say). Two fields keep what
    the agent printed, JSON-escaped on disk and shown only on request: a terminal line's `raw`
    (dropped when cleaning changed nothing but a line-ending `\r`) and a `raw` record's
    `value` (a protocol line that could not be parsed)."""
    out: dict[str, Any] = {}
    cut = 0
    for key, value in fields.items():
        if isinstance(value, str) and (key == "raw" or (kind == "raw" and key == "value")):
            out[key] = value if max_bytes is None else clip(value, max_bytes)[0]
            continue
        out[clean_text(str(key), None)[0]], one = _clean(value, max_bytes)
        cut += one
    if isinstance(out.get("raw"), str) and out["raw"].removesuffix("\r") == out.get("text"):
        del out["raw"]
    if cut:
        out.setdefault("truncated", True)
        if isinstance(out.get("omittedBytes", 0), int):
            out["omittedBytes"] = out.get("omittedBytes", 0) + cut
    return out
