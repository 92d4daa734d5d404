"""A record whose `kind` is not a string (an output dir others could write, a torn or foreign
file) is skipped as invalid by the one reader, so no view that looks records up by kind —
`matches`, `agent list`, `agent watch`, `transcript` — ends in a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inproc import inproc

from watchrun.output.backward import last_records
from watchrun.output.records import ReadStats, iter_records

ODD_KINDS: list[Any] = [{}, [], {"a": 1}, ["match"], None, 1, True]


def _write(path: Path, kinds: list[Any], stream: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    recs = [{"schema": 1, "seq": n, "cursor": f"{stream}:{n:016x}", "kind": k,
             "ts": "2026-12-04T06:00:00.000Z", "line": "ERROR x", "text": "hi"}
            for n, k in enumerate(kinds, 1)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


@pytest.mark.parametrize("args", [
    ("matches", "w"), ("matches", "w", "--json"), ("agent", "list"), ("agent", "list", "--json"),
    ("agent", "watch", "a"), ("agent", "transcript", "a"), ("transcript",),
])
def test_views_skip_a_record_whose_kind_is_not_a_string(tmp_path: Path,
                                                         args: tuple[str, ...]) -> None:
    # before: TypeError: unhashable type: 'dict' (rec.get("kind") in kinds), exit 1
    out = tmp_path / "out"
    _write(out / "watchers" / "w.jsonl", ["match", *ODD_KINDS, "match"], "w")
    _write(out / "agents" / "a.jsonl", ["dispatch-start", *ODD_KINDS, "text"], "a")
    done = inproc(tmp_path, *args, "--output-dir", str(out))  # (a read, in this process)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    if args[0] == "matches":
        assert done.stdout.count("ERROR x") == 2


@given(kinds=st.lists(st.one_of(st.sampled_from(["match", "start"]), st.sampled_from(ODD_KINDS),
                                st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
                      min_size=1, max_size=12))
def test_every_record_read_has_a_string_kind(tmp_path_factory: pytest.TempPathFactory,
                                             kinds: list[Any]) -> None:
    path = tmp_path_factory.mktemp("odd") / "w.jsonl"
    _write(path, kinds, "w")
    stats = ReadStats()
    read = [*iter_records(path, stats=stats), *last_records(path, 5, {"match"})]
    assert all(isinstance(r["kind"], str) for r in read)
    assert stats.invalid == sum(not isinstance(k, str) for k in kinds)
