"""Regex analysis for the matcher: bytes-pattern checks and backtracking constructs, from the
stdlib parse tree (`re._parser`, pinned by the tests on every supported Python); the translation
to engine syntax is `translate.py`.

The translation of a pattern is exact *per line*: every node is rewritten so that it can never
match b"\\n" (`.` -> `[^\\n]`, `\\s` -> `[\\t\\v\\f\\r ]`, classes lose b"\\n", a literal b"\\n"
becomes a never-matching class), `\\A`/`^` -> multi-line `^`, `\\Z` -> multi-line `$`, `$` ->
`\\r?` and a multi-line `$` (a line's final `\\r` is part of its end: `line_end.py`), and
classes are rewritten as explicit byte sets computed by the stdlib itself (so case folding and
category semantics are Python's). A match of the translated pattern in a chunk of lines
therefore never spans a newline, and it exists inside a line exactly when the reference regex
(Python's, with that `$`) finds one in that line alone. One known difference is left to the
caller: Python's `\\B` does not match the empty string, the engines' does, so empty lines are
re-checked.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from functools import lru_cache
from typing import Any

from msgspec import Struct

from watchrun.match.line_end import reference as dollar_reference
from watchrun.match.nullable import matches_empty
from watchrun.match.sanitize import shorten
from watchrun.match.syntax import prepare

_P: Any = importlib.import_module("re._parser")
C: Any = importlib.import_module("re._constants")

__all__ = [
    "REPEATS",
    "ZERO_WIDTH",
    "Analysis",
    "C",
    "Unsupported",
    "analyse",
    "backtracking_constructs",
    "scope_folds",
    "walk",
]

_PY_ONLY = {
    C.ASSERT,
    C.ASSERT_NOT,
    C.GROUPREF,
    C.GROUPREF_EXISTS,
    C.ATOMIC_GROUP,
    C.POSSESSIVE_REPEAT,
}
ZERO_WIDTH = {C.AT, C.ASSERT, C.ASSERT_NOT}
REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT}


class Unsupported(Exception):
    """The pattern uses a construct the target engine does not have."""


class Analysis(Struct, frozen=True):
    """A validated pattern: its reference regex and what the engines need to know."""

    pattern: str
    reference: re.Pattern[bytes]
    tree: Any
    caseless: bool
    """Case-insensitive at the top level (the watcher's setting or a leading `(?i)`)."""
    folds_somewhere: bool
    """Some part of the pattern is case-insensitive (top level or a `(?i:...)` group)."""
    python_only: bool
    """Uses lookaround, backreferences, conditionals, atomic groups or possessive repeats."""
    always: bool
    """Matches the empty string with no condition, so every line matches."""
    empty_line: bool
    """Whether an empty line matches."""


@lru_cache(maxsize=1024)
def analyse(pattern: str, case_sensitive: bool) -> Analysis:
    """Validate `pattern` for bytes matching; ValueError says what is wrong and how to fix it.
    Cached: validation, each watcher's matcher and its worker analyse the same patterns (the
    result is immutable)."""
    flags = 0 if case_sensitive else re.IGNORECASE
    try:
        data = _to_bytes(prepare(pattern))
        reference = re.compile(data, flags)
    except re.error as exc:
        raise ValueError(f"invalid regex {shorten(pattern, 200)!r}: {exc}") from None
    except UnicodeEncodeError as exc:  # a byte that is not UTF-8 (`surrogateescape`'d)
        raise ValueError(f"invalid regex {shorten(pattern, 200)!r}: {_not_utf8(exc)}") from None
    except KeyError as exc:  # \N{...} with an unknown name
        raise ValueError(f"invalid regex {shorten(pattern, 200)!r}: {exc.args[0]}") from None
    except ValueError as exc:  # prepare's
        raise ValueError(f"invalid regex {shorten(pattern, 200)!r}: {exc}") from None
    tree = _P.parse(data, flags)
    problem = _bytes_problem(pattern, tree)
    if tree.state.flags & re.LOCALE:
        problem = "the (?L) locale flag is not supported"
    if problem:
        raise ValueError(f"invalid regex {shorten(pattern, 200)!r}: {problem}")
    kinds = set(_ops(tree))
    if C.AT in kinds and any(op is C.AT and av is C.AT_END for op, av in walk(tree)):
        reference = dollar_reference(tree, flags)  # `$` takes a line's final `\r` too
    caseless = bool(tree.state.flags & re.IGNORECASE)
    scoped = any(add & re.IGNORECASE for add in _scoped_flags(tree))
    return Analysis(
        pattern=pattern,
        reference=reference,
        tree=tree,
        caseless=caseless,
        folds_somewhere=caseless or scoped,
        python_only=bool(kinds & _PY_ONLY),
        always=tree.getwidth()[0] == 0
        and not kinds & (ZERO_WIDTH | {C.GROUPREF, C.GROUPREF_EXISTS}),
        empty_line=matches_empty(tree),  # (not `reference.search(b"")`: it may backtrack)
    )


_TEXT_ESCAPE = re.compile(
    r"\\(?:\\|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|x[89a-fA-F][0-9a-fA-F]|[23][0-7]{2})"
)


def _to_bytes(pattern: str) -> bytes:
    """UTF-8 of the pattern, where the escapes of a non-ASCII character (`\\u00e9`,
    `\\U0001F600`, `\\N{EM DASH}`, `\\xe9`, the octal `\\351`) become the escaped UTF-8 bytes
    of that character, as they mean a character in a text pattern. (Three octal digits are
    always an octal escape in `re`, never a group reference.)"""

    def utf8(match: re.Match[str]) -> str:
        text = match.group()
        if text == "\\\\":
            return text
        char = (unicodedata.lookup(text[3:-1]) if text[1] == "N"
                else chr(int(text[1:], 8)) if text[1] in "23" else chr(int(text[2:], 16)))
        return "".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogatepass"))

    return _TEXT_ESCAPE.sub(utf8, pattern).encode("utf-8")


def _not_utf8(exc: UnicodeEncodeError) -> str:
    """A lone surrogate where the pattern came from bytes (argv, the environment) that were not
    UTF-8: name the byte (U+DC80-U+DCFF stand for 0x80-0xFF) or the surrogate."""
    code = ord(exc.object[exc.start])
    if 0xDC80 <= code <= 0xDCFF:
        return (f"holds the byte 0x{code - 0xDC00:02X} at character {exc.start}, which is not "
                "UTF-8 text (a Latin-1 terminal or variable?); write the pattern in UTF-8")
    return (f"holds U+{code:04X} at character {exc.start}, a lone surrogate (not a character); "
            "write the character itself or its escape")


def _bytes_problem(pattern: str, tree: Any) -> str | None:
    """What cannot mean the same on UTF-8 bytes as on text: a non-ASCII character in a class,
    or a quantifier on a lone non-ASCII character (it would repeat its last byte only)."""
    if _non_ascii_class(pattern):
        return (
            "a character class can hold ASCII characters only (patterns match UTF-8 bytes);"
            " write non-ASCII alternatives as an alternation, e.g. (?:é|è)"
        )
    for op, av in walk(tree):
        if op in REPEATS and len(av[2]) == 1 and av[2][0][0] is C.LITERAL and av[2][0][1] > 127:
            return (
                "a quantifier on a non-ASCII character repeats its last UTF-8 byte only;"
                " group the character: (?:é)+"
            )
    return None


def _non_ascii_class(pattern: str) -> bool:
    """Whether a `[...]` in the pattern text holds a non-ASCII character or its escape (the
    parse tree cannot tell: the parser also turns `é|è` into a class)."""
    i, n, in_class = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if in_class and _escape_value(pattern, i + 1) > 127:
                return True
            i += 2
            continue
        if not in_class and ch == "[":
            in_class = True
            i += 1
            i += pattern.startswith("^", i)
            i += pattern.startswith("]", i)  # a leading ] is a literal
            continue
        if in_class and ch == "]":
            in_class = False
        elif in_class and ord(ch) > 127:
            return True
        i += 1
    return False


def _escape_value(pattern: str, i: int) -> int:
    """The code point of the escape whose letter is at `i` (0 when it is not a character)."""
    kind = pattern[i : i + 1]
    if kind in ("u", "U", "N"):
        return 128  # \u, \U and \N name a character: treat as non-ASCII (ASCII ones are rare)
    if kind == "x":
        digits = pattern[i + 1 : i + 3]
        return int(digits, 16) if re.fullmatch("[0-9a-fA-F]{2}", digits) else 0
    octal = re.match("[0-7]{1,3}", pattern[i : i + 3])
    return int(octal.group(), 8) if octal else 0


def scope_folds(fold: bool, subpattern: Any) -> bool:
    """Whether a group `(?flags:...)` (the SUBPATTERN argument) folds case, inside `fold`."""
    _group, add, remove, _sub = subpattern
    return bool((fold or add & re.IGNORECASE) and not remove & re.IGNORECASE)


def walk(tree: Any) -> Any:
    """Each `(op, argument)` of the parse tree `tree`, depth first, every branch included."""
    for op, av in tree.data:
        yield op, av
        for sub in _children(op, av):
            yield from walk(sub)


def literal_runs(tree: Any) -> Any:
    """Each run of literal characters of the parse tree `tree` as a string, every branch
    included (`a\\u00e9b|c` gives `aéb`, `c`): the text the regex matches as written. A tree
    of a bytes regex (as `analyse` parses one) holds UTF-8 bytes: decoded."""
    unicode = bool(tree.state.flags & re.UNICODE)
    run: list[int] = []

    def text() -> str:
        return "".join(map(chr, run)) if unicode else bytes(run).decode("utf-8", "replace")

    for op, av in tree.data:
        if op is C.LITERAL:
            run.append(av)
            continue
        if run:
            yield text()
            run = []
        for sub in _children(op, av):
            yield from literal_runs(sub)
    if run:
        yield text()


def _children(op: Any, av: Any) -> list[Any]:
    if op is C.BRANCH:
        return list(av[1])
    if op is C.SUBPATTERN:
        return [av[3]]
    if op in REPEATS:
        return [av[2]]
    if op in (C.ASSERT, C.ASSERT_NOT):
        return [av[1]]
    if op is C.ATOMIC_GROUP:
        return [av]
    if op is C.GROUPREF_EXISTS:
        return [p for p in av[1:] if p is not None]
    return []


def _ops(tree: Any) -> Any:
    return (op for op, _ in walk(tree))


def backtracking_constructs(analysis: Analysis) -> list[str]:
    """The constructs of the pattern that only a backtracking engine (Python `re`) can run,
    named as a user would look for them, in the order they first appear."""
    found: dict[str, None] = {}
    for op, av in walk(analysis.tree):
        if op in (C.ASSERT, C.ASSERT_NOT):
            ahead, positive = av[0] > 0, op is C.ASSERT
            kind = "lookahead" if ahead else "lookbehind"
            text = ("(?=" if ahead else "(?<=") if positive else ("(?!" if ahead else "(?<!")
            found[f"{'' if positive else 'negative '}{kind} {text}…)"] = None
        elif op is C.GROUPREF:
            found["a backreference \\N"] = None
        elif op is C.GROUPREF_EXISTS:
            found["a conditional (?(N)…)"] = None
        elif op is C.ATOMIC_GROUP:
            found["an atomic group (?>…)"] = None
        elif op is C.POSSESSIVE_REPEAT:
            found["a possessive quantifier (*+, ++, ?+)"] = None
    return list(found)


def _scoped_flags(tree: Any) -> Any:
    """The flags each `(?flags:...)` group turns on."""
    for op, av in walk(tree):
        if op is C.SUBPATTERN:
            yield av[1]
