"""Where `$` matches: at a line's end, taking with it a `\\r` that ends the line (the CR of a CRLF
line ending); the reference regex built so.

A log a Windows tool (or many CI tools) wrote ends its lines in `\\r\\n`. Every surface shows
such a line without the `\\r`, so `build done$` is what a user writes for it; with `$` only at
the very end, an anchored `exclude` stopped excluding and a `gate.require` "never appeared"
beside a `logs` output showing the line. So `$` means `\\r?\\Z`: the end, after one optional
`\\r`. Only `$` changes: `\\Z` stays the very end (as in Python), one `\\r` is the ending
(`a\\r\\r\\n` ends in `a\\r`), a `\\r` inside a line is data, and the rest of the pattern still
sees the `\\r` (`\\r$` and `\\s$` match it). Written so, as a `\\r` the `$` consumes, every engine
says it in its own syntax (`\\r?$`, multi-line), with no lookahead, which RE2 and hyperscan lack:
what follows a `$` in a pattern is past the `\\r` (`$\\r` never matches; no pattern a log needs
puts anything after a `$`). In a lookbehind, which Python needs of a fixed width, `$` is the
lookahead `(?=\\r?\\Z)`, the same for what precedes it.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_P: Any = importlib.import_module("re._parser")
_COMPILER: Any = importlib.import_module("re._compiler")
C: Any = importlib.import_module("re._constants")

__all__ = ["CR", "reference"]

CR = 13


def reference(tree: Any, flags: int) -> re.Pattern[bytes]:
    """The per-line regex of the bytes pattern parsed into `tree` (which holds a `$`):
    Python's, with each `$` taking a final `\\r` with it."""
    compiled: re.Pattern[bytes] = _COMPILER.compile(_rewritten(tree, tree.state, False), flags)
    return compiled


def _dollar(state: Any, behind: bool) -> list[tuple[Any, Any]]:
    """`\\r?\\Z`, or `(?=\\r?\\Z)` in a lookbehind (`behind`)."""
    cr = _P.SubPattern(state, [(C.LITERAL, CR)])
    end = [(C.MAX_REPEAT, (0, 1, cr)), (C.AT, C.AT_END_STRING)]
    return [(C.ASSERT, (1, _P.SubPattern(state, end)))] if behind else end


def _rewritten(tree: Any, state: Any, behind: bool) -> Any:
    out: list[tuple[Any, Any]] = []
    for op, av in tree.data:
        if op is C.AT and av is C.AT_END:
            out += _dollar(state, behind)
        else:
            out.append(_node(op, av, state, behind))
    return _P.SubPattern(state, out)


def _node(op: Any, av: Any, state: Any, behind: bool) -> tuple[Any, Any]:
    if op is C.BRANCH:
        return op, (av[0], [_rewritten(alt, state, behind) for alt in av[1]])
    if op is C.SUBPATTERN:
        return op, (*av[:3], _rewritten(av[3], state, behind))
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        return op, (av[0], av[1], _rewritten(av[2], state, behind))
    if op in (C.ASSERT, C.ASSERT_NOT):
        return op, (av[0], _rewritten(av[1], state, behind or av[0] < 0))
    if op is C.ATOMIC_GROUP:
        return op, _rewritten(av, state, behind)
    if op is C.GROUPREF_EXISTS:
        group, yes, no = av
        return op, (group, _rewritten(yes, state, behind),
                    None if no is None else _rewritten(no, state, behind))
    return op, av
