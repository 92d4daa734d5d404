"""The redaction rules: their kinds and checks, block rules, the built-in set (JSON file)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from msgspec import Struct

from watchrun.match.optional import Unloadable, re2_installed

KIND = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
"""A rule's kind: shown in `[REDACTED:kind]` and used as the key of the counts."""
SECRET_GROUP = "(?P<secret>"


class RedactError(ValueError):
    """A redaction pattern RE2 cannot compile (the message says why)."""


class Rule(Struct, frozen=True):
    """One redaction rule: text matching `pattern` (RE2 syntax) becomes `[REDACTED:kind]`."""

    kind: str
    pattern: str
    known: bool = False
    """A config's `${VAR}` secret found by its text (`config/secrets.py`): runs first."""


class KeyBlock(Struct, frozen=True):
    """A rule over a block of lines: a line holding `begin` (RE2 syntax, and the same in Python
    `re`, which `match/keyblocks.py` runs) up to the first `end` after it."""

    kind: str
    begin: str
    end: str

    @property
    def pattern(self) -> str:
        """Its redaction pattern: from `begin` to the first `end`, newlines included, or, when
        no `end` follows, the rest of the `begin` line."""
        return f"{self.begin}(?:[\\s\\S]*?{self.end}|[^\\n]*)"

    def rule(self) -> Rule:
        return Rule(self.kind, self.pattern)


class Re2Required(Unloadable):
    """google-re2 missing or not loadable where redaction needs it: said in one line by every
    command, exit 3 (as an `Unloadable` engine is), never a traceback."""


def re2_module() -> Any:
    """google-re2, imported when a rule is compiled (not by every module that names `Rule`).
    Redaction has no fallback: it runs its patterns, a config's own among them, over every
    line, and only RE2 runs them in linear time (docs/decisions.md)."""
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError as exc:
        why = (f"could not be loaded ({' '.join(str(exc).split())})" if re2_installed()
               else "is not installed")
        raise Re2Required(
            f"google-re2 is required for redaction (output.redact, redact: rules, the values "
            f"of a config's ${{VAR}}s, agents' prompts, actions' bodies), which runs only on "
            f"RE2's linear-time engine, and "
            f"it {why}: pip install google-re2 (wheels for Linux with glibc on x86_64 and "
            f"aarch64; elsewhere it is built from source: README \"Installing\")") from None
    return re2


def rule_options() -> Any:
    options = re2_module().Options()
    options.log_errors = False
    return options


def check_rule(rule: Rule) -> None:
    """Raise RedactError when `rule` cannot be used (its kind, or a pattern RE2 refuses), and
    Re2Required when RE2 is not there to tell."""
    re2 = re2_module()
    if not KIND.fullmatch(rule.kind):
        raise RedactError(f"invalid kind {rule.kind!r}: lowercase letters, digits and -, "
                          "at most 40")
    if rule.pattern.count(SECRET_GROUP) > 1:
        raise RedactError("at most one group may be named `secret`")
    try:
        compiled = re2.compile(rule.pattern, rule_options())
    except Exception as exc:  # re2.error and what else the binding raises for a bad pattern
        raise RedactError(f"RE2 cannot compile it ({exc}); redaction patterns run on RE2 "
                          "(linear time), without lookaround or backreferences") from None
    if compiled.search("") is not None:
        raise RedactError("it matches the empty string, so it would redact nothing useful")


def rules_from(doc: Mapping[str, Any]) -> tuple[tuple[Rule, ...], KeyBlock]:
    """The rules of a `redact_rules.json` document, in order, and its one block rule (a rule
    with `begin` and `end` instead of a `pattern`), which is among them as its pattern."""
    rules, blocks = [], []
    for r in doc["rules"]:
        if "pattern" in r:
            rules.append(Rule(r["kind"], r["pattern"]))
        else:
            blocks.append(KeyBlock(r["kind"], r["begin"], r["end"]))
            rules.append(blocks[-1].rule())
    if len(blocks) != 1:
        raise ValueError(f"the redaction rules hold {len(blocks)} block rules: one is the "
                         "private-key block that match/keyblocks.py follows")
    return tuple(rules), blocks[0]


@cache
def _builtin() -> tuple[tuple[Rule, ...], KeyBlock]:
    from importlib import resources  # when redaction first runs, not at every start

    text = resources.files("watchrun.match").joinpath("redact_rules.json").read_text("utf-8")
    return rules_from(json.loads(text))


def builtin_rules() -> tuple[Rule, ...]:
    """The rules shipped in `redact_rules.json`."""
    return _builtin()[0]


def key_block() -> KeyBlock:
    """The built-in private-key block rule (`redact_rules.json`), which `match/keyblocks.py`
    follows across the lines of a stream."""
    return _builtin()[1]
