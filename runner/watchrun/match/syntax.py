"""A pattern's text made ready for Python's parser: POSIX classes spelled out, depth bounded."""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "POSIX_CLASSES", "prepare"]

MAX_DEPTH = 100
"""Groups nested deeper are refused: Python's parser (and the translation to the engines)
recurse once per level and end in a RecursionError near 300."""

POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\x0b\\x0c\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
"""`[[:name:]]` as grep and RE2 read it (ASCII), in Python's class syntax."""


def prepare(pattern: str) -> str:
    """`pattern` with each `[:name:]` inside a bracket class replaced by its ASCII ranges;
    ValueError naming the problem for an unknown or negated class name, or groups nested over
    MAX_DEPTH deep. Escapes, classes and `(?#…)` comments are skipped as Python reads them."""
    out: list[str] = []
    depth = deepest = 0
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        elif c == "[":
            i = _bracket(pattern, i, out)
        elif pattern.startswith("(?#", i):
            end = pattern.find(")", i)
            end = n if end < 0 else end + 1
            out.append(pattern[i:end])
            i = end
        else:
            if c == "(":
                depth += 1
                deepest = max(deepest, depth)
            elif c == ")":
                depth = max(0, depth - 1)
            out.append(c)
            i += 1
    if deepest > MAX_DEPTH:
        raise ValueError(f"groups are nested {deepest} deep; at most {MAX_DEPTH} are allowed")
    return "".join(out)


def _bracket(pattern: str, i: int, out: list[str]) -> int:
    """Copy the class opening at `i` to `out`, POSIX names spelled out; the index after it."""
    out.append("[")
    i += 1
    if pattern.startswith("^", i):
        out.append("^")
        i += 1
    if pattern.startswith("]", i):  # a `]` first is a member, as in Python
        out.append("]")
        i += 1
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        elif c == "]":
            out.append("]")
            return i + 1
        elif name := _class_name(pattern, i):
            end = i + 2 + len(name)
            if name.startswith("^"):
                raise ValueError(f"the negated POSIX class [:{name}:] is not supported; write "
                                 f"a negated class instead: [^[:{name[1:]}:]]")
            if name not in POSIX_CLASSES:
                raise ValueError(f"unknown POSIX class [:{name}:]; known: "
                                 + " ".join(f"[:{k}:]" for k in POSIX_CLASSES))
            out.append(POSIX_CLASSES[name])
            i = end + 2
        else:
            out.append(c)
            i += 1
    return i  # unterminated: Python's parser says so


def _class_name(pattern: str, i: int) -> str:
    """The name of the `[:name:]` at `i` (letters, maybe after `^`), or "" when none is."""
    end = pattern.find(":]", i + 2) if pattern.startswith("[:", i) else -1
    name = pattern[i + 2:end] if end >= 0 else ""
    letters = name.removeprefix("^")
    return name if letters.isascii() and letters.isalpha() else ""
