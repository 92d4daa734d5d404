"""A stream that ends in a torn record while its checkpoint counts seqs past it (explorer
ex-lockend, F2): the torn record was cut and its `error{sink-repaired}` took the torn record's
seq, so the `gap{lost}` that followed was missing or one record short, the torn record's line
was counted nowhere and a once gate passed over it (exit 0). The torn record is a lost one now:
the `gap{lost}` covers its seq, the repair is said after it, and a once verdict is an ERROR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liverunner import LiveRunner, cli, read_records, wait_for, write_config
from recordcheck import validate_records
from test_checkpoint_durable import killed_after


def tear(jsonl: Path, kept: int) -> bytes:
    """Keep the first `kept` records whole and half of the next one (what a copy taken
    mid-append, or a disk that kept part of a write, leaves); the records after it are gone.
    Returns the torn bytes."""
    lines = jsonl.read_bytes().splitlines(keepends=True)
    torn = lines[kept][: len(lines[kept]) // 2]
    jsonl.write_bytes(b"".join(lines[:kept]) + torn)
    return torn


def restarted(tmp_path: Path, config: Path) -> tuple[list[dict[str, Any]], str]:
    """Start again, append `ERROR line 11`, wait for its record, stop: (records, log)."""
    jsonl = tmp_path / "out" / "watchers" / "app.jsonl"
    r = LiveRunner(config)
    r.out = tmp_path / "out"
    try:
        r.wait_running()
        with open(tmp_path / "app.log", "a") as fh:
            fh.write("ERROR line 11\n")
        wait_for(lambda: "ERROR line 11" in jsonl.read_text(), "the new line's record")
    finally:
        assert r.stop() == 0, r.stderr()
    return validate_records(jsonl, contiguous=False), r.stderr()


def live_config(tmp_path: Path) -> Path:
    (tmp_path / "app.log").write_text("")
    return write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "path": str(tmp_path / "app.log"), "pattern": "ERROR"}]})


def said(recs: list[dict[str, Any]], since: int) -> list[tuple[Any, ...]]:
    """The records from index `since` on, as (seq, kind, what)."""
    return [(x["seq"], x["kind"], x.get("reason") or x.get("code") or x.get("line"))
            for x in recs[since:]]


def test_a_torn_last_record_past_the_checkpoint_is_a_lost_one(tmp_path: Path) -> None:
    """Only the last record (line 10's match, seq 11) torn, the checkpoint at seq 12: a
    `gap{lost}` of seq 11 takes seq 12, the repair comes after it; seq 11 goes to no record and
    line 10 is not read again."""
    config = live_config(tmp_path)
    assert killed_after(tmp_path, config, 10) == 12  # start, 10 matches: the next record's
    torn = tear(tmp_path / "out" / "watchers" / "app.jsonl", 10)
    recs, log = restarted(tmp_path, config)
    assert [x["seq"] for x in recs[:10]] == list(range(1, 11))
    assert said(recs, 10) == [(12, "gap", "lost"), (13, "error", "sink-repaired"),
                              (14, "start", None), (15, "match", "ERROR line 11"),
                              (16, "stop", "shutdown")]
    gap, repaired = recs[10], recs[11]
    assert (gap["fromSeq"], gap["toSeq"], gap["records"]) == (11, 11, 1)
    assert repaired["bytes"] == len(torn)
    assert [x["line"] for x in recs if x["kind"] == "match"].count("ERROR line 10") == 0
    assert "[app] warning: gap (lost): 1 records (seq 11 to 11) are not in the stream" in log
    assert f"[app] warning: repaired a torn last record ({len(torn)} bytes)" in log


def test_records_lost_after_a_torn_one_are_all_counted(tmp_path: Path) -> None:
    """Line 8's record (seq 9) torn and the two after it gone: the gap says 3 records, seqs 9
    to 11 (it said 2, seqs 10 to 11, and gave seq 9 to the repair)."""
    config = live_config(tmp_path)
    assert killed_after(tmp_path, config, 10) == 12
    tear(tmp_path / "out" / "watchers" / "app.jsonl", 8)
    recs, log = restarted(tmp_path, config)
    assert [x["seq"] for x in recs[:8]] == list(range(1, 9))
    assert said(recs, 8)[:2] == [(12, "gap", "lost"), (13, "error", "sink-repaired")]
    assert (recs[8]["fromSeq"], recs[8]["toSeq"], recs[8]["records"]) == (9, 11, 3)
    assert [x["seq"] for x in recs[10:]] == [14, 15, 16]
    assert "gap (lost): 3 records (seq 9 to 11) are not in the stream" in log


def test_a_once_gate_over_a_torn_record_fails_closed(tmp_path: Path) -> None:
    """A once run's stream whose last match is torn and whose `stop` is gone (a copy taken
    mid-append put back): the next once run cannot count that match, so its verdict is an
    ERROR, exit 3, as when the same records are gone whole; it passed (exit 0)."""
    log = tmp_path / "app.log"
    log.write_text("".join(f"ERROR line {i}\n" for i in range(1, 11)))
    config = write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "path": str(log), "pattern": "ERROR", "gate": {"maxMatches": 10}}]})
    first = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    jsonl = tmp_path / "out" / "watchers" / "app.jsonl"
    assert [x["kind"] for x in read_records(jsonl)[-2:]] == ["match", "stop"]
    tear(jsonl, 10)  # line 10's match (seq 11) torn, the stop (seq 12) gone
    with open(log, "a") as fh:
        fh.write("ERROR line 11\n")
    res = cli("run", "--once", "-c", config, cwd=tmp_path)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "records of an earlier run are lost, uncounted: 1 records (seq 11 to 11)" \
        in res.stdout
    recs = validate_records(jsonl, contiguous=False)
    assert said(recs, 10)[:2] == [(12, "gap", "lost"), (13, "error", "sink-repaired")]
