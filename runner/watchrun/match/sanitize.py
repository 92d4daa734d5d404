"""Make untrusted text safe for JSONL fields, terminals and prompts (SPEC §6).

Rules, in the order they are applied by `sanitize`:

1. Terminal escape sequences are removed: CSI (`ESC [` or 8-bit 0x9b, parameters, final byte;
   an incomplete one loses its introducer and parameters), OSC / DCS / SOS / PM / APC strings
   (`ESC ] P X ^ _` or 0x9d 0x90 0x98 0x9e 0x9f, ended by BEL, `ESC \\` or 0x9c; an
   unterminated string is removed up to the end of its line, never past a newline), charset and
   other nF escapes (`ESC ( B`, `ESC # 8`) and two-byte escapes (`ESC 7`, `ESC c`, `ESC =`).
   An OSC-8 hyperlink keeps its visible text and loses the URL.
2. `\\r\\n` becomes `\\n`; a line rewritten with a lone `\\r` keeps its last non-empty segment
   (`"10%\\r100%"` -> `"100%"`), as a terminal would show it.
3. A backspace deletes the character before it on the same line (`"a\\bb"` -> `"b"`,
   overstruck `"E\\bE"` -> `"E"`), as a terminal would show it.
4. Other C0 controls (not tab, newline), DEL and C1 are removed; lone surrogates become U+FFFD.
5. The text is clipped at `max_bytes` of UTF-8 on a character boundary.

U+2028/U+2029 are ordinary text and are kept; the record encoder (`output/jsonl.py`) writes them
as `\\u` escapes (a reader splitting on Unicode line breaks is then safe too). `match/plain.py`
tells, in C, that no rule applies to a line: the fast path of match records and `edge_text`.

A name (a path, a cwd, a label) is not a line: `name_text` escapes its controls, drops nothing
(rules 2 and 3 showed `/tmp/x\\r/var/log/auth.log` as `/var/log/auth.log`).

At the edge, where text leaves the runner for a person or another program (`logs`, `matches`,
`status`, `list`, the runner's log), there are exactly two functions: `edge_text` for a line of
text (sanitized, and every line or paragraph separator and bidirectional control shown as an
escape, so one value can never look like two lines or reorder what follows it) and `edge_json`
for a JSON document (content unchanged; DEL, C1, U+2028/U+2029, bidi controls and lone
surrogates escaped, and `##[` written `#\\u0023[`: the GitHub Actions runner obeys `##[command]`
anywhere in a line of a step's output, and a JSON document or log line is not fenced).

Two decodings of bytes exist: `decode` (invalid UTF-8 -> U+FFFD) feeds `sanitize` for every text
field; `raw_text` is the same decoding without sanitizing, for a record's `raw` field, where
every character (NUL, ESC, ...) is kept and JSON escapes it (`\\u0000`, `\\u001b`).
"""

from __future__ import annotations

import codecs
import functools
import json
import math
import re

from watchrun.match.plain import HIDDEN, MARKS, plain_chunk

__all__ = [
    "StreamDecoder",
    "clean_line",
    "decode",
    "edge_json",
    "edge_name",
    "edge_text",
    "name_text",
    "raw_text",
    "sanitize",
]

# Anything that needs the slow path: C0 but tab/newline, DEL, C1, surrogates.
_NEEDS_WORK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")

_STRING_END = "(?:\x07|\x9c|\x1b\\\\)?"  # BEL, 8-bit ST, ESC \ (or nothing: unterminated)
_ESCAPES = (
    # OSC, DCS, SOS, PM, APC strings: body up to a terminator, an ESC, or the end of the line.
    "(?:\x1b[\\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x9c\x1b\n]*"
    + _STRING_END
    # CSI: parameter bytes, intermediate bytes, final byte (missing when incomplete).
    + "|(?:\x1b\\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    # nF escapes (charset designation, DEC line attributes, ...): ESC, intermediates, final.
    + "|\x1b[\x20-\x2f]+[\x30-\x7e]?"
    # Two-byte escapes: ESC and one final byte (ESC 7, ESC c, ESC =, ESC M, ...).
    + "|\x1b[\x30-\x7e]"
)
_CONTROLS = "[\x00-\x08\x0b-\x1f\x7f-\x9f]"
_SURROGATES = "[\ud800-\udfff]"
_EDGE_LINE = re.compile(f"[\n{MARKS}{HIDDEN}]")
_EDGE_LINES = f"[{MARKS}{HIDDEN}]"
_EDGE_JSON = f"[\x7f-\x9f{MARKS}{HIDDEN}\ud800-\udfff]"
_WORKFLOW = re.compile(r"##\[|^([^\S\n]*):(?=:[A-Za-z])", re.MULTILINE)
"""What the GitHub Actions runner obeys in a step's output: `##[command]` anywhere, `::command`
at a line's start after Unicode white space (.NET's `TrimStart`): shown `#\\u0023[`, `\\u003a:`."""


