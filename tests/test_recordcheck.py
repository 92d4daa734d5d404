"""The record checker the tests rely on (tests/recordcheck.py) finds a record the schema refuses
wherever it stands, also in a long run of one shape, where the schema check is sampled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recordcheck import FULL_CHECKS, SAMPLE_EVERY, validate_records

from watchrun.clock import SystemClock
from watchrun.output.sink import JsonlSink

N = FULL_CHECKS + 3 * SAMPLE_EVERY + 5


def stream(tmp_path: Path, bad: int | None, field: str = "lineNo") -> Path:
    """N match records in one JSONL; record number `bad` (from 0) has `field` set to -1."""
    path = tmp_path / "app.jsonl"
    sink = JsonlSink(path, "app", max_bytes=1 << 30, keep=1, clock=SystemClock())
    lines = [sink.record("match", {"line": f"ERROR {n}", "lineNo": n + 1, "offset": n, "run": 1})
             for n in range(N)]
    sink.write_lines(lines)
    sink.close()
    if bad is not None:
        recs = path.read_text().splitlines()
        rec = json.loads(recs[bad])
        rec[field] = -1
        recs[bad] = json.dumps(rec, separators=(",", ":"))
        path.write_text("\n".join(recs) + "\n")
    return path


def test_a_valid_stream_passes(tmp_path: Path) -> None:
    assert len(validate_records(stream(tmp_path, None))) == N


@pytest.mark.parametrize("bad", [0, FULL_CHECKS - 1, FULL_CHECKS + SAMPLE_EVERY - 1, N - 1])
def test_a_refused_record_is_found_where_the_check_looks(tmp_path: Path, bad: int) -> None:
    with pytest.raises(AssertionError, match=r"app\.jsonl:\d+: \$\.lineNo"):
        validate_records(stream(tmp_path, bad))


def test_a_record_of_a_new_shape_is_checked_however_late(tmp_path: Path) -> None:
    """A field added or a run changed past the first FULL_CHECKS starts a shape of its own."""
    path = stream(tmp_path, None)
    recs = path.read_text().splitlines()
    rec = json.loads(recs[FULL_CHECKS + 1])
    rec["run"] = 0  # (runs count from 1)
    recs[FULL_CHECKS + 1] = json.dumps(rec, separators=(",", ":"))
    path.write_text("\n".join(recs) + "\n")
    with pytest.raises(AssertionError, match=r"\$\.run"):
        validate_records(path)
