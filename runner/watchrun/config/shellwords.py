"""Where each `${VAR}` of a command sits in shell syntax, so its value is quoted as one word.

Interpolation marks every reference with a placeholder character, and `contexts` reads the
command as `/bin/sh -c` (dialect `sh`) or `shlex.split` (dialect `shlex`) would, to tell for
each placeholder whether it is unquoted, inside '…', inside "…" or inside a comment. `quote`
then writes the value so that it is exactly one word (or part of the word it sits in) there:

| context | written as | e.g. `x` = `a b'c` |
|---|---|---|
| unquoted | `shlex.quote(x)` | `'a b'"'"'c'` |
| in "…" | `"` + `shlex.quote(x)` + `"` (leave the quotes, one word, back in) | `"'a b'"'"'c'"` |
| in '…' | `'` + `shlex.quote(x)` + `'` | `''a b'"'"'c''` |
| in a comment | `x` with newlines as spaces (a comment is inert up to its newline) | |

Where a value cannot be quoted safely the reference is refused with the reason: inside
backticks, `$((…))`, a shell `${…}` (written `$${…}`), bash's `$'…'`, a here-document, right
after a `\\` (it
would escape the quoting) or a `$` (`$'…'` is another quoting in bash), or after a construct
this reader does not follow (`case` inside `$(…)`, quotes inside backticks). The fix is always
the same: let the shell expand it from the environment (`"$$VAR"`), or use a list command.
Quoting is not enough where the word is read again (a shell named in the command, `eval`, bash
arithmetic): `config/shellcode.py` also limits the characters such a value may hold.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Literal

__all__ = ["Context", "command_line", "contexts", "quote"]

Context = Literal["plain", "double", "single", "comment"]
_META = " \t\n;&|()<>"
_NESTED = {"backtick": "inside backticks (`…`)", "arith": "inside an arithmetic $((…))",
           "param": "inside a shell parameter expansion ($${…})",
           "ansi": "inside bash's $'…' quoting (where `\\'` does not end it)"}


def command_line(command: str | Iterable[object]) -> str:
    """A command as one line to show: a string as it is, an argv shell-quoted (`sh -c 'echo a
    b' 'x y'`), so pasted into a shell it runs what the watcher runs (`validate`, the default
    `label`, `list`)."""
    return command if isinstance(command, str) else shlex.join(str(a) for a in command)


def quote(value: str, context: Context) -> str:
    """`value` as one shell word (or part of the word it sits in) in `context`."""
    if context == "comment":
        return value.replace("\n", " ")
    word = shlex.quote(value)
    if context == "double":
        return f'"{word}"'
    if context == "single":
        return f"'{word}'"
    return word


class _Frame:
    """One level of nesting: top, cmd `$(…)`, arith `$((…))`, param `${…}`, backtick, single,
    double or comment; `depth` counts the brackets opened inside it."""

    __slots__ = ("depth", "kind")

    def __init__(self, kind: str) -> None:
        self.kind, self.depth = kind, 0


class _Reader:
    """A one-pass reader of shell syntax that records the context of each placeholder."""

    def __init__(self, text: str, mark: str, dialect: Literal["sh", "shlex"]) -> None:
        self.text, self.mark, self.sh = text, mark, dialect == "sh"
        self.found: list[Context | str] = []
        self.stack = [_Frame("top")]
        self.untrackable = ""
        self.heredocs: list[tuple[str, bool]] = []
        self.heredoc = False  # inside a here-document's body
        self.word_start = True  # the next character starts a word (where `#` is a comment)

    def place(self, why: str = "") -> None:
        kinds = [frame.kind for frame in self.stack]
        nested = [_NESTED[k] for k in kinds if k in _NESTED]
        innermost = kinds[-1]
        if self.untrackable:
            self.found.append(f"after {self.untrackable}, which this reader does not follow")
        elif self.heredoc:
            self.found.append("inside a here-document")
        elif why or nested:
            self.found.append(why or nested[0])
        elif innermost == "single" or innermost == "double" or innermost == "comment":
            self.found.append(innermost)
        else:
            self.found.append("plain")

    def untrack(self, what: str) -> None:
        self.untrackable = self.untrackable or what

    def run(self) -> list[Context | str]:
        text, n, i = self.text, len(self.text), 0
        while i < n:
            if self.heredoc:
                i = self._heredoc_body(i)
                continue
            c = text[i]
            nxt = text[i + 1] if i + 1 < n else ""
            kind = self.stack[-1].kind
            if c == self.mark:
                dollar = self.sh and i > 0 and text[i - 1] == "$" and kind != "single" and (
                    i < 2 or text[i - 2] != "\\")
                self.place("right after a `$` (bash would read `$'…'`)" if dollar else "")
                i, self.word_start = i + 1, False
            elif kind == "single":
                if c == "'":
                    self.stack.pop()
                i += 1
            elif kind == "comment":
                if c == "\n":
                    self.stack.pop()  # the newline also ends the command: read it again
                else:
                    i += 1
            elif kind == "backtick":
                i = self._backtick(i, c)
            elif kind == "ansi":
                i = self._ansi(i, c)
            elif kind == "double":
                i = self._double(i, c, nxt)
            else:  # top, cmd, arith, param: unquoted shell text
                i = self._unquoted(i, c, nxt)
        return self.found

    def _escaped(self, i: int) -> int:
        """A backslash at `i`: it escapes the next character (a placeholder: refused)."""
        if i + 1 < len(self.text) and self.text[i + 1] == self.mark:
            self.place("right after a `\\` (it would escape the quoting)")
        return i + 2

    def _backtick(self, i: int, c: str) -> int:
        if c == "\\":
            return self._escaped(i)
        if c in "'\"":
            self.untrack("a quote inside backticks")
        elif c == "`":
            self.stack.pop()
        return i + 1

    def _ansi(self, i: int, c: str) -> int:
        """Inside bash's `$'…'`: a backslash escapes the next character, `\\'` included."""
        if c == "\\":
            return self._escaped(i)
        if c == "'":
            self.stack.pop()
        return i + 1

    def _double(self, i: int, c: str, nxt: str) -> int:
        if c == "\\":
            return self._escaped(i)
        if c == '"':
            self.stack.pop()
        elif self.sh and c == "`":
            self.stack.append(_Frame("backtick"))
        elif self.sh and c == "$" and nxt in ("(", "{"):
            return self._dollar(i, nxt)
        return i + 1

    def _dollar(self, i: int, nxt: str) -> int:
        if nxt == "{":
            self.stack.append(_Frame("param"))
            return i + 2
        if self.text.startswith("$((", i):
            self.stack.append(_Frame("arith"))
            return i + 3
        self.stack.append(_Frame("cmd"))
        self.word_start = True
        return i + 2

    def _unquoted(self, i: int, c: str, nxt: str) -> int:
        frame = self.stack[-1]
        kind, word_start = frame.kind, self.word_start
        self.word_start = c in _META
        if c == "\\":
            return self._escaped(i)
        if kind == "param" and c in "'\"":
            self.untrack("a quote inside $${…}")
        if c == "'":
            self.stack.append(_Frame("single"))
        elif c == '"':
            self.stack.append(_Frame("double"))
        elif not self.sh:
            return i + 1
        elif c == "$" and nxt == "'":
            self.stack.append(_Frame("ansi"))
            return i + 2
        elif c == "#" and word_start and kind in ("top", "cmd"):
            self.stack.append(_Frame("comment"))
        elif c == "`":
            self.stack.append(_Frame("backtick"))
        elif c == "$" and nxt in ("(", "{"):
            return self._dollar(i, nxt)
        elif kind == "param" and c in "{}":
            if c == "}" and frame.depth == 0:
                self.stack.pop()
            else:
                frame.depth += 1 if c == "{" else -1
        elif kind in ("cmd", "arith") and c in "()":
            if c == ")" and frame.depth == 0:
                self.stack.pop()
                self.word_start = False  # `$(…)#x` is one word: that `#` is no comment
                return i + (2 if kind == "arith" and nxt == ")" else 1)
            frame.depth += 1 if c == "(" else -1
        elif kind == "cmd" and word_start and re.match(r"case[ \t\n]", self.text[i : i + 5]):
            self.untrack("a `case` inside $(…)")
        elif c == "<" and nxt == "<" and kind in ("top", "cmd"):
            return self._heredoc_start(i)
        elif c == "\n" and self.heredocs:
            self.heredoc = True
        return i + 1

    def _heredoc_start(self, i: int) -> int:
        """`<<WORD` or `<<-WORD` (`<<<` is a here-string: plain text); the body starts at the
        next newline and ends at a line that is WORD (with leading tabs for `<<-`)."""
        text = self.text
        if text.startswith("<<<", i):
            return i + 3
        j = i + 2
        strip = j < len(text) and text[j] == "-"
        j += strip
        while j < len(text) and text[j] in " \t":
            j += 1
        start = j
        while j < len(text) and text[j] not in _META:
            j += 1
        for _ in range(text.count(self.mark, start, j)):
            self.place("in a here-document's delimiter")
        word = text[start:j].replace("'", "").replace('"', "").replace("\\", "")
        if self.mark in word or not word:
            self.untrack("a here-document delimiter")
        self.heredocs.append((word, strip))
        return j

    def _heredoc_body(self, i: int) -> int:
        """One line of a here-document body, from its start (placeholders in it are refused)."""
        text = self.text
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        line = text[i:end]
        for _ in range(line.count(self.mark)):
            self.place()
        word, strip = self.heredocs[0]
        if (line.lstrip("\t") if strip else line) == word:
            self.heredocs.pop(0)
            self.heredoc = bool(self.heredocs)
        return end + 1


def contexts(text: str, mark: str, dialect: Literal["sh", "shlex"]) -> list[Context | str]:
    """For each `mark` in `text`, in order: its Context, or why a value cannot be quoted there.
    `sh` reads like `/bin/sh -c` (comments, `$(…)`, here-documents); `shlex` like
    `shlex.split` (quotes and backslashes only)."""
    return _Reader(text, mark, dialect).run()
