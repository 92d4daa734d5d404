"""Which arguments of a command are shell code, and which values may be written into shell code.

Quoting a `${VAR}` value as one word (`config/shellwords.py`) is not enough wherever a shell
reads it: a shell named inside the code (`bash -lc '… ${V} …'`, `eval`, `trap`, `find -exec sh
-c`) parses the word again, and bash evaluates a quoted word as arithmetic in `(( ))`,
`[[ … -gt … ]]`, `let`, `declare -i`, `test -v`, `printf -v` and `read`, where `a[$(cmd)]` runs
`cmd`. No reader can know every such construct, so a value that lands in shell code may hold
only characters that start no code in any of them (`unsafe_character`). In an argv list, any
program that looks like a shell runs the argument after its `-c` as shell code
(`script_indexes`): the only cost of a false positive is that stricter rule.
"""

from __future__ import annotations

import os
import re
import string
import unicodedata
from collections.abc import Sequence

__all__ = ["ORDINARY", "SHELLS", "describe_character", "looks_like_shell", "script_indexes",
           "unsafe_character"]

SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "ksh93", "ksh88", "mksh", "lksh",
                    "pdksh", "oksh", "loksh", "rbash", "rksh", "zsh", "posh", "yash", "bosh",
                    "sh.distrib", "fish", "csh", "tcsh", "es", "rc", "elvish",
                    "nu", "xonsh", "osh", "ysh", "oil", "gash", "hush", "msh", "toysh"})
"""Shells by name. `looks_like_shell` also takes every name that is `sh`, ends in `sh` or starts
with `sh.`, so most of these are listed for the reader; it is the others (`fish`, `es`, `rc`,
`nu`, `ysh`, `oil`) that only this set names."""
ORDINARY = frozenset(string.ascii_letters + string.digits + " _-./:@%+=,~#*?[]{}!")
"""The ASCII characters a value in shell code may hold: none starts a command, a
substitution, a redirection, a quote or an escape, in any shell or in bash arithmetic."""
_NOT_SHELLS = frozenset({"ssh", "autossh"})
"""Names ending in `sh` whose `-c` is no script (ssh's cipher): their arguments stay as written."""
_C_OPTION = re.compile(r"-[A-Za-z]*c[A-Za-z]*|--command|-(?i:command|commandwithargs|cwa)")
"""`-c` alone or in a cluster, `--command`, and PowerShell's `-Command` (any case: `pwsh`)."""
_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
"""Shell options whose value is the next argument (`sh -o errexit -c …`)."""


def unsafe_character(value: str) -> str | None:
    """The first character of `value` that must not reach shell code, or None. Allowed: the
    ORDINARY ASCII characters and non-ASCII letters, marks, digits, punctuation and symbols
    (shells give no byte of their UTF-8 a meaning); refused: the rest of ASCII (`$`, `` ` ``,
    `;`, `&`, `|`, `<`, `>`, `(`, `)`, `'`, `"`, `\\`, `^`, controls) and non-ASCII controls,
    format characters (bidi), line and paragraph separators, other spaces, surrogates (bytes
    that are not UTF-8), private-use and unassigned characters."""
    for ch in value:
        if ch in ORDINARY:
            continue
        if ch.isascii() or unicodedata.category(ch)[0] not in "LMNPS":
            return ch
    return None


def describe_character(ch: str) -> str:
    """`ch` as a message may show it: quoted, escaped when not printable (Python's `repr`, so no
    control character reaches a terminal), with its code point unless it is printable ASCII."""
    return repr(ch) if ch.isascii() and ch.isprintable() else f"{ch!r} (U+{ord(ch):04X})"


def looks_like_shell(arg: str) -> bool:
    """True when the basename of `arg` is a shell's name, or looks like one (`sh`, `…sh`,
    `sh.…`, a versioned `bash5`, `ksh93`): better a program taken for a shell than a shell
    missed."""
    name = os.path.basename(arg)
    stem = name.rstrip("0123456789.-")
    if stem in _NOT_SHELLS:
        return False
    return name in SHELLS or stem in SHELLS or stem.endswith("sh") or name.startswith("sh.")


def script_indexes(argv: Sequence[str]) -> list[int]:
    """The indexes of what may be the script of `[sh, -c, SCRIPT, …]`: any program that
    `looks_like_shell`, run directly or through a wrapper (`env sh -c`, `nice -n 5 bash -lc`,
    `timeout 9 sh -c`), option clusters such as `-ec` or `-lc`, other options before the script,
    those that take a value with it (`-o errexit`, `-O extglob`, `--rcfile F`), `-c -` (both the
    `-` and what follows it), `--command SCRIPT`, `--command=SCRIPT`. Every argument naming a
    shell is looked at, not only the first: an interpolated value may end in `/sh` (`X=${V}`
    before `sh -c` in `env X=${V} sh -c …`), and it must not hide the shell after it. Empty
    when no shell runs a `-c` script."""
    return sorted({j for i, arg in enumerate(argv) if looks_like_shell(arg)
                   for j in _script_after(argv, i)})


def _script_after(argv: Sequence[str], shell: int) -> list[int]:
    """The script's index after the shell at `shell`: past its options (and their values) to
    a `-c` cluster, then past more options to the first operand (with the one after it when
    that is `-`, which some shells take as the end of the options)."""
    j, seen_c = shell + 1, False
    while j < len(argv):
        arg = argv[j]
        if arg == "--":  # the end of the options: the script (with -c) or a script file
            return [j + 1] if seen_c and j + 1 < len(argv) else []
        if arg.startswith("--command="):  # fish's `--command=SCRIPT`
            return [j]
        if arg in _WITH_VALUE:
            j += 2
        elif arg.startswith(("-", "+")) and arg != "-":
            seen_c = seen_c or _C_OPTION.fullmatch(arg) is not None
            j += 1
        elif not seen_c:
            return []  # without -c, an operand is a script file
        else:
            return [j, j + 1] if arg == "-" and j + 1 < len(argv) else [j]
    return []
