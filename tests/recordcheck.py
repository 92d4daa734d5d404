"""Test helper: validate every record of a JSONL stream against the record schema.

Usage in any test: `from recordcheck import validate_records; recs = validate_records(path)`.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]

from watchrun.output.records import retained_files

_CURSOR = re.compile(r"(.+):([0-9a-f]{16})")
FULL_CHECKS, SAMPLE_EVERY = 200, 16
"""Of the records of one shape (kind, fields in order, run), the first FULL_CHECKS, every
SAMPLE_EVERY-th after them and the last are checked against the schema; every record is checked
for whole UTF-8 JSON, its cursor and its seq. The schema check costs ~1 ms a record (the
schema's `unevaluatedProperties`): the tests that write 12 000 records of one shape spent most
of their CPU in it, on a suite bound by two cores' CPU."""


@functools.cache
def record_validator() -> Draft202012Validator:
    """The record schema as shipped in the package `watchrun.schemas`."""
    text = resources.files("watchrun.schemas").joinpath("record.schema.json").read_text("utf-8")
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


@functools.cache
def _kind_validators() -> dict[str, Draft202012Validator]:
    """For each kind, the schema as it applies to a record of that kind: the common part and
    that kind's `then`. The schema's `allOf` is one `if: kind == K, then: ...` per kind, so the
    other kinds' clauses hold vacuously; checking them all made a record cost ~1.6 ms (a test
    of 12 000 records spent 19 s here). Built only when every clause has exactly that shape."""
    schema = record_validator().schema
    out: dict[str, Draft202012Validator] = {}
    for clause in schema["allOf"]:
        cond = clause.get("if", {})
        kind = cond.get("properties", {}).get("kind", {}).get("const")
        if (set(clause) != {"if", "then"} or set(cond) != {"properties", "required"}
                or set(cond["properties"]) != {"kind"} or cond["required"] != ["kind"]
                or not isinstance(kind, str) or kind in out):
            return {}
        one = {k: v for k, v in schema.items() if k != "allOf"} | {"allOf": [clause["then"]]}
        out[kind] = Draft202012Validator(one, format_checker=FormatChecker())
    return out


def record_errors(rec: Any) -> list[str]:
    """Schema violations of one parsed record, each as `json.path: message`."""
    kind = rec.get("kind") if isinstance(rec, dict) else None
    validator = _kind_validators().get(kind) if isinstance(kind, str) else None
    errors = sorted((validator or record_validator()).iter_errors(rec),
                    key=lambda e: list(e.path))
    return [f"{e.json_path}: {e.message}" for e in errors]


def validate_records(path: Path, *, contiguous: bool = True) -> list[dict[str, Any]]:
    """Every record in `path` and its rotated copies (oldest first), checked against the schema
    (in long runs of one shape, a sample: FULL_CHECKS); also checks each line is whole UTF-8
    JSON, cursors match `<file stem>:<seq>`, and (with `contiguous`) seqs go up by exactly one.
    Raises AssertionError listing every problem.
    """
    stream_id = path.name.removesuffix(".jsonl")
    files = retained_files(path)
    if not files:
        raise AssertionError(f"{path}: no such JSONL file")
    problems: list[str] = []
    records: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], int] = {}
    last_unchecked: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
    for f in files:
        data = f.read_bytes()
        if data and not data.endswith(b"\n"):
            problems.append(f"{f.name}: last line is torn (no newline): {data[-80:]!r}")
        for no, line in enumerate(data.split(b"\n")[:-1], start=1):
            where = f"{f.name}:{no}"
            try:
                rec = json.loads(line.decode("utf-8"))
            except ValueError as exc:
                problems.append(f"{where}: not UTF-8 JSON ({exc}): {line[:80]!r}")
                continue
            if not isinstance(rec, dict):
                problems.extend(f"{where}: {err}" for err in record_errors(rec))
                continue
            shape = (rec.get("kind"), tuple(rec), rec.get("run"))
            seen[shape] = seen.get(shape, 0) + 1
            if seen[shape] <= FULL_CHECKS or (seen[shape] - FULL_CHECKS) % SAMPLE_EVERY == 0:
                problems.extend(f"{where}: {err}" for err in record_errors(rec))
                last_unchecked.pop(shape, None)
            else:
                last_unchecked[shape] = (where, rec)
            m = _CURSOR.fullmatch(str(rec.get("cursor")))
            if m and (m.group(1) != stream_id or int(m.group(2), 16) != rec.get("seq")):
                problems.append(f"{where}: cursor {rec['cursor']} is not {stream_id}:<seq>")
            if contiguous and records and rec.get("seq") != records[-1].get("seq", 0) + 1:
                problems.append(f"{where}: seq {rec.get('seq')} after {records[-1].get('seq')}")
            records.append(rec)
    for where, rec in last_unchecked.values():  # the last of each shape is always checked
        problems.extend(f"{where}: {err}" for err in record_errors(rec))
    if problems:
        shown = "\n  ".join(problems[:30])
        more = f"\n  … and {len(problems) - 30} more" if len(problems) > 30 else ""
        raise AssertionError(f"{path}: {len(problems)} invalid record(s):\n  {shown}{more}")
    return records
