"""What the files under state/ say of a watcher, as text: its label, source and cwd, the lines of
its `.tail`, and a snapshot's JSON bytes — sanitized, redacted with `output.redact`, escaped."""

from __future__ import annotations

from typing import Any, TypeAlias

import orjson

from watchrun.config.model import WatcherSpec
from watchrun.events import cut_note
from watchrun.match.keyblocks import key_body
from watchrun.match.plain import plain_chunk
from watchrun.match.redact import Redactor, clean_text, marker, redact_tree
from watchrun.match.sanitize import edge_text, raw_text, sanitize
from watchrun.output.jsonl import escape_marks, valid_value

__all__ = ["CUT_MARK", "TAIL_LINE_BYTES", "Said", "said", "snapshot_json", "tail_lines"]

TAIL_LINE_CHARS = 4096
TAIL_LINE_BYTES = 4 * TAIL_LINE_CHARS + 1
"""What of a raw line is taken for its TAIL_LINE_CHARS (a character is at most 4 bytes:
`RecentLines.last(TAIL_LINE_BYTES)`; the one byte more says the line was longer): the rest, up
to maxLineBytes (16 MiB), had been copied, decoded and sanitized on the loop, and held it for
seconds."""

CUT_MARK = f" [cut: longer than {TAIL_LINE_CHARS} characters]"
"""Ends a `.tail` line that was longer than TAIL_LINE_CHARS (its full length is not known:
only TAIL_LINE_BYTES of it were taken)."""

SAID_CHARS = 16384
"""At most this much of a label, of a source (an argv: of all its words) and of a cwd is in a
status snapshot, which so stays far under the 1 MiB its readers take (`views/watchers.py`)."""

Said: TypeAlias = tuple[str, str | list[str] | None, str | None, str, list[str]]
"""A watcher's label, source (a path, a command string or its argv), cwd, pattern and
excludes."""


def said(spec: WatcherSpec, redactor: Redactor | None) -> Said:
    """Its label, source and cwd as snapshots show them: sanitized (a `${VAR}`, a file name
    others chose) and with `output.redact` redacted (a command line's `${VAR}` password leaves
    the machine in `list`, `status` and the MCP answers, as it does in a webhook's label); each
    at most SAID_CHARS, the cut marked. Its pattern and excludes, with `output.redact`
    redacted as the MCP answers redact them (a leaked key watched for by its text)."""
    where = spec.path if spec.path is not None else spec.command
    source = _words([clean_text(a, redactor) for a in where]) if isinstance(where, tuple) else \
        None if where is None else _words([clean_text(str(where), redactor)])[0]
    cwd = None if spec.cwd is None else _words([clean_text(str(spec.cwd), redactor)])[0]
    regexes = [spec.pattern, *spec.exclude]
    if redactor is not None:
        regexes = redact_tree(regexes, redactor)
    return _words([clean_text(spec.label, redactor)])[0], source, cwd, regexes[0], regexes[1:]


def _words(words: list[str]) -> list[str]:
    """`words` cut to SAID_CHARS characters in all, the last one kept ending with a mark that
    counts the rest (a 1.5 MB label made a snapshot its readers refused as damaged)."""
    total = sum(len(w) for w in words)
    if total <= SAID_CHARS:
        return words
    out, left = [], SAID_CHARS
    for w in words:
        if len(w) >= left:
            out.append(f"{w[:left]} [cut: {total - SAID_CHARS} more characters]")
            break
        out.append(w)
        left -= len(w)
    return out


def tail_lines(tail: list[tuple[bytes, int, int | None]], redactor: Redactor | None,
               max_line_bytes: int = TAIL_LINE_BYTES) -> list[str]:
    """The `.tail` file's lines (`RecentLines.last(TAIL_LINE_BYTES)`: the heads of raw lines,
    their key blocks and what the reader cut of them), sanitized, with `output.redact`
    redacted together (a key block whole, and each line of a block whose BEGIN line has left
    the window marked, as records do),
    U+2028/U+2029 and bidi controls `\\u`-escaped as `logs` shows them (the file is read by
    `cat` and `tail -f` too), each cut to TAIL_LINE_CHARS and then marked as cut (`CUT_MARK`:
    `logs` shows a shortened line as such, never as the whole line); a line the reader cut at
    `maxLineBytes`, shown to that cut, ends with the note `matches` shows (`cut_note`). A head
    that may have been
    cut (at TAIL_LINE_BYTES, or at `max_line_bytes` when the line was read: 3 bytes less, a
    UTF-8 boundary) loses the head of a secret that went on past the cut too."""
    lines, text = _texts(tail)
    if redactor is not None:
        longest = min(TAIL_LINE_BYTES, max_line_bytes - 3)
        red = redactor.redact_lines(lines, [len(raw) >= longest or cut is not None
                                            for raw, _, cut in tail])[0]
        red = [marker("private-key") if key_body(block, line) else r
               for line, r, (_, block, _) in zip(lines, red, tail, strict=True)]
        text = text if red == lines else None  # (something redacted: each line looked at)
        lines = red
    if text is None:
        shown = [edge_text(x, multiline=True) for x in lines]
    elif "##[" in text or "::" in text:  # (plain: only a workflow command to escape)
        shown = [edge_text(x, multiline=True) if "##[" in x or "::" in x else x for x in lines]
    else:
        shown = lines
    return [x[:TAIL_LINE_CHARS] + CUT_MARK if len(x) > TAIL_LINE_CHARS or len(raw) >=
            TAIL_LINE_BYTES else x + cut_note(cut)
            for x, (raw, _, cut) in zip(shown, tail, strict=True)]


def _texts(tail: list[tuple[bytes, int, int | None]]) -> tuple[list[str], str | None]:
    """The lines decoded and sanitized, and, when all of them are plain ASCII, their text
    joined by newlines (told in C on their bytes, `plain_chunk`: then decoded at once, and
    `sanitize` and `edge_text` change nothing in them but a workflow command). A `.tail` of
    1 KiB lines took ~55 µs a line to render, ~90 % of it those functions' regex searches."""
    joined = b"\n".join([raw for raw, _, _ in tail])
    if tail and plain_chunk(joined):
        text = joined.decode("ascii")
        return text.split("\n"), text
    return [sanitize(raw_text(b), None)[0] for b, _, _ in tail], None


def snapshot_json(snap: dict[str, Any]) -> bytes:
    """A snapshot file's bytes: indented JSON in valid UTF-8 (orjson: the stdlib's indenting
    encoder is pure Python, see docs/decisions.md); a lone surrogate (a byte of a file name or
    an environment value that is not UTF-8) becomes U+FFFD; DEL, C1, U+2028/U+2029 and bidi
    controls are escaped as in records (`escape_marks`: `cat` shows it as it is)."""
    opts = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    try:
        return escape_marks(orjson.dumps(snap, option=opts))
    except orjson.JSONEncodeError:
        return escape_marks(orjson.dumps(valid_value(snap), option=opts))
