"""Record encoding (SPEC §4): orjson, with the escapes the record contract adds to JSON.

Every record is one line of UTF-8 JSON. Beyond what JSON escapes itself (`"`, `\\` and C0
controls), DEL, the C1 controls, U+2028/U+2029 and the bidi controls (`plain.MARKS`) are
written as `\\u` escapes, so no record looks like two lines to a reader that splits on Unicode
line breaks (`str.splitlines`, JavaScript), no record byte can drive a terminal that `cat`s the
file and none reorders what it shows (`tail -f` of a line with U+202E); `json.loads` still
returns the same values. The encoder does this, not a rewrite of its output: orjson's bytes
are only searched for those characters (`in`, in C), and the rare record that holds one is
encoded again with each string that needs an escape encoded as ASCII-only JSON and handed to
orjson as a fragment. Text fields are sanitized first (SPEC §6), so in practice only `raw`
fields, U+2028/U+2029 and bidi controls take that path; match records of plain lines
(`plain.plain_text`) never need it.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from watchrun.match.plain import MARKS, MARKS_UTF8

__all__ = ["batch_end", "batch_ends", "dumps", "escape_marks", "json_str", "plain_bodies",
           "safe_str", "valid_unicode", "valid_value"]

_UNSAFE = re.compile(f"[\x7f-\x9f{MARKS}\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_C1 = re.compile(b"\xc2[\x80-\x9f]")
_MARK_BYTES = re.compile(b"\x7f|\xc2[\x80-\x9f]|" + MARKS_UTF8.pattern)
_NEWLINE = orjson.OPT_APPEND_NEWLINE


def _unsafe(text: str) -> bool:
    if text.isascii():
        return "\x7f" in text
    return _UNSAFE.search(text) is not None


def valid_unicode(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD. Python keeps a byte of a file name or
    an environment value that is not UTF-8 as one (`\\udcff`); JSON would carry it as an
    escape that strict parsers (Rust's serde_json, so Vector) refuse. As SPEC §6 does for a
    line's invalid bytes, it becomes U+FFFD (the record's inode still says which file)."""
    return _SURROGATE.sub("\ufffd", text)


def _escaped(text: str) -> bytes:
    """`text` as ASCII-only JSON: every non-ASCII character (C1, U+2028/U+2029) is a `\\u`
    escape, and so is DEL, which JSON leaves alone; a lone surrogate is U+FFFD."""
    return json.dumps(valid_unicode(text)).replace("\x7f", "\\u007f").encode("ascii")


def json_str(text: str) -> bytes:
    """`text` as a JSON string (with its quotes) carrying the record escapes."""
    if _unsafe(text):
        return _escaped(text)
    return orjson.dumps(text)


def safe_str(text: str) -> bytes:
    """`json_str` for text known to need no record escape (see `plain.plain_text`)."""
    return orjson.dumps(text)


def plain_bodies(utf8: bytes) -> list[bytes]:
    """The JSON strings of the lines of `utf8` (valid UTF-8, lines joined by newlines), without
    their quotes, for lines with no control character but tab (`plain.plain_text`): `\\`,
    `"` and tab escaped as orjson escapes them, the rest as it is; in C over all the lines at
    once, on the bytes (those three are ASCII, never part of a longer UTF-8 sequence; a line
    with another control comes out unescaped: the caller encodes it alone)."""
    escaped = utf8.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\t", b"\\t")
    return escaped.split(b"\n")


def _safe(value: Any) -> Any:
    """`value` with every string that needs a record escape replaced by its encoding."""
    if isinstance(value, str):
        return orjson.Fragment(_escaped(value)) if _unsafe(value) else value
    if isinstance(value, dict):
        if not all(isinstance(k, str) and not _unsafe(k) for k in value):
            raise _Unsafe
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not valid JSON")
    return value


class _Unsafe(Exception):
    """A dict key that is not a string or needs an escape: the stdlib encodes that record."""


def dumps(record: Mapping[str, Any]) -> bytes:
    """One record line, with its newline. Raises TypeError for a value JSON cannot hold and
    ValueError for NaN or an infinity, as `json.dumps(..., allow_nan=False)` does.

    Most records hold no character that needs a record escape; orjson's output says so at the
    cost of a few tests in C (DEL, the UTF-8 of C1 and of `MARKS` can only be inside
    strings there). A record that may hold one is encoded again, every string that needs an
    escape handed to orjson as an escaped fragment."""
    try:
        out = orjson.dumps(record, option=_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS)
    except orjson.JSONEncodeError:  # a lone surrogate, a non-string key, an integer past 64 bits
        return _careful(record)
    if b"\x7f" in out or (not out.isascii() and (MARKS_UTF8.search(out) is not None or (
            b"\xc2" in out and _C1.search(out) is not None))):  # fmt: skip
        return _careful(record)
    if b"null" in out:
        _finite(record)  # orjson writes NaN and infinities as null: refuse them, as JSON does
    return out


