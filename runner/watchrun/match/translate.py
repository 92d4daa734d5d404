"""Translation of an analysed pattern to each engine's syntax (stdlib `re`, RE2, hyperscan),
exact per line: byte sets computed by the stdlib itself, nothing that can match b"\\n"."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from watchrun.match.regex import REPEATS, Analysis, C, Unsupported, scope_folds

__all__ = ["DOLLAR", "byte_set", "lf_only", "translate"]

_NL = 10
_CATEGORIES = {
    C.CATEGORY_DIGIT: "\\d",
    C.CATEGORY_NOT_DIGIT: "\\D",
    C.CATEGORY_SPACE: "\\s",
    C.CATEGORY_NOT_SPACE: "\\S",
    C.CATEGORY_WORD: "\\w",
    C.CATEGORY_NOT_WORD: "\\W",
}
DOLLAR = b"\\x0d?$"
"""`$` translated: the end, taking a final `\\r` with it (`line_end.py`)."""
_AT = {
    C.AT_BEGINNING: "^",
    C.AT_BEGINNING_STRING: "^",
    C.AT_END: DOLLAR.decode(),
    C.AT_END_STRING: "$",
    C.AT_BOUNDARY: "\\b",
    C.AT_NON_BOUNDARY: "\\B",
}
_NEVER = "[^\\x00-\\xff]"


def lf_only(expr: bytes) -> bytes:
    """A translation with each `$` as the engine's own, which means the same on lines with no
    `\\r` (hyperscan scans such a chunk faster so: `build done$` is one literal at a line's end,
    not two). Nothing else is written `\\x0d?$`: a literal `$` is `\\x24`, a repeat `{0,1}`."""
    return expr.replace(DOLLAR, b"$")


# --- byte sets -------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def byte_set(items: tuple[tuple[Any, Any], ...], fold: bool) -> frozenset[int]:
    """The bytes other than b"\\n" that the class `items` matches, as the stdlib decides."""
    parts: list[str] = []
    for kind, value in items:
        if kind is C.NEGATE:
            parts.insert(0, "^")
        elif kind is C.LITERAL:
            parts.append(f"\\x{value:02x}")
        elif kind is C.RANGE:
            parts.append(f"\\x{value[0]:02x}-\\x{value[1]:02x}")
        elif kind is C.CATEGORY:
            parts.append(_CATEGORIES[value])
        else:
            raise Unsupported(f"class item {kind}")
    regex = re.compile(("[" + "".join(parts) + "]").encode(), re.IGNORECASE if fold else 0)
    return frozenset(b for b in range(256) if b != _NL and regex.fullmatch(bytes((b,))))


def _node_set(op: Any, av: Any, fold: bool) -> frozenset[int]:
    if op is C.IN:
        return byte_set(tuple(av), fold)
    if op is C.NOT_LITERAL:
        return byte_set(((C.NEGATE, None), (C.LITERAL, av)), fold)
    return byte_set(((C.NEGATE, None), (C.LITERAL, _NL)), False)  # ANY


def _esc(b: int) -> str:
    return chr(b) if chr(b).isalnum() and b < 128 else f"\\x{b:02x}"


def _ranges(members: list[int]) -> str:
    out, i = [], 0
    while i < len(members):
        j = i
        while j + 1 < len(members) and members[j + 1] == members[j] + 1:
            j += 1
        out.append(_esc(members[i]) if i == j else f"{_esc(members[i])}-{_esc(members[j])}")
        i = j + 1
    return "".join(out)


def _emit_set(members: frozenset[int]) -> str:
    if not members:
        return _NEVER
    if len(members) == 1:
        return _esc(next(iter(members)))
    if len(members) <= 128:
        return "[" + _ranges(sorted(members)) + "]"
    return "[^" + _ranges(sorted(set(range(256)) - members)) + "]"  # includes b"\n"


# --- translation -----------------------------------------------------------------------------


def translate(analysis: Analysis, dialect: str) -> bytes:
    """The pattern in `dialect`, multi-line, never matching b"\\n". "py" (stdlib `re`) keeps
    the case flags: compile it with re.IGNORECASE when `analysis.caseless`. "re2" and "hs" spell
    case folding out (`[Ee]`) and are compiled case-sensitive, because RE2 in Latin-1 mode would
    also fold bytes >= 0x80 (Python folds ASCII only). Raises Unsupported."""
    if dialect != "py" and analysis.python_only:
        raise Unsupported("lookaround, backreference, conditional, atomic or possessive")
    return _seq(analysis.tree, analysis.caseless, dialect, False).encode("ascii")


def _seq(tree: Any, fold: bool, dialect: str, behind: bool) -> str:
    """The sequence `tree`; `behind`: in a lookbehind, where Python needs a fixed width."""
    return "".join(_node(op, av, fold, dialect, behind) for op, av in tree.data)


def _node(op: Any, av: Any, fold: bool, dialect: str, behind: bool) -> str:
    if op is C.LITERAL:
        if fold and dialect != "py":
            return _emit_set(byte_set(((C.LITERAL, av),), True))
        return _NEVER if av == _NL else _esc(av)
    if op in (C.IN, C.NOT_LITERAL, C.ANY):
        return _emit_set(_node_set(op, av, fold))
    if op is C.AT:
        if av not in _AT:
            raise Unsupported(f"anchor {av}")
        return "(?=\\x0d?$)" if behind and av is C.AT_END else _AT[av]
    if op is C.BRANCH:
        return "(?:" + "|".join(_seq(alt, fold, dialect, behind) for alt in av[1]) + ")"
    if op is C.SUBPATTERN:
        group, sub = av[0], av[3]
        inner_fold = scope_folds(fold, av)
        body = _seq(sub, inner_fold, dialect, behind)
        if inner_fold != fold and dialect == "py":
            body = ("(?i:" if inner_fold else "(?-i:") + body + ")"
        return f"({body})" if group is not None and dialect == "py" else f"(?:{body})"
    if op in REPEATS:
        low, high, sub = av
        body = "(?:" + _seq(sub, fold, dialect, behind) + ")"
        count = f"{{{low},}}" if high == C.MAXREPEAT else f"{{{low},{high}}}"
        suffix = {C.MAX_REPEAT: "", C.MIN_REPEAT: "?", C.POSSESSIVE_REPEAT: "+"}[op]
        return body + count + suffix
    if dialect != "py":
        raise Unsupported(str(op))
    if op in (C.ASSERT, C.ASSERT_NOT):
        direction, sub = av
        kind = (
            ("=" if op is C.ASSERT else "!")
            if direction > 0
            else ("<=" if op is C.ASSERT else "<!")
        )
        return f"(?{kind}{_seq(sub, fold, dialect, behind or direction < 0)})"
    if op is C.GROUPREF:
        return f"(?:\\{av})"
    if op is C.GROUPREF_EXISTS:
        group, yes, no = av
        other = "" if no is None else "|" + _seq(no, fold, dialect, behind)
        return f"(?({group}){_seq(yes, fold, dialect, behind)}{other})"
    if op is C.ATOMIC_GROUP:
        return f"(?>{_seq(av, fold, dialect, behind)})"
    raise Unsupported(str(op))
