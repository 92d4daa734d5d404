"""A rule's cut form: its secret begun in a line's kept text and going on past a maxLineBytes cut.

A line longer than `limits.maxLineBytes` keeps only its head (`match/framing.py`), so a token
that straddles the cut is a head the rules do not match: `ghp_` needs 36 characters after it,
an AWS key id 16, a URL's password its `@`. `cut_pattern(rule.pattern)` is the rule rewritten
(from Python's parse of it: RE2 syntax is a subset for the rules watchrun takes) to match, at
the very end of the text (`\\z`), every head of one of its matches that is past its fixed start
(`ghp_`, `AKIA`, `password=`; with a `secret` group: a non-empty head of the secret). The
redactor runs those forms, as one RE2 alternation, on the end of a line that was cut.
A rule Python cannot parse (`\\pL`, `[[:alpha:]]`) has no cut form (None).
"""

from __future__ import annotations

import re
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

__all__ = ["cut_pattern"]

FIXED_LITERALS = 4
"""A rule without a repeat after its start (a `${VAR}` secret's literal text, `\\bsk-(?:…)`)
is taken as cut once this many of its characters, or its first group, are kept."""
Items = list[tuple[Any, Any]]
_AT = {c.AT_BOUNDARY: r"\b", c.AT_NON_BOUNDARY: r"\B", c.AT_BEGINNING: "^",
       c.AT_BEGINNING_STRING: r"\A", c.AT_END: "$", c.AT_END_STRING: r"\z"}
_CATEGORY = {c.CATEGORY_DIGIT: r"\d", c.CATEGORY_NOT_DIGIT: r"\D", c.CATEGORY_SPACE: r"\s",
             c.CATEGORY_NOT_SPACE: r"\S", c.CATEGORY_WORD: r"\w", c.CATEGORY_NOT_WORD: r"\W"}
_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT)
_FLAGS = (("i", c.SRE_FLAG_IGNORECASE), ("m", c.SRE_FLAG_MULTILINE), ("s", c.SRE_FLAG_DOTALL))


class _Unsupported(Exception):
    """A construct RE2 does not have or this rewrite does not know."""


def cut_pattern(pattern: str) -> str | None:
    """The cut form of a rule's `pattern` (RE2 syntax, ending in `\\z`), or None."""
    try:
        tree = _parser.parse(pattern)
        secret = tree.state.groupdict.get("secret")
        items: Items = list(tree)
        alts = items[0][1][1] if len(items) == 1 and items[0][0] is c.BRANCH else [items]
        body = "|".join(_cut_of(list(alt), secret) for alt in alts)
    except (re.error, _Unsupported, RecursionError):
        return None
    mode = _letters(tree.state.flags)
    return (f"(?{mode})" if mode else "") + f"(?:{body})\\z"


def _cut_of(items: Items, secret: int | None) -> str:
    """One alternative of a rule, cut: past its fixed start, or inside its `secret` group."""
    for k, (op, av) in enumerate(items):
        if op is c.SUBPATTERN and secret is not None and av[0] == secret:
            return (_emit(items[:k]) + f"(?P<secret>{_heads(list(av[3]))})"
                    + _heads(items[k + 1 :]))
    fixed = False
    for k, (op, _) in enumerate(items):
        if op in _REPEATS and fixed:
            return _emit(items[:k]) + _heads(items[k:])
        fixed = fixed or op is not c.AT
    k, kept = 0, 0  # no repeat after a fixed start: past its first group or its first
    while k < len(items) and kept < FIXED_LITERALS:  # FIXED_LITERALS characters
        op = items[k][0]
        if kept and op is not c.LITERAL and op is not c.AT:
            break
        kept += op is not c.AT
        k += 1
    return _emit(items[:k]) + _heads(items[k:])


def _heads(items: Items) -> str:
    """Every head of a match of `items` (empty and whole included): nested so it stays linear,
    `P(e1) | e1 (P(e2) | e2 (…))`."""
    out = ""
    for op, av in reversed(items):
        head = _head(op, av)
        out = f"(?:{head}|{_one(op, av)}{out})" if out else head
    return out


def _head(op: Any, av: Any) -> str:
    """Every head of a match of one item."""
    if op is c.AT:
        return ""
    if op is c.BRANCH:
        return "(?:" + "|".join(_heads(list(a)) for a in av[1]) + ")"
    if op is c.SUBPATTERN:
        return f"(?{_flags(av[1], av[2])}:{_heads(list(av[3]))})"
    if op in _REPEATS:
        _, high, item = av
        if high == 0:
            return ""
        more = "*" if high is c.MAXREPEAT else f"{{0,{high - 1}}}"
        return f"(?:{_emit(list(item))}){more}(?:{_heads(list(item))})"
    return f"(?:{_one(op, av)})?"


def _emit(items: Items) -> str:
    return "".join(_one(op, av) for op, av in items)


def _one(op: Any, av: Any) -> str:
    """One parsed item back in RE2 syntax (groups unnamed, characters as `\\x{…}`)."""
    if op is c.LITERAL:
        return _char(av)
    if op is c.NOT_LITERAL:
        return f"[^{_char(av)}]"
    if op is c.ANY:
        return "."
    if op is c.IN:
        return _set(av)
    if op is c.AT and av in _AT:
        return _AT[av]
    if op is c.BRANCH:
        return "(?:" + "|".join(_emit(list(a)) for a in av[1]) + ")"
    if op is c.SUBPATTERN:
        return f"(?{_flags(av[1], av[2])}:{_emit(list(av[3]))})"
    if op in _REPEATS:
        low, high, item = av
        more = f"{{{low},}}" if high is c.MAXREPEAT else f"{{{low},{high}}}"
        return f"(?:{_emit(list(item))}){more}" + ("?" if op is c.MIN_REPEAT else "")
    raise _Unsupported(str(op))


def _char(code: int) -> str:
    ch = chr(code)
    return ch if ch.isascii() and ch.isalnum() else f"\\x{{{code:x}}}"


def _set(items: Items) -> str:
    parts: list[str] = []
    for op, av in items:
        if op is c.NEGATE:
            parts.insert(0, "^")
        elif op is c.LITERAL:
            parts.append(_char(av))
        elif op is c.RANGE:
            parts.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is c.CATEGORY and av in _CATEGORY:
            parts.append(_CATEGORY[av])
        else:
            raise _Unsupported(str(op))
    return "[" + "".join(parts) + "]"


def _flags(add: int, remove: int) -> str:
    """A group's own flags (`(?i:…)`)."""
    off = _letters(remove)
    return _letters(add) + (f"-{off}" if off else "")


def _letters(bits: int) -> str:
    """The RE2 letters of the flags i, m and s among `bits`."""
    return "".join(letter for letter, bit in _FLAGS if bits & bit)