def _finite(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not valid JSON")
    if isinstance(value, dict):
        for v in value.values():
            _finite(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _finite(v)


def _careful(record: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(_safe(dict(record)), option=_NEWLINE)
    except (_Unsafe, orjson.JSONEncodeError):  # an odd key, an integer past 64 bits, ...
        pass
    text = json.dumps(valid_value(record), separators=(",", ":"), allow_nan=False)  # ASCII-only
    return text.replace("\x7f", "\\u007f").encode("ascii") + b"\n"


def valid_value(value: Any) -> Any:
    """`value` (parsed JSON) with every string in it, keys too, made `valid_unicode`."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {valid_unicode(k) if isinstance(k, str) else k: valid_value(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [valid_value(v) for v in value]
    return value


def escape_marks(data: bytes) -> bytes:
    """JSON text (UTF-8) with DEL, the C1 controls and `MARKS` written as `\\u` escapes, the
    record escapes for JSON another encoder wrote (a status snapshot): outside its strings JSON
    holds none of them, so the bytes are rewritten where they are and the meaning is kept."""
    if data.isascii() and b"\x7f" not in data:
        return data
    return _MARK_BYTES.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data)


_MATCH_HEAD = b'{"schema":1,"seq":%d,"cursor":"'
_MATCH_TS = b'%x","ts":"'
_MATCH_LINE = b'","kind":"match","line":"%b","lineNo":%d,"offset":%d'
"""A match record, in the order `record("match", …)` writes its fields: the `line` as its JSON
string without the quotes; then the fields after `offset`, and `}`."""


def match_records(prefix: bytes, seq: int, ts: bytes, lines: Sequence[bytes],
                  line_nos: Iterable[int], offsets: Iterable[int],
                  rest: Sequence[bytes]) -> list[bytes]:
    """`match` records with seqs from `seq` on (cursors `<prefix><seq>`), the bytes that
    `JsonlSink.record("match", …)` would build, from columns: the `line` field's JSON string
    without its quotes, `lineNo`, `offset`, and the fields after `offset` as JSON members
    (`,"path":…`). One timestamp for the batch, no dict per record; the fields after
    `offset` are part of the template when every record has the same (one conversion less
    per record), and so are the zeros that pad the cursor's seq to 16 hex digits, per run of
    seqs with as many digits (`%x` is formatted in place, `%016x` through a temporary
    string: ~0.1 µs a record)."""
    end = seq + len(lines)
    tail = ts + _MATCH_LINE
    columns: list[Iterator[Any]] = [iter(lines), iter(line_nos), iter(offsets)]
    if rest and rest.count(rest[0]) == len(rest):
        tail += rest[0].replace(b"%", b"%%") + b"}\n"
    else:
        tail += b"%b}\n"
        columns.append(iter(rest))
    out: list[bytes] = []
    while seq < end:  # (one run, but when the batch passes a power of 16)
        digits = len(b"%x" % seq)
        stop = min(end, 16**digits)
        fmt = _MATCH_HEAD + prefix + b"0" * (16 - digits) + _MATCH_TS + tail
        out += map(fmt.__mod__, itertools.islice(zip(  # (the counts are endless)
            itertools.count(seq), itertools.count(seq), *columns, strict=False), stop - seq))
        seq = stop
    return out


def batch_end(ends: Sequence[int], i: int, limit: int) -> int:
    """The end of the longest run `lines[i:j]` of at most `limit` bytes, at least one line;
    `ends`: the lines' sizes summed (`batch_ends`). A bisection: the batches of a flood's
    records are cut without a loop per record, and without summing what follows each batch
    again (that made a chunk's 78 MB of records cost seconds)."""
    return max(i + 1, bisect.bisect_right(ends, ends[i] + limit, i + 1) - 1)


def batch_ends(lines: Sequence[bytes]) -> list[int]:
    """`ends[j]`: the bytes of `lines[:j]` (summed in C), for `batch_end`."""
    return list(itertools.accumulate(map(len, lines), initial=0))