@functools.cache
def _rx(pattern: str) -> re.Pattern[str]:
    """The patterns of the rare paths, compiled when first needed (not by every start)."""
    return re.compile(pattern)


def decode(data: bytes) -> str:
    """UTF-8 with U+FFFD for each invalid byte sequence: the input of `sanitize`."""
    return data.decode("utf-8", "replace")


def raw_text(data: bytes) -> str:
    """A record's `raw` field: decoded like `decode`, every character kept (no sanitizing);
    JSON encoding escapes the controls, e.g. NUL as `\\u0000`."""
    return data.decode("utf-8", "replace")


def redrawn(line: str) -> str | None:
    """A line a `\r` redrew (a progress bar, a test runner's status drawn over), whole, each
    `\r` in it shown as the two characters `\\r` (for a verdict's evidence: the last segment,
    which a terminal shows and the record keeps, may not hold the match); None for a line no
    `\r` redrew (a CRLF ending redraws nothing)."""
    body = line.rstrip("\r")
    return body.replace("\r", "\\r") if "\r" in body else None


def clean_line(data: bytes, max_bytes: int | None = None) -> tuple[str, bool]:
    """`sanitize(decode(data), max_bytes)`: bytes of one line (or of whole lines) to safe text;
    plain ASCII lines (`plain_chunk`: a check in C) as they are, without the regex."""
    if (max_bytes is None or len(data) <= max_bytes) and plain_chunk(data):
        return data.decode("ascii"), False
    return sanitize(data.decode("utf-8", "replace"), max_bytes)


