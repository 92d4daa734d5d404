"""`${VAR}` values a config puts where a secret goes, as redaction rules that find them whole.

A value substituted right after `--password=`, in `PGPASSWORD="${PW}"`, in a URL's
`user:${PW}@`, after `Authorization: Bearer`, under an `env:` key named like a secret, or in
a path's `db_password=${PW}` is a secret by where it stands: the built-in rules are run over
each config string (its key in front, `KEY=`) with a stand-in in place of every value, and a
value whose stand-in they would hide is one. Watchrun itself then quotes it for the shell
(`'a'"'"'b'`, `""v""`, `'--password=a b'` in a list command's label), and a rule reading the
result stops at the first quote, so it is found instead by its text: each way watchrun or
JSON may write it becomes a `known` rule (`match/redact.py` runs those first, before the
pattern rules), so the label, the command line, the path — in status, records, prompts,
action bodies, `run --once --json` — hide it whole, and so does any log line that echoes it.
A value under 8 characters is found only right after the name it follows (`password=`,
`PGPASSWORD="`), so a short one (`--use-password=true`) does not hide every `true` of a line.

A value is a secret by its place too, where the docs say a secret goes whatever its name: a
webhook's `url` (the part of a value in its path, query or credentials) and `headers`
(`webhook-secret`), an exec action's `env` (`exec-secret`) and a command watcher's `env`
(`env-secret`) — each such value, and each of its words, of 8 characters or more (an `env:`
value under 8 only right after `KEY=`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from watchrun.config.interpolate import references
from watchrun.config.shellwords import quote
from watchrun.config.tree import CMap, CSeq
from watchrun.match.redact import Rule, redactor
from watchrun.match.redact_rules import re2_module
from watchrun.match.sanitize import name_text, sanitize

__all__ = ["MIN_BARE", "known_secrets", "written_forms"]

MIN_BARE = 8
"""A shorter value is found only after its name, never alone."""
_STAND_IN = "W" * 40
"""Stands for a value while the rules look at where it is: a shape every value class takes
(40 characters, for the AWS secret key's)."""


def known_secrets(root: CMap, env: Mapping[str, str]) -> tuple[Rule, ...]:
    """A `known` rule per value of `root` (a config tree before interpolation) that stands
    where a secret goes, in the order found, one per (kind, value)."""
    rules: dict[tuple[str, str, str], Rule | None] = {}
    for key, text in _strings(root, ""):
        for kind, name, value in _placed(key, text, env):
            if (kind, name, value) not in rules:
                rules[kind, name, value] = _rule(kind, name, value)
    named = {value for _, _, value in rules}
    for kind, name, value in _by_place(root, env):
        if value not in named and (kind, name, value) not in rules:
            rules[kind, name, value] = _rule(kind, name, value)
    return tuple(r for r in rules.values() if r is not None)


def _by_place(root: CMap, env: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    """(kind, the name it follows or "", value) of each value a webhook's `url` or `headers`,
    an exec action's or a command watcher's `env` holds, with each of its words."""
    for kind, name, text in _places(root):
        template, mark, values = references(text, env)
        found = [v for _, v in values] if name is not None else \
            _url_parts(template.split(mark), [v for _, v in values])
        for value in filter(None, found):
            yield kind, (f"{name}=" if name and kind != "webhook-secret" else ""), value
            for piece in sorted({unquote(value), *value.split()} - {value}):
                yield kind, "", piece


def _places(root: CMap) -> Iterator[tuple[str, str | None, str]]:
    """(kind, key, text) of each `$` string in a place the docs call a secret's; the key of a
    webhook's `url` is None (only a part of it is)."""
    for w in _maps(root.get("watchers")):
        if "command" in w:
            yield from (("env-secret", k, v) for k, v in _texts(w.get("env")))
        for a in _maps(w.get("actions")):
            if a.get("type") == "exec":
                yield from (("exec-secret", k, v) for k, v in _texts(a.get("env")))
            elif a.get("type") == "webhook":
                yield from (("webhook-secret", k, v) for k, v in _texts(a.get("headers")))
                yield from (("webhook-secret", None, v) for _, v in _texts({"": a.get("url")}))


def _maps(node: Any) -> list[CMap]:
    return [x for x in node if isinstance(x, CMap)] if isinstance(node, CSeq) else []


def _texts(node: Any) -> list[tuple[str, str]]:
    items = node.items() if isinstance(node, dict) else ()
    return [(str(k), v) for k, v in items if isinstance(v, str) and "$" in v]


def _url_parts(parts: list[str], values: list[str]) -> list[str]:
    """The part of each value that lands in the URL's credentials, path, query or fragment
    (`${SLACK_URL}` whole: its path; `${HOST}`: nothing). A URL of another shape: each value
    whole (it fails validation; a secret is never kept for that)."""
    url, spans = parts[0], []
    for value, part in zip(values, parts[1:], strict=True):
        spans.append((len(url), len(url) + len(value)))
        url += value + part
    try:
        split = urlsplit(url)
    except ValueError:
        return values
    lead = f"{split.scheme}://"
    if not split.scheme or not split.netloc or url[:len(lead)].lower() != lead.lower():
        return values
    host = len(lead) + split.netloc.rfind("@") + 1  # (where the host starts)
    places = ((len(lead), host - 1), (len(lead) + len(split.netloc), len(url)))
    return [url[max(s, a):min(e, b)] for s, e in spans for a, b in places if min(e, b) > max(s, a)]


def _strings(node: Any, key: str) -> Iterator[tuple[str, str]]:
    """Every string holding a `$` with the mapping key it sits under (the nearest one)."""
    if isinstance(node, CMap):
        for k, value in node.items():
            yield from _strings(value, str(k))
    elif isinstance(node, CSeq):
        for value in node:
            yield from _strings(value, key)
    elif isinstance(node, str) and "$" in node:
        yield key, node


def _placed(key: str, text: str, env: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    """(kind, the name before it in `text` or "", value) of each secret-placed value."""
    template, mark, values = references(text, env)
    if not values:
        return
    head = f"{key}="
    parts = template.split(mark)
    probe, floor, bounds = head + parts[0], len(head), []
    for part in parts[1:]:  # (where the text before each value starts, where the value does)
        bounds.append((floor, len(probe)))
        floor = len(probe) + len(_STAND_IN)
        probe += _STAND_IN + part
    hidden = redactor().spans(probe)
    for (_, value), (floor, start) in zip(values, bounds, strict=True):
        end = start + len(_STAND_IN)
        kind = next((kind for s, e, kind in hidden if s < end and e > start), None)
        if kind is not None and value:
            yield kind, _name_before(probe[floor:start]), value


def _name_before(before: str) -> str:
    """The assignment a value follows in its string (`password=`, `PGPASSWORD="`, `app:`,
    `\\"password\\":\\"`), or "" (after `Bearer `, or right after another value)."""
    m = re.search(r"[A-Za-z0-9_.-]*(?:\\*[\"'])?\s*(?:=>|[:=]=?)\s*(?:\\*[\"'])?$", before)
    return m.group(0) if m else ""


_SURROGATES = re.compile("[\ud800-\udfff]")


def written_forms(value: str) -> list[str]:
    """The ways `value` may be written in what watchrun shows: as is; quoted for the shell as
    a word, inside `"…"` or `'…'` (`config/shellwords.py`); each of those inside a list
    command's argument its label quotes (`'--password=a'"'"'b'`, the script of a list's
    `sh -c` quoted twice so); JSON-escaped; each also as sanitized and as a name shows it
(`name_text`: controls escaped). Longest first. A byte of
    the environment that is not UTF-8 (a lone surrogate here) is U+FFFD in all of them, as
    everything watchrun writes has it (a surrogate cannot be encoded: the rule failed)."""
    value = _SURROGATES.sub("\ufffd", value)
    forms = {value, shlex.quote(value), quote(value, "double"), quote(value, "single")}
    forms |= {f.replace("'", "'\"'\"'") for f in forms}
    forms |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms |= {sanitize(f)[0] for f in forms} | {name_text(f) for f in forms}
    return sorted((f for f in forms if f), key=lambda f: (-len(f), f))


def _rule(kind: str, name: str, value: str) -> Rule | None:
    re2 = re2_module()
    forms = written_forms(value)
    anchored = f"{re2.escape(name)}(?P<secret>{'|'.join(map(re2.escape, forms))})" \
        if name else ""
    bare = "|".join(map(re2.escape, forms)) if len(value) >= MIN_BARE else ""  # (not every
    pattern = "|".join(p for p in (anchored, bare) if p)  # `true` of a line: after its name)
    return Rule(kind, pattern, known=True) if pattern else None
