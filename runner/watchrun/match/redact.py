"""Redact secrets from text before it leaves the machine: `[REDACTED:kind]`, counted per kind.

The built-in rules live in `redact_rules.json` beside this module (cloud keys, GitHub, GitLab and
Slack tokens, JWTs, private-key blocks, `password=` and `Authorization:` values, credentials in
URLs, ...); a config's `redact:` patterns are added after them. All rules are compiled into one
RE2 alternation, so a text is scanned once in linear time whatever it holds (a hostile log
cannot stall the loop), and the leftmost match wins (the earlier rule at the same position).
A named group `secret` in a rule limits the replacement to that part. The `known` rules that
find a config's `${VAR}` secrets by their text (`config/secrets.py`) are a second alternation,
scanned first.

A built-in rule may be a block instead of a pattern (`KeyBlock`: the private-key rule): its
`begin` and `end` edges make its pattern, and `match/keyblocks.py` follows the lines between the
same edges in a stream, so the two never disagree on what a key block is.

Use: `redactor(extra).redact(text)` returns `(text, {kind: count})`, the text's lines kept (a
secret spanning lines becomes a marker per line); `redact_lines` is the same over lines that go
out together. Given a line cut at limits.maxLineBytes (`cut`), they also hide the head of a
secret at its end that went on past the cut (`match/redact_cut.py`: each rule's cut form).
It is pure and cheap to call; `redactor()` is cached per rule set. Callers: agent
prompts (`agents/turn.py`), JSONL match records with `output.redact: true`
(`runtime/pipeline.py`); outgoing notifications call the same function.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property, lru_cache
from typing import Any

from watchrun.match.redact_cut import cut_pattern
from watchrun.match.redact_rules import (
    KIND,
    SECRET_GROUP,
    KeyBlock,
    RedactError,
    Rule,
    builtin_rules,
    check_rule,
    key_block,
    re2_module,
    rule_options,
    rules_from,
)
from watchrun.match.sanitize import name_text, sanitize

__all__ = ["KIND", "MARKERS", "KeyBlock", "RedactError", "Redactor", "Rule", "add_counts",
           "builtin_rules", "check_rule", "clean_text", "key_block", "marker", "redact_line",
           "redact_tree", "redactor", "rules_from"]

CUT_WINDOW = 16384
"""The characters at the end of a cut line that the cut forms look at (the rules before them
look at all of it): a secret's kept head is shorter, and a cut line of 64 KiB costs 0.3 ms
more (the whole of a 16 MiB line, 7 µs a KiB, took 115 ms; its copies take 5 ms)."""
_OPEN = "[REDACTED:"
MARKERS = re.compile(re.escape(_OPEN) + KIND.pattern + r"\]")
"""A whole `[REDACTED:kind]`."""
_LONE = re.compile("[\ud800-\udfff]")
"""A lone surrogate (an undecodable byte, JSON's `"\\ud800"`): U+FFFD before RE2 reads."""


def marker(kind: str) -> str:
    return f"{_OPEN}{kind}]"


class _Pass:
    """Rules compiled into one RE2 alternation: the leftmost match wins, then the earlier rule.
    Each in multi-line mode: `^` and `$` are a line's start and end in a text of many lines."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        parts = []
        for i, rule in enumerate(self.rules):
            pattern = rule.pattern.replace(SECRET_GROUP, f"(?P<_ws{i}>")
            parts.append(f"(?P<_wr{i}>(?m:{pattern}))")  # (^ and $: each line's, as lines
            # that go out together are redacted as one text: `redact_lines`)
        self.regex = re2_module().compile("|".join(parts), rule_options())
        index = self.regex.groupindex
        self.rule_of = {index[f"_wr{i}"]: i for i in range(len(self.rules))}
        self.secret_of = {i: index.get(f"_ws{i}") for i in range(len(self.rules))}

    def which(self, m: Any) -> tuple[Rule, int | None]:
        """The rule of a match, and its `secret` group when that took part in the match."""
        last = m.lastindex
        i = self.rule_of[last] if last in self.rule_of else \
            next(i for g, i in self.rule_of.items() if m.group(g) is not None)
        group = self.secret_of[i]
        return self.rules[i], (group if group is not None and m.group(group) is not None
                               else None)


class Redactor:
    """A compiled rule set. `redact` is pure: the same text always gives the same result.
    `known` rules (a config's `${VAR}` secrets by their text, `config/secrets.py`) run first,
    in a pass of their own: the pattern rules' match on a name before the value (`password=`)
    starts further left and would win over them, and cut a value watchrun quoted."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        groups = ([r for r in self.rules if r.known], [r for r in self.rules if not r.known])
        self._passes = [_Pass(group) for group in groups if group]

    @cached_property
    def _cut(self) -> _Pass | None:
        """The rules' cut forms (`match/redact_cut.py`), compiled when a cut line first comes.
        The private-key block has none: once its BEGIN line is kept it hides the rest of the
        line, and a cut form would stop it from finding a block that goes on to a later line."""
        block = key_block().pattern
        forms = [Rule(r.kind, form) for r in self.rules
                 if r.pattern != block and (form := cut_pattern(r.pattern))]
        return _Pass(forms) if forms else None

    def redact(self, text: str, cut: bool = False) -> tuple[str, dict[str, int]]:
        """`text` with every secret replaced by `[REDACTED:kind]`, and how many of each kind.
        Its lines stay as they were: a secret spanning lines (a private-key block) becomes one
        marker per line it spans, so no line of the text around it is joined to another or
        lost (an agent's prompt holds a firing's matched lines, each in its place). `cut`: the
        text is the head of a line cut at limits.maxLineBytes, so a secret that begins at its
        end and went on past the cut is hidden (and counted) too (`match/redact_cut.py`)."""
        out, counts = self._redact_all(text, {text.count("\n")} if cut else set())
        if cut and out:
            out = self._cut_end(out, counts)
        return out, counts

    def _redact_all(self, text: str, cut: set[int]) -> tuple[str, dict[str, int]]:
        """Every pass over `text`; `cut`: the lines of it (by index) that a cut ended, where a
        marker the cut trimmed is left as it is (`_trimmed`)."""
        counts: dict[str, int] = {}
        out = text
        try:
            for one in self._passes:
                if out:
                    out = self._redact(one, out, counts, cut)
        except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"): RE2 takes UTF-8 only
            return self._redact_all(_LONE.sub("\ufffd", text), cut)
        return out, counts

    @cached_property
    def _kinds(self) -> tuple[str, ...]:
        return tuple({r.kind for r in self.rules})

    def _trimmed(self, secret: str) -> bool:
        """Whether a secret found at the end of a cut line is a marker the cut trimmed
        (`password=[REDACTED:pass`: redacted, then clipped at limits.maxLineBytes), its quotes
        aside: `[REDACTED:` or a head of it, or it and the head of one of the rules' kinds.
        Redacted (and counted) already; what is left in clear is the marker's public text."""
        inner = secret.lstrip("\\\"'")
        if len(inner) <= len(_OPEN):
            return bool(inner) and _OPEN.startswith(inner)
        part = inner[len(_OPEN):]
        return inner.startswith(_OPEN) and any(k.startswith(part) for k in self._kinds)

    def cut_end(self, text: str) -> tuple[str, dict[str, int]]:
        """Only the head of a secret at the end of `text`, the head of a line cut at
        limits.maxLineBytes, hidden (a text that is redacted whole later, a prompt)."""
        counts: dict[str, int] = {}
        return (self._cut_end(text, counts) if text else text), counts

    def _cut_end(self, text: str, counts: dict[str, int]) -> str:
        """`text` less the head of a secret that a cut left at its end: its `secret` part (the
        whole of it without one) from where it starts to the end of the text."""
        base = max(0, len(text) - CUT_WINDOW - 1)  # (one character more: `\b` sees it)
        tail = _LONE.sub("\ufffd", text[base:])  # (RE2 takes UTF-8 only; one for one)
        one = self._cut
        m = one.regex.search(tail, 1 if base else 0) if one is not None else None
        if one is None or m is None:
            return text
        rule, secret = one.which(m)
        start, end = m.span(secret) if secret is not None else (m.start(), len(tail))
        if start == end or _in_marker(tail, start) or self._trimmed(tail[start:]):
            return text
        counts[rule.kind] = counts.get(rule.kind, 0) + 1
        return text[: base + start] + marker(rule.kind) + text[base + end :]

    def _redact(self, one: _Pass, text: str, counts: dict[str, int], cut: set[int]) -> str:
        def hide(kind: str, secret: str) -> str:
            return "\n".join([marker(kind)] * (secret.count("\n") + 1))

        def trimmed(m: Any, secret: int | None) -> bool:
            start, end = m.span(secret) if secret is not None else m.span()
            return (end == len(text) or text[end] == "\n") and \
                self._trimmed(text[start:end]) and text.count("\n", 0, start) in cut

        def sub(m: Any) -> str:
            rule, secret = one.which(m)
            whole: str = m.group(0)
            if _in_marker(text, m.start(secret) if secret is not None else m.start()) \
                    or (secret is not None and _quoted_marker(m.group(secret))) \
                    or (cut and trimmed(m, secret)):
                return whole  # redacted already (`password=[REDACTED:password]`, a marker
            counts[rule.kind] = counts.get(rule.kind, 0) + 1  # read as `user:pass@`, or one
            if secret is None:  # in quotes, `\"SecretAccessKey\":\"[REDACTED:…]\"`): idempotent
                return hide(rule.kind, whole)
            start, end = m.span(secret)
            base = m.start()
            return whole[: start - base] + hide(rule.kind, whole[start - base:end - base]) \
                + whole[end - base :]

        redacted: str = one.regex.sub(sub, text)
        return redacted

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Where the pattern rules would hide something in `text`: (start, end, kind) of each
        secret (of the whole match for a rule without a `secret` group)."""
        found = []
        if _LONE.search(text):  # (one for one: the spans stay those of `text`)
            text = _LONE.sub("\ufffd", text)
        for m in (self._passes[-1].regex.finditer(text) if self._passes else ()):
            rule, secret = self._passes[-1].which(m)
            start, end = m.span(secret) if secret is not None else m.span()
            found.append((start, end, rule.kind))
        return found

    def redact_lines(self, lines: Sequence[str], cut: Sequence[bool] = ()
                     ) -> tuple[list[str], dict[str, int]]:
        """Lines that go out together (a firing's matched lines, in order) redacted as one text,
        so a secret spanning them (a private-key block) is found whole: as many lines as
        before, each in its place (`redact`). `cut[k]`: line k is the head of a line cut at
        limits.maxLineBytes (`redact`'s `cut`)."""
        was_cut = [k < len(cut) and cut[k] for k in range(len(lines))]
        text, counts = self._redact_all("\n".join(lines), {k for k, c in enumerate(was_cut) if c})
        out = text.split("\n") if lines else []
        if len(out) != len(lines):
            counts, out = {}, []  # (a line held a newline: each on its own, as a record is)
            for line, c in zip(lines, was_cut, strict=True):
                red, found = self._redact_all(line, {line.count("\n")} if c else set())
                out.append(red)
                add_counts(counts, found)
        return [self._cut_end(x, counts) if was_cut[k] and x else x
                for k, x in enumerate(out)], counts


def _in_marker(text: str, pos: int) -> bool:
    """Whether a secret found at `pos` starts inside a marker of an earlier redaction: a whole
    `[REDACTED:kind]` (a kind as rules have them: no text a log line wraps in `[REDACTED: …]`
    hides a secret), its `[` included."""
    opened = text.rfind(_OPEN, 0, pos + len(_OPEN))  # (one starting at `pos` counts)
    if opened < 0:
        return False
    closed = text.find("]", opened)
    return closed >= pos and KIND.fullmatch(text, opened + len(_OPEN), closed) is not None


def _quoted_marker(secret: str) -> bool:
    """Whether a secret is a whole marker in quotes (`"[REDACTED:kind]"`, escaped or not): a
    value redacted already by a rule that keeps the quotes around it."""
    inner = secret.strip("\\\"'")
    return inner.startswith(_OPEN) and inner.endswith("]") \
        and KIND.fullmatch(inner, len(_OPEN), len(inner) - 1) is not None


def redact_line(redactor: Redactor, text: str, raw: str, cut: bool = False
                ) -> tuple[str, str | None, dict[str, int]]:
    """A record's sanitized `text` and its `raw` form, both redacted, and the counts (of `text`).
    `raw` comes back None when it cannot be kept safely: when an escape sequence split a secret
    in it, the rules find it only in `text`, so the redacted raw would still carry it. `cut`:
    the line was cut at limits.maxLineBytes (`Redactor.redact`)."""
    red_text, counts = redactor.redact(text, cut)
    if raw == text:
        return red_text, red_text, counts
    red_raw, _ = redactor.redact(raw, cut)
    return red_text, (red_raw if sanitize(red_raw)[0] == red_text else None), counts


def clean_text(text: str, redactor: Redactor | None) -> str:
    """A text field others may have chosen (a `${VAR}` in a label or command, a file name, a
    message naming one) as records and snapshots hold it: its controls escaped, none dropped
    (`name_text`), and redacted when given a redactor."""
    clean = name_text(text)
    return clean if redactor is None else redactor.redact(clean)[0]


@lru_cache(maxsize=32)
def redactor(extra: tuple[Rule, ...] = ()) -> Redactor:
    """The built-in rules plus `extra` (a config's `redact:`), compiled once per rule set."""
    return Redactor((*builtin_rules(), *extra))


def add_counts(into: dict[str, int], counts: Mapping[str, int] | Iterable[tuple[str, int]]
               ) -> None:
    """Add per-kind counts into a running total (status, metrics)."""
    items = counts.items() if isinstance(counts, Mapping) else counts
    for kind, n in items:
        into[kind] = into.get(kind, 0) + n


def redact_tree(value: Any, redactor: Redactor) -> Any:
    """`value` (JSON: dicts, lists, strings, …) with every string redacted; keys are kept."""
    if isinstance(value, str):
        return redactor.redact(value)[0]
    if isinstance(value, dict):
        return {k: redact_tree(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_tree(v, redactor) for v in value]
    return value