def sanitize(text: str, max_bytes: int | None = None) -> tuple[str, bool]:
    """Return (clean text, was_clipped). See the module docstring for the rules."""
    if _NEEDS_WORK.search(text) is not None:
        text = _clean(text)
    if max_bytes is None:
        return text, False
    return clip(text, max_bytes)


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters for display, the cut shown as `…` (a verdict line, a
    message; a table's cell by terminal cells: `views.cells.fit`); `clip` cuts records' bytes."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def clip(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` of UTF-8, never inside a character."""
    if len(text) * 4 <= max_bytes or (text.isascii() and len(text) <= max_bytes):
        return text, False
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    cut = max(max_bytes, 0)
    while cut > 0 and (data[cut] & 0xC0) == 0x80:  # data[cut] continues the char before it
        cut -= 1
    return data[:cut].decode("utf-8"), True


def _clean(text: str) -> str:
    if "\x1b" in text or _has_c1_introducer(text):
        text = _rx(_ESCAPES).sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            text = "\n".join(
                _last_segment(line) if "\r" in line else line for line in text.split("\n")
            )
    if "\b" in text:
        text = _apply_backspaces(text)
    text = _rx(_CONTROLS).sub("", text)
    if _rx(_SURROGATES).search(text) is not None:
        text = _rx(_SURROGATES).sub("\ufffd", text)
    return text


_SHORT = {"\b": "\\b", "\f": "\\f", "\r": "\\r"}


def name_text(text: str) -> str:
    """A name others chose (a watched file's path, a cwd, a label, a command's words) as records
    and snapshots hold it: each C0 control but tab and newline, DEL and each C1 control shown
    as its escape (`\\r`, `\\b`, `\\u001b`: an escape sequence loses its ESC only), a lone
    surrogate (a byte that is not UTF-8) as U+FFFD; no character is dropped. A backslash is
    not escaped: `\\r` may be those two characters (the record's `inode` tells the file)."""
    if _NEEDS_WORK.search(text) is None:
        return text
    text = _rx(_CONTROLS).sub(_escape_control, text)
    return _rx(_SURROGATES).sub("\ufffd", text)


def edge_name(value: object) -> str:
    """A name as a terminal surface or the text log shows it: `name_text`, its tabs and
    newlines as `\\t` and `\\n` too (a table's columns stay aligned), then `edge_text`."""
    text = name_text(value if isinstance(value, str) else str(value))
    return edge_text(text.replace("\t", "\\t") if "\t" in text else text)


def _escape_control(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def _has_c1_introducer(text: str) -> bool:
    return any(ch in text for ch in "\x9b\x9d\x90\x98\x9e\x9f")


def _last_segment(line: str) -> str:
    for segment in reversed(line.split("\r")):
        if segment:
            return segment
    return ""


def _apply_backspaces(text: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch == "\b":
            if out and out[-1] != "\n":
                out.pop()
        else:
            out.append(ch)
    return "".join(out)


def _escape_unsafe(match: re.Match[str]) -> str:
    """The character as its escape, `\\u200b` (or `\\U000e0041` beyond the BMP)."""
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def edge_text(value: object, *, multiline: bool = False) -> str:
    """Any value as text that is safe to print: `sanitize`d (escape sequences, C0/C1 controls
    and DEL removed; tab kept), then U+2028/U+2029, bidirectional controls, the invisible
    characters (`plain.HIDDEN`) and, unless `multiline`, newlines shown as `\\n`/`\\u2028`
    escapes; what the GitHub Actions runner would obey as a workflow command in a step's
    output is shown escaped too (`_WORKFLOW`). The one function every terminal surface and
    text log line goes through. Plain ASCII (told in C) has only a workflow command to escape
    (the regexes took ~40 µs a 1 KiB line; the log echoes 20 matches a second per watcher)."""
    text = value if isinstance(value, str) else str(value)
    plain = text.isascii() and plain_chunk(text.encode("ascii"))
    if not plain or (not multiline and "\n" in text):
        text, _ = sanitize(text)
        unsafe = _rx(_EDGE_LINES) if multiline else _EDGE_LINE
        text = unsafe.sub(lambda m: "\\n" if m.group() == "\n" else _escape_unsafe(m), text)
    if "##[" in text or "::" in text:  # (a line of a CI step's output: nothing it obeys)
        text = _WORKFLOW.sub(lambda m: "#\\u0023[" if m.group(1) is None else
                             m.group(1) + "\\u003a", text)
    return text


def edge_json(value: object, *, indent: int | None = None) -> str:
    """`value` as JSON that is safe to print and still means the same: non-ASCII text stays
    readable, while DEL, C1 controls, U+2028/U+2029, bidirectional controls and the characters
    that draw nothing (`plain.HIDDEN`: a tag character beyond the BMP as its surrogate pair)
    are `\\u`-escaped (json escapes C0 itself), and so is the `#` before `[` in `##[` (the
    GitHub Actions runner obeys `##[command]` anywhere in a line). A lone surrogate (a byte
    of a file name that is not UTF-8) is U+FFFD, as in the records: its escape is JSON that
    strict parsers (serde_json) refuse. Keys keep their order; what JSON cannot represent
    (NaN, infinities, other objects) is written as a string."""
    separators = (",", ": ") if indent is not None else (",", ":")
    try:
        dumped = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators,
                            default=str, allow_nan=False)
    except ValueError:  # NaN or an infinity somewhere (json.loads accepts them)
        dumped = json.dumps(_finite(value), ensure_ascii=False, indent=indent,
                            separators=separators, default=str)
    if "##[" in dumped:  # (only inside a string: `#` is nothing else in JSON)
        dumped = dumped.replace("##[", "#\\u0023[")
    unsafe = _rx(_EDGE_JSON)
    if unsafe.search(dumped) is None:
        return dumped
    return unsafe.sub(_json_safe, dumped)


def _json_safe(match: re.Match[str]) -> str:
    char = match.group()
    if "\ud800" <= char <= "\udfff":
        return "\ufffd"
    return json.dumps(char)[1:-1]  # (`\\u…`; beyond the BMP a surrogate pair, as JSON has it)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class StreamDecoder:
    """Incremental UTF-8 decoding of a byte stream (PTY or pipe reads): a character split
    across two reads is decoded whole; invalid bytes become U+FFFD."""

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes, final: bool = False) -> str:
        """Decode the next read; with `final=True` an incomplete trailing character is
        flushed as U+FFFD."""
        return self._decoder.decode(data, final)

    def flush(self) -> str:
        """End of stream: whatever is pending, as U+FFFD."""
        return self._decoder.decode(b"", True)

    def reset(self) -> None:
        """Forget pending bytes (a new stream)."""
        self._decoder.reset()
