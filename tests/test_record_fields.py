"""The record schema names every field the runner writes, under the record's kind, and
every field it names is written. Agent kinds accept fields they do not list (an adapter's own),
so validating records cannot see a field missing from the schema, nor one the schema promises
that never comes (`dispatch-start.turn`, while `turnId` went undescribed): the field names are
compared here. What is written is taken from real runs (tests/recordscenes.py), every provider
fixture replayed, and the code that writes records: the field names in its calls."""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from recordscenes import Written, everything

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runner" / "watchrun"
SCHEMA = json.loads((ROOT / "runner" / "watchrun" / "schemas" / "record.schema.json")
                    .read_text())
DEFS: dict[str, Any] = SCHEMA["$defs"]
KINDS: list[str] = DEFS["envelope"]["properties"]["kind"]["enum"]

RARE: dict[tuple[str, str], str] = {
    ("delivery", "delivery_state"): "read, never written: records from before deliveryState",
    ("error", "inode"): "a regex-timeout (tests/test_isolation.py), a rotated generation the "
                        "runner may not open (siblings.py; not as root)",
    ("gap", "kinds"): "records given up on a full disk (tests/test_disk_full.py)",
    ("gap", "laterCopy"): "a copytruncate copy overwritten "
                          "(tests/test_copytruncate_overwritten.py)",
    ("plan", "truncated"): "a plan's text clipped at 256 KiB (the recorder's clip)",
    ("rotate", "inodeGen"): "absent where the file system keeps no inode generation (tmpfs)",
}
"""(kind, field) neither the runs here write nor a call writing records names, and why: each is
written on a path these runs do not take, or built where the calls above do not show it."""

BASES = ("envelope", "agent-envelope")
"""The definitions the kinds refer to for the fields they share."""
HELPERS = {"tool": "tool", "tool_result": "tool-result", "denied": "tool-denied", "raw": "raw",
           "usage": "usage"}
"""Base adapter methods (agents/providers/base.py) that build one kind of observation and pass
their keyword arguments other than their own parameters on as its fields."""


def described(kind: str) -> tuple[set[str], list[str]]:
    """The field names the schema lists for `kind` (its own, and those of the definitions it
    refers to: the envelope's) and its patterns of further names."""
    names: set[str] = set()
    patterns: list[str] = []
    node: dict[str, Any] | None = DEFS[kind]
    while node is not None:
        names |= set(node.get("properties", {}))
        patterns += list(node.get("patternProperties", {}))
        ref = node.get("$ref")
        node = DEFS[ref.removeprefix("#/$defs/")] if ref else None
    return names, patterns


def undescribed(kind: str, fields: Any) -> list[str]:
    if kind not in KINDS:
        return [f"kind {kind!r}"]
    names, patterns = described(kind)
    return [f"{kind}.{f}" for f in fields
            if f not in names and not any(re.search(p, f) for p in patterns)]


@functools.cache  # (every .py of the runner parsed: once, not once per use)
def written_in_code() -> dict[tuple[str, str], str]:
    """(kind, field) -> where, for each field name given in a call that writes a record: an
    adapter's `observation("kind", field=…)` or a base adapter helper's extra keyword, a
    recorder's `.emit("kind", {"field": …})`, a watcher's `.event("kind", field=…)`."""
    base = ast.parse((RUNNER / "agents" / "providers" / "base.py").read_text())
    params = {f.name: {a.arg for a in [*f.args.args, *f.args.kwonlyargs]}
              for f in ast.walk(base) if isinstance(f, ast.FunctionDef) and f.name in HELPERS}
    found: dict[tuple[str, str], str] = {}
    for path in sorted(RUNNER.rglob("*.py")):
        for call in ast.walk(ast.parse(path.read_text())):
            if not isinstance(call, ast.Call):
                continue
            func, args, keywords = call.func, call.args, call.keywords
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            first = args[0].value if args and isinstance(args[0], ast.Constant) else None
            keys: list[str | None]
            if name in ("observation", "event") and first in KINDS:
                kind, keys = str(first), [k.arg for k in keywords if k.arg != "echo"]
            elif name == "emit" and first in KINDS and isinstance(args[-1], ast.Dict):
                kind = str(first)
                keys = [k.value for k in args[-1].keys if isinstance(k, ast.Constant)]
            elif (name in HELPERS and path.parent.name == "providers"
                  and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                  and func.value.id == "self"):
                kind, keys = HELPERS[name], [k.arg for k in keywords if k.arg not in params[name]]
            else:
                continue
            for key in keys:
                if key is not None:
                    found.setdefault((kind, key), f"{path.relative_to(ROOT)}:{call.lineno}")
    return found


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return everything(tmp_path_factory.mktemp("scenes"))


def test_every_field_written_is_described_under_its_kind(written: Written) -> None:
    problems: dict[str, str] = {}  # field -> where it was first seen
    for where, rec in written:
        for field in undescribed(rec["kind"], rec):
            problems.setdefault(field, where)
    for (kind, key), where in written_in_code().items():
        for field in undescribed(kind, [key]):
            problems.setdefault(field, where)
    assert sorted(f"{field} ({where})" for field, where in problems.items()) == []


def test_every_field_described_is_written(written: Written) -> None:
    seen = {(rec["kind"], f) for _, rec in written for f in rec} | set(written_in_code())
    fields = {f for _, f in seen}
    unseen = [f"{kind}.{f}" for kind in KINDS for f in DEFS[kind].get("properties", {})
              if (kind, f) not in seen and (kind, f) not in RARE and f != "kind"]
    for base in BASES:  # the fields every kind (of a stream) may have: on a record of any kind
        unseen += [f"{base}.{f}" for f in DEFS[base]["properties"] if f not in fields]
    assert unseen == []
    stale = [k for k in RARE if k[1] not in DEFS[k[0]]["properties"] or k in written_in_code()]
    assert stale == []


def test_the_comparison_sees_a_field_the_schema_does_not_list() -> None:
    assert undescribed("dispatch-start", ["turnId", "turn", "provider_seq"]) == [
        "dispatch-start.turn"]
    assert undescribed("usage", ["input", "fancy"]) == ["usage.fancy"]
    assert undescribed("matched", ["line"]) == ["kind 'matched'"]


def test_docs_records_md_names_every_field_of_each_kind() -> None:
    """Each kind's row of docs/records.md (both rows of `error` and `dropped`, written by
    watchers and agents) names every field the schema lists for it, in backticks."""
    doc = (ROOT / "docs" / "records.md").read_text()
    rows: dict[str, str] = {}
    for kind, cells in re.findall(r"^\| `([a-z-]+)` \|(.*)$", doc, flags=re.M):
        rows[kind] = rows.get(kind, "") + " ".join(re.findall(r"`([^`]*)`", cells))
    missing = [f"{kind}.{f}" for kind in KINDS for f in DEFS[kind]["properties"]
               if f != "kind" and not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])",
                                                rows.get(kind, ""))]
    assert missing == []
