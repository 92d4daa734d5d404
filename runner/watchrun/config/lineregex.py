"""Checks of a watcher's regexes against what a line can be: every line, no line, one case."""

from __future__ import annotations

import re

from watchrun.config.checks import Ctx, quoted
from watchrun.config.tree import KeyPath
from watchrun.match.regex import Analysis, C, Unsupported, analyse, literal_runs, walk
from watchrun.match.scanning import re2_regex

__all__ = ["line_checks"]

_PROBES = (b"_", b"\x01", b"_\x01" * 6)
"""Lines besides the empty one that a regex matching the empty string anywhere matches too: a
word character, a control, and both alternating. `^\\s*$` (blank lines) matches the empty line
but not these."""


def line_checks(ctx: Ctx, where: KeyPath, pattern: str, case_sensitive: bool) -> None:
    """Report a regex that matches every line where that cannot be meant: an exclude (no line
    would be left) or a gate's `require` (any line would do) is an error, a `pattern` a
    warning unless it consumes nothing (`^`, documented as matching every line)."""
    try:
        analysis = analyse(pattern, case_sensitive)  # (its errors are reported elsewhere)
    except ValueError:
        return
    if any(op is C.LITERAL and av == 10 for op, av in walk(analysis.tree)):
        _line_break(ctx, where, pattern, raw=not analysis.tree.state.flags & re.VERBOSE)
    if analysis.caseless:
        _one_case(ctx, where, list(literal_runs(analysis.tree)))
    if _every_line(analysis):
        role = where[-1] if isinstance(where[-1], str) else "exclude"
        why = "matches the empty string, so it "
        if role == "exclude":
            ctx.report.error(where, f"{quoted(pattern)} {why}excludes every line (an empty "
                             "alternative? `a|` and `(?:a)?` match where `a` does not)")
        elif role == "require":
            ctx.report.error(where, f"{quoted(pattern)} {why}is satisfied by any line: the "
                             "gate could never be crossed by it (an empty alternative? `a|` "
                             "and `(?:a)?` match where `a` does not)")
        elif analysis.tree.getwidth()[1] > 0:
            ctx.report.warning(where, f"{quoted(pattern)} {why}matches every line (an empty "
                               "alternative? `a|` and `(?:a)?` match where `a` does not); "
                               "write `^` if every line is meant")


def _one_case(ctx: Ctx, where: KeyPath, runs: list[str]) -> None:
    """A caseless regex holding a word with a non-ASCII letter that has another case
    (`ошибка`, `échec`, also written as escapes, `\\u043e`): case folding is ASCII only, so the
    word matches only as written, unless its other cases are written too. `runs`: the regex's
    literal text (`regex.literal_runs`)."""
    text = "\n".join(runs)
    for word in re.findall(r"\w+", text):
        letter = next((c for c in word if not c.isascii() and c.upper() + c.lower() != c * 2),
                      None)
        forms = list(dict.fromkeys((word, word.upper(), word.lower())))
        if letter is None or all(form in text for form in forms):
            continue
        ctx.report.warning(where, f"`{word}` matches only as written: "
                           "case-insensitive matching folds ASCII letters only, and "
                           f"`{letter}` is not one; write `(?:{'|'.join(forms)})` to match the "
                           "other case too (or match case-sensitively, if only this case is "
                           "meant)")
        return


def _every_line(analysis: Analysis) -> bool:
    """Whether the regex matches every line: it matches the empty string with no condition,
    or it matches the empty line (as the matcher's reference regex searches it) and the probe
    lines, searched by RE2 (linear: a probe never stalls the check; without RE2, or for a
    regex only Python `re` runs, the probes are not tried)."""
    if analysis.always:
        return True
    if not analysis.empty_line:
        return False
    try:
        search = re2_regex(analysis).search
    except Unsupported:
        return False
    return all(search(p) is not None for p in _PROBES)


def _line_break(ctx: Ctx, where: KeyPath, pattern: str, raw: bool) -> None:
    """A regex that needs a line break where it has one: lines are split at line breaks, so no
    line holds one. Raw (a YAML `|` block scalar keeps the last one): an error; escaped, `\\n`
    (maybe in one alternative only): a warning. `raw`: a raw line break is not whitespace
    that verbose mode, `(?x)`, ignores."""
    if raw and "\n" in pattern:
        ctx.report.error(where, f"{quoted(pattern)} holds a line break (U+000A) as itself, "
                         "which no line holds (the log is split into lines at line breaks), "
                         "so it can never match there; a YAML `|` or `>` block scalar ends "
                         "with one: write `|-`, `>-` or a plain scalar")
    else:
        ctx.report.warning(where, f"{quoted(pattern)} needs a line break (`\\n`) there, which "
                           "no line holds (the log is split into lines at line breaks), so it "
                           "can never match there; match the line's end with `$`")
