"""Which arguments of a list command an interpreter runs as program code: `python -c CODE`,
`perl -e`, `ruby -e`, `node -e`/`-p`/`-pe`/`--eval`, `php -r` (and `-B`/`-R`/`-E`), `lua -e`,
`Rscript -e`, `expect -c`, `osascript -e`, and awk's program (or gawk's `-e`).

A `${VAR}` there would be code in that language, and no quoting is generic across languages
(`config/shellcode.py` quotes values in shell code only): the reference is refused, and the
value is passed as an argument of its own after the code, or read from the environment. The
options are read as each program reads them; where that is unsure, more is taken for code,
never less (the cost of a mistake is a refused `${VAR}` in that argument).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["program_code"]


class _Reader(NamedTuple):
    language: str
    code: str
    """Option letters whose value is code (`-c CODE`, `-cCODE`, or ending a cluster)."""
    value: str = ""
    """Option letters that take a value that is not code (the rest of the argument or the
    next one)."""
    long: tuple[str, ...] = ()
    """Long options whose value is code (`--eval CODE`, `--eval=CODE`)."""
    operand: bool = False
    """The first operand is the program unless a code or file option gave it (awk)."""
    files: str = ""
    """Option letters that name a program file (then no operand is code: `awk -f prog`)."""
    ends: bool = False
    """The code ends the options: what follows is the program's arguments (`python -c`)."""
    joined: bool = True
    """A code letter before the end of a cluster takes the rest of it (`-cCODE`); else the
    cluster's letters are all flags and the code is the next argument (node's `-pe CODE`)."""


_PYTHON = _Reader("Python", "c", "WXm", ends=True)
_NODE = _Reader("JavaScript", "ep", "r", ("--eval", "--print"), joined=False)
_AWK = _Reader("awk", "e", "Fvf", ("--source",), True, "f")
_READERS = {
    "python": _PYTHON, "pypy": _PYTHON, "node": _NODE, "nodejs": _NODE,
    "perl": _Reader("Perl", "eE", "IMmFdD"),
    "ruby": _Reader("Ruby", "e", "CEFIKTr"),
    "php": _Reader("PHP", "rBRE", "cdfzF"),
    "lua": _Reader("Lua", "e", "l"), "luajit": _Reader("Lua", "e", "lbj"),
    "Rscript": _Reader("R", "e"),
    "expect": _Reader("Tcl", "c", "fD"),
    "osascript": _Reader("AppleScript", "e", "lis"),
    "awk": _AWK, "gawk": _AWK, "mawk": _AWK, "nawk": _AWK, "busybox-awk": _AWK,
}


def program_code(argv: Sequence[str]) -> dict[int, str]:
    """The indexes of the arguments of `argv` that an interpreter named in it (at any place:
    behind `sudo`, `env`, `timeout`…) runs as code, each with what it is (`the Python code
    `python` runs`)."""
    found: dict[int, str] = {}
    for i, arg in enumerate(argv):
        name = os.path.basename(arg).rstrip("0123456789.-")
        reader = _READERS.get(name)
        if reader is not None:
            found.update(dict.fromkeys(_code(argv, i, reader),
                                       f"the {reader.language} code `{name}` runs"))
    return found


def _code(argv: Sequence[str], at: int, r: _Reader) -> list[int]:
    """The code arguments of the program at `at`, read as its options are read."""
    found: list[int] = []
    given = False  # a code or file option gave the program (awk's operand is then not it)
    j = at + 1
    while j < len(argv):
        arg = argv[j]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            if arg == "--":
                j += 1
            if r.operand and not given and j < len(argv):
                found.append(j)
            return found
        long = next((opt for opt in r.long if arg == opt or arg.startswith(opt + "=")), None)
        if long is not None:
            found.append(j if "=" in arg else j + 1)
            given, j = True, j + (1 if "=" in arg else 2)
            continue
        if arg.startswith("--"):
            j += 1
            continue
        j += 1
        for k, letter in enumerate(arg[1:], 1):
            if letter in r.code or letter in r.value:
                last = k == len(arg) - 1 or (not r.joined and letter in r.code)
                if letter in r.code:
                    found.append(j if last else j - 1)
                    given = True
                given = given or letter in r.files
                j += 1 if last else 0
                break
        if r.ends and found:
            return found
    return found
